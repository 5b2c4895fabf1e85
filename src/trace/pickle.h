// The part of Python's pickle format (protocol 2 and the opcodes of later
// protocols a reader meets in small files) that torch's flight-recorder
// dumps use: None, booleans, integers, floats, strings, lists, tuples and
// dictionaries. Fairway writes its trace dumps with PickleWriter, so
// torch's analyzer reads them; fairway-trace reads them back with
// parsePickle, which never trusts its input: a truncated or corrupted
// file is an error naming the byte offset, never a crash.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace fairway {

class PickleWriter {
 public:
  PickleWriter();  // writes the protocol header
  void none();
  void boolean(bool value);
  void integer(int64_t value);
  void floating(double value);
  void string(const std::string& value);
  // Containers: begin, the items (a dictionary's as key, value, key, ...), end.
  void beginList();
  void endList();
  void beginDict();
  void endDict();
  void beginTuple();
  void endTuple();
  // The finished stream (adds the STOP opcode once).
  const std::string& finish();

 private:
  std::string out_;
  bool finished_ = false;
};

// A value read back.
struct PickleValue {
  enum class Type { None, Bool, Int, Float, String, List, Tuple, Dict };
  Type type = Type::None;
  bool boolean = false;
  int64_t integer = 0;
  double floating = 0;
  std::string text;
  std::vector<std::shared_ptr<PickleValue>> items;  // list and tuple items; a dict's keys and values in turn

  bool isNone() const { return type == Type::None; }
  // A dictionary's value under a string key, or null.
  const PickleValue* get(const std::string& key) const;
  // Convenience readers: fallback where the value is missing or of another type.
  int64_t intOr(int64_t fallback) const;
  std::string textOr(const std::string& fallback) const;
  // The same for a dictionary's value under key ("" for text).
  int64_t intAt(const std::string& key, int64_t fallback) const;
  std::string textAt(const std::string& key) const;
};

// Parses one pickled value. Limits: nesting 100 deep, 2 million values in all.
Status parsePickle(const std::string& bytes, std::shared_ptr<PickleValue>* out);

}  // namespace fairway

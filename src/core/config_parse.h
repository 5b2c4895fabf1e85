// How the values of FAIRWAY_* variables are read and shown, for the table
// of core/config_variables.cc. Each parser takes the variable's name (for
// its error message) and its text, and fails with fwInvalidArgument
// naming both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/status.h"

namespace fairway {

Status parseIntegerText(const std::string& name, const char* text, int64_t minValue, int64_t maxValue,
                        int64_t* out);
// Digits with an optional K, M or G suffix (powers of 1024), as the perf
// binaries' -b and -e take them.
Status parseByteText(const std::string& name, const char* text, size_t minValue, size_t maxValue, size_t* out);
// One of choices, exactly.
Status parseChoice(const std::string& name, const char* text, const std::vector<std::string>& choices,
                   std::string* out);
// FAIRWAY_ALGO: items collective[:FROM-TO][:ranks=LO-HI]:algorithm, separated
// by ',' or ';'. Names are checked by the selector (Selector::create).
Status parseAlgoOverrides(const char* text, std::vector<AlgoOverride>* out);
// FAIRWAY_COMPRESS: collective:kind[/block][:minbytes];...
Status parseCompressionRules(const char* text, std::map<std::string, CompressionRule>* out);

// A byte count as the variables take it: 262144 is "256K".
std::string byteText(size_t bytes);
// A cost-model link as FAIRWAY_INTRA_LINK takes it: "1,5".
std::string linkText(const LinkModel& link);

}  // namespace fairway

#include "trace/pickle.h"

#include <cstring>
#include <cstdio>
#include <map>
#include <set>

namespace fairway {

namespace {

// The opcodes, as Python's pickletools names them.
enum Op : uint8_t {
  kMark = '(', kStop = '.', kNone = 'N', kBinInt = 'J', kBinInt1 = 'K', kBinInt2 = 'M', kBinFloat = 'G',
  kBinUnicode = 'X', kEmptyList = ']', kAppend = 'a', kAppends = 'e', kEmptyDict = '}', kSetItem = 's',
  kSetItems = 'u', kEmptyTuple = ')', kTuple = 't', kBinPut = 'q', kLongBinPut = 'r', kBinGet = 'h',
  kLongBinGet = 'j', kProto = 0x80, kTuple1 = 0x85, kTuple2 = 0x86, kTuple3 = 0x87, kNewTrue = 0x88,
  kNewFalse = 0x89, kLong1 = 0x8a, kShortBinUnicode = 0x8c, kBinUnicode8 = 0x8d, kMemoize = 0x94, kFrame = 0x95,
};

constexpr int kDeepest = 100;
constexpr size_t kMostItems = 2000000;

void putLittle(std::string* out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

}  // namespace

PickleWriter::PickleWriter() {
  out_.push_back(static_cast<char>(kProto));
  out_.push_back(2);
}

void PickleWriter::none() { out_.push_back(kNone); }
void PickleWriter::boolean(bool value) { out_.push_back(static_cast<char>(value ? kNewTrue : kNewFalse)); }

void PickleWriter::integer(int64_t value) {
  if (value >= INT32_MIN && value <= INT32_MAX) {
    out_.push_back(kBinInt);
    putLittle(&out_, static_cast<uint32_t>(static_cast<int32_t>(value)), 4);
    return;
  }
  out_.push_back(static_cast<char>(kLong1));  // 8 bytes, two's complement, little end first
  out_.push_back(8);
  putLittle(&out_, static_cast<uint64_t>(value), 8);
}

void PickleWriter::floating(double value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, 8);
  out_.push_back(kBinFloat);
  for (int i = 7; i >= 0; --i) out_.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));  // big end first
}

void PickleWriter::string(const std::string& value) {
  out_.push_back(kBinUnicode);
  putLittle(&out_, value.size(), 4);
  out_ += value;
}

void PickleWriter::beginList() {
  out_.push_back(kEmptyList);
  out_.push_back(kMark);
}
void PickleWriter::endList() { out_.push_back(kAppends); }
void PickleWriter::beginDict() {
  out_.push_back(kEmptyDict);
  out_.push_back(kMark);
}
void PickleWriter::endDict() { out_.push_back(kSetItems); }
void PickleWriter::beginTuple() { out_.push_back(kMark); }
void PickleWriter::endTuple() { out_.push_back(kTuple); }

const std::string& PickleWriter::finish() {
  if (!finished_) out_.push_back(kStop);
  finished_ = true;
  return out_;
}

const PickleValue* PickleValue::get(const std::string& key) const {
  if (type != Type::Dict) return nullptr;
  for (size_t i = 0; i + 1 < items.size(); i += 2) {
    if (items[i]->type == Type::String && items[i]->text == key) return items[i + 1].get();
  }
  return nullptr;
}

int64_t PickleValue::intOr(int64_t fallback) const {
  if (type == Type::Int) return integer;
  if (type == Type::Bool) return boolean ? 1 : 0;
  return fallback;
}

std::string PickleValue::textOr(const std::string& fallback) const {
  return type == Type::String ? text : fallback;
}

int64_t PickleValue::intAt(const std::string& key, int64_t fallback) const {
  const PickleValue* v = get(key);
  return v != nullptr ? v->intOr(fallback) : fallback;
}

std::string PickleValue::textAt(const std::string& key) const {
  const PickleValue* v = get(key);
  return v != nullptr ? v->textOr("") : std::string();
}

namespace {

using ValuePtr = std::shared_ptr<PickleValue>;

class Parser {
 public:
  explicit Parser(const std::string& bytes) : in_(bytes) {}

  Status run(ValuePtr* out) {
    while (pos_ < in_.size()) {
      const size_t at = pos_;
      const uint8_t op = static_cast<uint8_t>(in_[pos_++]);
      if (op == kStop) {
        if (stack_.size() != 1 || !marks_.empty()) return error(at, "STOP with " + std::to_string(stack_.size()) +
                                                                        " values on the stack");
        *out = stack_.back();
        return Status::ok();
      }
      FW_RETURN_IF_ERROR(step(op, at));
    }
    return error(pos_, "the data ends before STOP (truncated)");
  }

 private:
  Status error(size_t at, const std::string& what) const {
    return Status(fwInvalidArgument, "not a readable dump: " + what + " at byte " + std::to_string(at));
  }

  Status take(size_t n, size_t at, const char** bytes) {
    if (in_.size() - pos_ < n) return error(at, "the data ends inside an opcode's argument (truncated)");
    *bytes = in_.data() + pos_;
    pos_ += n;
    return Status::ok();
  }
  Status little(int n, size_t at, uint64_t* value) {
    const char* b = nullptr;
    FW_RETURN_IF_ERROR(take(n, at, &b));
    *value = 0;
    for (int i = n - 1; i >= 0; --i) *value = (*value << 8) | static_cast<uint8_t>(b[i]);
    return Status::ok();
  }

  Status push(ValuePtr v, size_t at) {
    if (++items_ > kMostItems) return error(at, "more than " + std::to_string(kMostItems) + " values");
    stack_.push_back(std::move(v));
    depthOf_[stack_.back().get()] = 0;
    return Status::ok();
  }
  ValuePtr scalar(PickleValue::Type type) {
    auto v = std::make_shared<PickleValue>();
    v->type = type;
    return v;
  }
  // The values above the top mark, removed from the stack with the mark.
  Status popToMark(size_t at, std::vector<ValuePtr>* taken) {
    if (marks_.empty()) return error(at, "no MARK for this opcode");
    const size_t from = marks_.back();
    marks_.pop_back();
    taken->assign(stack_.begin() + static_cast<std::ptrdiff_t>(from), stack_.end());
    stack_.resize(from);
    return Status::ok();
  }
  Status popValues(size_t n, size_t at, std::vector<ValuePtr>* taken) {
    const size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() < floor + n) return error(at, "too few values on the stack");
    taken->assign(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
    stack_.resize(stack_.size() - n);
    return Status::ok();
  }
  int depth(const PickleValue* v) const {
    auto it = depthOf_.find(v);
    return it == depthOf_.end() ? 0 : it->second;
  }
  // Adds items to the container on top of the stack.
  Status addTo(std::vector<ValuePtr> items, bool dict, size_t at) {
    const size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() <= floor) return error(at, "no container to add to");
    PickleValue* target = stack_.back().get();
    const auto wanted = dict ? PickleValue::Type::Dict : PickleValue::Type::List;
    if (target->type != wanted) return error(at, dict ? "SETITEMS on a value that is not a dictionary"
                                                      : "APPENDS on a value that is not a list");
    if (dict && items.size() % 2 != 0) return error(at, "a dictionary key without a value");
    // A container taken again from the memo may already sit inside one of
    // the items: adding to it could make a value contain itself.
    if (fetched_.count(target) != 0) return error(at, "adding to a container taken from the memo");
    int deepest = depth(target);
    for (auto& item : items) {
      if (item.get() == target) return error(at, "a container inside itself");
      deepest = std::max(deepest, depth(item.get()) + 1);
      target->items.push_back(std::move(item));
    }
    if (deepest > kDeepest) return error(at, "values nested more than " + std::to_string(kDeepest) + " deep");
    depthOf_[target] = deepest;
    return Status::ok();
  }
  Status tuple(std::vector<ValuePtr> items, size_t at) {
    auto t = scalar(PickleValue::Type::Tuple);
    int deepest = 0;
    for (auto& item : items) deepest = std::max(deepest, depth(item.get()) + 1);
    if (deepest > kDeepest) return error(at, "values nested more than " + std::to_string(kDeepest) + " deep");
    t->items = std::move(items);
    FW_RETURN_IF_ERROR(push(t, at));
    depthOf_[t.get()] = deepest;
    return Status::ok();
  }
  Status text(size_t length, size_t at) {
    const char* b = nullptr;
    FW_RETURN_IF_ERROR(take(length, at, &b));
    auto v = scalar(PickleValue::Type::String);
    v->text.assign(b, length);
    return push(v, at);
  }
  Status memoPut(uint64_t key, size_t at) {
    const size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() <= floor) return error(at, "nothing to memoize");
    memo_[key] = stack_.back();
    return Status::ok();
  }
  Status memoGet(uint64_t key, size_t at) {
    auto it = memo_.find(key);
    if (it == memo_.end()) return error(at, "memo key " + std::to_string(key) + " never stored");
    // The same object again: a shared reference, as Python makes it, that
    // nothing may add to from now on (see addTo).
    if (++items_ > kMostItems) return error(at, "more than " + std::to_string(kMostItems) + " values");
    fetched_.insert(it->second.get());
    stack_.push_back(it->second);
    return Status::ok();
  }

  Status step(uint8_t op, size_t at) {
    uint64_t n = 0;
    std::vector<ValuePtr> taken;
    switch (op) {
      case kProto: return little(1, at, &n);
      case kFrame: return little(8, at, &n);
      case kMark: marks_.push_back(stack_.size()); return Status::ok();
      case kNone: return push(scalar(PickleValue::Type::None), at);
      case kNewTrue:
      case kNewFalse: {
        auto v = scalar(PickleValue::Type::Bool);
        v->boolean = op == kNewTrue;
        return push(v, at);
      }
      case kBinInt:
      case kBinInt1:
      case kBinInt2: {
        const int bytes = op == kBinInt ? 4 : (op == kBinInt1 ? 1 : 2);
        FW_RETURN_IF_ERROR(little(bytes, at, &n));
        auto v = scalar(PickleValue::Type::Int);
        v->integer = op == kBinInt ? static_cast<int32_t>(static_cast<uint32_t>(n)) : static_cast<int64_t>(n);
        return push(v, at);
      }
      case kLong1: {
        FW_RETURN_IF_ERROR(little(1, at, &n));
        if (n > 8) return error(at, "an integer of " + std::to_string(n) + " bytes");
        uint64_t raw = 0;
        FW_RETURN_IF_ERROR(little(static_cast<int>(n), at, &raw));
        if (n > 0 && n < 8 && (raw >> (8 * n - 1)) & 1) raw |= ~uint64_t{0} << (8 * n);  // sign-extend
        auto v = scalar(PickleValue::Type::Int);
        v->integer = static_cast<int64_t>(raw);
        return push(v, at);
      }
      case kBinFloat: {
        const char* b = nullptr;
        FW_RETURN_IF_ERROR(take(8, at, &b));
        uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = (bits << 8) | static_cast<uint8_t>(b[i]);
        auto v = scalar(PickleValue::Type::Float);
        std::memcpy(&v->floating, &bits, 8);
        return push(v, at);
      }
      case kBinUnicode: FW_RETURN_IF_ERROR(little(4, at, &n)); return text(n, at);
      case kShortBinUnicode: FW_RETURN_IF_ERROR(little(1, at, &n)); return text(n, at);
      case kBinUnicode8: FW_RETURN_IF_ERROR(little(8, at, &n)); return text(n, at);
      case kEmptyList: return push(scalar(PickleValue::Type::List), at);
      case kEmptyDict: return push(scalar(PickleValue::Type::Dict), at);
      case kEmptyTuple: return push(scalar(PickleValue::Type::Tuple), at);
      case kAppend: FW_RETURN_IF_ERROR(popValues(1, at, &taken)); return addTo(std::move(taken), false, at);
      case kAppends: FW_RETURN_IF_ERROR(popToMark(at, &taken)); return addTo(std::move(taken), false, at);
      case kSetItem: FW_RETURN_IF_ERROR(popValues(2, at, &taken)); return addTo(std::move(taken), true, at);
      case kSetItems: FW_RETURN_IF_ERROR(popToMark(at, &taken)); return addTo(std::move(taken), true, at);
      case kTuple: FW_RETURN_IF_ERROR(popToMark(at, &taken)); return tuple(std::move(taken), at);
      case kTuple1:
      case kTuple2:
      case kTuple3:
        FW_RETURN_IF_ERROR(popValues(op - kTuple1 + 1, at, &taken));
        return tuple(std::move(taken), at);
      case kBinPut: FW_RETURN_IF_ERROR(little(1, at, &n)); return memoPut(n, at);
      case kLongBinPut: FW_RETURN_IF_ERROR(little(4, at, &n)); return memoPut(n, at);
      case kMemoize: return memoPut(memo_.size(), at);
      case kBinGet: FW_RETURN_IF_ERROR(little(1, at, &n)); return memoGet(n, at);
      case kLongBinGet: FW_RETURN_IF_ERROR(little(4, at, &n)); return memoGet(n, at);
      default: {
        char hex[8];
        std::snprintf(hex, sizeof(hex), "0x%02x", op);
        return error(at, std::string("opcode ") + hex + " (not one a trace dump holds)");
      }
    }
  }

  const std::string& in_;
  size_t pos_ = 0;
  size_t items_ = 0;
  std::vector<ValuePtr> stack_;
  std::vector<size_t> marks_;
  std::map<uint64_t, ValuePtr> memo_;
  std::map<const PickleValue*, int> depthOf_;
  std::set<const PickleValue*> fetched_;
};

}  // namespace

Status parsePickle(const std::string& bytes, std::shared_ptr<PickleValue>* out) {
  Parser parser(bytes);
  return parser.run(out);
}

}  // namespace fairway

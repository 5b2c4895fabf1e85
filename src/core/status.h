// Status: a result code plus a message, the value every internal function
// returns. The message is only built on failure, so the success path never
// allocates (and carries a null pointer, not an empty string).
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "fairway/fairway.h"

namespace fairway {

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(fwResult_t code, std::string message)
      : code_(code), message_(std::make_unique<std::string>(std::move(message))) {}
  Status(const Status& other) : code_(other.code_) {
    if (other.message_) message_ = std::make_unique<std::string>(*other.message_);
  }
  Status& operator=(const Status& other) {
    if (this != &other) *this = Status(other);
    return *this;
  }
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  static Status ok() { return Status(); }
  bool isOk() const { return code_ == fwSuccess; }
  explicit operator bool() const { return isOk(); }
  fwResult_t code() const { return code_; }
  const std::string& message() const { return message_ ? *message_ : emptyMessage(); }

  // Prefixes context ("allreduce: ") to the message of a failed status.
  Status withContext(const std::string& context) const {
    if (isOk()) return *this;
    return Status(code_, context + ": " + message());
  }
  // The same for a literal: nothing is built on success (every call adds one).
  Status withContext(const char* context) const {
    if (isOk()) return *this;
    return Status(code_, std::string(context) + ": " + message());
  }

 private:
  static const std::string& emptyMessage() {
    static const std::string empty;
    return empty;
  }

  fwResult_t code_ = fwSuccess;
  // Null on success: every internal call returns a Status, and one that
  // carries nothing costs a word to set and a test to destroy.
  std::unique_ptr<std::string> message_;
};

}  // namespace fairway

#define FW_RETURN_IF_ERROR(expr)            \
  do {                                      \
    ::fairway::Status fw_status_ = (expr);  \
    if (!fw_status_.isOk()) return fw_status_; \
  } while (0)

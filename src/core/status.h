// Status: a result code plus a message, the value every internal function
// returns. The message is only built on failure, so the success path never
// allocates.
#pragma once

#include <string>
#include <utility>

#include "fairway/fairway.h"

namespace fairway {

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(fwResult_t code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return Status(); }
  bool isOk() const { return code_ == fwSuccess; }
  explicit operator bool() const { return isOk(); }
  fwResult_t code() const { return code_; }
  const std::string& message() const { return message_; }

  // Prefixes context ("allreduce: ") to the message of a failed status.
  Status withContext(const std::string& context) const {
    if (isOk()) return *this;
    return Status(code_, context + ": " + message_);
  }
  // The same for a literal: nothing is built on success (every call adds one).
  Status withContext(const char* context) const {
    if (isOk()) return *this;
    return Status(code_, std::string(context) + ": " + message_);
  }

 private:
  fwResult_t code_ = fwSuccess;
  std::string message_;
};

}  // namespace fairway

#define FW_RETURN_IF_ERROR(expr)            \
  do {                                      \
    ::fairway::Status fw_status_ = (expr);  \
    if (!fw_status_.isOk()) return fw_status_; \
  } while (0)

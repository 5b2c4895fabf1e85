#include "core/errors.h"

#include <string>

#include "core/log.h"

namespace fairway {
namespace {
thread_local std::string lastErrorMessage;
}  // namespace

fwResult_t reportToCaller(const Status& status) {
  if (!status.isOk()) {
    lastErrorMessage = status.message();
    FW_LOG(Warn, Api, "%s: %s", fwGetErrorString(status.code()), status.message().c_str());
  }
  return status.code();
}

}  // namespace fairway

extern "C" {

const char* fwGetErrorString(fwResult_t result) {
  switch (result) {
    case fwSuccess: return "success";
    case fwInvalidArgument: return "invalid argument";
    case fwInvalidPointer: return "invalid pointer";
    case fwInvalidCount: return "invalid count";
    case fwInvalidDatatype: return "invalid datatype";
    case fwInvalidOp: return "invalid reduction operation";
    case fwOpNotSupportedForType: return "reduction operation not defined for datatype";
    case fwInvalidRank: return "invalid rank";
    case fwInvalidComm: return "invalid communicator";
    case fwInvalidUsage: return "invalid usage";
    case fwCollectiveMismatch: return "collective mismatch across ranks";
    case fwRemoteError: return "remote rank failed";
    case fwTimeout: return "timed out";
    case fwTransportError: return "transport error";
    case fwSystemError: return "system error";
    case fwInternalError: return "internal error";
    case fwAuthError: return "bootstrap authentication failed";
    case fwNotAvailable: return "not available";
    case fwInProgress: return "in progress";
    case fwUnsupportedCompression: return "unsupported compression";
    case fwRevoked: return "communicator revoked";
    case fwNumResults: break;
  }
  return "unknown result code";
}

const char* fwGetLastErrorMessage(void) { return fairway::lastErrorMessage.c_str(); }

fwResult_t fwGetVersion(int* version) {
  if (version == nullptr) {
    return fairway::reportToCaller(fairway::Status(fwInvalidPointer, "version is NULL"));
  }
  *version = FAIRWAY_VERSION_CODE;
  return fwSuccess;
}

}  // extern "C"

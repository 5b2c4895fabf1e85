// fwCommDumpTrace: the process's flight records, written on request.
#include "api/handles.h"
#include "core/errors.h"

using namespace fairway;

fwResult_t fwCommDumpTrace(fwComm_t comm, const char* dir) {
  Communicator* impl = nullptr;
  Status st = lookupComm(comm, &impl);
  if (st.isOk()) st = impl->dumpTrace(dir == nullptr ? "" : dir, "call", nullptr);
  return reportToCaller(st.withContext("fwCommDumpTrace"));
}

// Argument checks for the C API: each failure names the argument and gets
// its own result code. Nothing is checked twice further down.
#pragma once

#include "comm/collective_args.h"
#include "core/status.h"

namespace fairway {

// Host buffers complete before the call returns, so they take no stream.
Status validateHostStream(fwStream_t stream);
Status validateCollective(const CollectiveArgs& args, int rank, int nranks);
Status validatePointToPoint(const void* buf, size_t count, fwDataType_t datatype, int peer, int nranks,
                            const char* bufName);

}  // namespace fairway

// Argument checks for the C API: each failure names the argument and gets
// its own result code. Nothing is checked twice further down.
#pragma once

#include "collective/collective_args.h"
#include "core/status.h"

namespace fairway {

// Host buffers complete before the call returns, so they take no stream.
Status validateHostStream(fwStream_t stream);
// Includes args.compression's rules (fwUnsupportedCompression).
Status validateCollective(const CollectiveArgs& args, int rank, int nranks);
// A caller's compression descriptor, checked for itself; its use with a
// collective is validateCollective's.
Status readCompression(const fwCompression_t* user, Compression* out);
Status validatePointToPoint(const void* buf, size_t count, fwDataType_t datatype, int peer, int nranks,
                            const char* bufName);

}  // namespace fairway

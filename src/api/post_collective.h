// fwPost's collectives: the description (fwOpArgs_t) read straight into the
// one CollectiveArgs every entry point of api_collectives.cc builds, and
// run by the same code as those entry points, in the form asked.
#pragma once

#include "fairway/fairway.h"

namespace fairway {

// a.type is a collective (operationRow(a.type).collective); checkShape in
// api_post.cc has passed. Non-blocking with a request, else blocking on
// host buffers or stream-ordered on device buffers.
fwResult_t postCollective(const fwOpArgs_t& a, fwComm_t comm, fwStream_t stream, fwRequest_t* request);

}  // namespace fairway

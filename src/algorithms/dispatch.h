// From a chosen algorithm to its function: runs one validated collective
// with the algorithm selection picked, on the context's providers.
#pragma once

#include "algorithms/algorithm.h"
#include "algorithms/context.h"
#include "collective/collective_args.h"

namespace fairway {

Status runCollective(CollectiveContext& ctx, const CollectiveArgs& args, Algorithm algorithm);

}  // namespace fairway

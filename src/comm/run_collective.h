// Runs one validated collective with the algorithm the selector picked.
#pragma once

#include "algorithms/context.h"
#include "algorithms/selector.h"
#include "comm/collective_args.h"

namespace fairway {

Status runCollective(CollectiveContext& ctx, const CollectiveArgs& args, Algorithm algorithm);

}  // namespace fairway

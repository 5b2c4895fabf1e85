#include "algorithms/selection_key.h"

#include "core/datatype.h"

namespace fairway {

DeviceRoutes DeviceRoutes::of(const TransportPlan& plan) {
  DeviceRoutes routes;
  routes.present = plan.intraDevice.has_value();
  const bool ncclInside = plan.intraDevice == Provider::Nccl;
  routes.ncclEverywhere = ncclInside && (plan.nodeCount == 1 || plan.interDevice == Provider::Nccl);
  routes.ncclInNodes = ncclInside && !routes.ncclEverywhere;
  routes.ucxDirect = plan.deviceOverUcx == Provider::DeviceUcx;
  return routes;
}

size_t selectionBytes(const CollectiveArgs& a, int ranks) {
  if (a.kind == CollectiveKind::Barrier) return 0;
  // A compressed allgather runs a plain one over its wire format.
  const size_t element = a.compression.active() && a.kind == CollectiveKind::AllGather
                             ? a.compression.encodedBytes(1)
                             : datatypeSize(a.datatype);
  const size_t bytes = a.count * element;
  return a.kind == CollectiveKind::ReduceScatter ? bytes * static_cast<size_t>(ranks) : bytes;
}

SelectionKey selectionKeyOf(const CollectiveArgs& args, int ranks, const RankLayout* layout, bool onDevice) {
  SelectionKey key;
  key.kind = args.kind;
  key.onDevice = onDevice;
  key.bytes = selectionBytes(args, ranks);
  key.layout = layout;
  key.ranks = ranks;
  key.compressed = args.compression.active();
  if (key.compressed) key.wireRatio = args.compression.wireRatio(datatypeSize(args.datatype));
  return key;
}

}  // namespace fairway

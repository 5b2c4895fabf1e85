// How collectives cut their buffers into pipelined pieces: the defaults,
// in one place, and what FAIRWAY_* variables override (core/config.cc).
#pragma once

#include <cstddef>

namespace fairway {

struct PipelineSettings {
  // Ring and tree algorithms: the unit each step sends (FAIRWAY_SEGMENT_BYTES)
  // and segments in flight per peer (FAIRWAY_PIPELINE_DEPTH).
  size_t segmentBytes = 256 * 1024;
  int depth = 4;
  // Two-phase algorithms: bytes of the whole buffer per slice
  // (FAIRWAY_SLICE_BYTES), slices in flight (FAIRWAY_SLICES_IN_FLIGHT), and
  // the smallest shard, one rank's piece of a slice, worth sending
  // (FAIRWAY_MIN_SHARD_BYTES).
  size_t sliceBytes = 1 << 20;
  int slicesInFlight = 8;
  size_t minShardBytes = 64 * 1024;
  // Rail members a two-phase exchange sends to (and receives from) at once
  // (FAIRWAY_RAIL_PEERS_IN_FLIGHT); more nodes than this take rounds.
  int railPeersInFlight = 256;
  // Device buffers staged through pinned host memory: bytes per staged
  // slice (FAIRWAY_STAGING_SLICE_BYTES). Big enough that a slice's network
  // time dwarfs the per-copy overhead, small enough that the few in flight
  // stay cheap in pinned memory and the copies overlap the network.
  size_t stagingSliceBytes = 4 << 20;
};
inline constexpr PipelineSettings kDefaultPipeline{};

}  // namespace fairway

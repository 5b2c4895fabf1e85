// The 64-bit message tag. Fields, high to low:
//   [63:62] channel: collective, point-to-point, control (failure notices)
//           or recovery (survivors' messages on a broken communicator)
//   [61:42] source rank (receives match on it, since UCX has no source filter)
//   collective: [41:18] sequence number, [17:10] signature, [9:0] step
//   point-to-point: [41:24] the caller's tag, [23:0] message number per
//   (pair of ranks, tag), wrapping
//   recovery: [41:0] the exchange's id
// The signature hashes what every rank must agree on (collective, type, op,
// root, count), so ranks that call different collectives never match each
// other's messages and the stall is diagnosed as a mismatch instead.
#pragma once

#include <cstdint>

namespace fairway {

enum class TagChannel : uint64_t { Collective = 0, PointToPoint = 1, Control = 2, Recovery = 3 };

constexpr uint64_t kMaxTagRanks = 1u << 20;

struct Tag {
  static constexpr int kChannelShift = 62;
  static constexpr int kSourceShift = 42;
  static constexpr int kSequenceShift = 18;
  static constexpr int kSignatureShift = 10;
  static constexpr uint64_t kSourceMask = (kMaxTagRanks - 1) << kSourceShift;
  static constexpr uint64_t kChannelMask = uint64_t{3} << kChannelShift;
  static constexpr uint64_t kSequenceMask = ((uint64_t{1} << 24) - 1) << kSequenceShift;
  static constexpr uint64_t kSignatureMask = uint64_t{0xff} << kSignatureShift;
  static constexpr uint64_t kStepMask = 0x3ff;
  static constexpr uint64_t kFullMask = ~uint64_t{0};

  static uint64_t channelBits(TagChannel c) { return static_cast<uint64_t>(c) << kChannelShift; }
  static uint64_t collective(int source, uint32_t sequence, uint8_t signature, uint32_t step) {
    return channelBits(TagChannel::Collective) | (static_cast<uint64_t>(source) << kSourceShift) |
           ((static_cast<uint64_t>(sequence) << kSequenceShift) & kSequenceMask) |
           (static_cast<uint64_t>(signature) << kSignatureShift) | (step & kStepMask);
  }
  static constexpr int kUserTagShift = 24;
  static constexpr uint32_t kMaxUserTag = (1u << (kSourceShift - kUserTagShift)) - 1;
  static constexpr uint64_t kMessageNumberMask = (uint64_t{1} << kUserTagShift) - 1;
  static uint64_t pointToPoint(int source, uint32_t userTag, uint64_t messageNumber) {
    return channelBits(TagChannel::PointToPoint) | (static_cast<uint64_t>(source) << kSourceShift) |
           (static_cast<uint64_t>(userTag & kMaxUserTag) << kUserTagShift) | (messageNumber & kMessageNumberMask);
  }
  static uint64_t control(int source) {
    return channelBits(TagChannel::Control) | (static_cast<uint64_t>(source) << kSourceShift);
  }
  static constexpr uint64_t kRecoveryIdMask = (uint64_t{1} << kSourceShift) - 1;
  static uint64_t recovery(int source, uint64_t exchangeId) {
    return channelBits(TagChannel::Recovery) | (static_cast<uint64_t>(source) << kSourceShift) |
           (exchangeId & kRecoveryIdMask);
  }
  static uint32_t sequence(uint64_t tag) { return static_cast<uint32_t>((tag & kSequenceMask) >> kSequenceShift); }
  static uint8_t signature(uint64_t tag) { return static_cast<uint8_t>((tag & kSignatureMask) >> kSignatureShift); }
  static TagChannel channel(uint64_t tag) { return static_cast<TagChannel>(tag >> kChannelShift); }
};

}  // namespace fairway

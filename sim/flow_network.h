// The simulated network's links and the flows across them. Every flow
// crosses a fixed list of links; the links' capacity is shared max-min
// fairly (progressive filling): a flow gets an equal share of its
// tightest link, and what it cannot use there goes to the others. Rates
// are worked out again only for the flows that share links, directly or
// through other flows, with a flow that started or ended, and only once
// per instant however many flows changed in it: a symmetric exchange of
// millions of flows costs one recomputation when it starts and one when
// it ends.
//
// Units: time in microseconds, sizes in bytes, capacities in bytes per
// microsecond (= MB/s; GB/s x 1000).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace fairway::sim {

class FlowNetwork {
 public:
  static constexpr int kMaxHops = 6;

  // A link of `capacity` bytes/us that adds `latencyUs` to every message
  // crossing it; returns its id.
  int addLink(double capacity, double latencyUs, const char* kind);
  int linkCount() const { return static_cast<int>(links_.size()); }
  double capacity(int link) const { return links_[link].capacity; }
  double latency(int link) const { return links_[link].latencyUs; }
  const char* kind(int link) const { return links_[link].kind; }

  // Starts a flow of `bytes` across `links`; owner is the
  // caller's (the message it carries). Rates are set at the next settle().
  int start(const int* links, int hops, double bytes, uint32_t owner);
  uint32_t owner(int flow) const { return flows_[flow].owner; }

  // Works out the rates of the flows that share links with flows started
  // or ended since the last call, and moves their finish times; returns
  // how many flows' rates changed.
  // With includeLarge false, flows whose links last formed a set of more
  // than kLargeComponent flows are left for a later call (Engine's rate
  // quantum).
  static constexpr size_t kLargeComponent = 50000;
  size_t settle(double now, bool includeLarge = true);
  // Whether flows started or ended that no settle() has seen.
  bool unsettled() const { return !dirty_.empty(); }
  // The earliest finish time of an active flow (infinity when none), and
  // that flow. Each flow has one place in an indexed heap, so a rate that
  // changes many times leaves nothing stale behind.
  double nextFinish() const;
  int nextFlow() const { return heap_.front(); }
  // Ends a flow (the one nextFlow() names, once its time has come).
  void finish(int flow);

  double rate(int flow) const { return flows_[flow].rate; }
  size_t activeFlows() const { return active_; }
  // Flows started so far, and the largest set whose rates one settle() worked out.
  uint64_t flowsStarted() const { return started_; }
  size_t largestComponent() const { return largestComponent_; }
  // Rate recomputations so far, and the flows they visited in all.
  uint64_t settles() const { return settles_; }
  uint64_t flowsSettled() const { return flowsSettled_; }

 private:
  struct Link {
    double capacity;
    double latencyUs;
    const char* kind;
    std::vector<int> flows;  // active flows crossing it
    // Progressive filling's state, valid during one settle().
    double left = 0;
    int unfrozen = 0;
    uint32_t seen = 0;  // settle() epoch that reached it
    bool dirty = false;  // flows started or ended on it since a settle() reached it
    size_t lastComponent = 0;  // flows in the set the last settle() that reached it worked out
  };
  // 80 bytes: a 16,384-rank two-phase call has 33 million flows at once.
  struct Flow {
    int links[kMaxHops];
    int slot[kMaxHops];  // index in each link's flows
    double rate = 0;
    // When the flow ends at its rate; until its first rate (rate 0), the
    // bytes it has to carry. What is left at t is rate x (finishAt - t).
    double finishAt = 0;
    int heapPos = -1;  // in heap_, or -1
    uint32_t owner = 0;
    uint32_t seen = 0;
    uint8_t hops = 0;
    bool frozen = false;
    bool changed = false;
    bool active = false;
  };
  static double bytesLeft(const Flow& f, double now) {
    return f.rate > 0 ? std::max(0.0, f.rate * (f.finishAt - now)) : f.finishAt;
  }

  void collectComponent();
  void fill(double now);
  void markDirty(int link);
  // The finish-time heap (min at the front), with each flow's position kept.
  void heapPlace(int pos, int flow);
  void heapUp(int pos);
  void heapDown(int pos);
  void heapUpdate(int flow);
  void heapRemove(int flow);
  std::vector<int> heap_;
  // Progressive filling's queue of links by fair share. A link's share
  // only grows as flows elsewhere freeze, so an entry is a lower bound,
  // brought up to date when it comes to the front.
  struct FillEntry {
    double share;
    int link;
    bool operator>(const FillEntry& o) const { return share > o.share || (share == o.share && link > o.link); }
  };
  std::vector<FillEntry> fillHeap_;

  std::vector<Link> links_;
  std::vector<Flow> flows_;
  std::vector<int> freeFlows_;
  std::vector<int> dirty_;
  std::vector<int> seeds_;
  std::vector<int> componentFlows_;
  std::vector<int> componentLinks_;
  uint32_t epoch_ = 0;
  size_t active_ = 0;
  uint64_t started_ = 0;
  size_t largestComponent_ = 0;
  uint64_t settles_ = 0, flowsSettled_ = 0;
};

}  // namespace fairway::sim

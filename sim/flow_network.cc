#include "sim/flow_network.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace fairway::sim {

int FlowNetwork::addLink(double capacity, double latencyUs, const char* kind) {
  Link link;
  link.capacity = capacity;
  link.latencyUs = latencyUs;
  link.kind = kind;
  links_.push_back(std::move(link));
  return static_cast<int>(links_.size()) - 1;
}

void FlowNetwork::markDirty(int link) {
  if (!links_[link].dirty) {
    links_[link].dirty = true;
    dirty_.push_back(link);
  }
}

int FlowNetwork::start(const int* links, int hops, double bytes, uint32_t owner) {
  int id;
  if (!freeFlows_.empty()) {
    id = freeFlows_.back();
    freeFlows_.pop_back();
  } else {
    id = static_cast<int>(flows_.size());
    flows_.emplace_back();
  }
  Flow& f = flows_[id];
  f.hops = static_cast<uint8_t>(hops);
  f.rate = 0;
  f.finishAt = bytes;
  f.heapPos = -1;
  f.owner = owner;
  f.frozen = false;
  f.changed = false;
  f.active = true;
  for (int h = 0; h < hops; ++h) {
    f.links[h] = links[h];
    f.slot[h] = static_cast<int>(links_[links[h]].flows.size());
    links_[links[h]].flows.push_back(id);
    markDirty(links[h]);
  }
  ++active_;
  ++started_;
  return id;
}

void FlowNetwork::finish(int id) {
  Flow& f = flows_[id];
  for (int h = 0; h < f.hops; ++h) {
    Link& link = links_[f.links[h]];
    // Swap-remove, keeping the moved flow's slot right.
    const int last = link.flows.back();
    link.flows[f.slot[h]] = last;
    Flow& moved = flows_[last];
    for (int k = 0; k < moved.hops; ++k) {
      if (moved.links[k] == f.links[h]) moved.slot[k] = f.slot[h];
    }
    link.flows.pop_back();
    markDirty(f.links[h]);
  }
  heapRemove(id);
  f.active = false;
  --active_;
  freeFlows_.push_back(id);
}

size_t FlowNetwork::settle(double now, bool includeLarge) {
  seeds_.clear();
  size_t kept = 0;
  for (int l : dirty_) {
    if (includeLarge || links_[l].lastComponent <= kLargeComponent) {
      seeds_.push_back(l);
    } else {
      dirty_[kept++] = l;
    }
  }
  dirty_.resize(kept);
  if (seeds_.empty()) return 0;
  collectComponent();
  fill(now);
  size_t changed = 0;
  for (int f : componentFlows_) {
    Flow& flow = flows_[f];
    if (!flow.changed) continue;
    flow.changed = false;
    heapUpdate(f);
    ++changed;
  }
  return changed;
}

double FlowNetwork::nextFinish() const {
  return heap_.empty() ? std::numeric_limits<double>::infinity() : flows_[heap_.front()].finishAt;
}

void FlowNetwork::heapPlace(int pos, int flow) {
  heap_[pos] = flow;
  flows_[flow].heapPos = pos;
}

// Ties go to the lower flow id, so runs are deterministic.
static bool earlier(double a, int fa, double b, int fb) { return a < b || (a == b && fa < fb); }

void FlowNetwork::heapUp(int pos) {
  const int flow = heap_[pos];
  const double t = flows_[flow].finishAt;
  while (pos > 0) {
    const int parent = (pos - 1) / 2;
    if (!earlier(t, flow, flows_[heap_[parent]].finishAt, heap_[parent])) break;
    heapPlace(pos, heap_[parent]);
    pos = parent;
  }
  heapPlace(pos, flow);
}

void FlowNetwork::heapDown(int pos) {
  const int n = static_cast<int>(heap_.size());
  const int flow = heap_[pos];
  const double t = flows_[flow].finishAt;
  for (;;) {
    int child = 2 * pos + 1;
    if (child >= n) break;
    if (child + 1 < n && earlier(flows_[heap_[child + 1]].finishAt, heap_[child + 1], flows_[heap_[child]].finishAt,
                                 heap_[child])) {
      ++child;
    }
    if (!earlier(flows_[heap_[child]].finishAt, heap_[child], t, flow)) break;
    heapPlace(pos, heap_[child]);
    pos = child;
  }
  heapPlace(pos, flow);
}

void FlowNetwork::heapUpdate(int flow) {
  Flow& f = flows_[flow];
  if (f.heapPos < 0) {
    heap_.push_back(flow);
    f.heapPos = static_cast<int>(heap_.size()) - 1;
  }
  heapUp(f.heapPos);
  heapDown(flows_[flow].heapPos);
}

void FlowNetwork::heapRemove(int flow) {
  Flow& f = flows_[flow];
  if (f.heapPos < 0) return;
  const int pos = f.heapPos;
  const int last = heap_.back();
  heap_.pop_back();
  f.heapPos = -1;
  if (last == flow) return;
  heapPlace(pos, last);
  heapUp(pos);
  heapDown(flows_[last].heapPos);
}

// Every flow and link reachable from the dirty links through shared links.
void FlowNetwork::collectComponent() {
  ++epoch_;
  componentFlows_.clear();
  componentLinks_.clear();
  for (int l : seeds_) {
    if (links_[l].seen == epoch_) continue;
    links_[l].seen = epoch_;
    componentLinks_.push_back(l);
  }
  for (size_t i = 0; i < componentLinks_.size(); ++i) {
    for (int f : links_[componentLinks_[i]].flows) {
      Flow& flow = flows_[f];
      if (flow.seen == epoch_) continue;
      flow.seen = epoch_;
      componentFlows_.push_back(f);
      for (int h = 0; h < flow.hops; ++h) {
        Link& link = links_[flow.links[h]];
        if (link.seen == epoch_) continue;
        link.seen = epoch_;
        componentLinks_.push_back(flow.links[h]);
      }
    }
  }
  // Deferred links this set reached are worked out with it.
  for (int l : componentLinks_) {
    links_[l].dirty = false;
    links_[l].lastComponent = componentFlows_.size();
  }
  if (!dirty_.empty()) {
    size_t kept = 0;
    for (int l : dirty_) {
      if (links_[l].dirty) dirty_[kept++] = l;
    }
    dirty_.resize(kept);
  }
  largestComponent_ = std::max(largestComponent_, componentFlows_.size());
  ++settles_;
  flowsSettled_ += componentFlows_.size();
}

// Progressive filling over the component: the link with the smallest fair
// share freezes its flows at that share, which leaves the others more.
void FlowNetwork::fill(double now) {
  for (int f : componentFlows_) flows_[f].frozen = false;
  std::vector<FillEntry>& heap = fillHeap_;  // kept between calls: settle() runs at every instant
  heap.clear();
  for (int l : componentLinks_) {
    Link& link = links_[l];
    link.left = link.capacity;
    link.unfrozen = static_cast<int>(link.flows.size());
    if (link.unfrozen > 0) heap.push_back({link.left / link.unfrozen, l});
  }
  std::make_heap(heap.begin(), heap.end(), std::greater<FillEntry>());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<FillEntry>());
    const FillEntry e = heap.back();
    heap.pop_back();
    Link& link = links_[e.link];
    if (link.unfrozen == 0) continue;
    const double current = std::max(0.0, link.left) / link.unfrozen;
    if (current > e.share * (1 + 1e-12)) {
      // Flows it shares with frozen links have left it more: queue it anew.
      heap.push_back({current, e.link});
      std::push_heap(heap.begin(), heap.end(), std::greater<FillEntry>());
      continue;
    }
    const double share = std::max(current, 1e-12);
    for (int f : link.flows) {
      Flow& flow = flows_[f];
      if (flow.frozen) continue;
      flow.frozen = true;
      // A flow keeps its finish event unless its rate really moved.
      if (flow.rate == 0 || std::abs(flow.rate - share) > 1e-9 * share) {
        const double left = bytesLeft(flow, now);
        flow.rate = share;
        flow.finishAt = now + left / share;
        flow.changed = true;
      }
      for (int h = 0; h < flow.hops; ++h) {
        if (flow.links[h] == e.link) continue;
        Link& other = links_[flow.links[h]];
        other.left -= share;
        --other.unfrozen;
      }
    }
    link.unfrozen = 0;
  }
}

}  // namespace fairway::sim

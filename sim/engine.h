// Runs every simulated rank's code in a fiber of its own, in virtual time.
// A rank runs until it waits for a message; its clock moves with the work
// it charges (sim_data_space.h) and never back. Its messages (SimPort)
// become flows on the FlowNetwork when both ends are ready (at once for
// small, eager ones); the flows' ends and deliveries are events, taken in
// time order, that complete the ranks' Pending slots and wake the ranks
// waiting for them. Nothing is copied: the data space charges time by
// bytes and the buffers are addresses that are never dereferenced.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/data_space.h"
#include "p2p/message_port.h"
#include "sim/cluster_spec.h"
#include "sim/fabric.h"
#include "sim/flow_network.h"
#include "sim/match_table.h"

namespace fairway::sim {

// One message as --trace lists it (times in microseconds).
struct TraceRecord {
  int src = 0, dst = 0;
  size_t bytes = 0;
  uint64_t tag = 0;
  double sendPosted = 0, recvPosted = 0;
  double flowStart = 0, flowEnd = 0, delivered = 0;
  std::string path;  // the links' kinds
};

struct RunStats {
  double finishUs = 0;        // the last rank's end
  double firstFinishUs = 0;   // the first rank's
  uint64_t events = 0;
  uint64_t messages = 0;
  uint64_t flows = 0;
  size_t largestComponent = 0;
  uint64_t settles = 0, flowsSettled = 0;  // rate recomputations, and the flows they visited
  double wallSeconds = 0;
};

class Engine {
 public:
  Engine(const ClusterSpec& spec, int nodes);
  ~Engine();
  int ranks() const { return ranks_; }
  const ClusterSpec& spec() const { return spec_; }

  // Runs body for every rank, each in its fiber with its port and data
  // space, until all have returned; once per engine. Fails with the first rank's error, or
  // when ranks wait for messages that can never come (the error names them).
  using Body = std::function<Status(int rank, MessagePort& port, DataSpace& space)>;
  Status run(const Body& body, RunStats* stats);
  // Works out the rates of large connected sets of flows (more than
  // FlowNetwork::kLargeComponent) at most once per `us` of virtual time
  // (0: at every instant a flow starts or ends, as smaller sets always
  // are). Between, a new flow there waits for its rate and an ended
  // flow's share waits to be handed on, each late by less than `us`. On
  // thousands of nodes a rail's flows form one set of millions, and
  // working it out at every instant is most of the run's time.
  void setRateQuantum(double us) { rateQuantumUs_ = us; }
  // Keeps every message of the next run for --trace.
  void keepTrace(bool on) { tracing_ = on; }
  const std::vector<TraceRecord>& trace() const { return trace_; }

  // For SimPort and SimDataSpace (engine.cc): the operations a rank
  // posts and waits for, and the time its work takes.
  void charge(int rank, double us);
  // Work of `processorUs` on one processor of the rank's own: charged to
  // its clock, or, where processors are shared, a flow across them that
  // the rank waits for.
  void work(int rank, double processorUs);
  Status post(int rank, bool isSend, int peer, size_t bytes, uint64_t tag, Pending* out);
  Status waitAll(int rank, Pending* list, size_t count);

 private:
  struct Rank;
  struct Message;
  // FlowEnd: a message of no bytes (flows' ends come from the network's own heap).
  enum class EventKind : uint8_t { FlowStart, FlowEnd, Deliver };
  // 24 bytes: millions wait in the queue when thousands of ranks post at once.
  struct Event {
    double time;
    uint64_t order;  // ties in posting order: deterministic
    uint32_t message;
    EventKind kind;
    bool operator>(const Event& o) const { return time != o.time ? time > o.time : order > o.order; }
  };

  void push(double time, EventKind kind, uint32_t message);
  // Both ends are posted, the second at secondAt.
  void matched(uint32_t m, double secondAt);
  void startFlow(uint32_t m);
  void flowEnded(uint32_t m);
  void complete(int rank, Pending* p, uint32_t serial);
  void process(const Event& e);
  void resumeRunnable();
  uint32_t newMessage();
  void releaseMessage(uint32_t m);

  ClusterSpec spec_;
  int nodes_, ranks_;
  FlowNetwork network_;
  Fabric fabric_;
  std::vector<std::unique_ptr<Rank>> rankStates_;
  // Where ranks share processors: each rank's own (1 processor-us per
  // us), its node's and the cluster's, as flow links.
  bool sharedProcessors_ = false;
  std::vector<int> rankProcessor_, nodeProcessors_;
  int clusterProcessors_ = -1;
  std::vector<int> runnable_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  uint64_t order_ = 0;
  double now_ = 0;
  double rateQuantumUs_ = 0;
  double nextSettle_ = 0;  // the earliest time rates may be worked out again
  std::vector<Message> messages_;
  std::vector<uint32_t> freeMessages_;
  uint64_t serial_ = 0;
  // Posted sends and receives that wait for their other end.
  MatchTable unmatched_;
  bool ran_ = false;
  bool tracing_ = false;
  std::vector<TraceRecord> trace_;
  // While tracing, by message: its record in trace_, and its ends' posting times.
  std::vector<uint32_t> traceIndex_;
  std::vector<std::pair<double, double>> tracePosted_;
  uint64_t eventCount_ = 0, messageCount_ = 0;
};

}  // namespace fairway::sim

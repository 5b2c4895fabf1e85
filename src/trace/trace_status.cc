#include "trace/trace_status.h"

#include <cstdio>
#include <sstream>

namespace fairway {

namespace {

std::string agoText(uint64_t thenNs, uint64_t nowNs) {
  if (thenNs == 0 || nowNs < thenNs) return "";
  char text[32];
  std::snprintf(text, sizeof(text), " (%.1f s ago)", static_cast<double>(nowNs - thenNs) / 1e9);
  return text;
}

int globalRank(const CommunicatorTrace& c, int rank) {
  return rank >= 0 && rank < static_cast<int>(c.globalRanks.size()) ? c.globalRanks[rank] : rank;
}

}  // namespace

std::string describeStatus(const TraceDump& dump, uint64_t nowNs) {
  std::ostringstream out;
  out << "process " << dump.pid << " on " << dump.host << " (rank " << dump.rank << "), " << dump.library
      << ", as of " << traceTimeText(dump.timeNs) << "\n";
  for (const CommunicatorTrace& c : dump.communicators) {
    out << "communicator " << c.name << " (" << c.desc << "), rank " << c.rank << " of " << c.size << ": ";
    bool anyCompleted = false;
    uint64_t lastCompleted = 0;
    for (const TraceEntry& e : c.entries) {
      if (e.isCollective() && e.state == TraceState::Completed && (!anyCompleted || e.sequence > lastCompleted)) {
        lastCompleted = e.sequence;
        anyCompleted = true;
      }
    }
    out << "last completed " << (anyCompleted ? "#" + std::to_string(lastCompleted) : std::string("none"));
    if (!c.broken.empty()) out << "; broken: " << c.broken;
    out << "\n";
    bool anyInFlight = false;
    for (const TraceEntry& e : c.entries) {
      if (e.state != TraceState::Posted && e.state != TraceState::Started) continue;
      anyInFlight = true;
      out << "  in flight: " << (e.isCollective() ? "collective #" : "message #") << e.sequence << " "
          << describeCall(e) << ": " << traceStateName(e.state);
      const uint64_t since = e.state == TraceState::Started && e.startedNs ? e.startedNs : e.postedNs;
      out << " " << traceTimeText(since) << agoText(since, nowNs) << "\n";
    }
    if (!anyInFlight) out << "  nothing in flight\n";
    if (c.waitingOn >= 0) {
      out << "  waiting on rank " << globalRank(c, c.waitingOn) << " since " << traceTimeText(c.waitingSinceNs)
          << agoText(c.waitingSinceNs, nowNs) << "\n";
    }
  }
  return out.str();
}

}  // namespace fairway

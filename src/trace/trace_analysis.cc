#include "trace/trace_analysis.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "core/datatype.h"

namespace fairway {

namespace {

std::string rankList(const std::set<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  size_t i = 0;
  for (int r : ranks) text += (i++ ? (i == ranks.size() ? " and " : ", ") : "") + std::to_string(r);
  return text;
}

// " (caller's #N)" where the caller numbered the call (torch's sequence
// number, through the PyTorch backend), else nothing.
std::string callerText(const TraceEntry* e) {
  return e != nullptr && e->callerSequence != 0 ? " (caller's #" + std::to_string(e->callerSequence) + ")" : "";
}

std::string secondsText(uint64_t ns) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f s", static_cast<double>(ns) / 1e9);
  return text;
}

// One rank's collectives of one communicator, by number.
struct RankView {
  const TraceFile* file = nullptr;
  const CommunicatorTrace* comm = nullptr;
  std::map<uint64_t, const TraceEntry*> bySequence;
  uint64_t firstKept = 0;  // the oldest number still in the ring
  bool any() const { return !bySequence.empty(); }
  uint64_t lastPosted() const { return bySequence.rbegin()->first; }
  const TraceEntry* at(uint64_t sequence) const {
    auto it = bySequence.find(sequence);
    return it == bySequence.end() ? nullptr : it->second;
  }
  std::string error(const TraceEntry& e) const {
    auto it = comm->failures.find(e.recordId);
    return it == comm->failures.end() ? "" : it->second;
  }
};

struct CommView {
  std::string name, desc;
  int size = 0;
  std::vector<int> globalRanks;
  std::vector<RankView> ranks;  // by communicator rank; file null where no dump holds it
  int global(int rank) const {
    return rank >= 0 && rank < static_cast<int>(globalRanks.size()) ? globalRanks[rank] : rank;
  }
};

struct Findings {
  std::vector<std::string> sentences;
  std::set<int> culprits;  // global ranks
  bool wrong = false;
};

// Lines up each communicator's ranks; files of other jobs and duplicate
// ranks are left out with a message.
std::vector<CommView> lineUp(const std::vector<TraceFile>& files, TraceReport* report) {
  std::map<std::string, CommView> views;
  std::vector<std::string> order;
  for (const TraceFile& f : files) {
    for (const CommunicatorTrace& c : f.dump.communicators) {
      auto it = views.find(c.name);
      if (it == views.end()) {
        CommView v;
        v.name = c.name;
        v.desc = c.desc;
        v.size = c.size;
        v.globalRanks = c.globalRanks;
        v.ranks.resize(static_cast<size_t>(c.size));
        it = views.emplace(c.name, std::move(v)).first;
        order.push_back(c.name);
      }
      CommView& v = it->second;
      if (c.size != v.size || c.rank < 0 || c.rank >= v.size) {
        report->unreadable.push_back(f.path + ": communicator " + c.name + " has rank " + std::to_string(c.rank) +
                                     " of " + std::to_string(c.size) + " where other dumps say " +
                                     std::to_string(v.size) + " ranks; left out");
        continue;
      }
      RankView& r = v.ranks[static_cast<size_t>(c.rank)];
      if (r.file != nullptr && r.file->dump.timeNs >= f.dump.timeNs) {
        report->unreadable.push_back(f.path + ": a second dump of rank " + std::to_string(c.rank) +
                                     " of communicator " + c.name + " (older than " + r.file->path + "); left out");
        continue;
      }
      r = RankView();
      r.file = &f;
      r.comm = &c;
      for (const TraceEntry& e : c.entries) {
        // NCCL's own collectives go to the stream without a number of their own.
        if (!e.isCollective() || e.state == TraceState::Enqueued) continue;
        r.bySequence[e.sequence] = &e;
      }
      // Where the ring wrapped, numbers before its oldest entry are unknown, not missing.
      if (c.posted > c.entries.size() && r.any()) r.firstKept = r.bySequence.begin()->first;
    }
  }
  std::vector<CommView> out;
  for (const std::string& name : order) out.push_back(std::move(views[name]));
  return out;
}

// The lowest number where ranks' calls differ.
bool findMismatch(const CommView& v, Findings* found) {
  std::set<uint64_t> sequences;
  for (const RankView& r : v.ranks) {
    for (const auto& [s, e] : r.bySequence) sequences.insert(s);
  }
  for (uint64_t s : sequences) {
    std::map<std::string, std::set<int>> callers;
    for (int rank = 0; rank < v.size; ++rank) {
      const TraceEntry* e = v.ranks[static_cast<size_t>(rank)].at(s);
      if (e != nullptr) callers[describeCall(*e)].insert(v.global(rank));
    }
    if (callers.size() < 2) continue;
    const TraceEntry* numbered = nullptr;
    for (const RankView& r : v.ranks) {
      const TraceEntry* e = r.at(s);
      if (e != nullptr && e->callerSequence != 0) numbered = e;
    }
    size_t most = 0;
    for (const auto& [call, ranks] : callers) most = std::max(most, ranks.size());
    std::string sentence = "Collective #" + std::to_string(s) + callerText(numbered) + " of communicator " + v.name +
                           " (" + v.desc +
                           ") does not match:";
    bool allAlike = true;
    for (const auto& [call, ranks] : callers) allAlike = allAlike && ranks.size() == most;
    size_t i = 0;
    for (const auto& [call, ranks] : callers) {
      sentence += std::string(i++ ? ";" : "") + " " + rankList(ranks) + " call" + (ranks.size() == 1 ? "s " : " ") +
                  call;
      // The smaller groups are the culprits; where all are the same size, all are.
      if (ranks.size() < most || allAlike) found->culprits.insert(ranks.begin(), ranks.end());
    }
    found->sentences.push_back(sentence + ".");
    found->wrong = true;
    return true;
  }
  return false;
}

// The lowest number some rank has not completed; false where every rank
// completed all it posted, up to the same number.
bool troubleSequence(const CommView& v, uint64_t* out) {
  bool any = false;
  uint64_t lowest = UINT64_MAX, highest = 0;
  bool allPosted = true;
  for (const RankView& r : v.ranks) {
    if (r.file == nullptr) {
      allPosted = false;
      continue;
    }
    for (const auto& [s, e] : r.bySequence) {
      if (e->state != TraceState::Completed) {
        lowest = std::min(lowest, s);
        any = true;
      }
    }
    if (r.any()) highest = std::max(highest, r.lastPosted());
  }
  if (!any) {
    // All completed: a rank behind the others is waited for by nobody yet.
    for (const RankView& r : v.ranks) {
      if (r.file != nullptr && r.any() && r.lastPosted() < highest) {
        lowest = std::min(lowest, r.lastPosted() + 1);
        any = true;
      }
    }
  }
  *out = lowest;
  return any || !allPosted;
}

void findStall(const CommView& v, uint64_t k, Findings* found) {
  const std::string where = " of communicator " + v.name + " (" + v.desc + ")";
  const TraceEntry* sample = nullptr;
  uint64_t earliest = UINT64_MAX;
  int earliestRank = -1;
  int64_t timeoutMs = 0;
  for (int rank = 0; rank < v.size; ++rank) {
    const RankView& r = v.ranks[static_cast<size_t>(rank)];
    if (r.comm != nullptr) timeoutMs = std::max(timeoutMs, r.comm->timeoutMs);
    const TraceEntry* e = r.at(k);
    if (e == nullptr) continue;
    if (sample == nullptr) sample = e;
    if (e->postedNs != 0 && e->postedNs < earliest) {
      earliest = e->postedNs;
      earliestRank = v.global(rank);
    }
  }
  const std::string call = "collective #" + std::to_string(k) + callerText(sample) +
                           (sample ? " (" + describeCall(*sample) + ")" : "");

  std::set<int> neverPosted, late, stuck, missing, namedFailed;
  std::string lateDetail, neverDetail, stuckDetail;
  std::map<std::string, std::set<int>> howStuck;
  std::set<int> waitedOn;  // ranks that ranks still waiting name
  for (int rank = 0; rank < v.size; ++rank) {
    const RankView& r = v.ranks[static_cast<size_t>(rank)];
    const int g = v.global(rank);
    if (r.file == nullptr) {
      missing.insert(g);
      continue;
    }
    for (int failed : r.comm->failedRanks) namedFailed.insert(v.global(failed));
    const TraceEntry* e = r.at(k);
    if (e == nullptr) {
      if (r.any() && r.lastPosted() > k && k < r.firstKept) continue;  // past the ring: not known
      neverPosted.insert(g);
      neverDetail += "; rank " + std::to_string(g) + "'s last was " +
                     (r.any() ? "#" + std::to_string(r.lastPosted()) + ", " +
                                    traceStateName(r.bySequence.rbegin()->second->state)
                              : std::string("none"));
      continue;
    }
    // Later than half the timeout after the first: the others were waiting for it.
    const uint64_t lateNs = static_cast<uint64_t>(std::max<int64_t>(timeoutMs, 2000)) * 500000u;
    if (earliest != UINT64_MAX && e->postedNs > earliest + lateNs) {
      late.insert(g);
      lateDetail += "; rank " + std::to_string(g) + " posted it " + secondsText(e->postedNs - earliest) +
                    " after rank " + std::to_string(earliestRank);
      continue;
    }
    if (e->state != TraceState::Completed) {
      stuck.insert(g);
      std::string how = e->state == TraceState::Failed
                            ? "failed: " + r.error(*e)
                            : e->state == TraceState::Started ? "were still in it at the dump"
                                                               : "had posted it, not started it, at the dump";
      if (e->state != TraceState::Failed && r.comm->waitingOn >= 0) {
        how += ", waiting on rank " + std::to_string(v.global(r.comm->waitingOn));
        waitedOn.insert(v.global(r.comm->waitingOn));
      }
      howStuck[how].insert(g);
    }
  }
  // Ranks that say the same are named together.
  for (const auto& [how, ranks] : howStuck) stuckDetail += "; " + rankList(ranks) + " " + how;
  if (!neverPosted.empty()) {
    found->sentences.push_back(rankList(neverPosted) + " never posted " + call + where + ", which " +
                               (stuck.empty() ? "the others posted" : rankList(stuck) + " waited in") +
                               neverDetail + ".");
    found->culprits.insert(neverPosted.begin(), neverPosted.end());
  }
  if (!late.empty()) {
    found->sentences.push_back(rankList(late) + " posted " + call + where + " late" + lateDetail + ".");
    found->culprits.insert(late.begin(), late.end());
  }
  if (!missing.empty()) {
    std::set<int> named;
    for (int m : missing) {
      if (namedFailed.count(m) != 0) named.insert(m);
    }
    std::string sentence = rankList(missing) + " of communicator " + v.name + " left no dump (killed, stopped, "
                                                "or writing elsewhere)";
    if (!named.empty()) sentence += "; the others found " + rankList(named) + " failed or silent";
    found->sentences.push_back(sentence + ".");
    // Without a dump a rank cannot be checked: it is the culprit where the
    // others name it, or where nothing else explains the stall.
    if (!named.empty()) {
      found->culprits.insert(named.begin(), named.end());
    } else if (neverPosted.empty() && late.empty()) {
      found->culprits.insert(missing.begin(), missing.end());
    }
  }
  if (!stuck.empty()) {
    found->sentences.push_back(rankList(stuck) + " did not complete " + call + where + stuckDetail + ".");
    if (found->culprits.empty()) {
      for (int r : namedFailed) found->culprits.insert(r);
    }
    if (found->culprits.empty()) found->culprits = waitedOn;
  }
  found->wrong = true;
}

// Whether rank holds an open message of kind with peer (or from any rank).
bool hasOpenMessage(const RankView& r, uint8_t kind, int peer) {
  for (const TraceEntry& e : r.comm->entries) {
    if (e.kind == kind && (e.rootOrPeer == peer || e.rootOrPeer < 0) && e.state != TraceState::Completed) return true;
  }
  return false;
}

// Messages (fwSend/fwRecv) that did not complete: each rank's, named with
// its peer. The culprit is the peer with no matching message open: a
// receive's sender that posted no send to it, a send's receiver that posted
// no receive, or a peer that left no dump.
void findStuckMessages(const CommView& v, Findings* found) {
  for (int rank = 0; rank < v.size; ++rank) {
    const RankView& r = v.ranks[static_cast<size_t>(rank)];
    if (r.comm == nullptr) continue;
    for (const TraceEntry& e : r.comm->entries) {
      if (e.isCollective() || e.state == TraceState::Completed || e.state == TraceState::Enqueued) continue;
      std::string sentence = "rank " + std::to_string(v.global(rank)) + "'s " + describeCall(e) + " of communicator " +
                             v.name + " did not complete";
      const std::string error = r.error(e);
      sentence += error.empty() ? " (still waiting at the dump)" : ": " + error;
      found->sentences.push_back(sentence + ".");
      found->wrong = true;
      if (e.rootOrPeer < 0 || e.rootOrPeer >= v.size) continue;
      const RankView& peer = v.ranks[static_cast<size_t>(e.rootOrPeer)];
      const bool isSend = e.kind == static_cast<uint8_t>(TracedKind::Send);
      const uint8_t answer = static_cast<uint8_t>(isSend ? TracedKind::Recv : TracedKind::Send);
      if (peer.file == nullptr || !hasOpenMessage(peer, answer, rank)) {
        found->culprits.insert(v.global(e.rootOrPeer));
        if (peer.file != nullptr) {
          found->sentences.back() += " Rank " + std::to_string(v.global(e.rootOrPeer)) + " has no " +
                                     (isSend ? "receive from" : "send to") + " rank " +
                                     std::to_string(v.global(rank)) + " open.";
        }
      }
    }
  }
}

// The earliest operation that ended with an error, over every file. A
// rank that only relays a peer's failure ("rank 3 reports: ...") did not
// start it: the ranks' clocks tick in milliseconds, so among failures the
// one seen first by a rank of its own is preferred.
void findFirstFailure(const std::vector<TraceFile>& files, Findings* found) {
  const TraceFile* file = nullptr;
  const CommunicatorTrace* comm = nullptr;
  const TraceEntry* first = nullptr;
  bool firstRelayed = true;
  for (const TraceFile& f : files) {
    for (const CommunicatorTrace& c : f.dump.communicators) {
      for (const TraceEntry& e : c.entries) {
        if (e.state != TraceState::Failed) continue;
        auto message = c.failures.find(e.recordId);
        const bool relayed = message == c.failures.end() || message->second.find(" reports: ") != std::string::npos;
        if (first == nullptr || (firstRelayed && !relayed) ||
            (relayed == firstRelayed && e.endedNs < first->endedNs)) {
          firstRelayed = relayed;
          first = &e;
          comm = &c;
          file = &f;
        }
      }
    }
  }
  if (first == nullptr) return;
  auto error = comm->failures.find(first->recordId);
  const int g = comm->rank < static_cast<int>(comm->globalRanks.size()) ? comm->globalRanks[comm->rank] : comm->rank;
  found->sentences.push_back("The first failure: rank " + std::to_string(g) + " (" + file->path + ") at " +
                             traceTimeText(first->endedNs) + " in " +
                             (first->isCollective() ? "collective #" + std::to_string(first->sequence) + " "
                                                    : std::string()) +
                             describeCall(*first) + " of communicator " + comm->name + ": " +
                             (error != comm->failures.end() ? error->second : "(no message)") + ".");
  found->wrong = true;
}

void writeDetails(const std::vector<CommView>& views, TraceReport* report) {
  std::ostringstream out;
  for (const CommView& v : views) {
    out << "communicator " << v.name << " (" << v.desc << ", " << v.size << " ranks)\n";
    for (int rank = 0; rank < v.size; ++rank) {
      const RankView& r = v.ranks[static_cast<size_t>(rank)];
      out << "  rank " << v.global(rank);
      if (r.file == nullptr) {
        out << ": no dump\n";
        continue;
      }
      uint64_t lastCompleted = 0;
      bool anyCompleted = false;
      for (const auto& [s, e] : r.bySequence) {
        if (e->state == TraceState::Completed) {
          lastCompleted = s;
          anyCompleted = true;
        }
      }
      out << " (pid " << r.file->dump.pid << " on " << r.file->dump.host << ", dump on " << r.file->dump.reason
          << "): last completed " << (anyCompleted ? "#" + std::to_string(lastCompleted) : std::string("none"));
      if (!r.comm->broken.empty()) out << "; broken: " << r.comm->broken;
      out << "\n";
      for (const TraceEntry& m : r.comm->entries) {
        if (m.isCollective() || m.state == TraceState::Completed || m.state == TraceState::Enqueued) continue;
        out << "    message #" << m.sequence << " " << describeCall(m) << ": " << traceStateName(m.state) << ", posted "
            << traceTimeText(m.postedNs) << "\n";
      }
      for (const auto& [s, e] : r.bySequence) {
        if (e->state == TraceState::Completed) continue;
        out << "    #" << s << callerText(e) << " " << describeCall(*e) << ": " << traceStateName(e->state) << ", posted "
            << traceTimeText(e->postedNs);
        if (e->startedNs) out << ", started " << traceTimeText(e->startedNs);
        if (e->endedNs) out << ", ended " << traceTimeText(e->endedNs);
        auto algorithm = r.comm->algorithmNames.find(e->recordId);
        if (algorithm != r.comm->algorithmNames.end()) out << ", " << algorithm->second;
        const std::string error = r.error(*e);
        if (!error.empty()) out << "\n      " << error;
        out << "\n";
      }
    }
  }
  report->details = out.str();
}

}  // namespace

void analyzeTraces(const std::vector<TraceFile>& all, TraceReport* report) {
  // One job: the one most dumps' first communicator belongs to.
  std::map<std::string, int> jobs;
  for (const TraceFile& f : all) ++jobs[f.dump.communicators.front().name];
  std::string job;
  int most = 0;
  for (const auto& [name, count] : jobs) {
    if (count > most) {
      most = count;
      job = name;
    }
  }
  std::vector<TraceFile> files;
  for (const TraceFile& f : all) {
    if (f.dump.communicators.front().name == job) {
      files.push_back(f);
    } else {
      report->unreadable.push_back(f.path + ": of another job (first communicator " +
                                   f.dump.communicators.front().name + ", not " + job + "); left out");
    }
  }
  if (files.empty()) {
    report->summary = "No dump could be read.";
    return;
  }
  const std::vector<CommView> views = lineUp(files, report);
  Findings found;
  for (const CommView& v : views) {
    if (findMismatch(v, &found)) continue;
    uint64_t k = 0;
    if (troubleSequence(v, &k)) findStall(v, k, &found);
    findStuckMessages(v, &found);
  }
  findFirstFailure(files, &found);
  if (!found.wrong) {
    report->summary = "Nothing wrong: in every communicator of the " + std::to_string(files.size()) +
                      " dumps, every rank completed every collective it posted, up to the same one.";
  } else {
    std::string text = found.culprits.empty() ? "No single rank explains it. "
                                              : "Culprit: " + rankList(found.culprits) + ". ";
    for (const std::string& s : found.sentences) text += s + " ";
    text.pop_back();
    report->summary = text;
    report->culpritFound = true;
  }
  writeDetails(views, report);
}

}  // namespace fairway

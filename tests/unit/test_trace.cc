// The flight record's ring, the pickle reader and writer behind the dumps
// (round trips, and every truncation or corruption an error, not a crash),
// and fairway-trace's analysis on made-up dumps.
#include <gtest/gtest.h>

#include <signal.h>

#include <cstring>

#include "trace/flight_record.h"
#include "trace/pickle.h"
#include "trace/trace_analysis.h"
#include "trace/trace_dump.h"
#include "trace/trace_registry.h"

namespace fairway {
namespace {

TraceEntry call(CollectiveKind kind, uint64_t sequence, uint64_t count) {
  TraceEntry e;
  e.kind = static_cast<uint8_t>(kind);
  e.sequence = sequence;
  e.count = count;
  e.datatype = fwFloat32;
  e.op = fwSum;
  return e;
}

TEST(FlightRecord, OffRecordsNothing) {
  FlightRecord record(0);
  EXPECT_EQ(record.post(call(CollectiveKind::AllReduce, 0, 1)), FlightRecord::kNone);
  record.ended(FlightRecord::kNone, Status::ok());
  EXPECT_TRUE(record.snapshot().empty());
}

TEST(FlightRecord, EntriesGoFromPostedToEndedWithTheirPlanAndError) {
  FlightRecord record(8);
  TraceEntry numbered = call(CollectiveKind::AllReduce, 0, 16);
  numbered.callerSequence = 41;
  const uint64_t a = record.post(numbered);
  const uint64_t b = record.post(call(CollectiveKind::Broadcast, 1, 4));
  const uint64_t c = record.post(call(CollectiveKind::AllGather, 2, 4));
  record.started(a, 3, 2);
  record.ended(a, Status::ok());
  record.started(b, 1, 0);
  record.ended(b, Status(fwTimeout, "rank 3 did not send"));
  const auto entries = record.snapshot();
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].state, TraceState::Completed);
  EXPECT_TRUE(entries[0].chosen);
  EXPECT_EQ(entries[0].algorithm, 3);
  EXPECT_EQ(entries[0].provider, 2);
  EXPECT_EQ(entries[0].count, 16u);
  EXPECT_EQ(entries[0].callerSequence, 41u);
  EXPECT_GT(entries[0].postedNs, 0u);
  EXPECT_GE(entries[0].endedNs, entries[0].postedNs);
  EXPECT_EQ(entries[1].state, TraceState::Failed);
  EXPECT_EQ(entries[1].result, fwTimeout);
  EXPECT_EQ(record.failureMessages().at(b), "rank 3 did not send");
  EXPECT_EQ(entries[2].recordId, c);
  EXPECT_EQ(entries[2].state, TraceState::Posted);
  EXPECT_FALSE(entries[2].chosen);
}

TEST(FlightRecord, KeepsTheLastEntriesAndNeverOverwritesOneInFlight) {
  FlightRecord record(4);
  for (uint64_t s = 0; s < 10; ++s) record.ended(record.post(call(CollectiveKind::AllReduce, s, 1)), Status::ok());
  auto entries = record.snapshot();
  ASSERT_EQ(entries.size(), 4u);
  EXPECT_EQ(entries.front().sequence, 6u);
  EXPECT_EQ(entries.back().sequence, 9u);

  const uint64_t running = record.post(call(CollectiveKind::AllReduce, 10, 1));  // slot 10 % 4 = 2
  record.started(running, 0, 0);
  for (uint64_t s = 11; s < 14; ++s) record.ended(record.post(call(CollectiveKind::AllReduce, s, 1)), Status::ok());
  EXPECT_EQ(record.post(call(CollectiveKind::AllReduce, 14, 1)), FlightRecord::kNone);  // would take slot 2
  entries = record.snapshot();
  ASSERT_EQ(entries.size(), 3u);  // 11, 12, 13; 14 went unrecorded, 10 is older than the ring's window
  record.ended(running, Status::ok());
  EXPECT_NE(record.post(call(CollectiveKind::AllReduce, 15, 1)), FlightRecord::kNone);
}

TEST(Pickle, ValuesRoundTrip) {
  PickleWriter w;
  w.beginDict();
  w.string("ints");
  w.beginList();
  for (int64_t v : {int64_t{0}, int64_t{-1}, int64_t{1} << 40, INT64_MIN, INT64_MAX}) w.integer(v);
  w.endList();
  w.string("tuple");
  w.beginTuple();
  w.string("héllo");
  w.floating(2.5);
  w.none();
  w.boolean(true);
  w.endTuple();
  w.string("empty");
  w.beginList();
  w.endList();
  w.endDict();
  std::shared_ptr<PickleValue> v;
  ASSERT_TRUE(parsePickle(w.finish(), &v).isOk());
  const PickleValue* ints = v->get("ints");
  ASSERT_NE(ints, nullptr);
  ASSERT_EQ(ints->items.size(), 5u);
  EXPECT_EQ(ints->items[1]->integer, -1);
  EXPECT_EQ(ints->items[2]->integer, int64_t{1} << 40);
  EXPECT_EQ(ints->items[3]->integer, INT64_MIN);
  EXPECT_EQ(ints->items[4]->integer, INT64_MAX);
  const PickleValue* tuple = v->get("tuple");
  ASSERT_NE(tuple, nullptr);
  ASSERT_EQ(tuple->items.size(), 4u);
  EXPECT_EQ(tuple->items[0]->text, "héllo");
  EXPECT_EQ(tuple->items[1]->floating, 2.5);
  EXPECT_TRUE(tuple->items[2]->isNone());
  EXPECT_TRUE(tuple->items[3]->boolean);
  EXPECT_TRUE(v->get("empty")->items.empty());
}

TraceDump sampleDump() {
  TraceDump dump;
  dump.rank = 1;
  dump.pid = 4242;
  dump.host = "node7";
  dump.reason = "timeout";
  dump.timeNs = 1700000000000000000ull;
  dump.library = "fairway 0.1.0";
  CommunicatorTrace c;
  c.name = "00c0ffee";
  c.desc = "world";
  c.globalRanks = {0, 1, 2};
  c.rank = 1;
  c.size = 3;
  c.timeoutMs = 5000;
  c.broken = "rank 2 did not send";
  c.failedRanks = {2};
  TraceEntry done = call(CollectiveKind::AllReduce, 7, 1024);
  done.recordId = 7;
  done.state = TraceState::Completed;
  done.postedNs = 1700000000000000000ull;
  done.startedNs = done.postedNs + 10;
  done.endedNs = done.postedNs + 2000000;
  done.inElements = done.outElements = 1024;
  done.callerSequence = 6;
  TraceEntry failed = call(CollectiveKind::Broadcast, 8, 16);
  failed.recordId = 8;
  failed.rootOrPeer = 2;
  failed.state = TraceState::Failed;
  failed.result = fwTimeout;
  failed.postedNs = done.endedNs;
  failed.endedNs = done.endedNs + 5000000000ull;
  c.entries = {done, failed};
  c.posted = 9;
  c.failures[8] = "rank 2 did not send within FAIRWAY_TIMEOUT_MS=5000 ms";
  c.algorithmNames[7] = "shm";
  dump.communicators.push_back(c);
  return dump;
}

TEST(TraceDump, RoundTripsEveryField) {
  const TraceDump dump = sampleDump();
  TraceDump back;
  ASSERT_TRUE(decodeTraceDump(encodeTraceDump(dump), &back).isOk());
  EXPECT_EQ(back.rank, 1);
  EXPECT_EQ(back.pid, 4242);
  EXPECT_EQ(back.host, "node7");
  EXPECT_EQ(back.reason, "timeout");
  EXPECT_EQ(back.timeNs, dump.timeNs);
  ASSERT_EQ(back.communicators.size(), 1u);
  const CommunicatorTrace& c = back.communicators[0];
  EXPECT_EQ(c.name, "00c0ffee");
  EXPECT_EQ(c.desc, "world");
  EXPECT_EQ(c.globalRanks, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(c.failedRanks, std::vector<int>{2});
  EXPECT_EQ(c.broken, "rank 2 did not send");
  EXPECT_EQ(c.posted, 9u);
  ASSERT_EQ(c.entries.size(), 2u);
  EXPECT_EQ(c.entries[0].sequence, 7u);
  EXPECT_EQ(c.entries[0].state, TraceState::Completed);
  EXPECT_EQ(c.entries[0].count, 1024u);
  EXPECT_EQ(c.entries[0].callerSequence, 6u);
  EXPECT_EQ(c.entries[0].datatype, fwFloat32);
  EXPECT_EQ(c.entries[0].op, fwSum);
  EXPECT_EQ(c.entries[0].endedNs, dump.communicators[0].entries[0].endedNs);
  EXPECT_EQ(c.algorithmNames.at(7), "shm");
  EXPECT_EQ(c.entries[1].kind, static_cast<uint8_t>(CollectiveKind::Broadcast));
  EXPECT_EQ(c.entries[1].rootOrPeer, 2);
  EXPECT_EQ(c.entries[1].state, TraceState::Failed);
  EXPECT_EQ(c.entries[1].result, fwTimeout);
  EXPECT_EQ(c.failures.at(8), "rank 2 did not send within FAIRWAY_TIMEOUT_MS=5000 ms");
}

TEST(TraceDump, EveryTruncationAndManyCorruptionsAreErrors) {
  const std::string bytes = encodeTraceDump(sampleDump());
  TraceDump out;
  for (size_t length = 0; length < bytes.size(); ++length) {
    const Status st = decodeTraceDump(bytes.substr(0, length), &out);
    ASSERT_FALSE(st.isOk()) << length;
    EXPECT_NE(st.message().find("not a"), std::string::npos) << st.message();
  }
  // Every byte flipped in turn: an error or a dump, never a crash.
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string corrupted = bytes;
    corrupted[i] = static_cast<char>(corrupted[i] ^ 0x5a);
    (void)decodeTraceDump(corrupted, &out);
  }
}

TEST(TraceDump, RefusesACommunicatorOfMoreRanksThanItCanLineUp) {
  TraceDump dump = sampleDump();
  dump.communicators[0].size = 1 << 30;  // what a fuzzer's corrupted dump said: 7 GB of rank records
  TraceDump out;
  const Status st = decodeTraceDump(encodeTraceDump(dump), &out);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("1073741824 ranks (more than 1048576)"), std::string::npos) << st.message();
}

TEST(Pickle, RefusesNestingPastItsLimitAndContainersInsideThemselves) {
  std::string deep = "\x80\x02";
  for (int i = 0; i < 200; ++i) deep += "](";
  for (int i = 0; i < 199; ++i) deep += "e";
  deep += "e.";
  std::shared_ptr<PickleValue> v;
  Status st = parsePickle(deep, &v);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("nested"), std::string::npos) << st.message();
  // L = []; memo 0; L.append(memo 0)
  st = parsePickle(std::string("\x80\x02]q\x00h\x00" "a.", 9), &v);
  ASSERT_FALSE(st.isOk());
  // M = []; memo 0; [M]-list N holding M; then appending N into M (taken from the memo).
  st = parsePickle(std::string("\x80\x02]q\x00](h\x00" "eh\x00" "(X\x00\x00\x00\x00" "e.", 20), &v);
  EXPECT_FALSE(st.isOk());
}

TEST(TraceSignal, AProgramsOwnHandlerIsNeverReplaced) {
  struct sigaction mine {}, before {};
  mine.sa_handler = [](int) {};
  sigemptyset(&mine.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR2, &mine, &before), 0);
  const Status st = armTraceSignal(SIGUSR2, "/tmp");
  struct sigaction after {};
  sigaction(SIGUSR2, &before, &after);  // restored; `after` is what arming left
  ASSERT_FALSE(st.isOk());
  EXPECT_EQ(st.code(), fwInvalidUsage);
  EXPECT_NE(st.message().find("SIGUSR2 already has a handler of the program's"), std::string::npos) << st.message();
  EXPECT_EQ(after.sa_handler, mine.sa_handler);
}

// Dumps of one job's ranks, made up: rank r did collectives 0..last[r],
// the last one left in state.
std::vector<TraceFile> jobOf(const std::vector<int>& last, const std::vector<TraceState>& state,
                             CollectiveKind odd = CollectiveKind::AllReduce, int oddRank = -1) {
  std::vector<TraceFile> files;
  const int n = static_cast<int>(last.size());
  for (int r = 0; r < n; ++r) {
    if (last[r] < -1) continue;  // no dump
    TraceFile f;
    f.path = "pid" + std::to_string(100 + r) + ".fairway_rank" + std::to_string(r);
    f.dump.rank = r;
    f.dump.pid = 100 + r;
    f.dump.timeNs = 1000;
    CommunicatorTrace c;
    c.name = "job";
    c.desc = "world";
    c.rank = r;
    c.size = n;
    c.timeoutMs = 1000;
    for (int g = 0; g < n; ++g) c.globalRanks.push_back(g);
    for (int s = 0; s <= last[r]; ++s) {
      TraceEntry e = call(r == oddRank && s == last[r] ? odd : CollectiveKind::AllReduce, s, 64);
      e.recordId = s;
      e.postedNs = 1000000000ull + s;
      e.state = s == last[r] ? state[r] : TraceState::Completed;
      if (e.state == TraceState::Failed) e.endedNs = 3000000000ull + r;
      c.entries.push_back(e);
    }
    c.posted = c.entries.size();
    f.dump.communicators.push_back(c);
    files.push_back(f);
  }
  return files;
}

TEST(TraceAnalysis, NamesTheRankThatNeverPostedTheCallTheOthersWaitIn) {
  using S = TraceState;
  TraceReport report;
  analyzeTraces(jobOf({5, 5, 4, 5}, {S::Failed, S::Failed, S::Completed, S::Started}), &report);
  EXPECT_TRUE(report.culpritFound);
  EXPECT_EQ(report.summary.rfind("Culprit: rank 2. rank 2 never posted collective #5", 0), 0u) << report.summary;
}

TEST(TraceAnalysis, NamesTheRankThatCalledAnotherCollective) {
  using S = TraceState;
  TraceReport report;
  analyzeTraces(jobOf({3, 3, 3}, {S::Failed, S::Failed, S::Failed}, CollectiveKind::AllGather, 1), &report);
  EXPECT_EQ(report.summary.rfind("Culprit: rank 1. Collective #3", 0), 0u) << report.summary;
}

TEST(TraceAnalysis, NamesTheRankWithoutADumpAndReadsAHealthyJobAsNothingWrong) {
  using S = TraceState;
  TraceReport report;
  analyzeTraces(jobOf({2, -2, 2}, {S::Started, S::Started, S::Started}), &report);
  EXPECT_EQ(report.summary.rfind("Culprit: rank 1. rank 1 of communicator job left no dump", 0), 0u)
      << report.summary;
  TraceReport healthy;
  analyzeTraces(jobOf({4, 4}, {S::Completed, S::Completed}), &healthy);
  EXPECT_FALSE(healthy.culpritFound);
  EXPECT_EQ(healthy.summary.rfind("Nothing wrong", 0), 0u) << healthy.summary;
}

}  // namespace
}  // namespace fairway

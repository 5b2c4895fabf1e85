// The bootstrap's wire format and its root under hostile input.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include "bootstrap/client.h"
#include "bootstrap/job_secret.h"
#include "bootstrap/launcher_env.h"
#include "bootstrap/root.h"
#include "p2p/peer_info.h"

namespace fairway {
namespace {

TEST(UniqueId, RoundTripsAndRejectsGarbage) {
  BootstrapId id;
  ASSERT_TRUE(findInterfaceAddress("", &id.root).isOk());
  ASSERT_TRUE(randomSecret(id.secret).isOk());
  fwUniqueId encoded;
  encodeUniqueId(id, &encoded);
  BootstrapId decoded;
  ASSERT_TRUE(decodeUniqueId(encoded, &decoded).isOk());
  EXPECT_EQ(decoded.root.toString(), id.root.toString());
  EXPECT_EQ(std::memcmp(decoded.secret, id.secret, kSecretBytes), 0);
  encoded.internal[0] ^= 1;
  EXPECT_EQ(decodeUniqueId(encoded, &decoded).code(), fwInvalidArgument);
}

TEST(HostPort, ParsesAndRejects) {
  SocketAddress a;
  EXPECT_TRUE(parseHostPort("127.0.0.1:8080", &a).isOk());
  EXPECT_EQ(a.toString(), "127.0.0.1:8080");
  EXPECT_TRUE(parseHostPort("[::1]:9", &a).isOk());
  EXPECT_FALSE(parseHostPort("127.0.0.1", &a).isOk());
  EXPECT_FALSE(parseHostPort("127.0.0.1:99999", &a).isOk());
  EXPECT_FALSE(parseHostPort("host:port", &a).isOk());
}

TEST(PeerInfo, RoundTripsAndRejectsTruncation) {
  PeerInfo p = PeerInfo::forThisProcess("node-7");
  p.transportAddress = {1, 2, 3, 4, 5};
  std::vector<uint8_t> bytes = p.encode();
  PeerInfo q;
  ASSERT_TRUE(PeerInfo::decode(bytes, &q).isOk());
  EXPECT_EQ(q.nodeId, "node-7");
  EXPECT_EQ(q.transportAddress, p.transportAddress);
  EXPECT_TRUE(p.sharesProcessSpaceWith(q));
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    std::vector<uint8_t> truncated(bytes.begin(), bytes.begin() + cut);
    EXPECT_FALSE(PeerInfo::decode(truncated, &q).isOk()) << cut;
  }
}

// Connects raw sockets that misbehave, then checks that a real job still forms.
TEST(BootstrapRoot, SurvivesStrayAndMalformedConnections) {
  SocketAddress loopback;
  ASSERT_TRUE(parseHostPort("127.0.0.1:1", &loopback).isOk());
  reinterpret_cast<sockaddr_in*>(&loopback.storage)->sin_port = 0;
  BootstrapId id;
  ASSERT_TRUE(randomSecret(id.secret).isOk());
  ASSERT_TRUE(startBootstrapRoot(loopback, id.secret, 10000, &id).isOk());
  Deadline soon = deadlineAfterMs(2000);

  {  // garbage bytes
    Socket s;
    ASSERT_TRUE(Socket::connectTo(id.root, soon, &s).isOk());
    const char junk[] = "GET / HTTP/1.1\r\n\r\n";
    ASSERT_TRUE(s.sendAll(junk, sizeof(junk), soon).isOk());
  }
  {  // a valid header announcing an enormous payload
    Socket s;
    ASSERT_TRUE(Socket::connectTo(id.root, soon, &s).isOk());
    std::vector<uint8_t> header;
    appendU32(&header, kFrameMagic);
    appendU32(&header, static_cast<uint32_t>(FrameType::Hello));
    appendU64(&header, uint64_t{1} << 40);
    ASSERT_TRUE(s.sendAll(header.data(), header.size(), soon).isOk());
  }
  {  // a wrong secret: told so, then dropped
    BootstrapId wrong = id;
    wrong.secret[0] ^= 0xff;
    BootstrapClient stray;
    Status st = BootstrapClient::join(wrong, 0, 2, 2000, &stray);
    EXPECT_EQ(st.code(), fwAuthError) << st.message();
  }

  std::vector<std::vector<uint8_t>> results[2];
  Status statuses[2];
  std::thread ranks[2];
  for (int r = 0; r < 2; ++r) {
    ranks[r] = std::thread([&, r] {
      BootstrapClient client;
      statuses[r] = BootstrapClient::join(id, r, 2, 5000, &client);
      if (statuses[r].isOk()) statuses[r] = client.allgather({static_cast<uint8_t>(10 + r)}, &results[r]);
      client.leave();
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(statuses[r].isOk()) << statuses[r].message();
    ASSERT_EQ(results[r].size(), 2u);
    EXPECT_EQ(results[r][0], std::vector<uint8_t>{10});
    EXPECT_EQ(results[r][1], std::vector<uint8_t>{11});
  }
}

// A root on an ephemeral loopback port with the given secret.
BootstrapId startLoopbackRoot(const uint8_t secret[kSecretBytes], int64_t timeoutMs = 10000) {
  SocketAddress loopback;
  EXPECT_TRUE(parseHostPort("127.0.0.1:1", &loopback).isOk());
  BootstrapId id;
  EXPECT_TRUE(startBootstrapRoot(withPort(loopback, 0), secret, timeoutMs, &id).isOk());
  return id;
}

// Forms a job of nranks threads through the root and checks one allgather.
::testing::AssertionResult formJob(const BootstrapId& id, int nranks) {
  std::vector<Status> statuses(nranks);
  std::vector<std::vector<std::vector<uint8_t>>> results(nranks);
  std::vector<std::thread> ranks;
  for (int r = 0; r < nranks; ++r) {
    ranks.emplace_back([&, r] {
      BootstrapClient client;
      statuses[r] = BootstrapClient::join(id, r, nranks, 5000, &client);
      if (statuses[r].isOk()) statuses[r] = client.allgather({static_cast<uint8_t>(r)}, &results[r]);
      client.leave();
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < nranks; ++r) {
    if (!statuses[r].isOk()) return ::testing::AssertionFailure() << "rank " << r << ": " << statuses[r].message();
    if (results[r].size() != static_cast<size_t>(nranks) || results[r][nranks - 1] != std::vector<uint8_t>{
                                                                 static_cast<uint8_t>(nranks - 1)}) {
      return ::testing::AssertionFailure() << "rank " << r << " gathered the wrong bytes";
    }
  }
  return ::testing::AssertionSuccess();
}

std::vector<Socket> openSilentConnections(const BootstrapId& id, int count) {
  std::vector<Socket> silent(count);
  for (Socket& s : silent) EXPECT_TRUE(Socket::connectTo(id.root, deadlineAfterMs(2000), &s).isOk());
  return silent;
}

// A job of nranks forms within budgetMs beside `silent` connections that
// never say a word.
void expectFormsBesideSilentConnections(int silentCount, int nranks, int budgetMs) {
  uint8_t secret[kSecretBytes];
  ASSERT_TRUE(randomSecret(secret).isOk());
  BootstrapId id = startLoopbackRoot(secret);
  std::vector<Socket> silent = openSilentConnections(id, silentCount);
  auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(formJob(id, nranks));
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(ms, budgetMs) << "a " << nranks << "-rank job took " << ms << " ms to form beside " << silentCount
                          << " silent connections";
}

// Each silent connection used to hold the root for 2 s; now each waits in
// its own place while the ranks that speak are admitted.
TEST(BootstrapRoot, SilentConnectionsDoNotDelayFormation) { expectFormsBesideSilentConnections(50, 2, 1000); }

// More silent connections than the root keeps waiting: the oldest make room
// and the job still forms.
TEST(BootstrapRoot, SilentConnectionsBeyondTheCapStillLetTheJobForm) {
  expectFormsBesideSilentConnections(400, 3, 2000);
}

// The hello of a peer that knows only what anyone can learn (the root's
// address, the world size, the launcher's job id) is refused, whether the
// job's secret was set by the user or drawn at random.
TEST(JobSecret, JoinerWithOnlyPublicValuesIsRefused) {
  Config config;
  const std::string publicValues = "slurm:4242.0 root 127.0.0.1:29501 size 2";
  JobSecret guessed;
  ASSERT_TRUE(readJobSecret(config, publicValues, &guessed).isOk());
  EXPECT_TRUE(guessed.isPublic);

  config.jobSecret = "correct horse battery staple";
  JobSecret set;
  ASSERT_TRUE(readJobSecret(config, publicValues, &set).isOk());
  EXPECT_FALSE(set.isPublic);
  EXPECT_EQ(set.source, "FAIRWAY_JOB_SECRET");
  uint8_t random[kSecretBytes];
  ASSERT_TRUE(randomSecret(random).isOk());

  for (const uint8_t* jobSecret : {static_cast<const uint8_t*>(set.bytes), static_cast<const uint8_t*>(random)}) {
    BootstrapId id = startLoopbackRoot(jobSecret);
    for (int attempt = 0; attempt < 2; ++attempt) {
      BootstrapId outsider = id;
      std::memcpy(outsider.secret, guessed.bytes, kSecretBytes);
      if (attempt == 1) outsider.secret[3] ^= 1;  // and a plainly wrong one
      BootstrapClient client;
      Status st = BootstrapClient::join(outsider, 0, 2, 3000, &client);
      EXPECT_EQ(st.code(), fwAuthError) << st.message();
      EXPECT_NE(st.message().find("wrong job secret"), std::string::npos) << st.message();
    }
    EXPECT_TRUE(formJob(id, 2));
  }
}

class SecretFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/fairway-secret-XXXXXX";
    int fd = mkstemp(pattern);
    ASSERT_GE(fd, 0);
    close(fd);
    path_ = pattern;
  }
  void TearDown() override { std::remove(path_.c_str()); }
  void write(const std::string& text, mode_t mode) {
    std::ofstream(path_, std::ios::trunc) << text;
    ASSERT_EQ(chmod(path_.c_str(), mode), 0);
  }
  Status read(JobSecret* out) {
    Config config;
    config.jobSecretFile = path_;
    return readJobSecret(config, "public", out);
  }
  std::string path_;
};

TEST_F(SecretFile, OwnerOnlyFileIsTheSecretWithoutItsNewline) {
  write("s3cret-from-a-file\n", 0600);
  JobSecret fromFile, direct;
  ASSERT_TRUE(read(&fromFile).isOk());
  EXPECT_FALSE(fromFile.isPublic);
  Config config;
  config.jobSecret = "s3cret-from-a-file";
  ASSERT_TRUE(readJobSecret(config, "public", &direct).isOk());
  EXPECT_EQ(std::memcmp(fromFile.bytes, direct.bytes, kSecretBytes), 0);
}

TEST_F(SecretFile, UnusableFilesAreRefusedNamingTheVariable) {
  JobSecret secret;
  write("readable by all\n", 0644);
  Status st = read(&secret);
  EXPECT_EQ(st.code(), fwInvalidArgument);
  EXPECT_NE(st.message().find("FAIRWAY_JOB_SECRET_FILE=" + path_), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("chmod 600"), std::string::npos) << st.message();
  write("\n", 0600);
  EXPECT_EQ(read(&secret).code(), fwInvalidArgument);
  write("", 0600);
  EXPECT_EQ(read(&secret).code(), fwInvalidArgument);
  std::remove(path_.c_str());
  st = read(&secret);
  EXPECT_EQ(st.code(), fwInvalidArgument);
  EXPECT_NE(st.message().find("cannot be opened"), std::string::npos) << st.message();
}

// Without a secret, rank 0 is told (once, by a warning) and the secret is
// marked public; with one, it is not.
TEST(LauncherEnvironment, SecretSourcesAndTheRootsAddress) {
  setenv("FAIRWAY_RANK", "0", 1);
  setenv("FAIRWAY_WORLD_SIZE", "2", 1);
  Config config;
  config.commId = "127.0.0.1:29555";
  LauncherEnvironment launch;
  ASSERT_TRUE(readLauncherEnvironment(config, &launch).isOk());
  EXPECT_TRUE(launch.secret.isPublic);
  EXPECT_TRUE(launch.hostsRoot);
  EXPECT_EQ(launch.listenAddress.toString(), "127.0.0.1:29555");
  config.jobSecret = "x";
  ASSERT_TRUE(readLauncherEnvironment(config, &launch).isOk());
  EXPECT_FALSE(launch.secret.isPublic);
  // An address this host does not hold: refused with the fix, or served on
  // FAIRWAY_SOCKET_IFNAME's address at the same port.
  config.commId = "192.0.2.1:29555";  // TEST-NET-1, never assigned
  Status st = readLauncherEnvironment(config, &launch);
  EXPECT_EQ(st.code(), fwInvalidUsage);
  EXPECT_NE(st.message().find("FAIRWAY_SOCKET_IFNAME"), std::string::npos) << st.message();
  config.socketIfname = "lo";
  ASSERT_TRUE(readLauncherEnvironment(config, &launch).isOk());
  EXPECT_EQ(launch.listenAddress.toString(), "127.0.0.1:29555");
  unsetenv("FAIRWAY_RANK");
  unsetenv("FAIRWAY_WORLD_SIZE");
}

// Frames arrive however TCP cuts them; the reader assembles the same frame
// from any cut and refuses a bad header before storing any payload.
TEST(FrameReader, AssemblesAnyCutAndRefusesBadHeaders) {
  std::vector<uint8_t> bytes;
  appendU32(&bytes, kFrameMagic);
  appendU32(&bytes, static_cast<uint32_t>(FrameType::Contribute));
  appendU64(&bytes, 5);
  for (uint8_t b : {1, 2, 3, 4, 5}) bytes.push_back(b);
  for (size_t cut = 1; cut <= bytes.size(); ++cut) {
    FrameReader reader(16);
    size_t pos = 0;
    while (!reader.complete()) {
      size_t used = 0;
      ASSERT_TRUE(reader.feed(bytes.data() + pos, std::min(cut, bytes.size() - pos), &used).isOk());
      pos += used;
    }
    EXPECT_EQ(pos, bytes.size());
    Frame f = reader.take();
    EXPECT_EQ(f.type, FrameType::Contribute);
    EXPECT_EQ(f.payload, (std::vector<uint8_t>{1, 2, 3, 4, 5}));
  }
  size_t used = 0;
  FrameReader small(4);
  EXPECT_EQ(small.feed(bytes.data(), bytes.size(), &used).code(), fwAuthError);  // 5 > 4
  std::vector<uint8_t> badType = bytes;
  badType[4] = 99;
  FrameReader reader(16);
  EXPECT_EQ(reader.feed(badType.data(), badType.size(), &used).code(), fwAuthError);
}

TEST(GatheredPayload, RoundTripsAndRefusesMalformed) {
  std::vector<std::vector<uint8_t>> in = {{1}, {}, {2, 3}};
  std::vector<uint8_t> payload = encodeGathered(in);
  std::vector<std::vector<uint8_t>> out;
  ASSERT_TRUE(decodeGathered(payload, 3, &out).isOk());
  EXPECT_EQ(out, in);
  EXPECT_FALSE(decodeGathered(payload, 2, &out).isOk());  // trailing bytes
  EXPECT_FALSE(decodeGathered(payload, 4, &out).isOk());  // truncated
  payload[0] = 0xff;                                       // a length past the end
  EXPECT_FALSE(decodeGathered(payload, 3, &out).isOk());
}

}  // namespace
}  // namespace fairway

// The bootstrap's wire format and its root under hostile input.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

#include "bootstrap/client.h"
#include "bootstrap/root.h"
#include "comm/peer_info.h"

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

}  // namespace
}  // namespace fairway

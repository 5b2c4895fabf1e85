// The failure notice a rank sends when a communicator breaks or is
// revoked: its kind and failed ranks survive the trip, a long text is cut
// to fit, and bytes that are not a notice are taken for text, not parsed.
#include <gtest/gtest.h>

#include <string>

#include "p2p/failure_notice.h"

namespace fairway {
namespace {

TEST(FailureNotice, KindRanksAndTextSurviveTheTrip) {
  FailureNotice sent;
  sent.code = fwRevoked;
  sent.failed = {0, 7, 1023};
  sent.text = "rank 3 revoked the communicator";
  char wire[FailureNotice::kBytes];
  sent.encode(wire);
  FailureNotice got;
  ASSERT_TRUE(FailureNotice::decode(wire, &got));
  EXPECT_EQ(got.code, fwRevoked);
  EXPECT_EQ(got.failed, sent.failed);
  EXPECT_EQ(got.text, sent.text);
}

TEST(FailureNotice, NoFailedRanksAndAFailureKind) {
  FailureNotice sent;
  sent.text = "rank 1 reports: timed out";
  char wire[FailureNotice::kBytes];
  sent.encode(wire);
  FailureNotice got;
  ASSERT_TRUE(FailureNotice::decode(wire, &got));
  EXPECT_EQ(got.code, fwRemoteError);
  EXPECT_TRUE(got.failed.empty());
  EXPECT_EQ(got.text, sent.text);
}

TEST(FailureNotice, ManyRanksAndALongTextAreCutToFit) {
  FailureNotice sent;
  for (int r = 0; r < 500; ++r) sent.failed.insert(1000 + r);
  sent.text = std::string(1000, 'x');
  char wire[FailureNotice::kBytes];
  sent.encode(wire);
  FailureNotice got;
  ASSERT_TRUE(FailureNotice::decode(wire, &got));
  EXPECT_FALSE(got.failed.empty());
  for (int r : got.failed) EXPECT_TRUE(sent.failed.count(r)) << r;
  EXPECT_LT(got.text.size(), FailureNotice::kBytes);
}

TEST(FailureNotice, OtherBytesAreText) {
  char wire[FailureNotice::kBytes] = "rank 2 reports: something";
  FailureNotice got;
  EXPECT_FALSE(FailureNotice::decode(wire, &got));
  EXPECT_EQ(got.text, "rank 2 reports: something");
  EXPECT_TRUE(got.failed.empty());
  char bad[FailureNotice::kBytes] = "FWN1 20 3,x,5\nwords";
  EXPECT_FALSE(FailureNotice::decode(bad, &got));
}

}  // namespace
}  // namespace fairway

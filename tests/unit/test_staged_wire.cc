// The staged wire's bookkeeping: a receive reaches its place only when its
// wait settles it, every bounce buffer goes back, and a message never
// waited for is reported.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/staged_wire.h"

namespace fairway {
namespace {

// Bounce buffers from the heap, counted.
class CountingWire final : public StagedWire {
 public:
  Status acquire(size_t bytes, char** out) override {
    buffers_.push_back(std::make_unique<std::vector<char>>(bytes));
    *out = buffers_.back()->data();
    held_[*out] = true;
    return Status::ok();
  }
  void release(char* buffer) override { held_.at(buffer) = false; }
  int held() const {
    int n = 0;
    for (const auto& entry : held_) n += entry.second ? 1 : 0;
    return n;
  }

 private:
  std::vector<std::unique_ptr<std::vector<char>>> buffers_;
  std::map<char*, bool> held_;
};

class PlainSpace final : public CpuDataSpace {
 public:
  char* scratch(ScratchRegion, size_t bytes) override {
    memory_.resize(bytes);
    return memory_.data();
  }

 private:
  std::vector<char> memory_;
};

TEST(StagedWire, AReceiveLandsWhenItsWaitSettlesIt) {
  CountingWire wire;
  PlainSpace space;
  Pending pendings[3];
  std::string landing(5, '.');
  char* sendBounce = nullptr;
  char* recvBounce = nullptr;
  ASSERT_TRUE(wire.acquire(5, &sendBounce).isOk());
  ASSERT_TRUE(wire.acquire(5, &recvBounce).isOk());
  wire.track(&pendings[0], sendBounce, nullptr, 5);
  wire.track(&pendings[2], recvBounce, landing.data(), 5);
  std::memcpy(recvBounce, "hello", 5);  // the transport delivered it

  // A wait on other messages leaves it where it is.
  ASSERT_TRUE(wire.settle(space, &pendings[1], 1).isOk());
  EXPECT_EQ(landing, ".....");
  EXPECT_EQ(wire.held(), 2);
  // The wait on both: the receive is copied into place, both bounces go back.
  ASSERT_TRUE(wire.settle(space, pendings, 3).isOk());
  EXPECT_EQ(landing, "hello");
  EXPECT_EQ(wire.held(), 0);
  EXPECT_TRUE(wire.finish(true).isOk());
}

TEST(StagedWire, AMessageNeverWaitedForIsReportedAndItsBufferReturned) {
  CountingWire wire;
  Pending pending;
  char* bounce = nullptr;
  ASSERT_TRUE(wire.acquire(8, &bounce).isOk());
  std::string landing(8, '.');
  wire.track(&pending, bounce, landing.data(), 8);
  const Status left = wire.finish(true);
  EXPECT_EQ(left.code(), fwInternalError);
  EXPECT_NE(left.message().find("1 staged messages were never waited for"), std::string::npos) << left.message();
  EXPECT_EQ(wire.held(), 0);
  EXPECT_EQ(landing, "........");  // nothing lands once the call is over
}

TEST(StagedWire, AfterAFailedCallEverythingIsReleasedSilently) {
  CountingWire wire;
  Pending pendings[2];
  for (Pending& p : pendings) {
    char* bounce = nullptr;
    ASSERT_TRUE(wire.acquire(4, &bounce).isOk());
    wire.track(&p, bounce, nullptr, 4);
  }
  EXPECT_TRUE(wire.finish(false).isOk());
  EXPECT_EQ(wire.held(), 0);
}

}  // namespace
}  // namespace fairway

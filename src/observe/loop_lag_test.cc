// The probe on a real loop that the test blocks on purpose; the assertions are on the buckets
// the samples landed in, with bounds a loaded machine cannot cross (a sleep never ends early).
#include "observe/loop_lag.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <thread>

namespace hutch::observe {
namespace {

using namespace std::chrono_literals;

// The histogram's cumulative count at the bucket whose upper bound is `le`.
uint64_t countAtMost(const prometheus::Histogram& h, double le) {
  for (const auto& bucket : h.Collect().histogram.bucket) {
    if (bucket.upper_bound == le) return bucket.cumulative_count;
  }
  ADD_FAILURE() << "no bucket le=" << le;
  return 0;
}

TEST(LoopLagProbeTest, ABlockedLoopIsOneSampleInTheBucketOfHowLongItWasBlocked) {
  boost::asio::io_context io;
  prometheus::Histogram lag(kLoopLagBuckets);
  LoopLagProbe probe(io.get_executor(), lag, 10ms);
  probe.start();
  // Runs before the first timer is due and holds the loop for 1.2 s: the timer's handler runs
  // at least 1.19 s late, which is past the 1 s bucket; it would take a further 1.3 s stall of
  // the test to pass 2.5 s.
  boost::asio::post(io, [] { std::this_thread::sleep_for(1200ms); });
  while (probe.samples() < 4) io.run_one();
  probe.stop();
  io.run();  // the cancelled timer's handler: nothing else is left

  const auto collected = lag.Collect().histogram;
  EXPECT_EQ(collected.sample_count, 4u);
  EXPECT_GE(collected.sample_sum, 1.19);
  EXPECT_EQ(countAtMost(lag, 2.5) - countAtMost(lag, 1), 1u) << "the blocked tick, in (1, 2.5]";
  EXPECT_EQ(countAtMost(lag, 1), 3u) << "the three unblocked ticks";
  EXPECT_EQ(countAtMost(lag, 5), 4u);
  EXPECT_EQ(probe.samples(), 4u);
}

TEST(LoopLagProbeTest, StopLeavesNothingOnTheLoopAndStartResumes) {
  boost::asio::io_context io;
  prometheus::Histogram lag(kLoopLagBuckets);
  LoopLagProbe probe(io.get_executor(), lag, 1ms);
  probe.start();
  probe.start();  // once is enough: still one timer
  while (probe.samples() < 2) io.run_one();
  probe.stop();
  io.run();  // returns: no timer is pending
  EXPECT_EQ(probe.samples(), 2u);
  io.restart();
  probe.start();
  while (probe.samples() < 3) io.run_one();
  probe.stop();
  io.run();
  EXPECT_EQ(lag.Collect().histogram.sample_count, 3u);
}

}  // namespace
}  // namespace hutch::observe

// LoopLagProbe: how late hutchd's event loop runs what is due (docs/observability.md "Metrics",
// hutch_event_loop_lag_seconds). A timer on the loop is due every `interval`; when its handler
// runs, how long after the due time it ran is observed in a histogram. A loop blocked for T (a
// handler that waits for a disk, a child or a lock instead of posting the work to the worker
// pool) shows as one sample of about T, whatever the interval; an idle loop's samples are the
// timer's slack (well under a millisecond). The next timer is armed from when the handler ran,
// not from the missed due time, so a long block is one sample and not a burst of catch-up ones.
// Event loop only; the histogram must outlive the probe.
#pragma once

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on

#include <prometheus/histogram.h>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>

namespace hutch::observe {

// hutch_event_loop_lag_seconds' buckets: 1 ms (the timer's own slack stays below) to 5 s.
extern const prometheus::Histogram::BucketBoundaries kLoopLagBuckets;

class LoopLagProbe {
 public:
  static constexpr std::chrono::milliseconds kDefaultInterval{100};

  LoopLagProbe(const boost::asio::any_io_executor& loop, prometheus::Histogram& lag,
               std::chrono::steady_clock::duration interval = kDefaultInterval);
  LoopLagProbe(const LoopLagProbe&) = delete;
  LoopLagProbe& operator=(const LoopLagProbe&) = delete;

  // Arms the first timer (start after stop starts again).
  void start();
  // Cancels the timer: nothing of the probe's is pending on the loop afterwards.
  void stop();
  // Samples observed since construction.
  uint64_t samples() const { return samples_; }

 private:
  void arm();

  boost::asio::steady_timer timer_;
  prometheus::Histogram& lag_;
  std::chrono::steady_clock::duration interval_;
  bool running_ = false;
  uint64_t samples_ = 0;
};

}  // namespace hutch::observe

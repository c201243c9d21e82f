#include "observe/loop_lag.h"

#include <algorithm>

namespace hutch::observe {

const prometheus::Histogram::BucketBoundaries kLoopLagBuckets{
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};

LoopLagProbe::LoopLagProbe(const boost::asio::any_io_executor& loop, prometheus::Histogram& lag,
                           std::chrono::steady_clock::duration interval)
    : timer_(loop), lag_(lag), interval_(interval) {}

void LoopLagProbe::start() {
  if (running_) return;
  running_ = true;
  arm();
}

void LoopLagProbe::stop() {
  running_ = false;
  timer_.cancel();
}

void LoopLagProbe::arm() {
  timer_.expires_after(interval_);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || !running_) return;
    const auto late = std::chrono::steady_clock::now() - timer_.expiry();
    lag_.Observe(std::max(0.0, std::chrono::duration<double>(late).count()));
    ++samples_;
    arm();
  });
}

}  // namespace hutch::observe

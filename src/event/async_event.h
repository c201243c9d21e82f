// AsyncEvent: wakes coroutines that wait for "something changed" on a single-threaded executor.
// Waiters re-check their own condition after every wake-up; a notify() with nobody waiting is
// lost on purpose (the condition, not the event, carries the state).
#pragma once

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <list>

namespace hutch::event {

class AsyncEvent {
 public:
  using Clock = std::chrono::steady_clock;

  explicit AsyncEvent(boost::asio::any_io_executor executor) : executor_(std::move(executor)) {}
  AsyncEvent(const AsyncEvent&) = delete;
  AsyncEvent& operator=(const AsyncEvent&) = delete;

  // Returns after the next notify() or at the deadline, whichever comes first.
  boost::asio::awaitable<void> waitUntil(Clock::time_point deadline) {
    boost::asio::steady_timer timer(executor_, deadline);
    auto self = waiters_.insert(waiters_.end(), &timer);
    boost::system::error_code ec;
    co_await timer.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
    waiters_.erase(self);
  }

  boost::asio::awaitable<void> wait() { return waitUntil(Clock::time_point::max()); }

  // Wakes every current waiter.
  void notify() {
    for (auto* timer : waiters_) timer->cancel();
  }

 private:
  boost::asio::any_io_executor executor_;
  std::list<boost::asio::steady_timer*> waiters_;
};

}  // namespace hutch::event

// The agent's single-threaded epoll loop: fd readiness, one-shot timers and posted tasks.
//
// Level-triggered. A handler may add or remove any fd, including its own, while it runs; events
// already returned by epoll for an fd removed in the meantime are dropped (each registration has
// its own token), so a reused fd number never receives a stale event.
#pragma once

#include <sys/epoll.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <unordered_map>

#include "base/result.h"
#include "base/unique_fd.h"

namespace hutch::agent {

class EventLoop {
 public:
  using Clock = std::chrono::steady_clock;
  using Handler = std::function<void(uint32_t events)>;
  using TimerId = uint64_t;

  static Result<std::unique_ptr<EventLoop>> create();

  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Watches fd (not owned; remove it before closing it). EPOLLHUP/EPOLLERR are always reported.
  Result<> add(int fd, uint32_t events, Handler handler);
  Result<> modify(int fd, uint32_t events);
  void remove(int fd);
  bool watching(int fd) const { return fds_.contains(fd); }

  TimerId addTimer(Clock::duration delay, std::function<void()> fn);
  void cancelTimer(TimerId id);

  // Runs fn after the current round of events, before the loop sleeps again.
  void post(std::function<void()> fn);

  // Dispatches until stop().
  void run();
  void stop() { stopped_ = true; }

 private:
  explicit EventLoop(UniqueFd epoll) : epoll_(std::move(epoll)) {}

  void runTimers();
  void runPosted();
  int waitTimeoutMs() const;

  struct Watch {
    uint64_t token;
    std::shared_ptr<Handler> handler;
  };

  UniqueFd epoll_;
  std::unordered_map<int, Watch> fds_;
  std::unordered_map<uint64_t, int> tokens_;
  uint64_t next_token_ = 1;
  std::multimap<Clock::time_point, TimerId> timer_queue_;
  std::unordered_map<TimerId, std::pair<Clock::time_point, std::function<void()>>> timers_;
  TimerId next_timer_ = 1;
  std::deque<std::function<void()>> posted_;
  bool stopped_ = false;
};

}  // namespace hutch::agent

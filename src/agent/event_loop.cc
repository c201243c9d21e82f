#include "agent/event_loop.h"

#include <cerrno>
#include <vector>

namespace hutch::agent {

Result<std::unique_ptr<EventLoop>> EventLoop::create() {
  UniqueFd epoll(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll) return fail(sysError("Cannot create the epoll instance", errno));
  return std::unique_ptr<EventLoop>(new EventLoop(std::move(epoll)));
}

Result<> EventLoop::add(int fd, uint32_t events, Handler handler) {
  remove(fd);
  const uint64_t token = next_token_++;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = token;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
    return fail(sysError("Cannot watch a file descriptor", errno));
  }
  fds_[fd] = Watch{token, std::make_shared<Handler>(std::move(handler))};
  tokens_[token] = fd;
  return ok();
}

Result<> EventLoop::modify(int fd, uint32_t events) {
  auto it = fds_.find(fd);
  if (it == fds_.end()) return fail(Errc::kInternal, "Cannot modify an unwatched descriptor");
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = it->second.token;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, fd, &ev) != 0) {
    return fail(sysError("Cannot change the events of a file descriptor", errno));
  }
  return ok();
}

void EventLoop::remove(int fd) {
  auto it = fds_.find(fd);
  if (it == fds_.end()) return;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
  tokens_.erase(it->second.token);
  fds_.erase(it);
}

EventLoop::TimerId EventLoop::addTimer(Clock::duration delay, std::function<void()> fn) {
  const TimerId id = next_timer_++;
  const auto when = Clock::now() + delay;
  timers_[id] = {when, std::move(fn)};
  timer_queue_.emplace(when, id);
  return id;
}

void EventLoop::cancelTimer(TimerId id) {
  auto it = timers_.find(id);
  if (it == timers_.end()) return;
  auto [begin, end] = timer_queue_.equal_range(it->second.first);
  for (auto q = begin; q != end; ++q) {
    if (q->second == id) {
      timer_queue_.erase(q);
      break;
    }
  }
  timers_.erase(it);
}

void EventLoop::post(std::function<void()> fn) {
  posted_.push_back(std::move(fn));
}

int EventLoop::waitTimeoutMs() const {
  if (!posted_.empty()) return 0;
  if (timer_queue_.empty()) return -1;
  const auto delay = timer_queue_.begin()->first - Clock::now();
  if (delay <= Clock::duration::zero()) return 0;
  // Round up so a timer never fires early and the loop does not spin on a sub-ms remainder.
  return static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(delay).count());
}

void EventLoop::runTimers() {
  const auto now = Clock::now();
  while (!timer_queue_.empty() && timer_queue_.begin()->first <= now) {
    const TimerId id = timer_queue_.begin()->second;
    timer_queue_.erase(timer_queue_.begin());
    auto it = timers_.find(id);
    if (it == timers_.end()) continue;
    auto fn = std::move(it->second.second);
    timers_.erase(it);
    fn();
  }
}

void EventLoop::runPosted() {
  // Tasks posted by tasks run in the same round.
  while (!posted_.empty()) {
    auto fn = std::move(posted_.front());
    posted_.pop_front();
    fn();
  }
}

void EventLoop::run() {
  std::vector<epoll_event> events(64);
  while (!stopped_) {
    const int n =
        ::epoll_wait(epoll_.get(), events.data(), static_cast<int>(events.size()), waitTimeoutMs());
    if (n < 0 && errno != EINTR) {
      // Only EBADF/EINVAL/EFAULT are possible: a bug, but PID 1 must not die of it.
      continue;
    }
    for (int i = 0; i < n; ++i) {
      auto token = tokens_.find(events[i].data.u64);
      if (token == tokens_.end()) continue;  // removed by an earlier handler this round
      // Hold the handler: it may remove (and destroy) its own registration while it runs.
      std::shared_ptr<Handler> handler = fds_[token->second].handler;
      (*handler)(events[i].events);
    }
    runTimers();
    runPosted();
  }
}

}  // namespace hutch::agent

#include "box/warm_pool.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <tuple>

namespace hutch::box {

namespace {

asio::awaitable<void> sleepFor(asio::any_io_executor loop, std::chrono::milliseconds time) {
  asio::steady_timer wait(loop, time);
  boost::system::error_code ec;
  co_await wait.async_wait(asio::redirect_error(asio::use_awaitable, ec));
}

}  // namespace

WarmPool::WarmPool(asio::any_io_executor loop, Source& source, Limits limits)
    : loop_(std::move(loop)), source_(source), limits_(limits) {}

unsigned WarmPool::target(const std::string& key) const {
  auto it = targets_.find(key);
  return it == targets_.end() ? limits_.size : it->second;
}

std::optional<PooledVm> WarmPool::take(const std::string& key, const BoxConfig& config) {
  if (!enabled()) return std::nullopt;
  std::optional<PooledVm> found;
  if (auto it = ready_.find(key); it != ready_.end()) {
    while (!found && !it->second.empty()) {
      PooledVm vm = std::move(it->second.back());
      it->second.pop_back();
      if (source_.usable(vm, key, config)) {
        found = std::move(vm);
      } else {
        discardLater(std::move(vm));
      }
    }
  }
  used_[key] = std::chrono::steady_clock::now();
  // Creates come faster than the pool refills: keep one more ready, within the limit.
  unsigned now = target(key);
  if (!found && now < std::max(limits_.max, limits_.size)) {
    targets_[key] = now + 1;
    spdlog::info("Warm pool {}: a create found it empty; it now keeps {}", key.substr(0, 12),
                 now + 1);
  }
  return found;
}

void WarmPool::giveBack(const std::string& key, PooledVm vm) {
  if (draining_) {
    discardLater(std::move(vm));
    return;
  }
  ready_[key].push_back(std::move(vm));
}

void WarmPool::shrinkIdle() {
  const auto now = std::chrono::steady_clock::now();
  for (auto& [key, size] : targets_) {
    if (size <= limits_.size || now - used_[key] < limits_.idle) continue;
    --size;
    used_[key] = now;  // one VM per idle period
    auto it = ready_.find(key);
    if (it == ready_.end() || it->second.size() <= size) continue;
    PooledVm vm = std::move(it->second.back());
    it->second.pop_back();
    spdlog::info("Warm pool {}: unused for {} s; it now keeps {}", key.substr(0, 12),
                 limits_.idle.count(), size);
    discardLater(std::move(vm));
  }
}

void WarmPool::refill(const std::string& key, const storage::Template& tmpl,
                      const BoxConfig& config) {
  if (!enabled() || draining_) return;
  shapes_.try_emplace(
      key,
      PoolStatus{.template_name = tmpl.name, .cpus = config.cpus, .memory_mib = config.memory_mib});
  if (filling_.contains(key) || ready_[key].size() >= target(key)) return;
  filling_.insert(key);
  asio::co_spawn(loop_, fill(key, tmpl, config), asio::detached);
}

asio::awaitable<void> WarmPool::fill(std::string key, storage::Template tmpl, BoxConfig config) {
  while (!draining_ && ready_[key].size() < target(key)) {
    co_await waitForCreates();
    if (draining_) break;
    auto made = co_await source_.make(key, tmpl, config);
    if (!made) {
      spdlog::warn("Warm pool for {}: {}", tmpl.name, made.error().describe());
      break;
    }
    if (draining_) {
      // hutchd is shutting down and drain() no longer looks at ready_.
      co_await source_.discard(std::move(*made));
      break;
    }
    spdlog::debug("Warm pool for {}: box {} ready (warmed up, paused)", tmpl.name, made->id);
    ready_[key].push_back(std::move(*made));
  }
  filling_.erase(key);
}

void WarmPool::discardLater(PooledVm vm) {
  ++discarding_;
  asio::co_spawn(loop_, discardCounted(std::move(vm)), asio::detached);
}

asio::awaitable<void> WarmPool::discardCounted(PooledVm vm) {
  co_await source_.discard(std::move(vm));
  --discarding_;
}

asio::awaitable<void> WarmPool::waitForCreates() {
  while (creating_ > 0 && !draining_) co_await sleepFor(loop_, std::chrono::milliseconds(50));
}

std::vector<PoolStatus> WarmPool::status() const {
  std::vector<PoolStatus> out;
  for (const auto& [key, shape] : shapes_) {
    PoolStatus status = shape;
    auto it = ready_.find(key);
    status.ready = it == ready_.end() ? 0 : it->second.size();
    status.size = target(key);
    status.filling = filling_.contains(key);
    out.push_back(std::move(status));
  }
  std::sort(out.begin(), out.end(), [](const PoolStatus& a, const PoolStatus& b) {
    return std::tie(a.template_name, a.cpus, a.memory_mib) <
           std::tie(b.template_name, b.cpus, b.memory_mib);
  });
  return out;
}

asio::awaitable<void> WarmPool::drain() {
  // A fill under way would make a VM after the drain, a discard might not have killed its VM
  // yet: stop the fills and wait for both.
  draining_ = true;
  while (!filling_.empty() || discarding_ > 0) {
    co_await sleepFor(loop_, std::chrono::milliseconds(20));
  }
  auto ready = std::move(ready_);
  ready_.clear();
  for (auto& [key, vms] : ready) {
    for (PooledVm& vm : vms) co_await source_.discard(std::move(vm));
  }
}

}  // namespace hutch::box

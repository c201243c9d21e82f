// A full host disk. QEMU stops a guest whose disk write found no space (werror=enospc, its
// default): the guest sees no error, and the write is retried when the VM goes on. Left alone,
// such a box hangs for good, every exec with it. Here it is said instead (the box reads as
// stalled, with why), and it goes on by itself once space is freed. And a box whose VM ends
// while the database refuses writes is recorded failed once it can be (recordFailure).
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/statvfs.h>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "box/box_service.h"

namespace hutch::box {

namespace {

// Room the state directory's filesystem must have before a stalled VM is resumed: a margin over
// the write that failed, so that a box does not stop again at once (if it does, it is stalled
// again and waits again).
constexpr uint64_t kResumeFreeBytes = 64ULL << 20;
constexpr auto kSpaceCheckEvery = std::chrono::seconds(2);

uint64_t freeBytes(const std::filesystem::path& dir) {
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
}

}  // namespace

asio::awaitable<void> BoxService::watchDisk(std::string id, std::shared_ptr<Runtime> runtime) {
  asio::steady_timer timer(loop_);
  for (;;) {
    auto full = co_await runtime->vm->waitDiskFull();
    if (!full || runtime->exited || runtime->removed) co_return;
    const std::filesystem::path dir = boxDir(id);
    if (runtime->stalled.empty()) {
      runtime->stalled = fmt::format(
          "stalled: the host's disk is full (its VMM stopped the guest at a {}); it goes on by "
          "itself, with nothing lost, once the filesystem of {} has {} MiB free ({} MiB now)",
          *full, dir.string(), kResumeFreeBytes >> 20, freeBytes(dir) >> 20);
      spdlog::warn("box={} {}", id, runtime->stalled);
      if (auto box = store_.find(id); box) publish("box.stalled", *box, {{"reason", *full}});
    }
    while (freeBytes(dir) < kResumeFreeBytes) {
      timer.expires_after(kSpaceCheckEvery);
      boost::system::error_code ec;
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      if (runtime->exited || runtime->removed) co_return;
    }
    // A box paused meanwhile (a stop, a capture, idle pause) is resumed by whoever paused it:
    // `cont` here would run it under their feet. Its next stall, if any, is reported again.
    if (runtime->stopping || runtime->busy) {
      runtime->stalled.clear();
      continue;
    }
    auto resumed = co_await runtime->vm->resume();
    if (!resumed) {
      spdlog::error("box={} cannot resume after its disk stall: {}", id,
                    resumed.error().describe());
      continue;
    }
    spdlog::info("box={} resumed: the host's disk has room again", id);
    runtime->stalled.clear();
    if (auto box = store_.find(id); box) publish("box.unstalled", *box, {});
  }
}

Box BoxService::withRuntimeState(Box box) const {
  auto it = runtimes_.find(box.id);
  if (box.state == BoxState::kRunning && it != runtimes_.end() && !it->second->stalled.empty()) {
    box.reason = it->second->stalled;
  }
  return box;
}

asio::awaitable<void> BoxService::recordFailure(Box box, std::string reason) {
  // The database may refuse the write (a full disk): the box must not read as running for good,
  // so the write is tried again, less and less often, until it lands or the box moves on.
  asio::steady_timer retry(loop_);
  auto delay = std::chrono::seconds(1);
  for (bool first = true;; first = false) {
    Box failed = box;
    auto recorded = setState(failed, BoxState::kFailed, reason);
    if (recorded) {
      if (!first) spdlog::info("box={} recorded as failed at last", box.id);
      unrecorded_failures_.erase(box.id);
      co_return;
    }
    if (first) {
      spdlog::error("box={} cannot be recorded as failed ({}): {}; trying again", box.id, reason,
                    recorded.error().describe());
    }
    unrecorded_failures_[box.id] = reason;
    retry.expires_after(delay);
    boost::system::error_code ec;
    co_await retry.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    delay = std::min<std::chrono::seconds>(delay * 2, std::chrono::seconds(30));
    auto now = store_.find(box.id);
    if (!now || now->state != BoxState::kRunning || runtimes_.contains(box.id)) {
      unrecorded_failures_.erase(box.id);
      co_return;
    }
    box = *now;
  }
}

}  // namespace hutch::box

// Boxes that wait for free (docs/snapshots.md "Suspend and idle pause"):
//   suspend: the guest's memory and devices saved next to its disk, QEMU gone, nothing used but
//            disk; start resumes it with every process as it was.
//   pause:   the vCPUs stopped, QEMU kept (idle pause): no CPU, memory kept; the next thing done
//            in the box wakes it.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <charconv>
#include <optional>

#include "base/fault.h"
#include "box/box_service.h"
#include "box/snapshot_helpers.h"
#include "guest/exec_session.h"

namespace hutch::box {

namespace fs = std::filesystem;

asio::awaitable<Result<Box>> BoxService::suspend(const std::string& key, std::string_view by) {
  if (auto box = store_.find(key); box && !box->shares.empty()) {
    // QEMU cannot save a shared folder's device: asked to, such a box shuts down (hutch stop);
    // when idle it stays paused.
    if (by == "idle") {
      co_return fail(Errc::kFailedPrecondition,
                     fmt::format("Box {} has shared folders: it stays paused", box->name));
    }
    co_return co_await stop(key);
  }
  auto done = [&](const Box& suspended, int64_t ms) {
    publish("box.suspended", suspended, {{"by", by}, {"duration_ms", ms}});
  };
  const observe::Subject subject = subjectOf(key);
  auto body = suspendBox(key, by);
  co_return co_await reported("suspend", subject, std::move(body), done);
}

asio::awaitable<Result<Box>> BoxService::suspendBox(const std::string& key, std::string_view by) {
  HUTCH_CO_TRY(Box box, store_.find(key));
  auto it = runtimes_.find(box.id);
  if ((box.state != BoxState::kRunning && box.state != BoxState::kPaused) ||
      it == runtimes_.end() || !it->second->vm) {
    co_return fail(Errc::kFailedPrecondition,
                   fmt::format("Box {} is {}; only a running or paused box can be suspended",
                               box.name, stateName(box.state)));
  }
  std::shared_ptr<Runtime> runtime = it->second;
  HUTCH_CO_TRY_VOID(checkNotBusy(box, *runtime, "stop it"));
  Busy busy(*runtime);
  const bool was_paused = box.state == BoxState::kPaused;

  Snapshot snap;
  snap.id = randomId();
  snap.kind = SnapshotKind::kSuspend;
  snap.box_id = box.id;
  snap.owner_id = box.owner.id;
  snap.name = "suspend-" + snap.id.substr(0, 8);
  snap.source = std::string(by);
  snap.dir = config_.snapshots_dir / snap.id;
  snap.created_at = unixNow();
  WriteClaim claim(*this, snap.dir);  // until the record is in the store
  if (auto made = makeDirectories(snap.dir); !made) co_return fail(made.error());
  std::error_code ec;
  // A template made from the suspended box's disk, or a cold boot after a resume that failed,
  // then has every file the box wrote. (A box paused for idleness wrote nothing for a long
  // while: the kernel flushed it.)
  if (!was_paused) co_await flushGuest(runtime->agent, box.name);
  // (A box paused for idleness has no open connection: one would have been work.)
  if (!was_paused) co_await parkConnections(box, *runtime);
  if (!was_paused) {
    if (auto paused = co_await runtime->vm->pause(); !paused) {
      removeQuietly(snap.dir);
      co_await resumeConnections(box.id, runtime->agent);
      co_return fail(paused.error().withContext(fmt::format("Cannot suspend {}", box.name)));
    }
  }
  auto saved = co_await runtime->vm->saveState(snap.dir / "state");
  Capture cap;
  cap.state = snap.dir / "state";
  cap.layer = boxDir(box.id) / box.disk;  // the box's own disk: it is not frozen
  if (auto chain = backingChain(cap.layer); chain)
    cap.disk_bytes = fs::file_size(chain->back(), ec);
  if (box.config.disk_mib != 0) cap.disk_bytes = box.config.disk_mib << 20;
  auto manifest = saved ? manifestFor(box, SnapshotKind::kSuspend, cap) : fail(saved.error());
  Result<> kept = manifest ? ok() : fail(manifest.error());
  if (kept) kept = co_await writeManifestOffLoop(snap.dir, *manifest);
  if (kept) {
    snap.size_bytes = allocatedBytes(snap.dir);
    kept = store_.insertSnapshot(snap);
  }
  if (!kept) {
    // Nothing was lost: the box goes on as it was.
    removeQuietly(snap.dir);
    if (!was_paused) {
      if (auto resumed = co_await runtime->vm->resume(); !resumed) {
        spdlog::error("box={} cannot resume: {}", box.id, resumed.error().describe());
      }
      co_await resumeConnections(box.id, runtime->agent);
    }
    co_return fail(kept.error().withContext(fmt::format("Cannot suspend {}", box.name)));
  }
  // The state is on disk and recorded: from here on the box is suspended, whatever happens to
  // its QEMU (a restarted hutchd finishes the job, recoverAfterRestart).
  fault::point("suspend.state-recorded", runtime->vm->pid());
  runtime->stopping = true;
  HUTCH_CO_TRY_VOID(setState(box, BoxState::kStopping));
  if (runtime->agent) runtime->agent->close();
  (void)co_await runtime->vm->kill();
  co_await waitExit(*runtime, std::chrono::seconds(10));
  runtimes_.erase(box.id);
  fs::remove(boxDir(box.id) / "memory", ec);
  HUTCH_CO_TRY(box, store_.find(box.id));
  HUTCH_CO_TRY_VOID(setState(box, BoxState::kSuspended));
  spdlog::info("box={} suspended ({} MiB of state in {} ms)", box.id, snap.size_bytes >> 20,
               saved->took.count());
  co_return box;
}

asio::awaitable<Result<Box>> BoxService::resumeSuspended(Box box) {
  auto found = store_.findSuspend(box.id);
  std::string why;
  if (!found) {
    why = found.error().describe();
  } else {
    const Snapshot snap = *found;
    auto manifest = co_await readManifestOffLoop(snap.dir);
    if (!manifest) {
      why = manifest.error().describe();
    } else if (auto incompatible = incompatibility(*manifest, config_.env, box.config.cpus,
                                                   box.config.memory_mib)) {
      why = *incompatible;
    } else {
      HUTCH_CO_TRY_VOID(setState(box, BoxState::kCreating));
      RestoreSource source{.state = snap.dir / "state",
                           .disk_bytes = manifest->disk_bytes,
                           .label = "its suspended state",
                           .keep_disk = true};
      box.boot = "resumed from its suspended state";
      spdlog::info("box={} resuming", box.id);
      auto resumed = co_await bootBox(box, &source);
      if (resumed) {
        if (auto it = runtimes_.find(box.id); it != runtimes_.end() && it->second->agent) {
          co_await resumeConnections(box.id, it->second->agent);
        }
        (void)dropSuspend(box.id);
        co_return resumed;
      }
      why = resumed.error().describe();
      HUTCH_CO_TRY(box, store_.find(box.id));
    }
  }
  // This QEMU, acceleration or CPU cannot load it (or it is damaged): a cold boot from the disk,
  // which QEMU flushed when it saved the state. Running processes are lost; files are not.
  (void)dropSuspend(box.id);
  spdlog::warn("box={} its suspended state cannot be loaded ({}); booting it cold", box.id, why);
  publish("box.resume_failed", box, {{"reason", why}});
  if (box.state != BoxState::kCreating) HUTCH_CO_TRY_VOID(setState(box, BoxState::kCreating));
  box.boot = fmt::format("cold boot: its suspended state could not be loaded ({})", why);
  co_return co_await bootBox(box);
}

std::string BoxService::suspendedBy(const std::string& box_id) {
  auto found = store_.findSuspend(box_id);
  return found ? found->source : std::string();
}

Result<> BoxService::dropSuspend(const std::string& box_id) {
  dropConnections(box_id);
  auto found = store_.findSuspend(box_id);
  if (!found) return ok();
  HUTCH_TRY_VOID(store_.removeSnapshot(found->id));
  removeQuietly(found->dir);
  return ok();
}

asio::awaitable<void> BoxService::parkConnections(const Box& box, Runtime& runtime) {
  if (!runtime.agent || !runtime.agent->isOpen()) co_return;
  auto parked = co_await runtime.agent->parkTcpStreams(std::chrono::seconds(10));
  if (!parked) {
    // An older agent, or one that did not answer: its connections end with the suspend.
    if (parked.error().code() != Errc::kUnsupported) {
      spdlog::warn("box={} its open connections end with the suspend: {}", box.id,
                   parked.error().describe());
    }
    co_return;
  }
  if (parked->empty()) co_return;
  spdlog::info("box={} {} open connection(s) kept across the suspend", box.id, parked->size());
  auto& kept = parked_[box.id];
  kept.insert(kept.end(), parked->begin(), parked->end());
}

asio::awaitable<void> BoxService::resumeConnections(const std::string& box_id,
                                                    std::shared_ptr<guest::AgentClient> agent) {
  auto it = parked_.find(box_id);
  if (it == parked_.end()) co_return;
  auto streams = std::move(it->second);
  parked_.erase(it);
  size_t resumed = 0;
  for (const auto& stream : streams) {
    if (stream->ended()) continue;  // its user closed it meanwhile
    auto going = co_await agent->resumeTcpStream(stream, std::chrono::seconds(10));
    if (going) {
      ++resumed;
    } else {
      spdlog::warn("box={} a connection kept across the suspend ends: {}", box_id,
                   going.error().describe());
    }
  }
  if (resumed > 0) spdlog::info("box={} {} connection(s) resumed", box_id, resumed);
}

void BoxService::dropConnections(const std::string& box_id) {
  auto it = parked_.find(box_id);
  if (it == parked_.end()) return;
  for (const auto& stream : it->second) stream->close();  // their relays reset their clients
  parked_.erase(it);
}

asio::awaitable<Result<Box>> BoxService::pause(const std::string& key) {
  HUTCH_CO_TRY(Box box, store_.find(key));
  auto it = runtimes_.find(box.id);
  if (box.state != BoxState::kRunning || it == runtimes_.end() || !it->second->vm) {
    co_return fail(Errc::kFailedPrecondition,
                   fmt::format("Box {} is {}; only a running box can be paused", box.name,
                               stateName(box.state)));
  }
  std::shared_ptr<Runtime> runtime = it->second;
  if (runtime->busy) {
    co_return fail(Errc::kFailedPrecondition, fmt::format("Box {} is busy", box.name));
  }
  HUTCH_CO_TRY_VOID(co_await runtime->vm->pause());
  HUTCH_CO_TRY_VOID(setState(box, BoxState::kPaused));
  runtime->paused_at = std::chrono::steady_clock::now();
  publish("box.paused", box, {{"idle_ms", msSince(runtime->last_activity)}});
  spdlog::info("box={} paused (idle)", box.id);
  co_return box;
}

asio::awaitable<Result<>> BoxService::wake(const std::string& key) {
  auto box = store_.find(key);
  if (!box) co_return fail(box.error());
  // Being started already (by an earlier call that woke it): wait for that.
  const auto deadline = std::chrono::steady_clock::now() + config_.boot_timeout;
  while (box->state == BoxState::kCreating && std::chrono::steady_clock::now() < deadline) {
    co_await state_changed_.waitUntil(deadline);
    box = store_.find(box->id);
    if (!box) co_return fail(box.error());
  }
  if (auto it = runtimes_.find(box->id); it != runtimes_.end()) {
    it->second->last_activity = std::chrono::steady_clock::now();
  }
  if (box->state == BoxState::kSuspended) {
    if (suspendedBy(box->id) != "idle") co_return ok();
    auto started = co_await start(box->id);
    if (!started) co_return fail(started.error());
    co_return ok();
  }
  if (box->state != BoxState::kPaused) co_return ok();
  auto it = runtimes_.find(box->id);
  if (it == runtimes_.end() || !it->second->vm) {
    co_return fail(Errc::kFailedPrecondition, fmt::format("Box {} has no VM", box->name));
  }
  // Woken by what is about to be done in it: resume first, then record.
  HUTCH_CO_TRY_VOID(co_await it->second->vm->resume());
  // Its clock stood still while it was paused.
  if (it->second->agent) {
    guest::Identity identity;
    identity.set_clock = true;
    auto applied = co_await it->second->agent->applyIdentity(identity, std::chrono::seconds(10));
    if (!applied) spdlog::warn("box={} clock not set: {}", box->id, applied.error().describe());
  }
  HUTCH_CO_TRY_VOID(setState(*box, BoxState::kRunning));
  publish("box.resumed", *box, {{"paused_ms", msSince(it->second->paused_at)}});
  co_return ok();
}

}  // namespace hutch::box

// ---- idle pause ----

namespace hutch::box {

namespace {

constexpr auto kIdleSample = std::chrono::seconds(5);

// The "cpu " line of /proc/stat: busy (all but idle and iowait) and total clock ticks.
std::optional<std::pair<uint64_t, uint64_t>> cpuTicks(std::string_view stat) {
  if (!stat.starts_with("cpu ")) return std::nullopt;
  std::string_view line = stat.substr(4, stat.find('\n') - 4);
  uint64_t total = 0;
  uint64_t idle = 0;
  for (int field = 0; !line.empty() && field < 10; ++field) {
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    uint64_t value = 0;
    auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), value);
    if (ec != std::errc()) break;
    line.remove_prefix(static_cast<size_t>(end - line.data()));
    total += value;
    if (field == 3 || field == 4) idle += value;  // idle, iowait
  }
  if (total == 0) return std::nullopt;
  return std::make_pair(total - idle, total);
}

}  // namespace

std::chrono::milliseconds BoxService::idlePauseOf(const Box& box) const {
  if (box.config.idle_pause_ms >= 0) return std::chrono::milliseconds(box.config.idle_pause_ms);
  return config_.idle_pause;
}

asio::awaitable<void> BoxService::sampleIdle(std::string box_id, std::shared_ptr<Runtime> runtime) {
  if (runtime->sampling || !runtime->agent) co_return;
  runtime->sampling = true;
  runtime->last_sample = std::chrono::steady_clock::now();
  struct Done {
    Runtime& r;
    ~Done() { r.sampling = false; }
  } done{*runtime};
  // Read through the agent's file API, not exec: a check must not itself be work in the box.
  proto::FileReadRequest request{.path = "/proc/stat", .user = "root"};
  auto reader = co_await runtime->agent->openRead(std::move(request), std::chrono::seconds(5));
  if (!reader) co_return;
  std::string text;
  while (text.size() < 4096) {
    auto chunk = co_await (*reader)->next();
    if (!chunk || !*chunk) break;
    text += **chunk;
  }
  (*reader)->close();
  auto ticks = cpuTicks(text);
  if (!ticks) co_return;
  const auto [busy, total] = *ticks;
  if (runtime->guest_total_ticks != 0 && total > runtime->guest_total_ticks) {
    // Ticks count per vCPU: the share of one CPU the guest kept busy since the last check.
    const double share = static_cast<double>(busy - runtime->guest_busy_ticks) /
                         static_cast<double>(total - runtime->guest_total_ticks);
    if (share > config_.idle_cpu_share) {
      spdlog::debug("box={} busy: {:.1f}% of its CPU time since the last check", box_id,
                    share * 100);
      runtime->last_activity = std::chrono::steady_clock::now();
    }
  }
  runtime->guest_busy_ticks = busy;
  runtime->guest_total_ticks = total;
}

asio::awaitable<void> BoxService::idleCheck() {
  const auto now = std::chrono::steady_clock::now();
  // A copy: what is awaited below may change the map.
  std::vector<std::pair<std::string, std::shared_ptr<Runtime>>> running(runtimes_.begin(),
                                                                        runtimes_.end());
  for (auto& [id, runtime] : running) {
    if (runtime->busy || runtime->stopping || runtime->exited || !runtime->agent) continue;
    auto box = store_.find(id);
    if (!box) continue;
    if (box->state == BoxState::kPaused) {
      if (config_.idle_suspend.count() > 0 && now - runtime->paused_at >= config_.idle_suspend &&
          box->shares.empty()) {
        auto suspended = co_await suspend(id, "idle");
        if (!suspended) {
          spdlog::warn("box={} idle, but cannot be suspended: {}", id,
                       suspended.error().describe());
        }
      }
      continue;
    }
    const auto limit = idlePauseOf(*box);
    if (box->state != BoxState::kRunning || limit.count() == 0) continue;
    if (runtime->last_activity == std::chrono::steady_clock::time_point{}) {
      runtime->last_activity = now;
    }
    // Work the host sees: a command or terminal open in it, a connection to a published port.
    if (runtime->active_sessions > 0 || (observer_ && observer_->openConnections(id) > 0)) {
      runtime->last_activity = now;
      continue;
    }
    // Work only the guest sees (a detached process, a download through the proxy): its CPU
    // time between two samples of its /proc/stat, taken every kIdleSample (or half the idle
    // period, if shorter) and once more before it is paused.
    const auto interval = std::min<std::chrono::steady_clock::duration>(kIdleSample, limit / 2);
    if (now - runtime->last_activity < limit) {
      if (now - runtime->last_sample >= interval) co_await sampleIdle(id, runtime);
      continue;
    }
    const bool had_sample = runtime->guest_total_ticks != 0;
    co_await sampleIdle(id, runtime);
    // Without an earlier sample there is nothing to compare with: no evidence of idleness yet.
    if (!had_sample) continue;
    if (std::chrono::steady_clock::now() - runtime->last_activity < limit) continue;
    if (runtime->busy || runtime->stopping || runtime->exited) continue;
    auto paused = co_await pause(id);
    if (!paused)
      spdlog::warn("box={} idle, but cannot be paused: {}", id, paused.error().describe());
  }
}

}  // namespace hutch::box

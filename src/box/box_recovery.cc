// After a restart: the boxes an earlier hutchd left, taken back (adopted) or put in a state a
// user can act on, and what no box owns killed or deleted (docs/reliability.md).
#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <filesystem>
#include <set>

#include "box/box_service.h"
#include "box/network_service.h"
#include "box/snapshot_helpers.h"
#include "sys/files.h"
#include "sys/unix_socket.h"

namespace hutch::box {

namespace fs = std::filesystem;

asio::awaitable<Result<>> BoxService::recoverAfterRestart() {
  HUTCH_CO_TRY(std::vector<Box> boxes, store_.list());
  // After a host reboot no VM can have survived: live boxes are simply stopped, disks intact.
  HUTCH_CO_TRY(std::string last_boot, store_.getMeta("boot_id"));
  std::string this_boot = config_.boot_id;
  bool rebooted = !last_boot.empty() && last_boot != this_boot;
  HUTCH_CO_TRY_VOID(store_.setMeta("boot_id", this_boot));
  // Scratch space of diffs a killed hutchd left (box_diff.cc): nothing in it is kept.
  removeQuietly(config_.boxes_dir.parent_path() / "diff");
  for (Box& box : boxes) {
    if (runtimes_.contains(box.id)) continue;
    recoverInterruptedCapture(box);
    bool live = box.state == BoxState::kRunning || box.state == BoxState::kCreating ||
                box.state == BoxState::kStopping || box.state == BoxState::kPaused;
    // A recorded suspended state is complete (it is recorded after it is written): a box caught
    // suspending or resuming, or on a host that rebooted, is suspended with it.
    const bool has_suspend = store_.findSuspend(box.id).has_value();
    auto record = [&](BoxState state, std::string_view why) -> Result<> {
      // Not a transition the state machine allows in normal operation: recorded directly.
      box.state = state;
      box.reason.clear();
      box.pid = 0;
      box.updated_at = unixNow();
      HUTCH_TRY_VOID(store_.update(box));
      spdlog::info("box={} {} ({})", box.id, stateName(state), why);
      return ok();
    };
    if (rebooted && live) {
      HUTCH_CO_TRY_VOID(
          record(has_suspend ? BoxState::kSuspended : BoxState::kStopped, "the host rebooted"));
      continue;
    }
    if (has_suspend && (box.state == BoxState::kStopping || box.state == BoxState::kCreating)) {
      // hutchd died after the state was saved (suspending) or before the resume finished.
      if (auto vm = co_await backend_.adopt(boxDir(box.id)); vm) co_await (*vm)->kill();
      HUTCH_CO_TRY_VOID(record(BoxState::kSuspended, "hutchd restarted while it was " +
                                                         std::string(stateName(box.state))));
      continue;
    }
    if (box.state == BoxState::kRunning || box.state == BoxState::kPaused) {
      auto adopted = co_await adopt(box);
      if (adopted) {
        // settle() resumed a paused VM; a suspend that did not finish is forgotten.
        if (has_suspend) (void)dropSuspend(box.id);
        if (box.state == BoxState::kPaused) HUTCH_CO_TRY_VOID(setState(box, BoxState::kRunning));
        spdlog::info("box={} adopted the running VM (pid {})", box.id, box.pid);
        continue;
      }
      spdlog::warn("box={} cannot be adopted: {}", box.id, adopted.error().describe());
      HUTCH_CO_TRY_VOID(
          setState(box, BoxState::kFailed,
                   "hutchd restarted and could not reattach: " + adopted.error().describe()));
    } else if (box.state == BoxState::kCreating || box.state == BoxState::kStopping) {
      // The operation died with the old hutchd; its VM, if any, is not trusted.
      if (auto vm = co_await backend_.adopt(boxDir(box.id)); vm) co_await (*vm)->kill();
      HUTCH_CO_TRY_VOID(
          setState(box, BoxState::kFailed,
                   "hutchd restarted while the box was " + std::string(stateName(box.state))));
    }
  }
  // A QEMU that no box took back is killed before anything is deleted: a warm-pool VM, a fork
  // child or a template VM caught restoring (its QMP may not answer, so adopting it to kill it
  // fails), or the VM of a box that could not be reattached (marked failed above).
  std::set<std::filesystem::path> adopted;
  for (const auto& [id, runtime] : runtimes_) adopted.insert(boxDir(id).lexically_normal());
  for (const auto& root : {config_.boxes_dir, config_.snapshots_dir}) {
    // Each logged by the backend; what they kept on the host (their jail's cgroup) goes too.
    for (const auto& dir : backend_.killStrays(root, adopted)) backend_.releaseRunDir(dir);
  }
  // A box whose VM was not adopted (the host rebooted, its QEMU died while no hutchd watched, or
  // adoption failed) may still have its jail's cgroup: nobody saw that QEMU exit.
  if (auto all = store_.list(); all) {
    for (const Box& box : *all) {
      if (!runtimes_.contains(box.id)) backend_.releaseRunDir(boxDir(box.id));
    }
  }
  co_await removeOrphans();
  if (network_) {
    // Namespaces of VMs that are gone (an earlier hutchd's boxes, template or pool VMs).
    std::vector<uint32_t> keep;
    for (const auto& [id, runtime] : runtimes_) {
      if (auto box = store_.find(id); box && box->uid_index >= 0) {
        keep.push_back(static_cast<uint32_t>(box->uid_index));
      }
    }
    for (uint32_t held : uid_indices_.held()) keep.push_back(held);
    network_->removeOrphans(keep);
  }
  collectGarbage();
  co_return ok();
}

asio::awaitable<Result<>> BoxService::adopt(Box& box) {
  auto runtime = std::make_shared<Runtime>(loop_);
  HUTCH_CO_TRY(runtime->vm, co_await backend_.adopt(boxDir(box.id)));
  // An earlier hutchd may have died in the middle of a capture, with the VM paused.
  HUTCH_CO_TRY_VOID(co_await runtime->vm->settle());
  // Root's socket in the box's directory: connected only if it is still the one hutchd made
  // (see QemuBackend::adoptQemu). Three tries of 10 s on a new connection each: a guest starved
  // of CPU on a loaded host, or one that missed the old hutchd's hangup, answers a later one
  // (CI saw one adoption time out once, on a host building beside it), and a box that cannot be
  // adopted is failed and its VM killed.
  Result<std::shared_ptr<guest::AgentClient>> agent = fail(Errc::kInternal, "not tried");
  for (int attempt = 1; attempt <= 3 && !runtime->vm->exited(); ++attempt) {
    HUTCH_CO_TRY(auto agent_socket, sys::openTrustedSocket(boxDir(box.id) / "agent.sock", 0));
    agent = co_await connectAgent(*runtime->vm, agent_socket.procPath(),
                                  std::chrono::steady_clock::now() + std::chrono::seconds(10));
    if (agent) break;
    spdlog::info("box={} adoption, try {} of 3: {}", box.id, attempt, agent.error().describe());
  }
  if (!agent) co_return fail(agent.error().withContext("The guest agent did not answer"));
  runtime->agent = std::move(*agent);
  asio::co_spawn(loop_, watchAgent(box.id, runtime), asio::detached);
  box.pid = runtime->vm->pid();
  HUTCH_CO_TRY_VOID(store_.update(box));
  runtimes_[box.id] = runtime;
  asio::co_spawn(loop_, watch(box.id, runtime), asio::detached);
  HUTCH_CO_TRY_VOID(co_await networkUp(box, *runtime));
  HUTCH_CO_TRY_VOID(co_await mountShares(box, runtime));
  co_return ok();
}

void BoxService::recoverInterruptedCapture(Box& box) {
  fs::path journal = boxDir(box.id) / "capture.json";
  auto text = sys::readFile(journal, 4096);
  if (!text) return;
  auto json = nlohmann::json::parse(*text, nullptr, false);
  std::error_code ec;
  if (json.is_object() && !json.value("new", std::string()).empty()) {
    // The new top stands on the frozen layer whether or not QEMU switched to it: with it the
    // disk holds every write either way.
    std::string new_name = json.value("new", "");
    // The journal is in the box's directory, which the box's uid owns: a name, never a path.
    bool plain = new_name.starts_with("disk-") && new_name.find('/') == std::string::npos;
    if (plain && fs::exists(boxDir(box.id) / new_name, ec) && box.disk != new_name) {
      spdlog::warn("box={} finishing an interrupted capture: its disk is now {}", box.id, new_name);
      box.disk = new_name;
      if (auto stored = store_.update(box); !stored) {
        spdlog::error("box={} {}", box.id, stored.error().describe());
        return;
      }
    }
  }
  fs::remove(journal, ec);
}

void BoxService::detachAll() {
  for (auto& [id, runtime] : runtimes_) {
    runtime->removed = true;  // watchers stop updating the store
    if (runtime->agent) runtime->agent->close();
  }
  runtimes_.clear();
}

}  // namespace hutch::box

// A running QEMU process: watched through a pidfd on the event loop, driven through QMP.
#pragma once

#include <sys/types.h>

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "base/unique_fd.h"
#include "jail/box_ids.h"
#include "jail/cgroup.h"
#include "sys/pidfd.h"
#include "vmm/backend.h"
#include "vmm/qemu/qmp_client.h"

namespace hutch::vmm::qemu {

struct QemuVmOptions {
  std::chrono::milliseconds quit_grace{3000};     // QMP quit → SIGKILL
  std::chrono::milliseconds kill_timeout{10000};  // SIGKILL → gone, else kTimeout
  std::chrono::milliseconds qmp_timeout{10000};   // per QMP command
};

// How the backend jailed a VM's QEMU: its own ids and cgroup. After QEMU exits, the watcher
// reads the cgroup (an OOM kill becomes the exit text), removes it and gives the run
// directory back to root (jail::reclaimBoxDir).
struct VmJail {
  jail::BoxIds ids;
  std::optional<jail::BoxCgroup> cgroup;
};

// Not thread-safe: use from its executor's thread. Destroying it leaves QEMU running (see Vm).
class QemuVm : public Vm {
 public:
  // Starts watching `pidfd` for the exit of `pid` (reaping it if it is our child). `run_dir`
  // holds qemu.pid, removed when the process is seen to exit.
  // `jail`: nullopt for an unjailed QEMU.
  QemuVm(const asio::any_io_executor& executor, pid_t pid, UniqueFd pidfd,
         std::filesystem::path run_dir, QemuVmOptions options = {},
         std::optional<VmJail> jail = std::nullopt);
  ~QemuVm() override;

  pid_t pid() const override { return pid_; }
  asio::awaitable<std::string> waitExit() override;
  bool exited() const override;
  asio::awaitable<Result<>> pause() override;
  asio::awaitable<Result<>> resume() override;
  asio::awaitable<Result<>> kill() override;
  asio::awaitable<Result<SaveStats>> saveState(std::filesystem::path state_file) override;
  // A jailed QEMU opens `new_top` as the box's uid: it is given to the box first (it must be a
  // regular file of root's with one link, as hutchd made it).
  asio::awaitable<Result<>> switchDisk(std::filesystem::path new_top) override;
  asio::awaitable<Result<>> settle() override;
  // From QMP's BLOCK_IO_ERROR events whose action is "stop" for lack of space ("nospace").
  asio::awaitable<Result<std::string>> waitDiskFull() override;
  Result<ResourceUsage> usage() const override;
  UniqueFd takeAgentChannel() override { return std::move(agent_channel_); }
  // The client end of the agent's socket, connected before QEMU started (QemuBackend).
  void setAgentChannel(UniqueFd channel) { agent_channel_ = std::move(channel); }
  const std::optional<VmJail>& jail() const { return jail_; }
  // Loads a state file into a QEMU started with -incoming defer; the VM is paused afterwards.
  asio::awaitable<Result<>> loadState(std::filesystem::path state_file) override;

  // Sends SIGKILL without asking QEMU first, then waits for the exit.
  asio::awaitable<Result<>> killNow();
  // True if the process exited within `timeout`.
  asio::awaitable<bool> waitExitFor(std::chrono::milliseconds timeout);
  // How it ended, once exited().
  std::optional<sys::ExitStatus> exitStatus() const;
  std::optional<std::string> exitText() const;

  // QMP, for what the Vm interface does not cover yet (snapshots, device queries).
  void attachQmp(std::shared_ptr<QmpClient> qmp);
  const std::shared_ptr<QmpClient>& qmp() const { return qmp_; }
  // "running", "paused", "inmigrate"... from query-status.
  asio::awaitable<Result<std::string>> queryStatus();
  const std::filesystem::path& runDir() const { return run_dir_; }

 private:
  struct Watch;
  asio::awaitable<Result<Json>> command(std::string name, Json arguments = nullptr);
  asio::awaitable<Result<>> passFd(const std::string& name, int fd);
  asio::awaitable<Result<>> ignoreSharedRam();
  asio::awaitable<void> sleep(std::chrono::milliseconds delay);

  pid_t pid_;
  std::filesystem::path run_dir_;
  QemuVmOptions options_;
  std::optional<VmJail> jail_;
  std::shared_ptr<Watch> watch_;
  std::shared_ptr<QmpClient> qmp_;
  uint64_t disk_full_seq_ = 0;  // the last BLOCK_IO_ERROR event waitDiskFull() looked at
  UniqueFd agent_channel_;
};

}  // namespace hutch::vmm::qemu

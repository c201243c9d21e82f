// The VMM seam. hutchd talks to virtual machines only through VmBackend and Vm, so a second
// backend (Firecracker, Cloud Hypervisor) can be added beside qemu/ without touching box/.
#pragma once

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on
#include <sys/types.h>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "base/result.h"
#include "base/unique_fd.h"
#include "vmm/vm_spec.h"

namespace hutch::vmm {

namespace asio = boost::asio;

// What a backend can do, so callers ask instead of being surprised.
struct Capabilities {
  bool pause = false;
  bool snapshot = false;
  bool kvm = false;  // this host can use hardware acceleration with this backend
  bool tcg = false;  // software emulation
  bool operator==(const Capabilities&) const = default;
};

// What saving a VM's state cost.
struct SaveStats {
  uint64_t bytes = 0;  // the state file's size
  std::chrono::milliseconds took{0};
};

// What a VM's VMM uses of the host, from its cgroup (zeros where a value is unknown).
struct ResourceUsage {
  uint64_t memory_bytes = 0;       // now
  uint64_t memory_peak_bytes = 0;  // the most since the VM started
  uint64_t memory_max_bytes = 0;   // the limit; 0: none
  uint64_t cpu_ns = 0;             // CPU time used since the VM started
  uint64_t pids = 0;               // tasks (QEMU's threads)
  uint64_t pids_max = 0;           // 0: unlimited
  uint64_t oom_kills = 0;
  int64_t uid = -1;  // the VMM's uid; -1 unknown
  // The VMM's I/O weight per control file that applies ("blkio.bfq.weight": 100); empty: none.
  std::map<std::string, uint64_t> io_weights;
  bool operator==(const ResourceUsage&) const = default;
};

// A launched VM. Owns the VMM process: destroying a Vm does NOT kill the process (so hutchd can
// restart and adopt it later); call kill() or shutdown() for that.
class Vm {
 public:
  virtual ~Vm() = default;
  virtual pid_t pid() const = 0;
  // Completes when the VMM process has exited; returns how it ended ("exited with status 1",
  // "killed by signal 9"). The text goes into the box's failure reason.
  virtual asio::awaitable<std::string> waitExit() = 0;
  virtual bool exited() const = 0;
  virtual asio::awaitable<Result<>> pause() = 0;
  virtual asio::awaitable<Result<>> resume() = 0;
  // Writes the paused VM's device state and its private RAM (not RAM in a shared memory file)
  // to `state_file`. The VM stays paused; resume() continues it.
  virtual asio::awaitable<Result<SaveStats>> saveState(std::filesystem::path state_file) {
    (void)state_file;
    co_return fail(Errc::kUnsupported, "This VM cannot save its state");
  }
  // Loads `state_file` into a VM launched with VmSpec::incoming_later; the VM is paused
  // afterwards, ready to resume().
  virtual asio::awaitable<Result<>> loadState(std::filesystem::path state_file) {
    (void)state_file;
    co_return fail(Errc::kUnsupported, "This VM cannot load a saved state");
  }
  // Moves the running VM's writes to `new_top`, an existing qcow2 whose backing file holds
  // everything written so far, which is frozen from then on.
  virtual asio::awaitable<Result<>> switchDisk(std::filesystem::path new_top) {
    (void)new_top;
    co_return fail(Errc::kUnsupported, "This VM cannot switch disks");
  }
  // Completes when the VMM stopped the guest because the host had no space left to write the
  // guest's disk (QEMU's default, werror=enospc: the guest sees no error and goes on at
  // resume(), its write retried), with what the VMM said. Each stop is reported once. Fails when
  // the VM is gone (kUnavailable) or the backend cannot tell (kUnsupported).
  virtual asio::awaitable<Result<std::string>> waitDiskFull() {
    co_return fail(Errc::kUnsupported, "This VM does not report a full host disk");
  }
  // After a hutchd restart: cancels a snapshot an earlier hutchd left half-taken and resumes
  // the VM if it was left paused.
  virtual asio::awaitable<Result<>> settle() { co_return co_await resume(); }
  // The VMM's use of memory, CPU and tasks; kUnsupported when the backend does not track it
  // (an unjailed VM has no cgroup of its own).
  virtual Result<ResourceUsage> usage() const {
    return fail(Errc::kUnsupported, "This VM's resource usage is not tracked (it runs unjailed)");
  }
  // The host end of the guest agent's channel if the backend connected it before the guest ran
  // (a restored guest then never sees its host go away and come back); invalid once taken, or
  // when the backend made none (an adopted VM): connect to VmSpec::agentSocket() instead.
  virtual UniqueFd takeAgentChannel() { return {}; }
  // Ask the VMM to quit now (QMP "quit"; SIGKILL if that fails), then wait until it is gone.
  virtual asio::awaitable<Result<>> kill() = 0;
};

class VmBackend {
 public:
  virtual ~VmBackend() = default;
  virtual std::string name() const = 0;
  virtual Capabilities capabilities() const = 0;
  // Starts the VMM for `spec` and returns once it is running (QMP answered and the guest is
  // executing). The guest agent may not be ready yet: that is the guest link's business.
  // `spec` must stay alive until the returned awaitable completes.
  virtual asio::awaitable<Result<std::unique_ptr<Vm>>> launch(const VmSpec& spec) = 0;
  // Reattaches to a VMM that an earlier hutchd started for `run_dir` and that still runs, e.g.
  // after a hutchd restart. kNotFound if none runs there; kUnsupported if the backend cannot.
  virtual asio::awaitable<Result<std::unique_ptr<Vm>>> adopt(std::filesystem::path run_dir) {
    co_return fail(Errc::kUnsupported,
                   "The " + name() + " backend cannot adopt the VM in " + run_dir.string());
  }
  // Kills, without adopting them, the VMMs this backend started whose run dir lies below `root`
  // and is not in `keep` (lexically normal paths): what an earlier hutchd left running that
  // nothing adopted, such as a warm-pool VM or a fork child caught restoring, whose QMP may not
  // answer, or one whose run dir is already gone. Waits (briefly) for them to exit. Returns the
  // run dirs whose VMM it killed.
  virtual std::vector<std::filesystem::path> killStrays(
      const std::filesystem::path& /*root*/, const std::set<std::filesystem::path>& /*keep*/) {
    return {};
  }
  // Removes what a VMM of `run_dir` keeps on the host beside its run dir (a jail's cgroup), once
  // it is gone and nothing watches it: an orphan's, or a stray's that killStrays killed. A
  // Vm's own exit does this for the VMs it watches. Failures are logged.
  virtual void releaseRunDir(const std::filesystem::path& /*run_dir*/) {}
};

}  // namespace hutch::vmm

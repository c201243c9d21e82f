#include "vmm/qemu/qemu_vm.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <vector>

#include "jail/box_dir.h"
#include "sys/files.h"
#include "vmm/log.h"

namespace hutch::vmm::qemu {

using boost::system::error_code;

// The exit watcher's state, shared with its coroutine so it can outlive the QemuVm (which may be
// dropped while QEMU keeps running) and still reap the process.
struct QemuVm::Watch {
  Watch(const asio::any_io_executor& ex, UniqueFd pidfd, pid_t p, std::filesystem::path dir,
        std::optional<VmJail> j)
      : descriptor(ex, pidfd.release()),
        pid(p),
        run_dir(std::move(dir)),
        pid_file(run_dir / "qemu.pid"),
        jail(std::move(j)) {}

  asio::posix::stream_descriptor descriptor;
  pid_t pid;
  std::filesystem::path run_dir;
  std::filesystem::path pid_file;
  std::optional<VmJail> jail;
  std::optional<sys::ExitStatus> status;
  std::optional<std::string> text;
  std::vector<asio::steady_timer*> waiters;
  std::weak_ptr<QmpClient> qmp;

  int pidfd() { return descriptor.native_handle(); }

  void markExited() {
    if (text) return;
    auto reaped = sys::pidfdTryReap(pidfd());
    status = reaped && *reaped ? **reaped : sys::ExitStatus{};
    text = status->describe();
    if (jail) cleanUpJail();
    vmmLog().info("QEMU pid {} {}", pid, *text);
    // Remove qemu.pid only if it still names this process.
    if (auto content = sys::readFile(pid_file, 64);
        content && *content == std::to_string(pid) + "\n") {
      std::error_code ignored;
      std::filesystem::remove(pid_file, ignored);
    }
    if (auto client = qmp.lock()) client->close();
    for (asio::steady_timer* timer : waiters) timer->cancel();
  }

  // QEMU is gone: say whether the OOM killer did it, then remove its cgroup and give its
  // directory back to root.
  void cleanUpJail() {
    if (jail->cgroup) {
      auto usage = jail->cgroup->usage();
      bool sigkill = status->kind != sys::ExitStatus::Kind::kExited &&
                     (status->kind == sys::ExitStatus::Kind::kUnknown || status->value == SIGKILL);
      if (usage && sigkill) {
        if (auto oom = jail::oomKillReason(*usage, "QEMU")) {
          // "killed by the OOM killer (memory.max 768 MiB)", like describe()'s "killed by ...".
          constexpr std::string_view kPrefix = "QEMU was ";
          text = oom->starts_with(kPrefix) ? oom->substr(kPrefix.size()) : *oom;
        }
      }
      if (auto removed = jail->cgroup->remove(); !removed) {
        vmmLog().warn("QEMU pid {}: {}", pid, removed.error().describe());
      }
    }
    if (auto reclaimed = jail::reclaimBoxDir(run_dir); !reclaimed) {
      vmmLog().warn("QEMU pid {}: {}", pid, reclaimed.error().describe());
    }
  }

  static asio::awaitable<void> run(std::shared_ptr<Watch> self) {
    for (;;) {
      if (sys::pidfdExited(self->pidfd())) {
        self->markExited();
        co_return;
      }
      error_code ec;
      co_await self->descriptor.async_wait(asio::posix::descriptor_base::wait_read,
                                           asio::redirect_error(asio::use_awaitable, ec));
      if (ec == asio::error::operation_aborted) co_return;
    }
  }
};

QemuVm::QemuVm(const asio::any_io_executor& executor, pid_t pid, UniqueFd pidfd,
               std::filesystem::path run_dir, QemuVmOptions options, std::optional<VmJail> jail)
    : pid_(pid), run_dir_(std::move(run_dir)), options_(options), jail_(std::move(jail)) {
  watch_ = std::make_shared<Watch>(executor, std::move(pidfd), pid, run_dir_, jail_);
  asio::co_spawn(executor, Watch::run(watch_), asio::detached);
}

QemuVm::~QemuVm() {
  // QEMU keeps running; the watcher stays to reap it if it is our child.
  if (qmp_) qmp_->close();
}

void QemuVm::attachQmp(std::shared_ptr<QmpClient> qmp) {
  qmp_ = std::move(qmp);
  watch_->qmp = qmp_;
  if (watch_->text && qmp_) qmp_->close();
}

bool QemuVm::exited() const {
  return watch_->text.has_value();
}
std::optional<sys::ExitStatus> QemuVm::exitStatus() const {
  return watch_->status;
}
std::optional<std::string> QemuVm::exitText() const {
  return watch_->text;
}

asio::awaitable<bool> QemuVm::waitExitFor(std::chrono::milliseconds timeout) {
  auto watch = watch_;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!watch->text) {
    asio::steady_timer timer(watch->descriptor.get_executor(), deadline);
    watch->waiters.push_back(&timer);
    error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    watch->waiters.erase(std::find(watch->waiters.begin(), watch->waiters.end(), &timer));
    if (!ec) break;  // the deadline passed
  }
  co_return watch->text.has_value();
}

asio::awaitable<std::string> QemuVm::waitExit() {
  auto watch = watch_;
  while (!watch->text) co_await waitExitFor(std::chrono::hours(24 * 365));
  co_return *watch->text;
}

asio::awaitable<Result<Json>> QemuVm::command(std::string name, Json arguments) {
  if (exited()) {
    co_return fail(Errc::kFailedPrecondition,
                   "The VM's QEMU has exited (" + *watch_->text + "): start the box again");
  }
  if (!qmp_)
    co_return fail(Errc::kUnavailable, "No QMP connection to QEMU pid " + std::to_string(pid_));
  co_return co_await qmp_->execute(std::move(name), std::move(arguments), options_.qmp_timeout);
}

asio::awaitable<void> QemuVm::sleep(std::chrono::milliseconds delay) {
  asio::steady_timer timer(watch_->descriptor.get_executor(), delay);
  error_code ec;
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
}

asio::awaitable<Result<>> QemuVm::passFd(const std::string& name, int fd) {
  if (!qmp_)
    co_return fail(Errc::kUnavailable, "No QMP connection to QEMU pid " + std::to_string(pid_));
  Json args = {{"fdname", name}};
  auto r = co_await qmp_->executeWithFd("getfd", std::move(args), fd, options_.qmp_timeout);
  if (!r) co_return fail(r.error());
  co_return ok();
}

// Both ends of a snapshot must agree: RAM in a shared memory file stays out of the stream.
asio::awaitable<Result<>> QemuVm::ignoreSharedRam() {
  Json caps = {
      {"capabilities", Json::array({{{"capability", "x-ignore-shared"}, {"state", true}}})}};
  auto r = co_await command("migrate-set-capabilities", std::move(caps));
  if (!r) co_return fail(r.error());
  co_return ok();
}

asio::awaitable<Result<SaveStats>> QemuVm::saveState(std::filesystem::path state_file) {
  auto started = std::chrono::steady_clock::now();
  std::string context = "Cannot save the VM's state to " + state_file.string();
  // A template VM's state file is in its run dir, which the VM's uid owns: never write through
  // a name it may have planted.
  if (::unlink(state_file.c_str()) != 0 && errno != ENOENT)
    co_return fail(sysError(context, errno));
  UniqueFd fd(
      ::open(state_file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) co_return fail(sysError(context, errno));
  auto caps = co_await ignoreSharedRam();
  if (!caps) co_return fail(caps.error().withContext(context));
  // The default bandwidth cap (128 MiB/s) would make a save of a busy guest take seconds.
  Json params = {{"max-bandwidth", int64_t{1} << 40}};
  auto limited = co_await command("migrate-set-parameters", std::move(params));
  if (!limited) co_return fail(limited.error().withContext(context));
  auto passed = co_await passFd("hutch-state", fd.get());
  if (!passed) co_return fail(passed.error().withContext(context));
  Json uri = {{"uri", "fd:hutch-state"}};
  auto migrating = co_await command("migrate", std::move(uri));
  if (!migrating) co_return fail(migrating.error().withContext(context));
  auto delay = std::chrono::milliseconds(1);
  for (;;) {
    auto info = co_await command("query-migrate");
    if (!info) co_return fail(info.error().withContext(context));
    std::string status = info->value("status", "");
    if (status == "completed") break;
    if (status == "failed" || status == "cancelled") {
      co_return fail(Errc::kInternal,
                     context + ": migration " + status + ": " +
                         info->value("error-desc", std::string("QEMU gave no reason")));
    }
    co_await sleep(delay);
    delay = std::min(delay * 2, std::chrono::milliseconds(20));
  }
  struct stat st {};
  SaveStats stats;
  if (::fstat(fd.get(), &st) == 0) stats.bytes = static_cast<uint64_t>(st.st_size);
  stats.took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started);
  co_return stats;
}

asio::awaitable<Result<>> QemuVm::loadState(std::filesystem::path state_file) {
  std::string context = "Cannot restore the VM from " + state_file.string();
  UniqueFd fd(::open(state_file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) co_return fail(sysError(context, errno));
  auto caps = co_await ignoreSharedRam();
  if (!caps) co_return fail(caps.error().withContext(context));
  auto passed = co_await passFd("hutch-state", fd.get());
  if (!passed) co_return fail(passed.error().withContext(context));
  Json uri = {{"uri", "fd:hutch-state"}};
  auto incoming = co_await command("migrate-incoming", std::move(uri));
  if (!incoming) co_return fail(incoming.error().withContext(context));
  auto delay = std::chrono::milliseconds(1);
  for (;;) {
    // A stream QEMU cannot load makes it exit: command() then reports the exit.
    auto status = co_await queryStatus();
    if (!status) co_return fail(status.error().withContext(context));
    if (*status != "inmigrate") {
      if (*status != "paused") {
        co_return fail(Errc::kInternal, context + ": QEMU is '" + *status + "' after loading");
      }
      co_return ok();
    }
    co_await sleep(delay);
    delay = std::min(delay * 2, std::chrono::milliseconds(10));
  }
}

asio::awaitable<Result<>> QemuVm::settle() {
  // A migration outlives the hutchd that started it. Resuming while it runs would not last: at
  // its end QEMU stops the VM again (postmigrate) with its disks handed over.
  for (int i = 0;; ++i) {
    auto info = co_await command("query-migrate");
    if (!info) co_return fail(info.error().withContext("Cannot settle the VM"));
    std::string status = info->value("status", "none");
    if (status == "none" || status == "completed" || status == "failed" || status == "cancelled") {
      break;
    }
    if (i == 0) {
      vmmLog().warn("QEMU pid {}: cancelling a snapshot left {} by an earlier hutchd", pid_,
                    status);
      auto cancelled = co_await command("migrate_cancel");
      if (!cancelled) co_return fail(cancelled.error().withContext("Cannot settle the VM"));
    }
    if (i > 500) co_return fail(Errc::kTimeout, "A snapshot left running would not cancel");
    co_await sleep(std::chrono::milliseconds(10));
  }
  auto status = co_await queryStatus();
  if (!status) co_return fail(status.error());
  if (*status == "paused" || *status == "postmigrate") {
    vmmLog().warn("QEMU pid {} was left {}; resuming it", pid_, *status);
    co_return co_await resume();
  }
  co_return ok();
}

namespace {

// The new top of a jailed VM's disk, made by hutchd (root) in the box directory, goes to the box
// before QEMU opens it. The name is checked through a descriptor: the box's uid owns the
// directory and may have put something else there.
Result<> giveNewTop(const std::filesystem::path& file, jail::BoxIds ids) {
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd) return fail(sysError("Cannot open " + file.string(), errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return fail(sysError("Cannot stat " + file.string(), errno));
  if (!S_ISREG(st.st_mode) || st.st_nlink != 1 || st.st_uid != 0) {
    return fail(Errc::kFailedPrecondition,
                file.string() + " is not the file hutchd made: refusing to give it to the box");
  }
  if (::fchown(fd.get(), ids.uid, ids.gid) != 0) {
    return fail(sysError("Cannot give " + file.string() + " to the box", errno));
  }
  return ok();
}

}  // namespace

Result<ResourceUsage> QemuVm::usage() const {
  if (!jail_ || !jail_->cgroup) return Vm::usage();
  auto usage = jail_->cgroup->usage();
  if (!usage) return fail(usage.error().withContext("Cannot read the VM's cgroup"));
  return ResourceUsage{.memory_bytes = usage->memory_current,
                       .memory_peak_bytes = usage->memory_peak,
                       .memory_max_bytes = usage->memory_max,
                       .cpu_ns = usage->cpu_usage_ns,
                       .pids = usage->pids_current,
                       .pids_max = usage->pids_max,
                       .oom_kills = usage->oom_kills,
                       .uid = static_cast<int64_t>(jail_->ids.uid),
                       .io_weights = usage->io_weights};
}

asio::awaitable<Result<>> QemuVm::switchDisk(std::filesystem::path new_top) {
  if (jail_) {
    auto given = giveNewTop(new_top, jail_->ids);
    if (!given) co_return fail(given.error().withContext("Cannot move the VM's disk"));
  }
  Json args = {{"device", "root"},
               {"snapshot-file", new_top.string()},
               {"format", "qcow2"},
               {"mode", "existing"}};
  auto r = co_await command("blockdev-snapshot-sync", std::move(args));
  if (!r) co_return fail(r.error().withContext("Cannot move the VM's disk to " + new_top.string()));
  co_return ok();
}

asio::awaitable<Result<>> QemuVm::pause() {
  auto r = co_await command("stop");
  if (!r) co_return fail(r.error().withContext("Cannot pause the VM"));
  co_return ok();
}

asio::awaitable<Result<>> QemuVm::resume() {
  auto r = co_await command("cont");
  if (!r) co_return fail(r.error().withContext("Cannot resume the VM"));
  co_return ok();
}

asio::awaitable<Result<std::string>> QemuVm::waitDiskFull() {
  if (!qmp_) co_return fail(Errc::kUnsupported, "This VM has no QMP connection");
  std::shared_ptr<QmpClient> qmp = qmp_;
  for (;;) {
    auto event = co_await qmp->waitEvent("BLOCK_IO_ERROR", disk_full_seq_, std::chrono::hours(1));
    if (!event && event.error().code() == Errc::kTimeout) continue;
    if (!event) co_return fail(event.error());
    disk_full_seq_ = event->seq;
    // QEMU's own words, read with care: a QEMU the guest took over could send anything.
    const Json& data = event->data;
    auto text = [&](const char* key) {
      return data.is_object() && data.contains(key) && data[key].is_string()
                 ? data[key].get<std::string>()
                 : std::string();
    };
    const bool nospace = data.is_object() && data.contains("nospace") &&
                         data["nospace"].is_boolean() && data["nospace"].get<bool>();
    if (!nospace || text("action") != "stop") continue;  // reported to the guest, or ignored
    // An event from before a later `cont` is stale: only a VM still stopped for it is stalled.
    auto status = co_await queryStatus();
    if (status && *status != "io-error") continue;
    std::string device = text("node-name").empty() ? text("device") : text("node-name");
    std::string reason = text("reason").empty() ? "No space left on device" : text("reason");
    std::string operation = text("operation").empty() ? "write" : text("operation");
    co_return operation + " of disk " + (device.empty() ? "?" : device) + ": " + reason;
  }
}

asio::awaitable<Result<std::string>> QemuVm::queryStatus() {
  auto r = co_await command("query-status");
  if (!r) co_return fail(r.error());
  if (!r->is_object() || !(*r)["status"].is_string()) {
    co_return fail(Errc::kProtocol, "query-status answer has no status");
  }
  co_return (*r)["status"].get<std::string>();
}

asio::awaitable<Result<>> QemuVm::kill() {
  if (exited()) co_return ok();
  if (qmp_ && qmp_->connected()) {
    // QEMU answers quit and closes the connection; either outcome is fine here.
    auto quit = co_await qmp_->execute("quit", nullptr, options_.quit_grace);
    if (!quit) vmmLog().debug("QMP quit to pid {}: {}", pid_, quit.error().describe());
    if (co_await waitExitFor(options_.quit_grace)) co_return ok();
    vmmLog().warn("QEMU pid {} ignored quit for {} ms; sending SIGKILL", pid_,
                  options_.quit_grace.count());
  }
  co_return co_await killNow();
}

asio::awaitable<Result<>> QemuVm::killNow() {
  if (exited()) co_return ok();
  auto signalled = sys::pidfdSignal(watch_->pidfd(), SIGKILL);
  if (!signalled) co_return fail(signalled.error().withContext("Cannot kill QEMU"));
  if (!co_await waitExitFor(options_.kill_timeout)) {
    co_return fail(Errc::kTimeout, "QEMU pid " + std::to_string(pid_) + " still runs " +
                                       std::to_string(options_.kill_timeout.count()) +
                                       " ms after SIGKILL: check for a hung host (D state)");
  }
  co_return ok();
}

}  // namespace hutch::vmm::qemu

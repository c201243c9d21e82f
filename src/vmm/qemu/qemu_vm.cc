#include "vmm/qemu/qemu_vm.h"

#include <signal.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <vector>

#include "sys/files.h"
#include "vmm/log.h"

namespace hutch::vmm::qemu {

using boost::system::error_code;

// The exit watcher's state, shared with its coroutine so it can outlive the QemuVm (which may be
// dropped while QEMU keeps running) and still reap the process.
struct QemuVm::Watch {
  Watch(const asio::any_io_executor& ex, UniqueFd pidfd, pid_t p, std::filesystem::path file)
      : descriptor(ex, pidfd.release()), pid(p), pid_file(std::move(file)) {}

  asio::posix::stream_descriptor descriptor;
  pid_t pid;
  std::filesystem::path pid_file;
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
               std::filesystem::path run_dir, QemuVmOptions options)
    : pid_(pid), run_dir_(std::move(run_dir)), options_(options) {
  watch_ = std::make_shared<Watch>(executor, std::move(pidfd), pid, run_dir_ / "qemu.pid");
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

asio::awaitable<Result<Json>> QemuVm::command(std::string name) {
  if (exited()) {
    co_return fail(Errc::kFailedPrecondition,
                   "The VM's QEMU has exited (" + *watch_->text + "): start the box again");
  }
  if (!qmp_)
    co_return fail(Errc::kUnavailable, "No QMP connection to QEMU pid " + std::to_string(pid_));
  co_return co_await qmp_->execute(std::move(name), nullptr, options_.qmp_timeout);
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

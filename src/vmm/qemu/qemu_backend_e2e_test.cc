// QemuBackend against a real qemu-system-x86_64. Every test boots a tiny generated PVH kernel
// that only halts, so they run on any host with QEMU; HUTCH_TEST_KERNEL (and optionally
// HUTCH_TEST_INITRD, HUTCH_TEST_ROOTFS: a raw base image for the disk overlay, and
// HUTCH_TEST_CONSOLE_EXPECT: text to wait for in console.log) add a boot of a real kernel.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstring>
#include <fstream>
#include <functional>

#include "sys/files.h"
#include "sys/proc_fs.h"
#include "sys/spawn.h"
#include "vmm/accel.h"
#include "vmm/qemu/qemu_backend.h"

namespace hutch::vmm::qemu {
namespace {

using namespace std::chrono_literals;

// An ELF64 x86-64 image whose only code is `cli; hlt; jmp .-1`, loaded at 1 MiB, with the Xen
// PHYS32_ENTRY note (type 18) that QEMU's PVH loader looks for. Enough for microvm to "run".
std::string haltKernelElf() {
  std::string out;
  auto put = [&](uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  };
  constexpr uint64_t kLoad = 0x100000;
  constexpr uint64_t kNoteOff = 64 + 2 * 56;
  constexpr uint64_t kNoteSize = 12 + 4 + 8;
  constexpr uint64_t kCodeOff = (kNoteOff + kNoteSize + 15) & ~15ull;
  const std::string code = "\xfa\xf4\xeb\xfd";
  // ELF header.
  out +=
      "\x7f"
      "ELF";
  put(2, 1), put(1, 1), put(1, 1), put(0, 1), put(0, 8);  // 64-bit, LE, v1, SysV
  put(2, 2), put(62, 2), put(1, 4), put(kLoad, 8);        // EXEC, x86-64, v1, entry
  put(64, 8), put(0, 8), put(0, 4);                       // phoff, shoff, flags
  put(64, 2), put(56, 2), put(2, 2), put(64, 2), put(0, 2), put(0, 2);
  // PT_LOAD, R+X.
  put(1, 4), put(5, 4), put(kCodeOff, 8), put(kLoad, 8), put(kLoad, 8);
  put(code.size(), 8), put(code.size(), 8), put(0x1000, 8);
  // PT_NOTE.
  put(4, 4), put(4, 4), put(kNoteOff, 8), put(0, 8), put(0, 8);
  put(kNoteSize, 8), put(kNoteSize, 8), put(4, 8);
  // Note: namesz 4, descsz 8, type XEN_ELFNOTE_PHYS32_ENTRY, "Xen\0", entry.
  put(4, 4), put(8, 4), put(18, 4);
  out += std::string("Xen", 4);
  put(kLoad, 8);
  out.resize(kCodeOff, '\0');
  out += code;
  return out;
}

// Pids of QEMU processes serving `run_dir`, from /proc.
std::vector<pid_t> qemusFor(const std::filesystem::path& run_dir) {
  std::vector<pid_t> pids;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    pid_t pid = std::stoi(name);
    auto cmdline = sys::readCmdline(pid);
    if (cmdline && isQemuForRunDir(*cmdline, run_dir)) pids.push_back(pid);
  }
  return pids;
}

bool processGone(pid_t pid) {
  return ::kill(pid, 0) != 0 && errno == ESRCH;
}

class QemuBackendE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!sys::findExecutable("qemu-system-x86_64")) GTEST_SKIP() << "qemu-system-x86_64 missing";
    char tmpl[] = "/tmp/hutch-qemu-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    run_dir_ = dir_ / "run";
    std::filesystem::create_directory(run_dir_);
    ASSERT_TRUE(sys::writeFileAtomic(dir_ / "halt.elf", haltKernelElf()));
    ASSERT_TRUE(makeDisk(dir_ / "disk.qcow2")) << "qemu-img create failed";
    spec_.id = "e2e";
    spec_.cpus = 1;
    spec_.memory_mib = 128;
    spec_.accel = Accel::kTcg;
    spec_.tsc_khz = hostTscKhz();
    spec_.kernel = dir_ / "halt.elf";
    spec_.disk = dir_ / "disk.qcow2";
    spec_.run_dir = run_dir_;
    spec_.guest_params["id"] = "e2e";
    backend_ = std::make_unique<QemuBackend>(ctx_.get_executor());
  }

  void TearDown() override {
    if (dir_.empty()) return;
    for (pid_t pid : qemusFor(run_dir_)) {
      ADD_FAILURE() << "QEMU pid " << pid << " was left running";
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    if (::testing::Test::HasFailure()) {
      for (const char* name : {"qemu.log", "console.log"}) {
        if (auto log = sys::readTail(run_dir_ / name, 8192)) {
          std::printf("--- %s:\n%s\n", name, log->c_str());
        }
      }
    }
    std::filesystem::remove_all(dir_);
  }

  // A blank qcow2, or an overlay over a raw `base`.
  static bool makeDisk(const std::filesystem::path& path, const std::filesystem::path& base = {}) {
    sys::SpawnOptions options;
    options.argv = {"qemu-img", "create", "-q", "-f", "qcow2", path.string(), "64M"};
    if (!base.empty()) {
      options.argv = {"qemu-img", "create",      "-q", "-f",  "qcow2",
                      "-b",       base.string(), "-F", "raw", path.string()};
    }
    auto pid = sys::spawn(options);
    if (!pid) return false;
    int status = 0;
    ::waitpid(*pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }

  // Runs `body` on the loop until it finishes (or `timeout`, a failure).
  void run(std::function<asio::awaitable<void>()> body, std::chrono::seconds timeout = 60s) {
    bool done = false;
    asio::co_spawn(ctx_, body(), [&](std::exception_ptr e) {
      done = true;
      ctx_.stop();
      if (e) std::rethrow_exception(e);
    });
    ctx_.run_for(timeout);
    ctx_.restart();
    EXPECT_TRUE(done) << "the test body did not finish within " << timeout.count() << " s";
  }

  asio::awaitable<void> sleep(std::chrono::milliseconds d) {
    asio::steady_timer timer(ctx_, d);
    co_await timer.async_wait(asio::use_awaitable);
  }

  // launch → running → pause → paused → resume → running → kill → exited.
  asio::awaitable<void> lifecycle() {
    auto launched = co_await backend_->launchQemu(spec_);
    EXPECT_TRUE(launched) << launched.error().describe();
    if (!launched) co_return;
    QemuVm& vm = **launched;
    EXPECT_GT(vm.pid(), 0);
    EXPECT_EQ(*sys::readFile(run_dir_ / "qemu.pid"), std::to_string(vm.pid()) + "\n");
    EXPECT_EQ(*findRunningQemu(run_dir_), vm.pid());
    EXPECT_EQ(::getsid(vm.pid()), vm.pid());  // its own session
    EXPECT_EQ(co_await vm.queryStatus(), Result<std::string>("running"));
    EXPECT_TRUE(co_await vm.pause());
    EXPECT_EQ(co_await vm.queryStatus(), Result<std::string>("paused"));
    EXPECT_TRUE(co_await vm.resume());
    EXPECT_EQ(co_await vm.queryStatus(), Result<std::string>("running"));
    EXPECT_FALSE(vm.exited());
    auto killed = co_await vm.kill();
    EXPECT_TRUE(killed) << killed.error().describe();
    EXPECT_TRUE(vm.exited());
    EXPECT_EQ(co_await vm.waitExit(), "exited with status 0");  // QMP quit is a clean exit
    EXPECT_TRUE(processGone(vm.pid()));
    EXPECT_FALSE(std::filesystem::exists(run_dir_ / "qemu.pid"));
    auto paused = co_await vm.pause();
    EXPECT_FALSE(paused);
    if (!paused) {
      EXPECT_EQ(paused.error().code(), Errc::kFailedPrecondition);
    }
  }

  asio::io_context ctx_;
  std::filesystem::path dir_;
  std::filesystem::path run_dir_;
  VmSpec spec_;
  std::unique_ptr<QemuBackend> backend_;
};

TEST_F(QemuBackendE2eTest, LifecycleUnderTcg) {
  run([&]() { return lifecycle(); });
}

TEST_F(QemuBackendE2eTest, LifecycleUnderKvmWhereAStockKernelCanUseIt) {
  auto decision = decideAccel(probeHost(), std::nullopt);
  ASSERT_TRUE(decision);
  if (decision->accel != Accel::kKvm) GTEST_SKIP() << "no KVM here: " << decision->reason;
  spec_.accel = Accel::kKvm;
  run([&]() { return lifecycle(); });
}

TEST_F(QemuBackendE2eTest, RealKernelBoots) {
  const char* kernel = std::getenv("HUTCH_TEST_KERNEL");
  if (!kernel || !*kernel) {
    GTEST_SKIP() << "set HUTCH_TEST_KERNEL (and HUTCH_TEST_INITRD) to boot a real kernel";
  }
  spec_.kernel = kernel;
  if (const char* initrd = std::getenv("HUTCH_TEST_INITRD")) spec_.initrd = initrd;
  if (const char* rootfs = std::getenv("HUTCH_TEST_ROOTFS"); rootfs && *rootfs) {
    spec_.disk = dir_ / "overlay.qcow2";
    ASSERT_TRUE(makeDisk(spec_.disk, rootfs)) << "cannot make an overlay over " << rootfs;
  }
  spec_.memory_mib = 256;
  const char* expect = std::getenv("HUTCH_TEST_CONSOLE_EXPECT");
  run(
      [&]() -> asio::awaitable<void> {
        if (expect && *expect) {
          // Boot until the console shows `expect`, then run the lifecycle on a fresh VM.
          auto vm = co_await backend_->launchQemu(spec_);
          EXPECT_TRUE(vm) << vm.error().describe();
          if (!vm) co_return;
          bool seen = false;
          for (int i = 0; i < 1200 && !seen && !(*vm)->exited(); ++i) {
            co_await sleep(100ms);
            auto console = sys::readFile(spec_.consoleLog());
            seen = console && console->find(expect) != std::string::npos;
          }
          EXPECT_TRUE(seen) << "console.log never showed '" << expect << "'";
          EXPECT_TRUE(co_await (*vm)->kill());
        }
        co_await lifecycle();
      },
      180s);
}

TEST_F(QemuBackendE2eTest, MissingDiskFailsBeforeStartingQemu) {
  spec_.disk = dir_ / "no-such-disk.qcow2";
  run([&]() -> asio::awaitable<void> {
    auto vm = co_await backend_->launch(spec_);
    EXPECT_FALSE(vm);
    if (!vm) {
      EXPECT_EQ(vm.error().code(), Errc::kNotFound);
      EXPECT_NE(vm.error().message().find("no-such-disk.qcow2 does not exist"), std::string::npos)
          << vm.error().message();
    }
  });
  EXPECT_TRUE(qemusFor(run_dir_).empty());
  EXPECT_FALSE(std::filesystem::exists(run_dir_ / "qemu.pid"));
}

TEST_F(QemuBackendE2eTest, UnreadableDiskFailsWithQemusOwnWords) {
  ASSERT_TRUE(sys::writeFileAtomic(dir_ / "bad.qcow2", "this is not a qcow2 image\n"));
  spec_.disk = dir_ / "bad.qcow2";
  run([&]() -> asio::awaitable<void> {
    auto vm = co_await backend_->launch(spec_);
    EXPECT_FALSE(vm);
    if (!vm) {
      const std::string& message = vm.error().message();
      EXPECT_EQ(vm.error().code(), Errc::kUnavailable);
      EXPECT_NE(message.find("exited with status 1"), std::string::npos) << message;
      EXPECT_NE(message.find("qcow2"), std::string::npos) << message;
      EXPECT_EQ(message.find("--- hutch"), std::string::npos) << message;  // QEMU's words only
    }
  });
  EXPECT_TRUE(qemusFor(run_dir_).empty());
  EXPECT_FALSE(std::filesystem::exists(run_dir_ / "qemu.pid"));
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1);  // reaped, no zombie
}

TEST_F(QemuBackendE2eTest, DeathIsReportedByWaitExit) {
  run([&]() -> asio::awaitable<void> {
    auto vm = co_await backend_->launch(spec_);
    EXPECT_TRUE(vm) << vm.error().describe();
    if (!vm) co_return;
    ::kill((*vm)->pid(), SIGKILL);
    EXPECT_EQ(co_await (*vm)->waitExit(), "killed by signal 9 (SIGKILL)");
    EXPECT_TRUE((*vm)->exited());
    EXPECT_FALSE(co_await (*vm)->resume());
    EXPECT_TRUE(co_await (*vm)->kill());  // already gone: nothing to do
  });
}

TEST_F(QemuBackendE2eTest, SecondLaunchInTheSameRunDirIsRefused) {
  run([&]() -> asio::awaitable<void> {
    auto first = co_await backend_->launch(spec_);
    EXPECT_TRUE(first) << first.error().describe();
    if (!first) co_return;
    auto second = co_await backend_->launch(spec_);
    EXPECT_FALSE(second);
    if (!second) {
      EXPECT_EQ(second.error().code(), Errc::kAlreadyExists);
    }
    EXPECT_TRUE(co_await (*first)->kill());
  });
}

TEST_F(QemuBackendE2eTest, KvmIsRefusedWhereUnusable) {
  QemuBackendOptions options;
  options.kvm_usable = false;
  QemuBackend backend(ctx_.get_executor(), "qemu-system-x86_64", options);
  EXPECT_FALSE(backend.capabilities().kvm);
  EXPECT_TRUE(backend.capabilities().pause);
  spec_.accel = Accel::kKvm;
  run([&]() -> asio::awaitable<void> {
    auto vm = co_await backend.launch(spec_);
    EXPECT_FALSE(vm);
    if (!vm) {
      EXPECT_EQ(vm.error().code(), Errc::kUnsupported);
    }
  });
  EXPECT_TRUE(qemusFor(run_dir_).empty());
}

TEST_F(QemuBackendE2eTest, MissingQemuBinaryIsReported) {
  QemuBackend backend(ctx_.get_executor(), "hutch-no-such-qemu");
  run([&]() -> asio::awaitable<void> {
    auto vm = co_await backend.launch(spec_);
    EXPECT_FALSE(vm);
    if (!vm) {
      EXPECT_NE(vm.error().message().find("hutch-no-such-qemu"), std::string::npos);
    }
  });
}

TEST_F(QemuBackendE2eTest, AdoptsAQemuLeftRunning) {
  pid_t pid = 0;
  run([&]() -> asio::awaitable<void> {
    auto vm = co_await backend_->launch(spec_);
    EXPECT_TRUE(vm) << vm.error().describe();
    if (vm) pid = (*vm)->pid();
    // Dropping the Vm (as a hutchd restart would) leaves QEMU running.
  });
  ASSERT_GT(pid, 0);
  EXPECT_FALSE(processGone(pid));

  // A fresh backend, as after a restart.
  QemuBackend restarted(ctx_.get_executor());
  run([&]() -> asio::awaitable<void> {
    auto missing = co_await restarted.adopt(dir_);
    EXPECT_FALSE(missing);
    if (!missing) {
      EXPECT_EQ(missing.error().code(), Errc::kNotFound);
    }

    auto vm = co_await restarted.adoptQemu(run_dir_);
    EXPECT_TRUE(vm) << vm.error().describe();
    if (!vm) co_return;
    EXPECT_EQ((*vm)->pid(), pid);
    EXPECT_EQ(co_await (*vm)->queryStatus(), Result<std::string>("running"));
    EXPECT_TRUE(co_await (*vm)->pause());
    EXPECT_EQ(co_await (*vm)->queryStatus(), Result<std::string>("paused"));
    EXPECT_TRUE(co_await (*vm)->kill());
    EXPECT_TRUE((*vm)->exited());
  });
  EXPECT_TRUE(processGone(pid));
}

TEST(IsQemuForRunDirTest, MatchesOnlyOurQmpSocket) {
  std::vector<std::string> cmdline = {"/usr/bin/qemu-system-x86_64", "-name", "x", "-qmp",
                                      "unix:/b/r,,1/qmp.sock,server=on,wait=off"};
  EXPECT_TRUE(isQemuForRunDir(cmdline, "/b/r,1"));
  EXPECT_FALSE(isQemuForRunDir(cmdline, "/b/r"));
  cmdline[0] = "/bin/sleep";
  EXPECT_FALSE(isQemuForRunDir(cmdline, "/b/r,1"));
  EXPECT_FALSE(isQemuForRunDir({}, "/b/r,1"));
}

}  // namespace
}  // namespace hutch::vmm::qemu

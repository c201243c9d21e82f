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
#include <sstream>

#include "jail/box_dir.h"
#include "jail/box_ids.h"
#include "sys/files.h"
#include "sys/proc_fs.h"
#include "sys/spawn.h"
#include "vmm/accel.h"
#include "vmm/qemu/qemu_argv.h"
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

// The same backend with the jail on, as hutchd runs it: QEMU through hutch-jail, as its own uid,
// in its own namespaces and cgroup, on the TCG and the KVM launch paths.
class JailedQemuBackendE2eTest : public QemuBackendE2eTest {
 protected:
  void SetUp() override {
    QemuBackendE2eTest::SetUp();
    if (IsSkipped()) return;
    if (::geteuid() != 0) GTEST_SKIP() << "The jail needs root";
    auto cgroups = jail::CgroupHost::detect();
    ASSERT_TRUE(cgroups) << cgroups.error().describe();
    auto prepared = cgroups->prepare();
    ASSERT_TRUE(prepared) << prepared.error().describe();
    options_.jail = QemuJailOptions{.helper = HUTCH_JAIL_BIN, .cgroups = *cgroups};
    // A jailed QEMU writes its disk as the box's uid: it lives in the run dir, as in hutchd.
    std::filesystem::rename(dir_ / "disk.qcow2", run_dir_ / "disk.qcow2");
    spec_.disk = run_dir_ / "disk.qcow2";
    // Clear of the indices a hutchd on this host hands out first.
    spec_.uid_index = jail::kMaxBoxIndex - static_cast<uint32_t>(::getpid() % 1000);
    backend_ = std::make_unique<QemuBackend>(ctx_.get_executor(), "qemu-system-x86_64", options_);
  }

  static std::string status(pid_t pid, const std::string& key) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind(key + ":", 0) == 0) {
        std::string value = line.substr(key.size() + 1);
        return value.substr(value.find_first_not_of(" \t"));
      }
    }
    return "";
  }

  static std::string ns(const std::string& pid, const std::string& name) {
    std::error_code ec;
    return std::filesystem::read_symlink("/proc/" + pid + "/ns/" + name, ec).string();
  }

  // Launches, checks the jail from outside, runs `more`, kills; then checks the cleanup.
  asio::awaitable<void> jailedLifecycle(bool kvm) {
    auto launched = co_await backend_->launchQemu(spec_);
    EXPECT_TRUE(launched) << launched.error().describe();
    if (!launched) co_return;
    QemuVm& vm = **launched;
    auto ids = *jail::boxIds(*spec_.uid_index);
    std::string uid = std::to_string(ids.uid);
    EXPECT_EQ(status(vm.pid(), "Uid"), uid + "\t" + uid + "\t" + uid + "\t" + uid);
    EXPECT_EQ(status(vm.pid(), "CapEff"), "0000000000000000");
    EXPECT_EQ(status(vm.pid(), "NoNewPrivs"), "1");
    EXPECT_EQ(status(vm.pid(), "Seccomp"), "2");
    EXPECT_EQ(status(vm.pid(), "NSpid"), std::to_string(vm.pid()) + "\t1");
    for (const char* name : {"mnt", "pid", "ipc", "uts", "net", "cgroup"}) {
      EXPECT_NE(ns(std::to_string(vm.pid()), name), ns("self", name)) << name;
    }
    // What adoption checks: the pid is QEMU's, with our QMP socket.
    auto cmdline = sys::readCmdline(vm.pid());
    EXPECT_TRUE(cmdline && isQemuForRunDir(*cmdline, run_dir_));
    // The jail shows the run dir and the kernel, nothing of the rest of the test's directory.
    std::filesystem::path root = "/proc/" + std::to_string(vm.pid()) + "/root";
    EXPECT_TRUE(std::filesystem::exists(root / run_dir_.relative_path() / "disk.qcow2"));
    EXPECT_TRUE(std::filesystem::exists(root / spec_.kernel.relative_path()));
    EXPECT_FALSE(std::filesystem::exists(root / "etc/shadow"));
    EXPECT_EQ(std::filesystem::exists(root / "dev/kvm"), kvm);
    EXPECT_EQ(co_await vm.queryStatus(), Result<std::string>("running"));
    auto kvm_state = co_await vm.qmp()->execute("query-kvm", nullptr, 5s);
    EXPECT_TRUE(kvm_state && (*kvm_state)["enabled"] == kvm)
        << (kvm_state ? kvm_state->dump() : "");
    auto usage = vm.usage();
    EXPECT_TRUE(usage) << usage.error().describe();
    if (usage) {
      EXPECT_EQ(usage->uid, static_cast<int64_t>(ids.uid));
      uint64_t overhead = jail::kVmmOverheadMib + (kvm ? 0 : AccelOption{}.tcg_tb_size_mib);
      EXPECT_EQ(usage->memory_max_bytes, (spec_.memory_mib + overhead) << 20);
      EXPECT_EQ(usage->pids_max, 128U + spec_.cpus);
      EXPECT_GT(usage->pids, 1U);  // QEMU's threads
      EXPECT_GT(usage->memory_bytes, 0U);
    }
    auto killed = co_await vm.kill();
    EXPECT_TRUE(killed) << killed.error().describe();
    EXPECT_EQ(co_await vm.waitExit(), "exited with status 0");
    // Gone: the cgroup removed, the run dir root's again.
    for (const jail::CgroupDir& dir : vm.jail()->cgroup->dirs) {
      EXPECT_FALSE(std::filesystem::exists(dir.path)) << dir.path;
    }
    struct stat st {};
    EXPECT_EQ(::stat(run_dir_.c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 0U);
    EXPECT_EQ(::stat(spec_.disk.c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 0U);
  }

  QemuBackendOptions options_;
};

TEST_F(JailedQemuBackendE2eTest, LifecycleUnderTcg) {
  run([&]() -> asio::awaitable<void> {
    co_await jailedLifecycle(false);
    co_await lifecycle();  // and again, as a restart of the same box would
  });
}

// The KVM launch path: /dev/kvm in the jail, QEMU's KVM accelerator enabled. On a host whose
// /dev/kvm is PVM (no vmx/svm) hutchd picks TCG for stock kernels; the launch path itself still
// works there with the halt kernel.
TEST_F(JailedQemuBackendE2eTest, LaunchUnderKvm) {
  if (!std::filesystem::exists("/dev/kvm")) GTEST_SKIP() << "no /dev/kvm";
  spec_.accel = Accel::kKvm;
  // First unjailed: where QEMU cannot run a KVM guest at all (a PVM /dev/kvm rejects -cpu host's
  // MSRs), the jailed launch must fail the same way, not because of the jail.
  QemuBackendOptions unjailed;
  unjailed.kvm_usable = true;
  QemuBackend plain(ctx_.get_executor(), "qemu-system-x86_64", unjailed);
  std::string plain_error;
  run([&]() -> asio::awaitable<void> {
    auto vm = co_await plain.launch(spec_);
    if (vm) {
      EXPECT_TRUE(co_await (*vm)->kill());
    } else {
      plain_error = vm.error().message();
    }
  });
  options_.kvm_usable = true;
  backend_ = std::make_unique<QemuBackend>(ctx_.get_executor(), "qemu-system-x86_64", options_);
  if (plain_error.empty()) {
    run([&]() { return jailedLifecycle(true); });
    return;
  }
  std::string jailed_error;
  run([&]() -> asio::awaitable<void> {
    auto vm = co_await backend_->launch(spec_);
    EXPECT_FALSE(vm);
    if (!vm) jailed_error = vm.error().message();
  });
  auto qemuWords = [](const std::string& message) {
    size_t at = message.find("qemu-system-x86_64: ");
    return at == std::string::npos ? message : message.substr(at, message.find('\n', at) - at);
  };
  EXPECT_EQ(qemuWords(jailed_error), qemuWords(plain_error));
  GTEST_SKIP() << "QEMU cannot run a KVM guest on this host, jailed or not: "
               << qemuWords(plain_error);
}

TEST_F(JailedQemuBackendE2eTest, ABackingFileOutsideTheAllowedPlacesIsRefused) {
  // An overlay whose header names a file hutch never made (here: the test's own halt kernel as
  // a raw disk) must not be bound into the jail.
  ASSERT_TRUE(makeDisk(run_dir_ / "tampered.qcow2", spec_.kernel));
  spec_.disk = run_dir_ / "tampered.qcow2";
  spec_.backing_files = {jail::globLiteral(dir_) + "/layers/*.qcow2"};
  run([&]() -> asio::awaitable<void> {
    auto vm = co_await backend_->launch(spec_);
    EXPECT_FALSE(vm);
    if (!vm) {
      EXPECT_EQ(vm.error().code(), Errc::kFailedPrecondition) << vm.error().describe();
      EXPECT_NE(vm.error().message().find("halt.elf"), std::string::npos) << vm.error().message();
    }
  });
  EXPECT_TRUE(qemusFor(run_dir_).empty());
  // Allowed, the same disk starts.
  spec_.backing_files = {jail::globLiteral(dir_) + "/*.elf"};
  run([&]() -> asio::awaitable<void> {
    auto vm = co_await backend_->launch(spec_);
    EXPECT_TRUE(vm) << vm.error().describe();
    if (vm) {
      EXPECT_TRUE(co_await (*vm)->kill());
    }
  });
}

// A hutchd restart: the jailed QEMU (the pid is QEMU's, not hutch-jail's) is adopted with its
// uid and cgroup, and cleaned up after when it exits.
TEST_F(JailedQemuBackendE2eTest, AdoptsAJailedQemu) {
  pid_t pid = 0;
  run([&]() -> asio::awaitable<void> {
    auto vm = co_await backend_->launch(spec_);
    EXPECT_TRUE(vm) << vm.error().describe();
    if (vm) pid = (*vm)->pid();
  });
  ASSERT_GT(pid, 0);
  QemuBackend restarted(ctx_.get_executor(), "qemu-system-x86_64", options_);
  run([&]() -> asio::awaitable<void> {
    auto vm = co_await restarted.adoptQemu(run_dir_);
    EXPECT_TRUE(vm) << vm.error().describe();
    if (!vm) co_return;
    EXPECT_EQ((*vm)->pid(), pid);
    auto usage = (*vm)->usage();
    EXPECT_TRUE(usage) << usage.error().describe();
    if (usage) {
      EXPECT_EQ(usage->uid, static_cast<int64_t>(jail::boxIds(*spec_.uid_index)->uid));
      EXPECT_GT(usage->pids, 1U);
    }
    EXPECT_TRUE(co_await (*vm)->kill());
  });
  EXPECT_TRUE(processGone(pid));
  struct stat st {};
  EXPECT_EQ(::stat(run_dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0U);
}

// A restored box maps a snapshot's RAM file that is root's, 0444 and bound read-only: QEMU 7.2
// opens mem-path O_RDWR, which the preload library turns into O_RDONLY for that one file.
TEST_F(JailedQemuBackendE2eTest, MapsAReadOnlyMemoryFileCopyOnWrite) {
  std::filesystem::create_directories(dir_ / "snapshot");
  std::filesystem::path memory = dir_ / "snapshot" / "memory";
  {
    std::ofstream out(memory);
    out << std::string(1 << 20, 'x');
  }
  std::filesystem::resize_file(memory, spec_.memory_mib << 20);
  ASSERT_TRUE(sys::freezeFile(memory));
  spec_.ram = GuestRam::kMappedFile;
  spec_.memory_file = memory;
  run([&]() -> asio::awaitable<void> {
    auto vm = co_await backend_->launchQemu(spec_);
    EXPECT_TRUE(vm) << vm.error().describe();
    if (!vm) co_return;
    EXPECT_EQ(co_await (*vm)->queryStatus(), Result<std::string>("running"));
    EXPECT_TRUE(co_await (*vm)->kill());
  });
  auto content = sys::readFile(memory, 1 << 30);
  ASSERT_TRUE(content);
  EXPECT_EQ(content->substr(0, 4), "xxxx");  // never written through
}

TEST(IsQemuForRunDirTest, MatchesOnlyOurConsoleLog) {
  std::vector<std::string> cmdline = {"/usr/bin/qemu-system-x86_64",
                                      "-name",
                                      "x",
                                      "-chardev",
                                      "file,id=console,path=/b/r,,1/console.log,append=on",
                                      "-chardev",
                                      "socket,id=qmp,fd=5,server=on,wait=off"};
  EXPECT_TRUE(isQemuForRunDir(cmdline, "/b/r,1"));
  EXPECT_FALSE(isQemuForRunDir(cmdline, "/b/r"));
  EXPECT_FALSE(isQemuForRunDir(cmdline, "/b/r,1/x"));
  cmdline[0] = "/bin/sleep";
  EXPECT_FALSE(isQemuForRunDir(cmdline, "/b/r,1"));
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

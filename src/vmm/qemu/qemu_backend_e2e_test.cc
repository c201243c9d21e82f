// QemuBackend against a real qemu-system-x86_64. Every test boots a tiny generated PVH kernel
// that only halts, so they run on any host with QEMU; HUTCH_TEST_KERNEL (and optionally
// HUTCH_TEST_INITRD, HUTCH_TEST_ROOTFS: a raw base image for the disk overlay, and
// HUTCH_TEST_CONSOLE_EXPECT: text to wait for in console.log) add a boot of a real kernel.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <sstream>
#include <thread>

#include "jail/box_dir.h"
#include "jail/box_ids.h"
#include "sys/files.h"
#include "sys/proc_fs.h"
#include "sys/spawn.h"
#include "sys/unix_socket.h"
#include "vmm/accel.h"
#include "vmm/qemu/halt_kernel.h"
#include "vmm/qemu/qemu_argv.h"
#include "vmm/qemu/qemu_backend.h"

namespace hutch::vmm::qemu {
namespace {

using namespace std::chrono_literals;

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

  // Launches spec_ on backend_ and leaves it running: its pid, or 0 (a failure) if it did not.
  pid_t launchAndLeave() {
    pid_t pid = 0;
    run([&]() -> asio::awaitable<void> {
      auto vm = co_await backend_->launch(spec_);
      EXPECT_TRUE(vm) << vm.error().describe();
      if (vm) pid = (*vm)->pid();
    });
    return pid;
  }

  // Adopting `run_dir` with `backend` is refused with a message holding `why` (and `code`, if
  // given); a QEMU adopted by mistake is killed.
  void expectAdoptionRefused(QemuBackend& backend, const std::filesystem::path& run_dir,
                             const std::string& why, std::optional<Errc> code = std::nullopt) {
    run([&]() -> asio::awaitable<void> {
      auto vm = co_await backend.adoptQemu(run_dir);
      EXPECT_FALSE(vm);
      if (vm) {
        co_await (*vm)->kill();
        co_return;
      }
      if (code) {
        EXPECT_EQ(vm.error().code(), *code) << vm.error().describe();
      }
      EXPECT_NE(vm.error().message().find(why), std::string::npos) << vm.error().message();
    });
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
  // Dropping the Vm (as a hutchd restart would) leaves QEMU running.
  pid_t pid = launchAndLeave();
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
    // The cgroup is named after the run dir: a name of its own, as a box id is.
    std::filesystem::path unique = dir_ / ("vm-" + dir_.filename().string());
    std::filesystem::rename(run_dir_, unique);
    run_dir_ = unique;
    spec_.run_dir = run_dir_;
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
    EXPECT_EQ(status(vm.pid(), "Seccomp_filters"), "2");  // hutch-jail's and QEMU's -sandbox
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
    // /dev: the defaults, and /dev/kvm only on the KVM path.
    std::vector<std::string> dev;
    for (const auto& entry : std::filesystem::directory_iterator(root / "dev")) {
      dev.push_back(entry.path().filename().string());
    }
    std::sort(dev.begin(), dev.end());
    std::vector<std::string> want = {"fd",    "full",   "null",    "random", "stderr",
                                     "stdin", "stdout", "urandom", "zero"};
    if (kvm) want.insert(want.begin() + 2, "kvm");
    EXPECT_EQ(dev, want);
    EXPECT_EQ(co_await vm.queryStatus(), Result<std::string>("running"));
    auto kvm_state = co_await vm.qmp()->execute("query-kvm", nullptr, 5s);
    EXPECT_TRUE(kvm_state) << kvm_state.error().describe();
    if (kvm_state) {
      EXPECT_EQ((*kvm_state)["enabled"], kvm) << kvm_state->dump();
      if (kvm) {
        EXPECT_EQ((*kvm_state)["present"], true) << kvm_state->dump();
      }
    }
    // Its cgroup is the run dir's, where adoption looks for it.
    EXPECT_TRUE(vm.jail() && vm.jail()->cgroup);
    if (vm.jail() && vm.jail()->cgroup) {
      EXPECT_EQ(vm.jail()->cgroup, *options_.jail->cgroups.boxCgroup(vmCgroupName(run_dir_)));
      EXPECT_TRUE(*vm.jail()->cgroup->holds(vm.pid()));
    }
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

// The launch paths, one body: TCG, and KVM wherever /dev/kvm can be opened. On this host's PVM
// /dev/kvm the halt kernel runs too (hutchd picks TCG there only because stock guest kernels do
// not): QEMU gets /dev/kvm in its jail and the KVM accelerator is on.
class JailedLaunchPathTest : public JailedQemuBackendE2eTest,
                             public ::testing::WithParamInterface<Accel> {};

TEST_P(JailedLaunchPathTest, Lifecycle) {
  const bool kvm = GetParam() == Accel::kKvm;
  if (kvm) {
    HostProbe host = probeHost();
    if (!host.dev_kvm_exists) GTEST_SKIP() << "This host has no /dev/kvm";
    if (!host.dev_kvm_usable)
      GTEST_SKIP() << "/dev/kvm cannot be used here: " << host.dev_kvm_error;
    spec_.accel = Accel::kKvm;
    options_.kvm_usable = true;  // what hutchd does when told --accel kvm
    backend_ = std::make_unique<QemuBackend>(ctx_.get_executor(), "qemu-system-x86_64", options_);
  }
  run([&]() -> asio::awaitable<void> {
    co_await jailedLifecycle(kvm);
    co_await lifecycle();  // and again, as a restart of the same box would
  });
}

INSTANTIATE_TEST_SUITE_P(Accel, JailedLaunchPathTest, ::testing::Values(Accel::kTcg, Accel::kKvm),
                         [](const auto& info) { return std::string(accelName(info.param)); });

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
  pid_t pid = launchAndLeave();
  ASSERT_GT(pid, 0);
  QemuBackend restarted(ctx_.get_executor(), "qemu-system-x86_64", options_);
  run([&]() -> asio::awaitable<void> {
    auto vm = co_await restarted.adoptQemu(run_dir_);
    EXPECT_TRUE(vm) << vm.error().describe();
    if (!vm) co_return;
    EXPECT_EQ((*vm)->pid(), pid);
    EXPECT_EQ((*vm)->jail()->cgroup, *options_.jail->cgroups.boxCgroup(vmCgroupName(run_dir_)));
    auto usage = (*vm)->usage();
    EXPECT_TRUE(usage) << usage.error().describe();
    if (usage) {
      EXPECT_EQ(usage->uid, static_cast<int64_t>(jail::boxIds(*spec_.uid_index)->uid));
      EXPECT_GT(usage->pids, 1U);
      EXPECT_EQ(usage->pids_max, 128U + spec_.cpus);
    }
    EXPECT_TRUE(co_await (*vm)->kill());
  });
  EXPECT_TRUE(processGone(pid));
  struct stat st {};
  EXPECT_EQ(::stat(run_dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0U);
}

// Rewrites `from` as `to` (same length) in the argument block of `pid`, through /proc/PID/mem:
// what a taken-over QEMU can do to its own command line without any privilege.
bool rewriteCmdline(pid_t pid, const std::string& from, const std::string& to) {
  if (from.size() != to.size()) return false;
  auto stat = sys::readFile("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return false;
  // Fields after the command name: state is field 3; arg_start and arg_end are 48 and 49.
  std::istringstream fields(stat->substr(stat->rfind(')') + 2));
  std::vector<std::string> rest{std::istream_iterator<std::string>(fields), {}};
  if (rest.size() < 47) return false;
  uint64_t start = std::stoull(rest[45]);
  uint64_t end = std::stoull(rest[46]);
  UniqueFd mem(::open(("/proc/" + std::to_string(pid) + "/mem").c_str(), O_RDWR | O_CLOEXEC));
  if (!mem) return false;
  std::string block(end - start, '\0');
  if (::pread(mem.get(), block.data(), block.size(), static_cast<off_t>(start)) !=
      static_cast<ssize_t>(block.size())) {
    return false;
  }
  bool changed = false;
  for (size_t at = block.find(from); at != std::string::npos; at = block.find(from, at + 1)) {
    block.replace(at, from.size(), to);
    changed = true;
  }
  return changed && ::pwrite(mem.get(), block.data(), block.size(), static_cast<off_t>(start)) ==
                        static_cast<ssize_t>(block.size());
}

// After a restart, which box a jailed QEMU is comes from hutchd's records (the run dir's owner
// and cgroup), checked against the kernel's word, never from the QEMU's own command line.
TEST_F(JailedQemuBackendE2eTest, AdoptionDoesNotTrustACmdlineThatLies) {
  pid_t pid = launchAndLeave();
  ASSERT_GT(pid, 0);
  QemuBackend restarted(ctx_.get_executor(), "qemu-system-x86_64", options_);

  // 1. Its -name now names another VM: adoption still finds its own cgroup (the run dir's).
  ASSERT_TRUE(rewriteCmdline(pid, "-name" + std::string(1, '\0') + spec_.id + std::string(1, '\0'),
                             "-name" + std::string(1, '\0') + "e2x" + std::string(1, '\0')));
  ASSERT_EQ((*sys::readCmdline(pid))[2], "e2x");
  run([&]() -> asio::awaitable<void> {
    auto vm = co_await restarted.adoptQemu(run_dir_);
    EXPECT_TRUE(vm) << vm.error().describe();
    if (!vm) co_return;
    EXPECT_EQ((*vm)->jail()->cgroup, *options_.jail->cgroups.boxCgroup(vmCgroupName(run_dir_)));
    auto usage = (*vm)->usage();
    EXPECT_TRUE(usage) << usage.error().describe();  // "e2x" has no cgroup
  });

  // 2. It claims the run dir of another box (same length, so the bytes fit), whose qemu.pid
  // names it and whose QMP socket leads to it: the worst case. Its uid is not that box's.
  std::filesystem::path other = dir_ / ("vx-" + dir_.filename().string());
  ASSERT_EQ(other.string().size(), run_dir_.string().size());
  std::filesystem::create_directory(other);
  auto other_ids = jail::boxIds(*spec_.uid_index - 1);
  ASSERT_TRUE(jail::prepareBoxDir(other, *other_ids));
  ASSERT_TRUE(sys::writeFileAtomic(other / "qemu.pid", std::to_string(pid) + "\n"));
  std::filesystem::create_symlink(run_dir_ / "qmp.sock", other / "qmp.sock");
  ASSERT_TRUE(rewriteCmdline(pid, run_dir_.string(), other.string()));
  ASSERT_TRUE(isQemuForRunDir(*sys::readCmdline(pid), other));
  expectAdoptionRefused(restarted, other,
                        "not the run dir's owner " + std::to_string(other_ids->uid),
                        Errc::kFailedPrecondition);
  // With the same uid (a stale owner), the cgroup still tells them apart.
  ASSERT_EQ(::chown(other.c_str(), jail::boxIds(*spec_.uid_index)->uid,
                    jail::boxIds(*spec_.uid_index)->gid),
            0);
  expectAdoptionRefused(restarted, other, "is not in the run dir's cgroup",
                        Errc::kFailedPrecondition);
  EXPECT_FALSE(processGone(pid));  // refused, not killed
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);  // our child: the backend that launched it is gone
  EXPECT_TRUE(processGone(pid));
  EXPECT_TRUE(jail::reclaimBoxDir(other));
  ASSERT_TRUE(jail::reclaimBoxDir(run_dir_));
  std::filesystem::remove_all(other);
  auto cgroup = options_.jail->cgroups.boxCgroup(vmCgroupName(run_dir_));
  EXPECT_TRUE(cgroup->remove());
}

// A connection waiting on `listener`, or none: never blocks.
int acceptNow(int listener) {
  ::fcntl(listener, F_SETFL, ::fcntl(listener, F_GETFL) | O_NONBLOCK);
  return ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
}

// The QMP socket hutchd made is root's, in a directory the box's uid owns: what that uid can do
// to it (rename it away, put a symlink to another QEMU's socket or a socket of its own in its
// place) makes adoption refuse, and nothing connects to the decoy.
TEST_F(JailedQemuBackendE2eTest, AdoptionConnectsOnlyToTheSocketHutchdMade) {
  pid_t pid = launchAndLeave();
  ASSERT_GT(pid, 0);
  struct stat st {};
  ASSERT_EQ(::lstat((run_dir_ / "qmp.sock").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0U);
  ASSERT_EQ(::lstat((run_dir_ / "agent.sock").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0U);
  auto decoy = sys::listenUnix(dir_ / "decoy.sock");
  ASSERT_TRUE(decoy) << decoy.error().describe();
  std::filesystem::rename(run_dir_ / "qmp.sock", run_dir_ / "moved.sock");
  std::filesystem::create_symlink(dir_ / "decoy.sock", run_dir_ / "qmp.sock");
  QemuBackend restarted(ctx_.get_executor(), "qemu-system-x86_64", options_);
  auto refused = [&](const std::string& why) {
    expectAdoptionRefused(restarted, run_dir_, why);
    UniqueFd got(acceptNow(decoy->get()));
    EXPECT_FALSE(got) << "adoption connected to the decoy";
  };
  refused("is a symlink");
  // A socket of the box's own uid in its place.
  std::filesystem::remove(run_dir_ / "qmp.sock");
  auto own = sys::listenUnix(run_dir_ / "qmp.sock");
  ASSERT_TRUE(own);
  auto ids = jail::boxIds(*spec_.uid_index);
  ASSERT_EQ(::chown((run_dir_ / "qmp.sock").c_str(), ids->uid, ids->gid), 0);
  refused("a socket of uid " + std::to_string(ids->uid));
  // Put back, it is adopted.
  std::filesystem::remove(run_dir_ / "qmp.sock");
  std::filesystem::rename(run_dir_ / "moved.sock", run_dir_ / "qmp.sock");
  run([&]() -> asio::awaitable<void> {
    auto vm = co_await restarted.adoptQemu(run_dir_);
    EXPECT_TRUE(vm) << vm.error().describe();
    if (vm) {
      auto killed = co_await (*vm)->kill();
      EXPECT_TRUE(killed);
    }
  });
  EXPECT_TRUE(processGone(pid));
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

TEST(QemuRunDirTest, IsTheConsoleLogsOrTheQmpSocketsDirectory) {
  EXPECT_EQ(qemuRunDir({"/usr/bin/qemu-system-x86_64", "-chardev",
                        "file,id=console,path=/s/boxes/a,,b/console.log,append=on"}),
            "/s/boxes/a,b");
  EXPECT_EQ(qemuRunDir({"qemu-system-x86_64", "-qmp", "unix:/s/snapshots/t/qmp.sock,server=on"}),
            "/s/snapshots/t");
  // Another chardev's file, another program, no such option: no run dir.
  EXPECT_EQ(qemuRunDir({"qemu-system-x86_64", "-chardev", "file,id=console,path=/s/x.log"}), "");
  EXPECT_EQ(qemuRunDir({"/bin/sleep", "-chardev", "file,id=console,path=/s/b/console.log"}), "");
  EXPECT_EQ(qemuRunDir({"qemu-system-x86_64", "-chardev"}), "");
  EXPECT_EQ(qemuRunDir({}), "");
}

// A process that looks like a QEMU of `run_dir` to /proc (argv[0] and the console chardev), but
// is Python sleeping: killStrays must tell them apart by run dir alone.
pid_t decoyQemu(const std::filesystem::path& run_dir, const std::string& program) {
  std::string chardev =
      "file,id=console,path=" + escapeOptionValue((run_dir / "console.log").string()) +
      ",append=on";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/usr/bin/python3", program.c_str(), "-c", "import time; time.sleep(600)", "-chardev",
            chardev.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

TEST(KillStraysTest, KillsOnlyQemusBelowTheRootThatNothingKeeps) {
  boost::asio::io_context ctx;
  QemuBackend backend(ctx.get_executor());
  const std::filesystem::path root = "/tmp/hutch-kill-strays-" + std::to_string(::getpid());
  const pid_t stray = decoyQemu(root / "boxes" / "pool-vm", "qemu-system-x86_64");
  const pid_t kept = decoyQemu(root / "boxes" / "adopted", "qemu-system-x86_64");
  const pid_t outside = decoyQemu("/tmp/another-hutchd/boxes/x", "qemu-system-x86_64");
  const pid_t not_qemu = decoyQemu(root / "boxes" / "y", "sleeper");
  // Their command lines are in place once exec has happened.
  for (pid_t pid : {stray, kept, outside, not_qemu}) {
    for (int i = 0; i < 500; ++i) {
      auto cmdline = sys::readCmdline(pid);
      if (cmdline && cmdline->size() > 3) break;
      std::this_thread::sleep_for(10ms);
    }
  }
  auto killed = backend.killStrays(root, {(root / "boxes" / "adopted").lexically_normal()});
  EXPECT_EQ(killed, std::vector<std::filesystem::path>{root / "boxes" / "pool-vm"});
  int status = 0;
  ASSERT_EQ(::waitpid(stray, &status, 0), stray);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  for (pid_t pid : {kept, outside, not_qemu}) {
    EXPECT_EQ(::waitpid(pid, &status, WNOHANG), 0) << "pid " << pid << " was killed";
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
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

// Real QEMU under the jail, started the way hutchd starts it: the command line from
// QemuArgv::forSpec and the JailSpec from the backend's jailSpecFor (so neither can drift from
// hutchd's), a tiny halting PVH kernel stopped before it runs (-S) so no guest image is needed,
// on the TCG and the KVM launch paths. QMP is driven from outside the jail, at the socket path
// hutchd uses.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <thread>

#include "harness.h"
#include "jail/box_dir.h"
#include "sys/files.h"
#include "sys/proc_fs.h"
#include "sys/run.h"
#include "sys/spawn.h"
#include "sys/unix_socket.h"
#include "vmm/accel.h"
#include "vmm/qemu/halt_kernel.h"
#include "vmm/qemu/qemu_argv.h"
#include "vmm/qemu/qemu_backend.h"

namespace hutch::jail::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using vmm::Accel;
using vmm::VmSpec;
using vmm::qemu::QemuArgv;

// A blocking QMP client, enough for a test.
class Qmp {
 public:
  bool connect(const fs::path& socket, std::chrono::seconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      fd_ = UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
      sockaddr_un addr{};
      addr.sun_family = AF_UNIX;
      std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", socket.c_str());
      if (::connect(fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
        greeting_ = next();
        return greeting_.contains("QMP");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  json execute(const std::string& command, const json& arguments = nullptr) {
    json request = {{"execute", command}};
    if (!arguments.is_null()) request["arguments"] = arguments;
    std::string line = request.dump() + "\n";
    if (::write(fd_.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      return json{{"error", "write failed"}};
    }
    for (;;) {
      json reply = next();
      if (!reply.contains("event")) return reply;
    }
  }
  const json& greeting() const { return greeting_; }

 private:
  json next() {
    for (;;) {
      size_t nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return json::parse(line, nullptr, false);
      }
      pollfd pfd{fd_.get(), POLLIN, 0};
      if (::poll(&pfd, 1, 10000) <= 0) return json{{"error", "timeout"}};
      char buf[4096];
      ssize_t n = ::read(fd_.get(), buf, sizeof buf);
      if (n <= 0) return json{{"error", "closed"}};
      buffer_.append(buf, static_cast<size_t>(n));
    }
  }
  UniqueFd fd_;
  std::string buffer_;
  json greeting_;
};

std::string procStatus(pid_t pid, const std::string& key) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      std::string value = line.substr(key.size() + 1);
      return value.substr(value.find_first_not_of(" \t"));
    }
  }
  return "";
}

// The names in a directory, sorted and joined by spaces.
std::string listing(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : " ") + name;
  return ec ? "(" + ec.message() + ")" : out;
}

class QemuJailTest : public JailTest {
 protected:
  void SetUp() override {
    JailTest::SetUp();
    if (IsSkipped()) return;
    auto qemu = sys::findExecutable("qemu-system-x86_64");
    if (!qemu) GTEST_SKIP() << "qemu-system-x86_64 is not installed";
    qemu_ = *qemu;
    host_ = vmm::probeHost();
    halt_kernel_ = root_ / "images" / "t1" / "halt.elf";
    ASSERT_TRUE(sys::writeFileAtomic(halt_kernel_, vmm::qemu::haltKernelElf()));
    ::chmod(halt_kernel_.c_str(), 0644);
  }

  // A VM as hutchd describes one: its run dir (named uniquely: the cgroup is named after it)
  // holding a blank qcow2 disk, the halt kernel, file-backed RAM.
  VmSpec vmSpec(Accel accel, uint64_t memory_mib = 64) {
    VmSpec vm;
    vm.id = "jailed";
    vm.cpus = 1;
    vm.memory_mib = memory_mib;
    vm.accel = accel;
    vm.kernel = halt_kernel_;
    vm.run_dir = root_ / "boxes" /
                 ("jailtest-" + std::to_string(::getpid()) + "-q" + std::to_string(next_index_));
    fs::create_directories(vm.run_dir);
    vm.disk = vm.run_dir / "disk.qcow2";
    EXPECT_TRUE(
        sys::runCapture({"qemu-img", "create", "-q", "-f", "qcow2", vm.disk.string(), "64M"}));
    vm.ram = vmm::GuestRam::kSharedFile;
    vm.memory_file = vm.run_dir / "memory";
    vm.tsc_khz = vmm::hostTscKhz();
    return vm;
  }

  // The JailSpec hutchd would hand hutch-jail for `vm`, with the box dir given to the box's ids.
  JailSpec jailSpec(const VmSpec& vm) {
    auto ids = boxIds(61000 + next_index_++);
    EXPECT_TRUE(ids);
    EXPECT_TRUE(prepareBoxDir(vm.run_dir, *ids));
    vmm::qemu::QemuJailOptions options{.helper = HUTCH_JAIL_BIN, .cgroups = *cgroups_};
    auto js = vmm::qemu::jailSpecFor(vm, *ids, options, qemu_);
    EXPECT_TRUE(js) << js.error().describe();
    if (!js) return JailSpec{};
    made_.push_back(*js->cgroup);
    return *js;
  }

  // hutchd's QEMU argv for `vm` (the -sandbox included), stopped before the guest runs.
  QemuArgv qemuArgv(const VmSpec& vm) {
    QemuArgv argv = QemuArgv::forSpec(vm, qemu_, host_.isPvm());
    argv.extra = {"-S"};
    return argv;
  }

  // Starts `argv` (forSpec's) in the jail the way hutchd does: with QMP and agent sockets
  // listening at the VM's socket paths, passed as the descriptors the argv names.
  Running startQemu(const JailSpec& spec, const VmSpec& vm, const std::vector<std::string>& argv) {
    auto qmp = sys::listenUnix(vm.qmpSocket());
    auto agent = sys::listenUnix(vm.agentSocket());
    EXPECT_TRUE(qmp && agent);
    if (!qmp || !agent) return Running{};
    return start(spec, argv, CLONE_NEWPID,
                 {{qmp->get(), QemuArgv::kQmpFd}, {agent->get(), QemuArgv::kAgentFd}});
  }

  fs::path qemu_;
  vmm::HostProbe host_;
  fs::path halt_kernel_;
};

// The launch paths: TCG, and KVM wherever /dev/kvm can be opened (this host's PVM /dev/kvm too:
// QEMU creates the VM and its vCPU there; only a stock guest kernel would not run).
class QemuAccelTest : public QemuJailTest, public ::testing::WithParamInterface<Accel> {};

TEST_P(QemuAccelTest, QemuStartsInTheJailOnThisLaunchPath) {
  const Accel accel = GetParam();
  const bool kvm = accel == Accel::kKvm;
  if (kvm && !host_.dev_kvm_exists) GTEST_SKIP() << "This host has no /dev/kvm";
  if (kvm && !host_.dev_kvm_usable) {
    GTEST_SKIP() << "/dev/kvm cannot be used here: " << host_.dev_kvm_error;
  }
  VmSpec vm = vmSpec(accel);
  JailSpec spec = jailSpec(vm);
  ASSERT_EQ(spec.devices, kvm ? std::vector<fs::path>{"/dev/kvm"} : std::vector<fs::path>{});
  Running qemu = startQemu(spec, vm, qemuArgv(vm).render());

  Qmp qmp;
  if (!qmp.connect(vm.qmpSocket(), std::chrono::seconds(30))) {
    ::kill(qemu.pid, SIGKILL);
    Finished done = wait(std::move(qemu));
    FAIL() << "QEMU (" << vmm::accelName(accel) << ") did not answer on QMP in the jail: status "
           << done.status << ": " << done.err;
  }
  EXPECT_GE(qmp.greeting()["QMP"]["version"]["qemu"]["major"].get<int>(), 7);
  EXPECT_TRUE(qmp.execute("qmp_capabilities").contains("return"));
  json status = qmp.execute("query-status");
  EXPECT_EQ(status["return"]["status"], "prelaunch") << status.dump();
  json kvm_state = qmp.execute("query-kvm");
  EXPECT_EQ(kvm_state["return"]["enabled"], kvm) << kvm_state.dump();
  if (kvm) {
    EXPECT_EQ(kvm_state["return"]["present"], true) << kvm_state.dump();
  }

  // The process hutchd holds is QEMU itself, jailed as asked.
  auto cmdline = sys::readCmdline(qemu.pid);
  ASSERT_TRUE(cmdline);
  EXPECT_EQ(cmdline->front(), qemu_.string());
  std::string id = std::to_string(spec.uid);
  EXPECT_EQ(procStatus(qemu.pid, "Uid"), id + "\t" + id + "\t" + id + "\t" + id);
  EXPECT_EQ(procStatus(qemu.pid, "NoNewPrivs"), "1");
  EXPECT_EQ(procStatus(qemu.pid, "CapEff"), "0000000000000000");
  EXPECT_EQ(procStatus(qemu.pid, "NSpid"), std::to_string(qemu.pid) + "\t1");
  // Two filters: hutch-jail's and QEMU's own -sandbox (QemusOwnSandboxStopsASpawn: it is QEMU's).
  EXPECT_EQ(procStatus(qemu.pid, "Seccomp"), "2");
  EXPECT_EQ(procStatus(qemu.pid, "Seccomp_filters"), "2");
  // Its /dev: the defaults, and /dev/kvm only on the KVM path.
  fs::path root = "/proc/" + std::to_string(qemu.pid) + "/root";
  EXPECT_EQ(listing(root / "dev"), kvm ? "fd full kvm null random stderr stdin stdout urandom zero"
                                       : "fd full null random stderr stdin stdout urandom zero");
  EXPECT_TRUE(fs::exists(root / vm.kernel.relative_path()));
  EXPECT_FALSE(fs::exists(root / "etc/shadow"));
  // What QEMU made in the box dir is the box's, and reachable from the host at the same path.
  struct stat st {};
  ASSERT_EQ(::stat(vm.memory_file.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, spec.uid);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), vm.memory_mib << 20);
  EXPECT_TRUE(fs::exists(vm.agentSocket()));
  EXPECT_TRUE(fs::exists(vm.consoleLog()));
  auto usage = spec.cgroup->usage();
  ASSERT_TRUE(usage) << usage.error().describe();
  uint64_t overhead = kVmmOverheadMib + (kvm ? 0 : vmm::qemu::AccelOption{}.tcg_tb_size_mib);
  EXPECT_EQ(usage->memory_max, (vm.memory_mib + overhead) << 20);
  EXPECT_GT(usage->memory_current, uint64_t{1} << 20);
  EXPECT_GE(usage->pids_current, 2U);  // QEMU's threads count
  EXPECT_EQ(usage->oom_kills, 0U);

  // cont would run the halt kernel; quit is the clean end, as after a guest poweroff.
  EXPECT_TRUE(qmp.execute("quit").contains("return"));
  Finished done = wait(std::move(qemu));
  EXPECT_TRUE(done.exited(0)) << "status " << done.status << ": " << done.err;
}

INSTANTIATE_TEST_SUITE_P(Accel, QemuAccelTest, ::testing::Values(Accel::kTcg, Accel::kKvm),
                         [](const auto& info) { return std::string(vmm::accelName(info.param)); });

// QEMU's own -sandbox took effect, not just its argument: with it, a spawn (what an `exec:`
// migration does: fork and exec /bin/sh) kills QEMU with SIGSYS; without it, in the same jail,
// the same migration completes and QEMU carries only hutch's filter.
TEST_F(QemuJailTest, QemusOwnSandboxStopsASpawn) {
  for (bool sandbox : {true, false}) {
    SCOPED_TRACE(sandbox ? "with -sandbox" : "without -sandbox");
    VmSpec vm = vmSpec(Accel::kTcg);
    JailSpec spec = jailSpec(vm);
    QemuArgv argv = qemuArgv(vm);
    if (!sandbox) argv.sandbox.reset();
    Running qemu = startQemu(spec, vm, argv.render());
    Qmp qmp;
    ASSERT_TRUE(qmp.connect(vm.qmpSocket(), std::chrono::seconds(30)));
    ASSERT_TRUE(qmp.execute("qmp_capabilities").contains("return"));
    EXPECT_EQ(procStatus(qemu.pid, "Seccomp_filters"), sandbox ? "2" : "1");
    json migrate = qmp.execute("migrate", {{"uri", "exec:cat > /dev/null"}});
    if (sandbox) {
      Finished done = wait(std::move(qemu));
      EXPECT_TRUE(done.killedBy(SIGSYS)) << "status " << done.status << ": " << done.err;
      continue;
    }
    EXPECT_TRUE(migrate.contains("return")) << migrate.dump();
    std::string state;
    for (int i = 0; i < 200 && state != "completed" && state != "failed"; ++i) {
      state = qmp.execute("query-migrate")["return"].value("status", "");
      if (state != "completed") std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_EQ(state, "completed");
    EXPECT_TRUE(qmp.execute("quit").contains("return"));
    Finished done = wait(std::move(qemu));
    EXPECT_TRUE(done.exited(0)) << "status " << done.status << ": " << done.err;
  }
}

TEST_F(QemuJailTest, SigtermStopsJailedQemu) {
  VmSpec vm = vmSpec(Accel::kTcg);
  JailSpec spec = jailSpec(vm);
  Running qemu = startQemu(spec, vm, qemuArgv(vm).render());
  Qmp qmp;
  ASSERT_TRUE(qmp.connect(vm.qmpSocket(), std::chrono::seconds(30)));
  // SIGTERM reaches the namespace's PID 1 because QEMU handles it (a default action would not).
  // The QMP greeting comes from QEMU's monitor thread, possibly before the main thread installed
  // its SIGTERM handler; an answered query-status means the main loop runs. (As PID 1 of its
  // namespace, QEMU ignores a SIGTERM that arrives before it has a handler; hutchd stops QEMU with
  // QMP quit, then SIGKILL, which always arrives.)
  ASSERT_TRUE(qmp.execute("qmp_capabilities").contains("return"));
  ASSERT_TRUE(qmp.execute("query-status").contains("return"));
  EXPECT_NE(std::stoull(procStatus(qemu.pid, "SigCgt"), nullptr, 16) & (1ULL << (SIGTERM - 1)), 0U);
  ASSERT_EQ(::kill(qemu.pid, SIGTERM), 0);
  Finished done = wait(std::move(qemu));
  EXPECT_TRUE(done.exited(0) || done.killedBy(SIGTERM)) << done.status << done.err;
  auto usage = spec.cgroup->usage();
  ASSERT_TRUE(usage);
  EXPECT_FALSE(oomKillReason(*usage, "QEMU"));
}

TEST_F(QemuJailTest, OomKilledQemuIsReportedWithThatReason) {
  VmSpec vm = vmSpec(Accel::kTcg);
  JailSpec spec = jailSpec(vm);
  // Far below what QEMU needs to start: the kernel's OOM killer ends it inside its cgroup.
  spec.limits.memory_max = 12 << 20;
  Finished done = wait(startQemu(spec, vm, qemuArgv(vm).render()));
  ASSERT_TRUE(done.killedBy(SIGKILL)) << "status " << done.status << ": " << done.err;
  auto usage = spec.cgroup->usage();
  ASSERT_TRUE(usage) << usage.error().describe();
  EXPECT_GE(usage->oom_kills, 1U);
  // What hutchd shows as the box's failure reason instead of "killed by signal 9".
  EXPECT_EQ(oomKillReason(*usage, "QEMU"), "QEMU was killed by the OOM killer (memory.max 12 MiB)");
}

// A real guest boot in the jail when an image is given (scripts/test.sh sets these): the kernel,
// initrd and base disk read-only, the overlay over it in the box dir.
TEST_F(QemuJailTest, BootsARealGuestUnderTcg) {
  const char* kernel = std::getenv("HUTCH_TEST_KERNEL");
  const char* initrd = std::getenv("HUTCH_TEST_INITRD");
  const char* rootfs = std::getenv("HUTCH_TEST_ROOTFS");
  if (kernel == nullptr || initrd == nullptr || rootfs == nullptr) {
    GTEST_SKIP()
        << "set HUTCH_TEST_KERNEL, HUTCH_TEST_INITRD and HUTCH_TEST_ROOTFS to boot a guest";
  }
  const char* expect_env = std::getenv("HUTCH_TEST_CONSOLE_EXPECT");
  std::string expect = expect_env != nullptr ? expect_env : "hutch-agent";
  VmSpec vm = vmSpec(Accel::kTcg, 256);
  vm.kernel = kernel;
  vm.initrd = initrd;
  fs::remove(vm.disk);
  ASSERT_TRUE(sys::runCapture(
      {"qemu-img", "create", "-q", "-f", "qcow2", "-b", rootfs, "-F", "raw", vm.disk.string()}));
  vm.backing_files = {globLiteral(fs::canonical(rootfs))};
  JailSpec spec = jailSpec(vm);
  QemuArgv argv = QemuArgv::forSpec(vm, qemu_, host_.isPvm());
  auto started = std::chrono::steady_clock::now();
  Running qemu = startQemu(spec, vm, argv.render());
  Qmp qmp;
  ASSERT_TRUE(qmp.connect(vm.qmpSocket(), std::chrono::seconds(30)));
  ASSERT_TRUE(qmp.execute("qmp_capabilities").contains("return"));
  std::string console;
  while (console.find(expect) == std::string::npos &&
         std::chrono::steady_clock::now() - started < std::chrono::seconds(120)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::ifstream log(vm.consoleLog());
    console.assign(std::istreambuf_iterator<char>(log), {});
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_NE(console.find(expect), std::string::npos) << console;
  std::printf("jailed TCG boot: '%s' on the console after %.2f s\n", expect.c_str(), seconds);
  EXPECT_EQ(qmp.execute("query-status")["return"]["status"], "running");
  auto usage = spec.cgroup->usage();
  ASSERT_TRUE(usage);
  std::printf("jailed TCG boot: memory.current %llu MiB, peak %llu MiB, pids %llu\n",
              static_cast<unsigned long long>(usage->memory_current >> 20),
              static_cast<unsigned long long>(usage->memory_peak >> 20),
              static_cast<unsigned long long>(usage->pids_current));
  EXPECT_TRUE(qmp.execute("quit").contains("return"));
  Finished done = wait(std::move(qemu));
  EXPECT_TRUE(done.exited(0)) << "status " << done.status << ": " << done.err;
}

}  // namespace
}  // namespace hutch::jail::test

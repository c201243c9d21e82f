// Real QEMU under the jail, with QEMU's own -sandbox on top of hutch's filter: the command line
// shape hutchd uses (microvm, file-backed RAM in the box dir, QMP and agent sockets, console
// log), on the TCG and the KVM launch paths. QMP is driven from outside the jail, at the same
// socket path hutchd uses.
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
#include "sys/proc_fs.h"
#include "sys/run.h"
#include "sys/spawn.h"

namespace hutch::jail::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

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
  json execute(const std::string& command) {
    std::string line = json{{"execute", command}}.dump() + "\n";
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

class QemuJailTest : public JailTest {
 protected:
  void SetUp() override {
    JailTest::SetUp();
    if (IsSkipped()) return;
    auto qemu = sys::findExecutable("qemu-system-x86_64");
    if (!qemu) GTEST_SKIP() << "qemu-system-x86_64 is not installed";
    qemu_ = *qemu;
  }

  // hutchd's argv shape (vmm/qemu/qemu_argv.cc), stopped before the guest runs (-S) so no kernel
  // is needed, plus the -sandbox the lead adds.
  std::vector<std::string> qemuArgv(const fs::path& box, const std::string& accel) {
    return {
        qemu_.string(),
        "-name",
        "jailed",
        "-nodefaults",
        "-no-user-config",
        "-nographic",
        "-no-reboot",
        "-machine",
        "microvm,memory-backend=mem",
        "-accel",
        accel == "tcg" ? "tcg,tb-size=64" : "kvm",
        "-smp",
        "1",
        "-m",
        "64M",
        "-object",
        "memory-backend-file,id=mem,size=64M,mem-path=" + (box / "memory").string() + ",share=on",
        "-device",
        "virtio-serial-device",
        "-chardev",
        "socket,id=agent,path=" + (box / "agent.sock").string() + ",server=on,wait=off",
        "-device",
        "virtserialport,chardev=agent,name=hutch.agent",
        "-object",
        "rng-random,id=rng0,filename=/dev/urandom",
        "-device",
        "virtio-rng-device,rng=rng0",
        "-chardev",
        "file,id=console,path=" + (box / "console.log").string() + ",append=on",
        "-serial",
        "chardev:console",
        "-qmp",
        "unix:" + (box / "qmp.sock").string() + ",server=on,wait=off",
        "-S",
        "-sandbox",
        "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"};
  }

  fs::path qemu_;
};

// The launch paths: TCG, and KVM where the host has /dev/kvm.
class QemuAccelTest : public QemuJailTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(QemuAccelTest, QemuStartsAndAnswersQmpInsideTheJail) {
  const std::string accel = GetParam();
  JailSpec spec = specFor("a");
  if (accel == "kvm") {
    if (!fs::exists("/dev/kvm")) GTEST_SKIP() << "No /dev/kvm on this host";
    spec.devices.push_back("/dev/kvm");
  }
  spec.paths.push_back({qemu_, BindPath::Access::kReadOnly, true});  // under /usr anyway
  spec.limits = CgroupLimits::forVm(1, 64, kVmmOverheadMib);
  fs::path box = boxDir("a");
  Running qemu = start(spec, qemuArgv(box, accel));

  Qmp qmp;
  bool connected = qmp.connect(box / "qmp.sock", std::chrono::seconds(30));
  if (!connected) {
    ::kill(qemu.pid, SIGKILL);
    Finished done = wait(std::move(qemu));
    if (accel == "kvm") {
      GTEST_SKIP() << "QEMU with KVM did not start in the jail (PVM /dev/kvm?): " << done.err;
    }
    FAIL() << "QEMU did not answer on QMP: status " << done.status << ": " << done.err;
  }
  EXPECT_EQ(qmp.greeting()["QMP"]["version"]["qemu"]["major"].get<int>() >= 7, true);
  EXPECT_TRUE(qmp.execute("qmp_capabilities").contains("return"));
  json status = qmp.execute("query-status");
  EXPECT_EQ(status["return"]["status"], "prelaunch") << status.dump();
  json kvm = qmp.execute("query-kvm");
  EXPECT_EQ(kvm["return"]["enabled"].get<bool>(), accel == "kvm") << kvm.dump();

  // The process hutchd holds is QEMU itself: what it adopts by cmdline, jailed as asked.
  auto cmdline = sys::readCmdline(qemu.pid);
  ASSERT_TRUE(cmdline);
  EXPECT_EQ(cmdline->front(), qemu_.string());
  EXPECT_EQ(procStatus(qemu.pid, "Uid"), [&] {
    std::string id = std::to_string(spec.uid);
    return id + "\t" + id + "\t" + id + "\t" + id;
  }());
  EXPECT_EQ(procStatus(qemu.pid, "NoNewPrivs"), "1");
  EXPECT_EQ(procStatus(qemu.pid, "Seccomp"), "2");
  EXPECT_EQ(procStatus(qemu.pid, "CapEff"), "0000000000000000");
  EXPECT_EQ(procStatus(qemu.pid, "NSpid"), std::to_string(qemu.pid) + "\t1");
  // What QEMU made in the box dir is the box's, and reachable from the host at the same path.
  struct stat st {};
  ASSERT_EQ(::stat((box / "memory").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, spec.uid);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), uint64_t{64} << 20);
  EXPECT_TRUE(fs::exists(box / "agent.sock"));
  EXPECT_TRUE(fs::exists(box / "console.log"));
  auto usage = spec.cgroup->usage();
  ASSERT_TRUE(usage) << usage.error().describe();
  EXPECT_GT(usage->memory_current, uint64_t{1} << 20);
  EXPECT_GE(usage->pids_current, 2U);  // QEMU's threads count
  EXPECT_EQ(usage->oom_kills, 0U);

  // cont would need a kernel; quit is the clean end, as after a guest poweroff.
  EXPECT_TRUE(qmp.execute("quit").contains("return"));
  Finished done = wait(std::move(qemu));
  EXPECT_TRUE(done.exited(0)) << "status " << done.status << ": " << done.err;
}

TEST_F(QemuJailTest, SigtermStopsJailedQemu) {
  const std::string accel = "tcg";
  JailSpec spec = specFor("a");
  fs::path box = boxDir("a");
  Running qemu = start(spec, qemuArgv(box, accel));
  Qmp qmp;
  ASSERT_TRUE(qmp.connect(box / "qmp.sock", std::chrono::seconds(30)));
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
  const std::string accel = "tcg";
  JailSpec spec = specFor("a");
  // Far below what QEMU needs to start: the kernel's OOM killer ends it inside its cgroup.
  spec.limits.memory_max = 12 << 20;
  Finished done = run(spec, qemuArgv(boxDir("a"), accel));
  ASSERT_TRUE(done.killedBy(SIGKILL)) << "status " << done.status << ": " << done.err;
  auto usage = spec.cgroup->usage();
  ASSERT_TRUE(usage) << usage.error().describe();
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
  fs::path box = boxDir("a");
  fs::path overlay = box / "disk.qcow2";
  fs::remove(overlay);
  ASSERT_TRUE(sys::runCapture(
      {"qemu-img", "create", "-q", "-f", "qcow2", "-b", rootfs, "-F", "raw", overlay.string()}));
  JailSpec spec = specFor("a");  // gives the overlay to the box's uid
  spec.paths.push_back({kernel, BindPath::Access::kReadOnly, false});
  spec.paths.push_back({initrd, BindPath::Access::kReadOnly, false});
  auto chain = qcow2BackingChain(overlay);
  ASSERT_TRUE(chain) << chain.error().describe();
  ASSERT_EQ(chain->size(), 1U);
  for (const fs::path& layer : *chain) {
    spec.paths.push_back({layer, BindPath::Access::kReadOnly, false});
  }
  spec.limits = CgroupLimits::forVm(1, 256, kVmmOverheadMib + 64);

  uint64_t tsc_khz = 0;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("cpu MHz", 0) == 0) {
      tsc_khz = static_cast<uint64_t>(std::stod(line.substr(line.find(':') + 1)) * 1000);
      break;
    }
  }
  std::vector<std::string> argv = qemuArgv(box, "tcg");
  argv.erase(std::find(argv.begin(), argv.end(), "-S"));
  for (std::string& arg : argv) {
    if (arg == "64M") arg = "256M";
    if (arg.rfind("memory-backend-file", 0) == 0) {
      arg = "memory-backend-file,id=mem,size=256M,mem-path=" + (box / "memory").string() +
            ",share=on";
    }
  }
  std::string append = "console=ttyS0 root=/dev/vda rw quiet panic=-1 tsc=reliable";
  if (tsc_khz != 0) append += " tsc_early_khz=" + std::to_string(tsc_khz);
  argv.insert(argv.end(), {"-kernel", kernel, "-initrd", initrd, "-append", append, "-drive",
                           "id=root,file=" + overlay.string() + ",format=qcow2,if=none", "-device",
                           "virtio-blk-device,drive=root"});
  auto started = std::chrono::steady_clock::now();
  Running qemu = start(spec, argv);
  Qmp qmp;
  ASSERT_TRUE(qmp.connect(box / "qmp.sock", std::chrono::seconds(30)));
  ASSERT_TRUE(qmp.execute("qmp_capabilities").contains("return"));
  std::string console;
  while (console.find(expect) == std::string::npos &&
         std::chrono::steady_clock::now() - started < std::chrono::seconds(120)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::ifstream log(box / "console.log");
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

INSTANTIATE_TEST_SUITE_P(Accel, QemuAccelTest, ::testing::Values("tcg", "kvm"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace hutch::jail::test

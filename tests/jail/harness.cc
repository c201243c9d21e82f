#include "harness.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "jail/box_dir.h"
#include "sys/spawn.h"

namespace hutch::jail::test {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// Ids well away from what a real hutchd on this host would hand out first.
constexpr uint32_t kTestIndexBase = 61000;

void writeFile(const fs::path& path, const std::string& text, mode_t mode) {
  std::ofstream(path) << text;
  ::chmod(path.c_str(), mode);
}

std::string drain(int fd) {
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  return text;
}

}  // namespace

void JailTest::SetUp() {
  if (::geteuid() != 0) GTEST_SKIP() << "The jail tests need root (namespaces, cgroups, mounts)";
  char tmpl[] = "/tmp/hutch-jail-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  root_ = tmpl;
  ::chmod(root_.c_str(), 0755);
  fs::create_directories(root_ / "boxes");
  fs::create_directories(root_ / "images" / "t1");
  fs::create_directories(root_ / "run");
  db_ = root_ / "hutch.db";
  writeFile(db_, "SECRET DATABASE", 0600);
  template_ = root_ / "images" / "t1" / "vmlinux";
  writeFile(template_, "KERNEL", 0644);  // templates are world-readable
  for (const char* box : {"a", "b"}) {
    fs::create_directories(boxDir(box));
    writeFile(boxDir(box) / "disk.qcow2", std::string("SECRET DISK OF ") + box, 0600);
  }
  socket_ = root_ / "run" / "hutchd.sock";
  listener_ = UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", socket_.c_str());
  ASSERT_EQ(::bind(listener_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener_.get(), 4), 0);
  ::chmod(socket_.c_str(), 0666);  // even a world-writable socket must stay out of reach

  auto host = CgroupHost::detect();
  ASSERT_TRUE(host) << host.error().describe();
  auto prepared = host->prepare();
  ASSERT_TRUE(prepared) << prepared.error().describe();
  cgroups_ = *host;
}

void JailTest::TearDown() {
  for (pid_t pid : started_) {
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  for (const BoxCgroup& cgroup : made_) {
    auto removed = cgroup.remove();
    EXPECT_TRUE(removed) << removed.error().describe();
  }
  if (!root_.empty()) fs::remove_all(root_);
}

JailSpec JailTest::specFor(const std::string& box) {
  auto ids = boxIds(kTestIndexBase + next_index_++);
  EXPECT_TRUE(ids);
  EXPECT_TRUE(prepareBoxDir(boxDir(box), *ids));
  JailSpec spec;
  spec.name = "test-" + box;
  spec.uid = ids->uid;
  spec.gid = ids->gid;
  spec.cwd = boxDir(box);
  spec.paths = {{boxDir(box), BindPath::Access::kReadWrite, false},
                {template_, BindPath::Access::kReadOnly, false},
                {HUTCH_JAIL_PROBE, BindPath::Access::kReadOnly, true}};
  auto cgroup = cgroups_->boxCgroup("jailtest-" + std::to_string(::getpid()) + "-" + box + "-" +
                                    std::to_string(next_index_));
  EXPECT_TRUE(cgroup);
  spec.cgroup = *cgroup;
  made_.push_back(*cgroup);
  spec.limits = CgroupLimits::forVm(1, 256, kVmmOverheadMib);
  return spec;
}

Running JailTest::start(const JailSpec& spec, const std::vector<std::string>& program,
                        unsigned long clone_flags, const std::vector<sys::FdMapping>& extra_fds) {
  Running running;
  auto memfd = specMemfd(spec);
  EXPECT_TRUE(memfd) << memfd.error().describe();
  int out[2];
  int err[2];
  EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
  EXPECT_EQ(::pipe2(err, O_CLOEXEC), 0);
  sys::SpawnOptions options;
  options.argv = jailCommand(HUTCH_JAIL_BIN, 3, program);
  options.fds = {{memfd->get(), 3}, {out[1], 1}, {err[1], 2}};
  options.fds.insert(options.fds.end(), extra_fds.begin(), extra_fds.end());
  options.new_session = true;
  options.clone_flags = clone_flags;
  auto pid = sys::spawn(options);
  ::close(out[1]);
  ::close(err[1]);
  running.out = UniqueFd(out[0]);
  running.err = UniqueFd(err[0]);
  EXPECT_TRUE(pid) << pid.error().describe();
  if (pid) {
    running.pid = *pid;
    started_.push_back(*pid);
  }
  return running;
}

Finished JailTest::wait(Running running, std::chrono::seconds timeout) {
  Finished done;
  if (running.pid < 0) return done;
  auto deadline = Clock::now() + timeout;
  int status = 0;
  for (;;) {
    pid_t got = ::waitpid(running.pid, &status, WNOHANG);
    if (got == running.pid) break;
    if (Clock::now() > deadline) {
      ADD_FAILURE() << "pid " << running.pid << " still runs after " << timeout.count() << " s";
      ::kill(running.pid, SIGKILL);
      ::waitpid(running.pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::erase(started_, running.pid);
  done.status = status;
  done.out = drain(running.out.get());
  done.err = drain(running.err.get());
  return done;
}

Finished JailTest::probe(const JailSpec& spec, const std::vector<std::string>& args) {
  std::vector<std::string> program = {HUTCH_JAIL_PROBE};
  program.insert(program.end(), args.begin(), args.end());
  return run(spec, program);
}

std::string JailTest::readUntil(Running& running, const std::string& text,
                                std::chrono::seconds timeout) {
  std::string seen;
  auto deadline = Clock::now() + timeout;
  while (seen.find(text) == std::string::npos && Clock::now() < deadline) {
    pollfd pfd{running.out.get(), POLLIN, 0};
    if (::poll(&pfd, 1, 50) <= 0) continue;
    char buf[4096];
    ssize_t n = ::read(running.out.get(), buf, sizeof buf);
    if (n <= 0) break;
    seen.append(buf, static_cast<size_t>(n));
  }
  return seen;
}

std::string lineValue(const std::string& text, const std::string& prefix) {
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(at, end - at);
    if (line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
    at = end + 1;
  }
  return "(no line " + prefix + ")";
}

std::string ownNamespace(const std::string& ns) {
  char target[128] = {};
  ssize_t n = ::readlink(("/proc/self/ns/" + ns).c_str(), target, sizeof target - 1);
  return n > 0 ? target : "?";
}

}  // namespace hutch::jail::test

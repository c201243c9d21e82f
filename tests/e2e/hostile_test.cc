// A hostile guest (issue 18.2): a box whose root replaced hutch-agent with a PID 1 that speaks the
// protocol wrongly on purpose (hostile_agent.cc), while another box works. What is proven, for
// each misbehaviour: hutchd stays up and answers, the normal box is unaffected, hutchd's memory
// and descriptors stay bounded, a call to the hostile box returns (with an error saying what
// happened) instead of hanging, and `rm -f` removes the box and its QEMU.
//
// The hostile binary is installed the way an attacker with root in a box would: copied in, named
// in /etc/hutch/init, the box stopped. That box's disk is then frozen as the template "hostile",
// so every test boots its own hostile box from it with one cold boot (--no-snapshots: no
// template snapshot, whose readiness check a hostile agent would not pass). A box whose name
// contains "nohello" never gets a handshake; every other one is served trick by trick: the
// command an exec names (argv[0]) is the misbehaviour.
//
// Every CLI call is bounded (BoundedCli): a call still running at its limit is killed and
// reported as a hang, never waited for forever. The limits only stop hangs; nothing here
// asserts how long anything takes. The figures (RSS, descriptors, durations) are printed with
// a "[hostile]" prefix.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "base/unique_fd.h"
#include "harness.h"
#include "sys/spawn.h"

namespace hutch::e2e {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Only guards against hangs: a cold boot under TCG takes seconds, and a call that hutchd must
// time out itself (a handshake, an exec that never starts) takes its timeout.
constexpr auto kCallLimit = 180s;
// hutchd's own deadline for a box's handshake, short so that the test of a guest that never
// answers does not wait the default 120 s.
constexpr int kBootTimeoutSeconds = 40;

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// /proc/PID/status VmRSS in KiB (0 if gone).
long rssKiB(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("VmRSS:")) return std::stol(line.substr(6));
  }
  return 0;
}

int fdCount(pid_t pid) {
  int n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

// The CLI as a child whose end is awaited with a limit: `hung` if it had to be killed.
class BoundedCli {
 public:
  BoundedCli(const Daemon& d, const std::vector<std::string>& args, const std::string& input = {})
      : t0_(Clock::now()) {
    static int counter = 0;
    const std::string base = fmt::format("hostile-{}", counter++);
    out_ = d.dir() / (base + ".out");
    err_ = d.dir() / (base + ".err");
    const auto in = d.dir() / (base + ".in");
    {
      std::ofstream f(in, std::ios::binary);
      f << input;
    }
    UniqueFd in_fd(::open(in.c_str(), O_RDONLY | O_CLOEXEC));
    UniqueFd out_fd(::open(out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    UniqueFd err_fd(::open(err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    std::vector<std::string> argv{std::string(HUTCH_BIN_DIR) + "/hutch", "--socket", d.socket()};
    argv.insert(argv.end(), args.begin(), args.end());
    auto pid =
        sys::spawn({.argv = argv, .fds = {{in_fd.get(), 0}, {out_fd.get(), 1}, {err_fd.get(), 2}}});
    if (!pid) {
      ADD_FAILURE() << "cannot start hutch: " << pid.error().describe();
      return;
    }
    pid_ = *pid;
    std::filesystem::remove(in);
  }
  ~BoundedCli() { kill(); }
  BoundedCli(const BoundedCli&) = delete;
  BoundedCli& operator=(const BoundedCli&) = delete;

  bool running() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) != pid_) return true;
    finish(status);
    return false;
  }
  std::string output() const { return readFile(out_); }

  // Waits up to `limit`; kills the CLI if it is still running then.
  CommandResult wait(std::chrono::seconds limit = kCallLimit) {
    const auto deadline = Clock::now() + limit;
    while (running() && Clock::now() < deadline) std::this_thread::sleep_for(50ms);
    if (pid_ > 0) {
      hung_ = true;
      kill();
    }
    result_.out = readFile(out_);
    result_.err = readFile(err_);
    return result_;
  }
  // Ends the CLI (as a user's ^C would, then harder).
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 40 && running(); ++i) std::this_thread::sleep_for(50ms);
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    finish(status);
  }
  bool hung() const { return hung_; }
  double seconds() const { return seconds_; }

 private:
  void finish(int status) {
    result_.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    seconds_ = secondsSince(t0_);
    pid_ = -1;
  }

  Clock::time_point t0_;
  std::filesystem::path out_, err_;
  pid_t pid_ = -1;
  bool hung_ = false;
  double seconds_ = 0;
  CommandResult result_;
};

struct Call {
  CommandResult r;
  bool hung = false;
  double seconds = 0;
};

Call call(const Daemon& d, const std::vector<std::string>& args, const std::string& input = {},
          std::chrono::seconds limit = kCallLimit) {
  BoundedCli cli(d, args, input);
  Call c;
  c.r = cli.wait(limit);
  c.hung = cli.hung();
  c.seconds = cli.seconds();
  return c;
}

class HostileGuestTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    daemon_ = new Daemon({"--no-snapshots", "--boot-timeout", std::to_string(kBootTimeoutSeconds)});
    const Daemon& d = *daemon_;
    // The normal box that must not notice anything.
    auto good = call(d, {"run", "--name", "good"});
    ASSERT_EQ(good.r.exit_code, 0) << good.r.err;
    // The attacker's box: the hostile binary becomes its init. The initramfs honours
    // /etc/hutch/init since the systemd template (issue 16.1); an image built before that
    // ignores it, so the systemd image is the seed when there is one.
    const bool systemd = std::getenv("HUTCH_TEST_SYSTEMD_IMAGE") != nullptr;
    auto seed = call(d, {"run", "--name", "seed", "--template", systemd ? "systemd" : "base"});
    ASSERT_EQ(seed.r.exit_code, 0) << seed.r.err;
    auto cp = call(d, {"cp", HUTCH_HOSTILE_AGENT, "seed:/tmp/hostile-agent"});
    ASSERT_EQ(cp.r.exit_code, 0) << cp.r.err;
    auto install = call(d, {"exec", "-u", "root", "seed", "--", "sh", "-c",
                            "mkdir -p /etc/hutch /usr/local/sbin && "
                            "install -m 0755 /tmp/hostile-agent /usr/local/sbin/hostile-agent && "
                            "echo /usr/local/sbin/hostile-agent > /etc/hutch/init && sync"});
    ASSERT_EQ(install.r.exit_code, 0) << install.r.err;
    auto stop = call(d, {"stop", "seed"});
    ASSERT_EQ(stop.r.exit_code, 0) << stop.r.err;
    auto made = call(d, {"template", "create", "--from", "seed", "hostile"});
    ASSERT_EQ(made.r.exit_code, 0) << made.r.err;
    ASSERT_EQ(call(d, {"rm", "seed"}).r.exit_code, 0);
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  static Daemon* daemon_;
  const Daemon& d() { return *daemon_; }

  void SetUp() override {
    ASSERT_NE(daemon_, nullptr);
    rss_before_ = rssKiB(d().pid());
    fds_before_ = fdCount(d().pid());
    std::printf("[hostile] %s: hutchd RSS %ld KiB, %d fds before\n", name(), rss_before_,
                fds_before_);
  }

  static const char* name() {
    return ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }

  // A hostile box, booted from the template (its handshake answered by the hostile agent).
  void runHostile(const std::string& box) {
    auto run = call(d(), {"run", "--name", box, "--template", "hostile"});
    ASSERT_FALSE(run.hung) << "hutch run " << box << " hung";
    ASSERT_EQ(run.r.exit_code, 0) << run.r.err;
    std::printf("[hostile] %s: booted in %.1f s\n", box.c_str(), run.seconds);
    auto logs = call(d(), {"logs", box});
    ASSERT_NE(logs.r.out.find("hostile-agent: PID 1 in box " + box), std::string::npos)
        << "the box did not boot the hostile agent: its image's initramfs predates "
           "/etc/hutch/init (rebuild it, or set HUTCH_TEST_SYSTEMD_IMAGE); its console:\n"
        << logs.r.out.substr(logs.r.out.size() > 3000 ? logs.r.out.size() - 3000 : 0);
  }

  // The normal box answers, and hutchd lists boxes.
  void othersWork(const std::string& when) {
    auto ok = call(d(), {"exec", "good", "--", "echo", "ok"});
    EXPECT_FALSE(ok.hung) << when;
    EXPECT_EQ(ok.r.exit_code, 0) << when << ": " << ok.r.err;
    EXPECT_EQ(ok.r.out, "ok\n") << when;
    auto ls = call(d(), {"ls"});
    EXPECT_EQ(ls.r.exit_code, 0) << when << ": " << ls.r.err;
  }

  // An exec into the hostile box: it must return; what it said is printed.
  Call execIn(const std::string& box, const std::vector<std::string>& argv,
              const std::string& input = {}) {
    std::vector<std::string> args{"exec"};
    if (!input.empty()) args.push_back("-i");
    args.push_back(box);
    args.push_back("--");
    args.insert(args.end(), argv.begin(), argv.end());
    auto c = call(d(), args, input);
    std::string err = c.r.err.substr(0, 300);
    std::replace(err.begin(), err.end(), '\n', ' ');
    std::printf("[hostile] exec %s %s: exit %d after %.1f s%s; stderr: %s\n", box.c_str(),
                argv[0].c_str(), c.r.exit_code, c.seconds, c.hung ? " (HUNG, killed)" : "",
                err.c_str());
    EXPECT_FALSE(c.hung) << "exec " << box << " -- " << argv[0] << " did not return";
    // While its agent's connection is ending the box still reads as running: the refusal must
    // not contradict itself.
    EXPECT_EQ(c.r.err.find("is running; exec needs a running box"), std::string::npos) << c.r.err;
    return c;
  }

  // A connection-level violation fails the box, saying why, and stops its VM (watchAgent).
  void expectFailedSaying(const std::string& box, const std::string& needle) {
    auto j = d().waitForState(box, "failed");
    EXPECT_EQ(j.value("state", ""), "failed") << j.dump();
    EXPECT_NE(j.value("reason", "").find(needle), std::string::npos) << j.dump();
  }

  void printInspect(const std::string& box) {
    auto j = d().inspect(box);
    std::printf("[hostile] %s: state %s, reason \"%s\"\n", box.c_str(),
                j.is_object() ? j.value("state", "?").c_str() : "?",
                j.is_object() ? j.value("reason", "").c_str() : "");
  }

  // rm -f removes the box and its QEMU; hutchd's descriptors go back to where they were and
  // its memory did not grow without bound.
  void removeAndCheckBounded(const std::string& box) {
    auto j = d().inspect(box);
    ASSERT_TRUE(j.is_object()) << box;
    const std::string id = j.value("id", "");
    ASSERT_FALSE(id.empty());
    auto rm = call(d(), {"rm", "-f", box});
    ASSERT_FALSE(rm.hung);
    ASSERT_EQ(rm.r.exit_code, 0) << rm.r.err;
    EXPECT_EQ(d().inspect(box), nullptr);
    EXPECT_TRUE(eventually([&] { return pidsMentioning(id).empty(); }, 60s))
        << "the QEMU of " << box << " outlived rm -f";
    const long rss = rssKiB(d().pid());
    int fds = fdCount(d().pid());
    eventually([&] { return (fds = fdCount(d().pid())) <= fds_before_ + 2; }, 30s);
    std::printf("[hostile] %s: hutchd RSS %ld KiB (%+ld), %d fds (%+d) after rm -f\n", name(), rss,
                rss - rss_before_, fds, fds - fds_before_);
    EXPECT_TRUE(processAlive(d().pid()));
    EXPECT_LT(rss - rss_before_, 64 * 1024) << "hutchd's memory grew by more than 64 MiB";
    EXPECT_LE(fds, fds_before_ + 2) << "hutchd holds descriptors of the removed box";
  }

  long rss_before_ = 0;
  int fds_before_ = 0;
};
Daemon* HostileGuestTest::daemon_ = nullptr;

// Frames for streams that were never opened (output, exits, results, errors, windows), exits and
// output after a stream's last frame, fake exit codes and statuses, malformed exits and starts:
// each affects at most the exec it answers. The connection stays open (a correct answer after
// them gets through); a never-ending stream and a silent one are abandoned by killing their CLI.
// Last, output on stream 0 is a connection-level violation: hutchd drops the connection, and
// execs to the box then fail at once with an error instead of hanging.
TEST_F(HostileGuestTest, MisbehavingStreamsStayInTheirOwnExec) {
  runHostile("evil-streams");

  auto ghosts = execIn("evil-streams", {"ghosts"});
  EXPECT_EQ(ghosts.r.exit_code, 42) << ghosts.r.err;  // the fake exit code, passed on as such
  EXPECT_EQ(ghosts.r.out, "ghosts ignored\n");        // nothing of the ghosts, nothing after exit

  EXPECT_EQ(execIn("evil-streams", {"fake-signal"}).r.exit_code, 128 + SIGKILL);

  auto bad_exit = execIn("evil-streams", {"bad-exit"});
  EXPECT_NE(bad_exit.r.exit_code, 0);
  EXPECT_FALSE(bad_exit.r.err.empty());
  auto bad_started = execIn("evil-streams", {"bad-started"});
  EXPECT_NE(bad_started.r.exit_code, 0);
  EXPECT_FALSE(bad_started.r.err.empty());
  EXPECT_EQ(execIn("evil-streams", {"no-such-trick"}).r.exit_code, 127);

  auto still = execIn("evil-streams", {"echo", "still", "here"});
  EXPECT_EQ(still.r.exit_code, 0) << still.r.err;
  EXPECT_EQ(still.r.out, "still here\n");

  // A stream that never ends: its CLI is what a user ^C's.
  const int fds_steady = fdCount(d().pid());
  {
    BoundedCli endless(d(), {"exec", "evil-streams", "--", "endless"});
    EXPECT_TRUE(eventually([&] { return endless.output().find("tick") != std::string::npos; }))
        << "no output from the endless stream";
    endless.kill();
  }
  // A stream that starts and then says nothing, abandoned the same way.
  {
    BoundedCli silent(d(), {"exec", "evil-streams", "--", "silent"});
    std::this_thread::sleep_for(3s);
    EXPECT_TRUE(silent.running());
    silent.kill();
  }
  // The guest never sends the exits that the SIGKILLs ask for: hutchd stops waiting for them
  // (10 s after each) and lets go of both clients' connections while the box still runs.
  int fds_now = 0;
  EXPECT_TRUE(eventually([&] { return (fds_now = fdCount(d().pid())) <= fds_steady; }, 40s))
      << "hutchd holds " << fds_now << " descriptors, " << fds_steady
      << " before the abandoned execs: their connections are still open";
  othersWork("after the stream tricks");
  auto after = execIn("evil-streams", {"echo", "after", "abandoned", "streams"});
  EXPECT_EQ(after.r.out, "after abandoned streams\n") << after.r.err;

  // A connection-level violation.
  auto stream0 = execIn("evil-streams", {"stream0"});
  EXPECT_NE(stream0.r.exit_code, 0);
  auto dead = execIn("evil-streams", {"echo", "anyone?"});
  EXPECT_NE(dead.r.exit_code, 0);
  EXPECT_FALSE(dead.r.err.empty());
  expectFailedSaying("evil-streams", "unexpected frame on stream 0");
  printInspect("evil-streams");
  othersWork("after the connection to evil-streams was dropped");
  removeAndCheckBounded("evil-streams");
}

// 64 KiB output frames as fast as the guest can write them for 30 s, ignoring the window, mixed
// with output for streams that do not exist. hutchd ends that exec at the first frame beyond
// the window it granted (a protocol error for that stream only) and drops the rest unread;
// meanwhile the normal box answers again and again, and hutch ls too. After the flood the
// hostile box's channel still works.
TEST_F(HostileGuestTest, AFloodOfOutputIsBoundedAndOtherBoxesKeepWorking) {
  runHostile("evil-flood");
  BoundedCli flood(d(), {"exec", "evil-flood", "--", "flood", "30"});
  const auto t0 = Clock::now();
  int rounds = 0;
  long rss_peak = rssKiB(d().pid());
  while (secondsSince(t0) < 25 && rounds < 10) {
    othersWork(fmt::format("during the flood, round {}", rounds));
    rss_peak = std::max(rss_peak, rssKiB(d().pid()));
    ++rounds;
  }
  std::printf("[hostile] %d rounds of exec good + ls during the flood; hutchd RSS peak %ld KiB\n",
              rounds, rss_peak);
  auto flooded = flood.wait();
  std::printf("[hostile] exec evil-flood flood: exit %d after %.1f s; stderr: %s\n",
              flooded.exit_code, flood.seconds(), flooded.err.substr(0, 300).c_str());
  EXPECT_FALSE(flood.hung());
  EXPECT_NE(flooded.exit_code, 0);
  EXPECT_NE(flooded.err.find("window"), std::string::npos) << flooded.err;
  // Output up to the point where the guest overtook the CLI got through: the host counts the
  // window it grants as the CLI consumes, so a guest that ignores the window is only caught once
  // it is ahead by more than that. What hutchd holds for the exec never exceeds the window.
  std::printf("[hostile] %zu bytes of the flood reached the CLI before the violation\n",
              flooded.out.size());

  // The guest reads the next exec once its flood is over: the connection survived it.
  auto survived = execIn("evil-flood", {"echo", "survived"});
  EXPECT_EQ(survived.r.out, "survived\n") << survived.r.err;
  auto logs = call(d(), {"logs", "evil-flood"});
  if (auto at = logs.r.out.find("flooded "); at != std::string::npos) {
    std::printf("[hostile] the guest %s\n",
                logs.r.out.substr(at, logs.r.out.find('\n', at) - at).c_str());
  }
  othersWork("after the flood");
  removeAndCheckBounded("evil-flood");
}

// A guest that grants huge stdin windows and then never reads the port again, and pings hutchd
// with 1 MiB payloads whose pongs cannot be delivered: what hutchd queues for it must stay
// bounded (back-pressure on stdin, the connection closed when the guest does not read its
// answers) rather than take the stdin of the exec and every pong into memory.
TEST_F(HostileGuestTest, AGuestThatStopsReadingCannotGrowHutchd) {
  runHostile("evil-deaf");
  BoundedCli deaf(d(), {"exec", "-i", "evil-deaf", "--", "deaf"},
                  std::string(size_t{96} << 20, 'i'));
  long rss_peak = rssKiB(d().pid());
  for (int round = 0; round < 4; ++round) {
    othersWork(fmt::format("while evil-deaf does not read, round {}", round));
    rss_peak = std::max(rss_peak, rssKiB(d().pid()));
  }
  auto r = deaf.wait(90s);
  rss_peak = std::max(rss_peak, rssKiB(d().pid()));
  std::printf(
      "[hostile] exec -i evil-deaf deaf (96 MiB stdin): exit %d after %.1f s%s; stderr: %s; "
      "hutchd RSS peak %ld KiB (%+ld)\n",
      r.exit_code, deaf.seconds(), deaf.hung() ? " (killed at the limit)" : "",
      r.err.substr(0, 300).c_str(), rss_peak, rss_peak - rss_before_);
  EXPECT_LT(rss_peak - rss_before_, 64 * 1024)
      << "hutchd buffered what a guest that does not read was sent";
  EXPECT_NE(r.exit_code, 0);
  expectFailedSaying("evil-deaf", "does not read");
  printInspect("evil-deaf");
  othersWork("after evil-deaf");
  removeAndCheckBounded("evil-deaf");
}

// Half a frame and then silence, before the exec's kStarted: hutchd cannot tell this guest from
// a slow one by its bytes, so the exec must fail at hutchd's deadline for a start instead of
// waiting forever; so must the next one (its kExec reaches a guest that answers nothing).
TEST_F(HostileGuestTest, ATruncatedFrameThenSilenceDoesNotHangExecs) {
  runHostile("evil-truncate");
  auto first = execIn("evil-truncate", {"truncate"});
  EXPECT_NE(first.r.exit_code, 0);
  othersWork("after the truncated frame");
  auto second = execIn("evil-truncate", {"echo", "anyone?"});
  EXPECT_NE(second.r.exit_code, 0);
  printInspect("evil-truncate");
  removeAndCheckBounded("evil-truncate");
}

// A header claiming a 4 GiB payload: a framing error. hutchd closes the connection at once
// (without allocating the claimed length); the exec and every later one fail with an error.
TEST_F(HostileGuestTest, AnOversizedFrameClosesTheChannel) {
  runHostile("evil-oversized");
  auto first = execIn("evil-oversized", {"oversized"});
  EXPECT_NE(first.r.exit_code, 0);
  EXPECT_FALSE(first.r.err.empty());
  auto second = execIn("evil-oversized", {"echo", "anyone?"});
  EXPECT_NE(second.r.exit_code, 0);
  EXPECT_FALSE(second.r.err.empty());
  expectFailedSaying("evil-oversized", "exceeds the limit");
  printInspect("evil-oversized");
  othersWork("after the oversized frame");
  removeAndCheckBounded("evil-oversized");
}

// A guest that never answers kHello and sends garbage instead (random bytes, kHelloAck frames
// with broken JSON or cut short, kError that is not "unsupported"): hutchd's handshake scan
// keeps only a bounded tail of it, the run fails at the boot timeout with a clear error, the box
// is left failed with that reason, and rm -f removes it with its QEMU.
TEST_F(HostileGuestTest, AGuestThatNeverAnswersTheHandshakeFailsToStart) {
  auto run = call(d(), {"run", "--name", "evil-nohello", "--template", "hostile"});
  std::printf("[hostile] run evil-nohello: exit %d after %.1f s; stderr: %s\n", run.r.exit_code,
              run.seconds, run.r.err.substr(0, 300).c_str());
  EXPECT_FALSE(run.hung);
  EXPECT_NE(run.r.exit_code, 0);
  EXPECT_NE(run.r.err.find("did not answer"), std::string::npos) << run.r.err;
  auto box = d().inspect("evil-nohello");
  ASSERT_TRUE(box.is_object()) << "the failed box is not listed";
  EXPECT_NE(box.value("state", ""), "running");
  EXPECT_FALSE(box.value("reason", "").empty()) << box.dump();
  printInspect("evil-nohello");
  othersWork("after the failed handshake");
  removeAndCheckBounded("evil-nohello");
}

}  // namespace
}  // namespace hutch::e2e

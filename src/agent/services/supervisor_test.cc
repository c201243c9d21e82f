// The Supervisor on the host: real services (sh, sleep) from a temp config directory, users from
// temp passwd and group files, its EventLoop driven by the test, which reaps the children itself
// and hands their statuses to onExited (as the agent's reaper does). No assertion on how long
// anything took, beyond lower bounds a timer guarantees and generous limits against hangs.
#include "agent/services/supervisor.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

namespace hutch::agent {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

std::string readAll(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

int64_t realtimeNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// One step of a scenario: once `until` holds (checked after every reaping round), `then` runs.
struct Step {
  std::function<bool()> until;
  std::function<void()> then = [] {};
};

class SupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/hutch-supervisor-XXXXXX";
    ASSERT_TRUE(::mkdtemp(dir));
    dir_ = dir;
    fs::create_directories(dir_ / "services");
    fs::create_directories(dir_ / "work");
    std::ofstream(dir_ / "passwd") << "root:x:0:0:root:/root:/bin/sh\n"
                                   << "svc:x:4242:4343:svc:/nonexistent:/bin/sh\n";
    std::ofstream(dir_ / "group") << "root:x:0:\nsvc:x:4343:\nextra:x:4444:svc\n";
    options_.config_dir = (dir_ / "services").string();
    options_.log_dir = (dir_ / "var/log/hutch/services").string();  // made by the supervisor
    options_.passwd_path = (dir_ / "passwd").string();
    options_.group_path = (dir_ / "group").string();
    options_.first_backoff = milliseconds(40);
    options_.max_backoff = milliseconds(160);
    options_.healthy_after = std::chrono::hours(1);
    auto loop = EventLoop::create();
    ASSERT_TRUE(loop) << loop.error().describe();
    loop_ = std::move(*loop);
    // The supervisor's own messages ("restarting in N ms") go to stderr: keep them in a file.
    std::fflush(stderr);
    saved_stderr_ = ::dup(STDERR_FILENO);
    const int messages = ::open((dir_ / "agent.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ASSERT_GE(messages, 0);
    ::dup2(messages, STDERR_FILENO);
    ::close(messages);
  }

  void TearDown() override {
    if (supervisor_) supervisor_->stopAll(milliseconds(2000));
    supervisor_.reset();
    if (saved_stderr_ >= 0) {
      ::dup2(saved_stderr_, STDERR_FILENO);
      ::close(saved_stderr_);
    }
    // Anything left (a test failed half-way): reap it.
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    fs::remove_all(dir_);
  }

  void writeService(const std::string& file, const std::string& json) {
    std::ofstream(dir_ / "services" / file) << json;
  }

  Supervisor& start() {
    supervisor_ = std::make_unique<Supervisor>(*loop_, options_);
    supervisor_->start();
    return *supervisor_;
  }

  proto::ServiceStatus status(const std::string& name) const {
    for (const auto& s : supervisor_->status().services) {
      if (s.name == name) return s;
    }
    ADD_FAILURE() << "no service " << name;
    return {};
  }

  std::string log(const std::string& name) const {
    return readAll(fs::path(options_.log_dir) / (name + ".log"));
  }
  std::string agentLog() const { return readAll(dir_ / "agent.log"); }

  // Runs the loop once (it cannot run again after it stopped) through the steps in order,
  // reaping children every few milliseconds and telling the supervisor, as the agent's reaper
  // does. False if the steps did not complete before a limit that only stops hangs.
  bool drive(std::vector<Step> steps) {
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    size_t next = 0;
    bool done = false;
    std::function<void()> tick = [&] {
      for (;;) {
        int wait_status = 0;
        const pid_t pid = ::waitpid(-1, &wait_status, WNOHANG);
        if (pid <= 0) break;
        const int64_t now = realtimeNs();
        if (supervisor_->onExited(pid, wait_status)) {
          claimed_ns_.push_back(now);
        } else {
          foreign_.push_back(pid);
        }
      }
      while (next < steps.size() && steps[next].until()) steps[next++].then();
      done = next == steps.size();
      if (done || std::chrono::steady_clock::now() > limit) {
        loop_->stop();
        return;
      }
      loop_->addTimer(milliseconds(2), tick);
    };
    loop_->post(tick);
    loop_->run();
    return done;
  }

  fs::path dir_;
  SupervisorOptions options_;
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<Supervisor> supervisor_;
  std::vector<int64_t> claimed_ns_;  // when the test reaped each service's process, in order
  std::vector<pid_t> foreign_;       // reaped children onExited did not claim
  int saved_stderr_ = -1;
};

TEST_F(SupervisorTest, AServiceStartsAsItsUserWithItsEnvironmentAndLog) {
  writeService("web.json", R"({"argv": ["sh", "-c",
      "echo \"as $(id -u):$(id -g) groups $(id -G) in $PWD with $GREETING\"; echo oops >&2; exec sleep 1000"],
      "env": ["GREETING=hello"], "user": "svc", "cwd": "/tmp"})");
  writeService("README", "not a service");  // no .json suffix: ignored
  Supervisor& supervisor = start();
  ASSERT_EQ(supervisor.status().services.size(), 1u);
  EXPECT_EQ(status("web").state, "running");
  EXPECT_GT(status("web").pid, 0);
  EXPECT_GT(status("web").started_ns, 0);
  EXPECT_EQ(status("web").restarts, 0u);
  EXPECT_EQ(status("web").log, options_.log_dir + "/web.log");
  ASSERT_TRUE(drive({{[&] { return log("web").find("oops\n") != std::string::npos; }}}))
      << log("web");

  const std::string text = log("web");
  EXPECT_EQ(text.rfind("--- hutch-agent: starting web ---\n", 0), 0u) << text;
  EXPECT_NE(text.find("as 4242:4343 groups 4343 4444 in /tmp with hello\n"), std::string::npos)
      << text;
  EXPECT_EQ(status("web").state, "running");  // sleeping on, in its own session
  EXPECT_EQ(::getsid(status("web").pid), status("web").pid);
  EXPECT_TRUE(foreign_.empty());
}

TEST_F(SupervisorTest, ADyingServiceIsRestartedAfterADoublingCappedBackoff) {
  writeService("flaky.json", R"({"argv": ["sh", "-c", "echo run; exit 3"]})");
  Supervisor& supervisor = start();
  // Restart r (the start of run r+1): how long after the reaping of run r it came.
  std::map<uint32_t, int64_t> waited_ms;
  auto restarted = [&] {
    const auto s = status("flaky");
    if (s.restarts > 0 && !waited_ms.contains(s.restarts)) {
      waited_ms[s.restarts] = (s.started_ns - claimed_ns_.at(s.restarts - 1)) / 1'000'000;
    }
    return s.restarts >= 5;
  };
  ASSERT_TRUE(drive({{restarted}})) << agentLog();
  EXPECT_EQ(status("flaky").last_exit, proto::ExitStatus::exited(3));
  supervisor.stopAll(milliseconds(2000));

  // 40, 80, 160, then capped at 160 ms.
  const std::string messages = agentLog();
  const std::vector<int> expected = {40, 80, 160, 160, 160};
  size_t at = 0;
  for (int ms : expected) {
    const std::string line =
        "Service flaky exited with code 3; restarting in " + std::to_string(ms) + " ms";
    at = messages.find(line, at);
    ASSERT_NE(at, std::string::npos) << "no '" << line << "' in order in:\n" << messages;
    ++at;
  }
  EXPECT_EQ(messages.find("restarting in 320 ms"), std::string::npos) << messages;
  // And the timer honours it: no start came before its back-off was over.
  ASSERT_FALSE(waited_ms.empty());
  for (const auto& [restart, ms] : waited_ms) {
    EXPECT_GE(ms, expected.at(restart - 1)) << "restart " << restart;
  }
  const std::string text = log("flaky");
  EXPECT_EQ(text.rfind("--- hutch-agent: starting flaky ---\n", 0), 0u) << text;
  EXPECT_GE(count(text, "--- hutch-agent: starting flaky ---"), 6u) << text;
  EXPECT_GE(count(text, "--- hutch-agent: flaky exited with code 3 ---"), 5u) << text;
  EXPECT_GE(count(text, "run\n"), 5u) << text;
  EXPECT_EQ(status("flaky").state, "stopped");
}

TEST_F(SupervisorTest, TheBackoffStartsOverAfterAHealthyRun) {
  options_.healthy_after = milliseconds(1500);
  // Runs 1 and 2 die at once, run 3 lives 3 s (healthy), run 4 dies at once.
  writeService("counted.json", R"({"argv": ["sh", "-c",
      "n=$(($(cat count 2>/dev/null || echo 0) + 1)); echo $n > count; [ $n = 3 ] && sleep 3; exit 1"],
      "cwd": ")" + (dir_ / "work").string() +
                                   R"("})");
  start();
  ASSERT_TRUE(drive({{[&] { return status("counted").restarts >= 4; }}})) << agentLog();
  const std::string messages = agentLog();
  size_t at = 0;
  for (const char* ms : {"40", "80", "40", "80"}) {  // run 3 was healthy: 40 again
    const std::string line =
        std::string("Service counted exited with code 1; restarting in ") + ms + " ms";
    at = messages.find(line, at);
    ASSERT_NE(at, std::string::npos) << "no '" << line << "' in order in:\n" << messages;
    ++at;
  }
}

TEST_F(SupervisorTest, RestartPoliciesDecideWhatComesBack) {
  writeService("always-clean.json", R"({"argv": ["sh", "-c", "exit 0"], "restart": "always"})");
  writeService("never-fails.json", R"({"argv": ["sh", "-c", "exit 5"], "restart": "never"})");
  writeService("onfail-clean.json", R"({"argv": ["true"], "restart": "on-failure"})");
  writeService("onfail-fails.json", R"({"argv": ["sh", "-c", "exit 2"], "restart": "on-failure"})");
  writeService("onfail-killed.json",
               R"({"argv": ["sh", "-c", "kill -9 $$"], "restart": "on-failure"})");
  Supervisor& supervisor = start();
  ASSERT_TRUE(drive({{[&] {
    return status("always-clean").restarts >= 2 && status("onfail-fails").restarts >= 2 &&
           status("onfail-killed").restarts >= 2 && status("never-fails").state == "stopped" &&
           status("onfail-clean").state == "stopped";
  }}}))
      << agentLog();

  // Not restarted: ended once, stopped, what they exited with recorded.
  for (const char* name : {"never-fails", "onfail-clean"}) {
    const auto s = status(name);
    EXPECT_EQ(s.state, "stopped") << name;
    EXPECT_EQ(s.restarts, 0u) << name;
    EXPECT_EQ(s.pid, 0) << name;
    EXPECT_EQ(count(log(name), "--- hutch-agent: starting"), 1u) << log(name);
  }
  EXPECT_EQ(status("never-fails").last_exit, proto::ExitStatus::exited(5));
  EXPECT_NE(log("never-fails").find("--- hutch-agent: never-fails exited with code 5 ---"),
            std::string::npos);
  EXPECT_EQ(status("onfail-clean").last_exit, proto::ExitStatus::exited(0));
  // Restarted: "always" even after exit 0; "on-failure" after a failure code or a signal.
  EXPECT_EQ(status("always-clean").last_exit, proto::ExitStatus::exited(0));
  EXPECT_EQ(status("onfail-fails").last_exit, proto::ExitStatus::exited(2));
  EXPECT_EQ(status("onfail-killed").last_exit, proto::ExitStatus::signaled(SIGKILL));
  EXPECT_NE(log("onfail-killed").find("--- hutch-agent: onfail-killed killed by signal 9 ---"),
            std::string::npos)
      << log("onfail-killed");
  const std::string messages = agentLog();
  EXPECT_NE(messages.find("Service never-fails exited with code 5; not restarted"),
            std::string::npos)
      << messages;
  supervisor.stopAll(milliseconds(2000));
}

TEST_F(SupervisorTest, InvalidServicesAreReportedAndTheOthersRun) {
  writeService("a-empty-argv.json", R"({"argv": []})");
  writeService("b-not-json.json", "{argv: nope");
  writeService("c-bad-policy.json", R"({"argv": ["true"], "restart": "sometimes"})");
  writeService(".hidden.json", R"({"argv": ["true"]})");
  writeService("d-no-user.json", R"({"argv": ["sleep", "1000"], "user": "nobody-here"})");
  writeService("e-no-command.json", R"({"argv": ["no-such-command-here"]})");
  writeService("good.json", R"({"argv": ["sleep", "1000"]})");
  Supervisor& supervisor = start();

  const auto list = supervisor.status().services;
  std::vector<std::string> names;
  for (const auto& s : list) names.push_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{".hidden", "a-empty-argv", "b-not-json",
                                             "c-bad-policy", "d-no-user", "e-no-command", "good"}));
  for (const char* name : {".hidden", "a-empty-argv", "b-not-json", "c-bad-policy"}) {
    const auto s = status(name);
    EXPECT_EQ(s.state, "failed") << name;
    EXPECT_EQ(s.pid, 0) << name;
    EXPECT_EQ(s.started_ns, 0) << name;
    EXPECT_FALSE(fs::exists(s.log)) << name << ": never started, no log";
  }
  EXPECT_NE(status(".hidden").error.find("\".hidden\" is not a valid service name"),
            std::string::npos)
      << status(".hidden").error;
  EXPECT_NE(status("a-empty-argv").error.find(options_.config_dir + "/a-empty-argv.json: "),
            std::string::npos)
      << status("a-empty-argv").error;
  EXPECT_NE(status("a-empty-argv").error.find("argv"), std::string::npos)
      << status("a-empty-argv").error;
  EXPECT_NE(status("b-not-json").error.find("b-not-json.json"), std::string::npos)
      << status("b-not-json").error;
  EXPECT_NE(status("c-bad-policy").error.find("\"sometimes\" is not one of always"),
            std::string::npos)
      << status("c-bad-policy").error;
  EXPECT_EQ(status("good").state, "running");

  // A valid file whose command cannot start is retried like a death, saying why.
  ASSERT_TRUE(drive({{[&] {
    return status("d-no-user").restarts >= 2 && status("e-no-command").restarts >= 2;
  }}}))
      << agentLog();
  for (const char* name : {"d-no-user", "e-no-command"}) {
    const auto s = status(name);
    EXPECT_NE(s.state, "failed") << name;
    EXPECT_EQ(s.pid, 0) << name;
    EXPECT_FALSE(s.last_exit) << name;
  }
  EXPECT_NE(status("d-no-user").error.find("User \"nobody-here\" does not exist"),
            std::string::npos)
      << status("d-no-user").error;
  EXPECT_NE(status("e-no-command").error.find("no-such-command-here"), std::string::npos)
      << status("e-no-command").error;
  EXPECT_EQ(status("good").state, "running");
  EXPECT_EQ(status("good").restarts, 0u);
  EXPECT_TRUE(foreign_.empty());
}

TEST_F(SupervisorTest, AMissingConfigDirectoryMeansNoServices) {
  options_.config_dir = (dir_ / "nowhere").string();
  EXPECT_TRUE(start().status().services.empty());
}

TEST_F(SupervisorTest, StopAllTermsThenKillsAndRestartsNothing) {
  writeService("polite.json", R"({"argv": ["sleep", "1000"]})");
  writeService("stubborn.json", R"({"argv": ["sh", "-c",
      "trap 'echo got TERM' TERM; echo trapping; while :; do sleep 0.05; done"]})");
  writeService("waiting.json", R"({"argv": ["sh", "-c", "exit 1"]})");
  options_.first_backoff = milliseconds(200);  // "waiting" spends most of its time restarting
  Supervisor& supervisor = start();
  pid_t polite = 0;
  pid_t stubborn = 0;
  bool stopped = false;
  uint32_t waiting_restarts = 0;
  ASSERT_TRUE(drive({
      {[&] {
         return log("stubborn").find("trapping") != std::string::npos &&
                status("waiting").state == "restarting";
       },
       [&] {
         polite = status("polite").pid;
         stubborn = status("stubborn").pid;
         waiting_restarts = status("waiting").restarts;
         supervisor.stopAll(milliseconds(300));  // blocks the loop, as at power-off
         stopped = true;
       }},
      // Long enough for any restart timer that survived to fire several times over.
      {[&, until = std::optional<std::chrono::steady_clock::time_point>()]() mutable {
        if (!until) until = std::chrono::steady_clock::now() + milliseconds(1500);
        return std::chrono::steady_clock::now() >= *until;
      }},
  })) << agentLog();
  ASSERT_TRUE(stopped);

  const auto p = status("polite");
  EXPECT_EQ(p.state, "stopped");
  EXPECT_EQ(p.pid, 0);
  EXPECT_EQ(p.last_exit, proto::ExitStatus::signaled(SIGTERM));  // TERM was enough
  const auto s = status("stubborn");
  EXPECT_EQ(s.state, "stopped");
  EXPECT_EQ(s.last_exit, proto::ExitStatus::signaled(SIGKILL));  // it ignored TERM: KILLed
  EXPECT_NE(log("stubborn").find("got TERM"), std::string::npos) << log("stubborn");
  EXPECT_NE(log("stubborn").find("--- hutch-agent: stubborn killed by signal 9 ---"),
            std::string::npos)
      << log("stubborn");
  EXPECT_NE(agentLog().find("Service stubborn did not stop in time: killing it"), std::string::npos)
      << agentLog();
  EXPECT_EQ(status("waiting").state, "stopped");  // its pending restart was cancelled
  EXPECT_EQ(status("waiting").restarts, waiting_restarts);
  // Nothing started again: one start each, and their processes are gone (reaped by stopAll).
  EXPECT_EQ(count(log("polite"), "--- hutch-agent: starting"), 1u) << log("polite");
  EXPECT_EQ(count(log("stubborn"), "--- hutch-agent: starting"), 1u) << log("stubborn");
  EXPECT_NE(::kill(polite, 0), 0);
  EXPECT_NE(::kill(stubborn, 0), 0);
  EXPECT_TRUE(foreign_.empty());
  EXPECT_FALSE(supervisor.onExited(polite, 0));  // not a running service any more
}

}  // namespace
}  // namespace hutch::agent

// Boxes that wait for free, end to end (docs/snapshots.md "Suspend and idle pause"): stop keeps
// memory and start resumes every process; a suspended box survives a killed hutchd and a host
// reboot; idle boxes pause themselves and wake for the next exec or connection; busy boxes are
// not paused; a box's lifetime can end in a suspend and be extended.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "harness.h"
#include "tcp_client.h"

namespace hutch::e2e {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// A detached counter: its pid in /tmp/counter.pid, its count in /dev/shm/count (memory only).
constexpr const char* kCounter =
    "echo $$ > /tmp/counter.pid; i=0; while :; do i=$((i+1)); echo $i > /dev/shm/count; "
    "sleep 0.2; done";

std::string out(const Daemon& d, const std::string& box, const std::string& script) {
  auto r = d.hutch({"exec", box, "--", "sh", "-c", script});
  EXPECT_EQ(r.exit_code, 0) << script << ": " << r.err;
  return r.out;
}

// The same, quiet enough for an idle box: one Python process that wakes once a second (a shell
// loop forks `sleep` five times a second, ~20 % of a CPU under TCG: not idle).
constexpr const char* kQuietCounter =
    "echo $$ > /tmp/counter.pid; exec python3 -c '\n"
    "import time\n"
    "i = 0\n"
    "while True:\n"
    "    i += 1\n"
    "    open(\"/dev/shm/count\", \"w\").write(str(i))\n"
    "    time.sleep(1)\n'";

void startCounter(const Daemon& d, const std::string& box, const char* script = kCounter) {
  ASSERT_EQ(d.hutch({"exec", "-d", box, "--", "sh", "-c", script}).exit_code, 0);
  for (int i = 0; i < 100 && out(d, box, "cat /dev/shm/count 2>/dev/null || true").empty(); ++i) {
    std::this_thread::sleep_for(100ms);
  }
}

// The counter is the same process, alive, and counting again.
void expectCounterResumed(const Daemon& d, const std::string& box, const std::string& pid) {
  EXPECT_EQ(out(d, box, "cat /tmp/counter.pid"), pid);
  EXPECT_EQ(d.hutch({"exec", box, "--", "sh", "-c", "kill -0 $(cat /tmp/counter.pid)"}).exit_code,
            0);
  const int before = std::stoi(out(d, box, "cat /dev/shm/count"));
  bool counting = false;
  for (int i = 0; i < 100 && !counting; ++i) {
    std::this_thread::sleep_for(100ms);
    counting = std::stoi(out(d, box, "cat /dev/shm/count")) > before;
  }
  EXPECT_TRUE(counting) << "the counter did not go on after the resume";
}

std::vector<std::string> eventTypes(const Daemon& d, const std::string& box) {
  std::vector<std::string> types;
  std::istringstream in(d.hutch({"events", "--box", box, "--json"}).out);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) types.push_back(json::parse(line)["type"]);
  }
  return types;
}

bool has(const std::vector<std::string>& all, const std::string& one) {
  return std::find(all.begin(), all.end(), one) != all.end();
}

TEST(SuspendTest, StopKeepsProcessesAndMemoryAndStartResumesThem) {
  Daemon d;
  ASSERT_EQ(d.hutch({"run", "--name", "s"}).exit_code, 0);
  startCounter(d, "s");
  const std::string pid = out(d, "s", "cat /tmp/counter.pid");
  ASSERT_EQ(d.hutch({"exec", "s", "--", "sh", "-c", "echo on-disk > ~/f; sync"}).exit_code, 0);
  const int qemu = d.inspect("s")["pid"];

  auto stop = d.hutch({"stop", "s"});
  ASSERT_EQ(stop.exit_code, 0) << stop.err;
  auto suspended = d.inspect("s");
  EXPECT_EQ(suspended["state"], "suspended");
  EXPECT_EQ(suspended["pid"], 0);
  EXPECT_FALSE(processAlive(qemu)) << "QEMU still runs: its memory was not freed";
  auto exec = d.hutch({"exec", "s", "--", "true"});
  EXPECT_EQ(exec.exit_code, 65);
  EXPECT_NE(exec.err.find("hutch start s"), std::string::npos) << exec.err;

  auto start = d.hutch({"start", "s"});
  ASSERT_EQ(start.exit_code, 0) << start.err;
  EXPECT_EQ(d.inspect("s")["boot"], "resumed from its suspended state");
  expectCounterResumed(d, "s", pid);
  EXPECT_EQ(out(d, "s", "cat ~/f"), "on-disk\n");
  // Its clock was set on resume: the guest's time is the host's, within a few seconds.
  const int64_t guest = std::stoll(out(d, "s", "date +%s"));
  EXPECT_LT(std::abs(guest - static_cast<int64_t>(std::time(nullptr))), 5);
  auto types = eventTypes(d, "s");
  EXPECT_TRUE(has(types, "box.suspended")) << d.hutch({"events", "--box", "s"}).out;

  // --shutdown is the clean poweroff: the processes end, the files stay.
  ASSERT_EQ(d.hutch({"stop", "--shutdown", "s"}).exit_code, 0);
  EXPECT_EQ(d.inspect("s")["state"], "stopped");
  ASSERT_EQ(d.hutch({"start", "s"}).exit_code, 0);
  EXPECT_EQ(d.inspect("s")["boot"], "cold boot from its disk");
  // Not `kill -0 PID`: a cold boot hands out pids in much the same order, so another process
  // can hold the counter's old pid. The counter's count (memory only) and its process are gone.
  EXPECT_EQ(out(d, "s", "cat /dev/shm/count 2>/dev/null; pgrep -f 'counter[.]pid' || true"), "");
  EXPECT_EQ(out(d, "s", "cat ~/f"), "on-disk\n");
  // A suspended box shut down drops its saved memory.
  ASSERT_EQ(d.hutch({"stop", "s"}).exit_code, 0);
  ASSERT_EQ(d.hutch({"stop", "--shutdown", "s"}).exit_code, 0);
  EXPECT_EQ(d.inspect("s")["state"], "stopped");
  ASSERT_EQ(d.hutch({"start", "s"}).exit_code, 0);
  EXPECT_EQ(d.inspect("s")["boot"], "cold boot from its disk");
}

// A checkpoint leaves the box's earlier disk name as a second link to the frozen layer (for the
// QEMU that had it open); the resume after a suspend must not trip over it and boot cold.
TEST(SuspendTest, ABoxWithCheckpointsResumesWithItsProcesses) {
  Daemon d;
  ASSERT_EQ(d.hutch({"run", "--name", "c"}).exit_code, 0);
  startCounter(d, "c");
  const std::string pid = out(d, "c", "cat /tmp/counter.pid");
  ASSERT_EQ(d.hutch({"checkpoint", "c", "--name", "one"}).exit_code, 0);
  ASSERT_EQ(d.hutch({"stop", "c"}).exit_code, 0);
  ASSERT_EQ(d.hutch({"start", "c"}).exit_code, 0);
  EXPECT_EQ(d.inspect("c")["boot"], "resumed from its suspended state");
  expectCounterResumed(d, "c", pid);
  // And the checkpoint still rolls back.
  EXPECT_EQ(d.hutch({"rollback", "c", "one"}).exit_code, 0);
}

// An echo server in the box that numbers its connections: "N:" before everything it echoes.
constexpr const char* kNumberingEcho =
    "exec python3 -c '\n"
    "import socket\n"
    "s = socket.socket()\n"
    "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind((\"127.0.0.1\", 9000))\n"
    "s.listen()\n"
    "n = 0\n"
    "while True:\n"
    "    c, _ = s.accept()\n"
    "    n += 1\n"
    "    while True:\n"
    "        d = c.recv(65536)\n"
    "        if not d:\n"
    "            break\n"
    "        c.sendall(str(n).encode() + b\":\" + d)\n"
    "    c.close()\n'";

// One line from a blocking socket (with connectLocal's receive timeout); "" at end of file or on
// an error.
std::string readLine(int fd) {
  std::string line;
  char c = 0;
  while (::read(fd, &c, 1) == 1) {
    line += c;
    if (c == '\n') break;
  }
  return line;
}

bool sendAll(int fd, std::string_view data) {
  return ::send(fd, data.data(), data.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(data.size());
}

// 15.7: a TCP connection through a published port is the same connection, in the box's server
// too, after stop (a suspend) and start; bytes sent while the box was suspended arrive. A
// shutdown ends it.
TEST(SuspendTest, AnOpenConnectionThroughAPublishedPortSurvivesStopAndStart) {
  Daemon d;
  ASSERT_EQ(d.hutch({"run", "--name", "c"}).exit_code, 0);
  ASSERT_EQ(d.hutch({"exec", "-d", "c", "--", "sh", "-c", kNumberingEcho}).exit_code, 0);
  const uint16_t port = freePort();
  ASSERT_EQ(d.hutch({"port", "c", fmt::format("{}:9000", port)}).exit_code, 0);
  int fd = -1;
  for (int i = 0; i < 100; ++i) {  // until the server listens
    fd = connectLocal(port);
    if (fd >= 0 && sendAll(fd, "hello\n") && readLine(fd) == "1:hello\n") break;
    if (fd >= 0) ::close(fd);
    fd = -1;
    std::this_thread::sleep_for(200ms);
  }
  ASSERT_GE(fd, 0) << "the server in the box did not answer";
  const int qemu = d.inspect("c")["pid"];

  auto stop = d.hutch({"stop", "c"});
  ASSERT_EQ(stop.exit_code, 0) << stop.err;
  EXPECT_EQ(d.inspect("c")["state"], "suspended");
  EXPECT_FALSE(processAlive(qemu));
  EXPECT_NE(readFile(d.dir() / "hutchd.log").find("1 open connection(s) kept across the suspend"),
            std::string::npos);
  ASSERT_TRUE(sendAll(fd, "while suspended\n"));  // waits in hutchd's socket
  auto start = d.hutch({"start", "c"});
  ASSERT_EQ(start.exit_code, 0) << start.err;
  EXPECT_EQ(d.inspect("c")["boot"], "resumed from its suspended state");
  EXPECT_EQ(readLine(fd), "1:while suspended\n");
  ASSERT_TRUE(sendAll(fd, "after\n"));
  EXPECT_EQ(readLine(fd), "1:after\n");
  auto ports = json::parse(d.hutch({"--json", "port", "ls", "c"}).out);
  EXPECT_EQ(ports[0]["connections"], 1) << ports.dump();

  // Twice, and then a clean end: our end of file reaches the server, which closes.
  ASSERT_EQ(d.hutch({"stop", "c"}).exit_code, 0);
  ASSERT_EQ(d.hutch({"start", "c"}).exit_code, 0);
  ASSERT_TRUE(sendAll(fd, "again\n"));
  EXPECT_EQ(readLine(fd), "1:again\n");
  ::shutdown(fd, SHUT_WR);
  EXPECT_EQ(readLine(fd), "");
  ::close(fd);

  // A shutdown (or a box that boots cold) ends a kept connection: its client sees the end.
  fd = connectLocal(port);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(sendAll(fd, "x\n"));
  EXPECT_EQ(readLine(fd), "2:x\n");
  ASSERT_EQ(d.hutch({"stop", "c"}).exit_code, 0);
  ASSERT_EQ(d.hutch({"stop", "--shutdown", "c"}).exit_code, 0);
  EXPECT_EQ(readLine(fd), "");
  ::close(fd);
  EXPECT_EQ(d.hutch({"rm", "-f", "c"}).exit_code, 0);
}

TEST(SuspendTest, ASuspendedBoxSurvivesAKilledHutchdAndAHostReboot) {
  Daemon d;
  ASSERT_EQ(d.hutch({"run", "--name", "s"}).exit_code, 0);
  startCounter(d, "s");
  const std::string pid = out(d, "s", "cat /tmp/counter.pid");
  ASSERT_EQ(d.hutch({"stop", "s"}).exit_code, 0);
  d.crashAndRestart();
  EXPECT_EQ(d.inspect("s")["state"], "suspended");
  ASSERT_EQ(d.hutch({"start", "s"}).exit_code, 0);
  expectCounterResumed(d, "s", pid);

  // A reboot, as hutchd sees it (PersistenceTest does the same): every VM gone, a new boot id.
  ASSERT_EQ(d.hutch({"stop", "s"}).exit_code, 0);
  ASSERT_EQ(d.hutch({"run", "--name", "r"}).exit_code, 0);
  const int qemu = d.inspect("r")["pid"];
  d.crashAndRestart([&] {
    ::kill(qemu, SIGKILL);
    while (processAlive(qemu)) std::this_thread::sleep_for(20ms);
    std::string cmd = "sqlite3 " + (d.stateDir() / "hutch.db").string() +
                      " \"UPDATE meta SET value='an-earlier-boot' WHERE key='boot_id'\"";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  });
  EXPECT_EQ(d.inspect("s")["state"], "suspended");
  EXPECT_EQ(d.inspect("r")["state"], "stopped");
  ASSERT_EQ(d.hutch({"start", "s"}).exit_code, 0);
  expectCounterResumed(d, "s", pid);
}

TEST(SuspendTest, KillingHutchdDuringASuspendOrAResumeLosesNothing) {
  Daemon d;
  ASSERT_EQ(d.hutch({"run", "--name", "s"}).exit_code, 0);
  startCounter(d, "s");
  const std::string pid = out(d, "s", "cat /tmp/counter.pid");
  // Killed at different moments of the operation: whatever it reached, the box is running or
  // suspended afterwards, and its counter is the same process.
  for (auto delay : {50ms, 200ms, 600ms}) {
    for (const char* verb : {"stop", "start"}) {
      const std::string state = d.inspect("s")["state"];
      if ((state == "running") != (std::string(verb) == "stop")) continue;
      auto o = d.dir() / "cli.out";
      auto e = d.dir() / "cli.err";
      pid_t cli = d.start({verb, "s"}, o, e);
      std::this_thread::sleep_for(delay);
      d.crashAndRestart();
      (void)collect(cli, o, e);
      const std::string after = d.inspect("s")["state"];
      EXPECT_TRUE(after == "running" || after == "suspended")
          << verb << " +" << delay.count() << " ms: " << after;
      if (after == "suspended") {
        ASSERT_EQ(d.hutch({"start", "s"}).exit_code, 0);
      }
      expectCounterResumed(d, "s", pid);
    }
  }
}

TEST(SuspendTest, IdleBoxesPauseAndWakeForTheNextExecOrConnection) {
  // Paused after 2 s without work, suspended after 4 s more.
  Daemon d({"--idle-pause", "2", "--idle-suspend", "4"});
  ASSERT_EQ(d.hutch({"run", "--name", "idle"}).exit_code, 0);
  startCounter(d, "idle", kQuietCounter);
  const std::string pid = out(d, "idle", "cat /tmp/counter.pid");
  ASSERT_EQ(d.hutch({"exec", "-d", "idle", "--", "python3", "-m", "http.server", "8000",
                     "--directory", "/etc"})
                .exit_code,
            0);
  const uint16_t port = freePort();
  ASSERT_EQ(d.hutch({"port", "idle", fmt::format("{}:8000", port)}).exit_code, 0);

  auto paused = d.waitForState("idle", "paused");
  ASSERT_EQ(paused["state"], "paused") << paused.dump();
  // An exec wakes it and is answered.
  EXPECT_EQ(out(d, "idle", "echo awake"), "awake\n");
  EXPECT_EQ(d.inspect("idle")["state"], "running");
  expectCounterResumed(d, "idle", pid);

  // Paused, then suspended; a connection to its published port resumes it and is answered.
  auto suspended = d.waitForState("idle", "suspended");
  ASSERT_EQ(suspended["state"], "suspended") << suspended.dump();
  auto page = httpGet(port, "/hostname");
  ASSERT_TRUE(page) << "the connection was not answered";
  EXPECT_NE(page->find("200 OK"), std::string::npos) << *page;
  EXPECT_NE(page->find("idle"), std::string::npos) << *page;
  EXPECT_EQ(d.inspect("idle")["state"], "running");
  expectCounterResumed(d, "idle", pid);
  auto types = eventTypes(d, "idle");
  for (const char* t : {"box.paused", "box.resumed", "box.suspended", "box.started"}) {
    EXPECT_TRUE(has(types, t)) << t;
  }
}

TEST(SuspendTest, BusyBoxesAreNeverPaused) {
  Daemon d({"--idle-pause", "2"});
  ASSERT_EQ(d.hutch({"run", "--name", "cpu"}).exit_code, 0);
  ASSERT_EQ(d.hutch({"run", "--name", "shell", "--idle-pause", "0"}).exit_code, 0);
  ASSERT_EQ(d.hutch({"run", "--name", "session"}).exit_code, 0);
  ASSERT_EQ(d.hutch({"exec", "-d", "cpu", "--", "sh", "-c", "while :; do :; done"}).exit_code, 0);
  // An exec that runs (and uses no CPU) keeps its box awake while it is open.
  auto o = d.dir() / "s.out";
  auto e = d.dir() / "s.err";
  pid_t sleeper = d.start({"exec", "session", "--", "sleep", "12"}, o, e);
  // Far longer than the idle period, with an idle check every second.
  std::this_thread::sleep_for(10s);
  EXPECT_EQ(d.inspect("cpu")["state"], "running");
  EXPECT_EQ(d.inspect("session")["state"], "running");
  EXPECT_EQ(d.inspect("shell")["state"], "running") << "--idle-pause 0 means never";
  EXPECT_EQ(collect(sleeper, o, e).exit_code, 0);
  // Once the session ended and nothing else runs, it does pause.
  EXPECT_EQ(d.waitForState("session", "paused")["state"], "paused");
}

TEST(SuspendTest, ALifetimeCanEndInASuspendAndBeExtended) {
  Daemon d;
  // Long enough to be read back however slowly the box is made; then cut short (the action
  // stays).
  ASSERT_EQ(d.hutch({"run", "--name", "t", "--timeout", "1h", "--on-timeout", "suspend"}).exit_code,
            0);
  auto b = d.inspect("t");
  EXPECT_EQ(b["on_timeout"], "suspend");
  EXPECT_GT(b["expires_at"].get<int64_t>(), std::time(nullptr) + 3500);
  ASSERT_EQ(d.hutch({"timeout", "t", "2s"}).exit_code, 0);
  EXPECT_EQ(d.waitForState("t", "suspended")["state"], "suspended");
  ASSERT_EQ(d.hutch({"start", "t"}).exit_code, 0);
  // Extended: a new lifetime from now.
  auto set = d.hutch({"timeout", "t", "1h"});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_GT(d.inspect("t")["expires_at"].get<int64_t>(), std::time(nullptr) + 3500);
  ASSERT_EQ(d.hutch({"timeout", "t", "0"}).exit_code, 0);
  EXPECT_EQ(d.inspect("t")["expires_at"], 0);
  EXPECT_EQ(d.hutch({"run", "--name", "bad", "--on-timeout", "suspend"}).exit_code, 64);
  EXPECT_EQ(
      d.hutch({"run", "--name", "bad", "--timeout", "1s", "--on-timeout", "explode"}).exit_code,
      64);
}

// Memory back (issue 15.4): the guest's free page reporting hands what a workload freed back to
// the host. 200 MiB written to the guest's tmpfs are 200 MiB more of QEMU's private memory (the
// copy-on-write of the template's RAM file); once removed, most of it leaves QEMU again.
uint64_t anonKib(pid_t pid) {
  std::ifstream status(fmt::format("/proc/{}/status", pid));
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("RssAnon:", 0) == 0) return std::stoull(line.substr(8));
  }
  ADD_FAILURE() << "no RssAnon in /proc/" << pid << "/status";
  return 0;
}

TEST(SuspendTest, MemoryAGuestFreesGoesBackToTheHost) {
  Daemon d;
  ASSERT_EQ(d.hutch({"run", "--name", "m"}).exit_code, 0);
  const pid_t qemu = d.inspect("m")["pid"].get<int>();
  const uint64_t before = anonKib(qemu);
  out(d, "m", "dd if=/dev/zero of=/dev/shm/fill bs=1M count=200 2>/dev/null; sync");
  const uint64_t filled = anonKib(qemu);
  ASSERT_GE(filled, before + 150 * 1024) << "before " << before << " KiB, filled " << filled;
  out(d, "m", "rm /dev/shm/fill");
  uint64_t now = filled;
  EXPECT_TRUE(eventually(
      [&] {
        now = anonKib(qemu);
        return now + 120 * 1024 <= filled;
      },
      std::chrono::seconds(60)))
      << "QEMU kept the freed memory: before " << before << " KiB, filled " << filled
      << " KiB, after the rm " << now << " KiB";
  // The box is as it was: its files, and a new workload gets the memory again.
  out(d, "m", "dd if=/dev/zero of=/dev/shm/again bs=1M count=100 2>/dev/null; rm /dev/shm/again");
  EXPECT_EQ(out(d, "m", "echo alive"), "alive\n");
}

}  // namespace
}  // namespace hutch::e2e

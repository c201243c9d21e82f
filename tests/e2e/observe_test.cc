// Control end to end with the CLI (docs/observability.md): events and the audit log as hutch
// prints them, their survival across a hutchd restart, a tampered audit log found by
// `hutch audit verify`, commands killed by their time limit, and stop/rm of a box that
// saturates its CPU, disk and network.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <sstream>
#include <thread>

#include "harness.h"
#include "tcp_client.h"

namespace hutch::e2e {
namespace {

using nlohmann::json;

// `hutch ... --json` output of one object a line.
std::vector<json> lines(const std::string& out) {
  std::vector<json> all;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) all.push_back(json::parse(line));
  }
  return all;
}

std::vector<std::string> types(const std::vector<json>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.push_back(e["type"]);
  return out;
}

TEST(ObserveTest, EventsAndTheAuditLogShowWhatHappenedAndSurviveARestart) {
  Daemon d;
  ASSERT_EQ(d.hutch({"run", "--name", "watched"}).exit_code, 0);
  auto exec = d.hutch(
      {"exec", "-e", "SECRET_TOKEN=hunter2", "watched", "--", "sh", "-c", "echo out; exit 4"});
  ASSERT_EQ(exec.exit_code, 4) << exec.err;
  ASSERT_EQ(d.hutch({"checkpoint", "--name", "one", "watched"}).exit_code, 0);
  const std::string port = std::to_string(freePort());
  ASSERT_EQ(d.hutch({"port", "watched", port + ":80"}).exit_code, 0);
  ASSERT_EQ(d.hutch({"port", "rm", "watched", port}).exit_code, 0);
  ASSERT_EQ(d.hutch({"stop", "--shutdown", "watched"}).exit_code, 0);

  auto listed = d.hutch({"events", "--box", "watched", "--json"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  auto events = lines(listed.out);
  auto seen = types(events);
  for (const char* type : {"box.created", "exec.started", "exec.ended", "box.checkpointed",
                           "port.published", "port.unpublished", "box.stopped"}) {
    EXPECT_NE(std::find(seen.begin(), seen.end(), type), seen.end())
        << type << " in " << listed.out;
  }
  auto ended = std::find_if(events.begin(), events.end(),
                            [](const json& e) { return e["type"] == "exec.ended"; });
  ASSERT_NE(ended, events.end());
  EXPECT_EQ((*ended)["data"]["exit_code"], 4);
  EXPECT_EQ((*ended)["data"]["bytes_out"], 4);
  EXPECT_EQ(listed.out.find("hunter2"), std::string::npos);
  // The table form names the box and the types.
  auto table = d.hutch({"events", "--box", "watched", "--type", "box."});
  EXPECT_EQ(table.exit_code, 0);
  EXPECT_NE(table.out.find("box.checkpointed"), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find("exec.ended"), std::string::npos) << table.out;

  d.crashAndRestart();
  auto after = lines(d.hutch({"events", "--box", "watched", "--json"}).out);
  EXPECT_EQ(after.size(), events.size()) << "events did not survive the restart";
  auto audit = d.hutch({"audit", "--box", "watched", "--json"});
  ASSERT_EQ(audit.exit_code, 0) << audit.err;
  auto records = lines(audit.out);
  auto end = std::find_if(records.begin(), records.end(),
                          [](const json& r) { return r["type"] == "exec.end"; });
  ASSERT_NE(end, records.end()) << audit.out;
  EXPECT_EQ((*end)["data"]["env"], json::array({"SECRET_TOKEN"}));
  EXPECT_EQ(audit.out.find("hunter2"), std::string::npos);
  auto verify = d.hutch({"audit", "verify"});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  EXPECT_NE(verify.out.find("intact"), std::string::npos);

  // Removed: the box's trail stays, by id.
  const std::string id = d.inspect("watched")["id"];
  ASSERT_EQ(d.hutch({"rm", "watched"}).exit_code, 0);
  EXPECT_FALSE(lines(d.hutch({"audit", "--box", id, "--json"}).out).empty());
  auto removed = lines(d.hutch({"events", "--box", id, "--json"}).out);
  ASSERT_FALSE(removed.empty());
  EXPECT_EQ(removed.back()["type"], "box.removed");
}

// `hutch events --follow` prints each event when it happens: a line is a few hundred bytes, and
// the CLI used to wait for 64 KiB of the stream before it printed any.
TEST(ObserveTest, EventsFollowPrintsEachEventWhenItHappens) {
  Daemon d;
  const auto out = d.dir() / "follow.out";
  const auto err = d.dir() / "follow.err";
  pid_t follower = d.start({"events", "--follow", "--json", "--type", "box."}, out, err);
  ASSERT_EQ(d.hutch({"run", "--name", "f"}).exit_code, 0);
  EXPECT_TRUE(eventually([&] { return readFile(out).find("box.created") != std::string::npos; }))
      << readFile(out) << readFile(err);
  ASSERT_EQ(d.hutch({"stop", "--shutdown", "f"}).exit_code, 0);
  EXPECT_TRUE(eventually([&] { return readFile(out).find("box.stopped") != std::string::npos; }))
      << readFile(out) << readFile(err);
  ::kill(follower, SIGTERM);
  collect(follower, out, err);
  for (const auto& e : lines(readFile(out))) {
    EXPECT_EQ(e["type"].get<std::string>().rfind("box.", 0), 0u) << e.dump();
  }
}

TEST(ObserveTest, AuditVerifyFindsARemovedRecordAndARestartKeepsTheBreakVisible) {
  Daemon d;
  ASSERT_EQ(d.hutch({"run", "--name", "a"}).exit_code, 0);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(d.hutch({"exec", "a", "--", "true"}).exit_code, 0);
  const auto log = d.stateDir() / "audit" / "audit.log";
  std::vector<std::string> all;
  {
    std::ifstream in(log);
    for (std::string line; std::getline(in, line);) all.push_back(line);
  }
  ASSERT_GE(all.size(), 4u);
  {
    std::ofstream out(log, std::ios::trunc);
    for (size_t i = 0; i < all.size(); ++i) {
      if (i != 1) out << all[i] << "\n";  // the second record goes
    }
  }
  auto verify = d.hutch({"audit", "verify"});
  EXPECT_EQ(verify.exit_code, 1) << verify.out;
  EXPECT_NE(verify.out.find("NOT intact"), std::string::npos) << verify.out;
  EXPECT_NE(verify.out.find("line 2"), std::string::npos) << verify.out;
  // Cut the end off while hutchd is down: on start it notes the cut in the chain itself.
  d.crashAndRestart([&] {
    std::ofstream out(log, std::ios::trunc);
    out << all[0] << "\n" << all[1] << "\n";
  });
  ASSERT_EQ(d.hutch({"exec", "a", "--", "true"}).exit_code, 0);
  auto json_verdict = json::parse(d.hutch({"--json", "audit", "verify"}).out);
  EXPECT_FALSE(json_verdict["intact"]);
  EXPECT_EQ(json_verdict["broken"]["line"], 3) << json_verdict.dump();
  EXPECT_NE(json_verdict["broken"]["reason"].get<std::string>().find("expected to continue"),
            std::string::npos);
}

TEST(ObserveTest, TheGuestKernelsOomKillsAreEvents) {
  Daemon d;
  ASSERT_EQ(d.hutch({"run", "--name", "small", "--memory", "256M"}).exit_code, 0);
  // Touches ever more memory (bytes are written, not just reserved) until the guest's kernel
  // kills it.
  auto hog = d.hutch(
      {"exec", "small", "--", "python3", "-c", "a = []\nwhile True: a.append(b'x' * (16 << 20))"});
  EXPECT_EQ(hog.exit_code, 137) << hog.err;
  std::vector<json> kills;
  for (int i = 0; i < 100 && kills.empty(); ++i) {
    kills = lines(d.hutch({"events", "--box", "small", "--type", "box.oom_kill", "--json"}).out);
    if (kills.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_FALSE(kills.empty()) << "no box.oom_kill event; console:\n"
                              << d.hutch({"logs", "small"}).out;
  EXPECT_EQ(kills[0]["data"]["process"], "python3");
  EXPECT_GT(kills[0]["data"]["pid"].get<int>(), 1);
}

TEST(ObserveTest, CommandsThatRunTooLongAreKilled) {
  Daemon d;
  ASSERT_EQ(d.hutch({"run", "--name", "slow", "--max-exec-time", "2s"}).exit_code, 0);
  EXPECT_EQ(d.inspect("slow")["max_exec_ms"], 2000);
  auto limited = d.hutch({"exec", "--timeout", "500ms", "slow", "--", "sleep", "30"});
  EXPECT_EQ(limited.exit_code, 124) << limited.err;
  EXPECT_NE(limited.err.find("ran longer than 500 ms"), std::string::npos) << limited.err;
  // The box's own limit applies to every command.
  auto boxed = d.hutch({"exec", "slow", "--", "sleep", "30"});
  EXPECT_EQ(boxed.exit_code, 137) << boxed.err;
  // Quick commands are untouched; detached processes are not limited.
  EXPECT_EQ(d.hutch({"exec", "--timeout", "30s", "slow", "--", "true"}).exit_code, 0);
  auto bad = d.hutch({"exec", "--timeout", "soon", "slow", "--", "true"});
  EXPECT_EQ(bad.exit_code, 64) << bad.err;
  EXPECT_NE(bad.err.find("--timeout soon"), std::string::npos) << bad.err;
  EXPECT_EQ(d.hutch({"exec", "-d", "--timeout", "1s", "slow", "--", "true"}).exit_code, 64);
  auto timeouts =
      lines(d.hutch({"events", "--box", "slow", "--type", "exec.timeout", "--json"}).out);
  ASSERT_EQ(timeouts.size(), 2u);
  EXPECT_EQ(timeouts[0]["data"]["limit_ms"], 500);
  EXPECT_EQ(timeouts[1]["data"]["limit_ms"], 2000);
}

TEST(ObserveTest, ARunawayBoxIsStoppedAndRemovedWhileItSaturatesItself) {
  Daemon d;
  ASSERT_EQ(d.hutch({"run", "--name", "runaway"}).exit_code, 0);
  // Every CPU busy, the disk written as fast as it goes, loopback traffic flooding.
  for (const char* load :
       {"while :; do :; done",
        "while :; do dd if=/dev/zero of=/tmp/fill bs=1M count=256 "
        "conv=fsync 2>/dev/null; done",
        "exec python3 -c '\n"
        "import socket, threading\n"
        "s = socket.socket(); s.bind((\"127.0.0.1\", 9)); s.listen()\n"
        "def drain():\n"
        "    c, _ = s.accept()\n"
        "    while c.recv(1 << 20): pass\n"
        "threading.Thread(target=drain, daemon=True).start()\n"
        "c = socket.create_connection((\"127.0.0.1\", 9)); chunk = b\"x\" * (1 << 20)\n"
        "while True: c.sendall(chunk)\n'"}) {
    ASSERT_EQ(d.hutch({"exec", "-d", "-u", "root", "runaway", "--", "sh", "-c", load}).exit_code,
              0);
  }
  // Suspended while it saturates itself (its memory saved with the loops in it)...
  auto suspended = d.hutch({"stop", "runaway"});
  EXPECT_EQ(suspended.exit_code, 0) << suspended.err;
  EXPECT_EQ(d.inspect("runaway")["state"], "suspended");
  ASSERT_EQ(d.hutch({"start", "runaway"}).exit_code, 0);
  // ...and shut down.
  auto stopped = d.hutch({"stop", "--shutdown", "runaway"});
  EXPECT_EQ(stopped.exit_code, 0) << stopped.err;
  EXPECT_EQ(d.inspect("runaway")["state"], "stopped");
  ASSERT_EQ(d.hutch({"start", "runaway"}).exit_code, 0);
  ASSERT_EQ(d.hutch({"exec", "-d", "runaway", "--", "sh", "-c", "while :; do :; done"}).exit_code,
            0);
  auto removed = d.hutch({"rm", "-f", "runaway"});
  EXPECT_EQ(removed.exit_code, 0) << removed.err;
  EXPECT_NE(d.hutch({"inspect", "runaway"}).exit_code, 0);
}

}  // namespace
}  // namespace hutch::e2e

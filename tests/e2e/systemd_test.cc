// The systemd template (images/systemd: systemd is PID 1, hutch-agent one of its services) on
// real boxes: a service the box's user enables with sudo systemctl runs, answers through a
// published port, logs to the journal, and is running again in a fork, after a suspend and after
// a cold boot, and a rollback returns it; the usual operations (exec, cp, detached processes,
// identity) work as on the agent-as-init templates. Needs HUTCH_TEST_SYSTEMD_IMAGE
// (scripts/test.sh builds the template); skipped without it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "harness.h"
#include "tcp_client.h"

namespace hutch::e2e {
namespace {

namespace fs = std::filesystem;

// A service as a user writes one: a small HTTP server, run as the box's user, with a line in the
// journal when it starts.
constexpr const char* kUnit =
    "[Unit]\n"
    "Description=the test's web service\n"
    "After=network.target\n"
    "[Service]\n"
    "User=hutch\n"
    "WorkingDirectory=/srv/www\n"
    "ExecStartPre=/bin/echo serving /srv/www\n"
    "ExecStart=/usr/bin/python3 -m http.server 8000\n"
    "Restart=on-failure\n"
    "[Install]\n"
    "WantedBy=multi-user.target\n";

class SystemdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::getenv("HUTCH_TEST_SYSTEMD_IMAGE") == nullptr) {
      GTEST_SKIP() << "HUTCH_TEST_SYSTEMD_IMAGE is not set: build the systemd template "
                      "(scripts/build-image.sh --recipe images/systemd; scripts/test.sh does)";
    }
    // A warm pool of one: the second box of the template comes from it.
    d_ = std::make_unique<Daemon>(std::vector<std::string>{"--pool-size", "1"});
  }

  Daemon& d() { return *d_; }

  CommandResult sh(const std::string& box, const std::string& script) {
    return d().hutch({"exec", box, "--", "sh", "-c", script});
  }
  // stdout of a script that must succeed.
  std::string out(const std::string& box, const std::string& script) {
    auto r = sh(box, script);
    EXPECT_EQ(r.exit_code, 0) << box << ": " << script << "\n" << r.out << r.err;
    return r.out;
  }
  // Waits (in the box) until systemd has finished booting, and returns its state.
  std::string systemState(const std::string& box) {
    auto r = sh(box, "systemctl is-system-running --wait");
    return r.out;
  }

  std::unique_ptr<Daemon> d_;
};

TEST_F(SystemdTest, AnEnabledServiceRunsAndComesBackInForksAfterSuspendAndAfterAColdBoot) {
  const uint16_t http = freePort();
  auto run = d().hutch(
      {"run", "--name", "sd", "--template", "systemd", "-p", std::to_string(http) + ":8000"});
  ASSERT_EQ(run.exit_code, 0) << run.err;

  // systemd is the init; the agent is one of its services, and exec works as on other templates.
  EXPECT_EQ(out("sd", "cat /proc/1/comm"), "systemd\n");
  EXPECT_EQ(out("sd", "systemctl is-active hutch-agent"), "active\n");
  EXPECT_EQ(systemState("sd"), "running\n") << out("sd", "systemctl --failed --no-pager");
  EXPECT_EQ(out("sd", "id -un"), "hutch\n");

  // A box from the warm pool (restored from the template's snapshot): its own name and machine
  // id, a booted systemd, and a journal that follows the new machine id.
  ASSERT_EQ(d().hutch({"run", "--name", "pooled", "--template", "systemd"}).exit_code, 0);
  EXPECT_EQ(out("pooled", "hostname"), "pooled\n");
  EXPECT_EQ(systemState("pooled"), "running\n");
  EXPECT_NE(out("pooled", "cat /etc/machine-id"), out("sd", "cat /etc/machine-id"));
  EXPECT_EQ(out("pooled",
                "logger -t hutch-test marked; sleep 1; sudo journalctl -t hutch-test "
                "-o cat --no-pager"),
            "marked\n");
  ASSERT_EQ(d().hutch({"rm", "-f", "pooled"}).exit_code, 0);

  // The box's user enables a service with sudo, as on a laptop.
  fs::path unit = d().dir() / "web.service";
  std::ofstream(unit) << kUnit;
  ASSERT_EQ(d().hutch({"cp", unit.string(), "sd:/tmp/web.service"}).exit_code, 0);
  auto enable = sh("sd",
                   "sudo mkdir -p /srv/www && echo 'served by systemd' | sudo tee "
                   "/srv/www/index.html >/dev/null && sudo cp /tmp/web.service "
                   "/etc/systemd/system/web.service && sudo systemctl daemon-reload && sudo "
                   "systemctl enable --now web.service");
  ASSERT_EQ(enable.exit_code, 0) << enable.out << enable.err;
  auto page = waitForHttp(http, "/index.html", "served by systemd");
  ASSERT_TRUE(page) << "the service does not answer through the published port\n"
                    << out("sd", "systemctl status web --no-pager; journalctl -u web --no-pager");
  EXPECT_NE(page->find("served by systemd"), std::string::npos) << *page;
  // journalctl works, for the unit's own lines and systemd's about it.
  std::string journal = out("sd", "sudo journalctl -u web --no-pager -o cat");
  EXPECT_NE(journal.find("serving /srv/www"), std::string::npos) << journal;
  const std::string pid = out("sd", "systemctl show -p MainPID --value web");
  ASSERT_NE(pid, "0\n");

  // A detached process and the box's files, as elsewhere.
  ASSERT_EQ(d().hutch({"exec", "-d", "sd", "--", "sleep", "600"}).exit_code, 0);

  // A fork has the service running (its memory is the parent's) and its own identity.
  auto fork = d().hutch({"fork", "sd", "--name", "sd-fork"});
  ASSERT_EQ(fork.exit_code, 0) << fork.err;
  EXPECT_EQ(out("sd-fork", "systemctl is-active web"), "active\n");
  EXPECT_NE(out("sd-fork", "curl -fsS http://127.0.0.1:8000/index.html").find("served by systemd"),
            std::string::npos);
  EXPECT_EQ(out("sd-fork", "hostname"), "sd-fork\n");
  EXPECT_NE(out("sd-fork", "cat /etc/machine-id"), out("sd", "cat /etc/machine-id"));
  ASSERT_EQ(d().hutch({"rm", "-f", "sd-fork"}).exit_code, 0);

  // A checkpoint holds the running service: disabled and stopped after it, back after rollback.
  ASSERT_EQ(d().hutch({"checkpoint", "--name", "served", "sd"}).exit_code, 0);
  ASSERT_EQ(sh("sd", "sudo systemctl disable --now web").exit_code, 0);
  EXPECT_NE(sh("sd", "systemctl is-active web").exit_code, 0);
  auto rollback = d().hutch({"rollback", "sd", "served"});
  ASSERT_EQ(rollback.exit_code, 0) << rollback.err;
  EXPECT_EQ(out("sd", "systemctl is-enabled web; systemctl show -p MainPID --value web"),
            "enabled\n" + pid);

  // stop suspends: the same service process is there after start, the detached one too.
  ASSERT_EQ(d().hutch({"stop", "sd"}).exit_code, 0);
  ASSERT_EQ(d().hutch({"start", "sd"}).exit_code, 0);
  EXPECT_EQ(out("sd", "systemctl show -p MainPID --value web"), pid);
  EXPECT_EQ(out("sd", "pgrep -x sleep >/dev/null && echo yes"), "yes\n");

  // A cold boot: systemd powers the box off in order and starts the enabled service again.
  auto shutdown = d().hutch({"stop", "--shutdown", "sd"});
  ASSERT_EQ(shutdown.exit_code, 0) << shutdown.err;
  EXPECT_EQ(d().inspect("sd")["state"], "stopped");
  ASSERT_EQ(d().hutch({"start", "sd"}).exit_code, 0);
  EXPECT_EQ(systemState("sd"), "running\n") << out("sd", "systemctl --failed --no-pager");
  EXPECT_EQ(out("sd", "systemctl is-active web"), "active\n");
  EXPECT_NE(out("sd", "curl -fsS http://127.0.0.1:8000/index.html").find("served by systemd"),
            std::string::npos);
  EXPECT_TRUE(waitForHttp(http, "/index.html", "served by systemd"))
      << "the published port does not reach the service after a cold boot";
  // The journal is kept on the disk: the boot before this one is in it.
  std::string boots = out("sd", "sudo journalctl --list-boots --no-pager | wc -l");
  EXPECT_GE(std::stoi(boots), 2) << out("sd", "sudo journalctl --list-boots --no-pager");
  // The box was shut down in order: systemd stopped the service (its line in the last boot).
  std::string last = out("sd", "sudo journalctl -b -1 -u web --no-pager -o cat");
  EXPECT_NE(last.find("Stopped"), std::string::npos) << last;

  ASSERT_EQ(d().hutch({"rm", "-f", "sd"}).exit_code, 0);
}

}  // namespace
}  // namespace hutch::e2e

// The fixture of the jail tests: a fake hutch state directory (two boxes, a template file, a
// database and an API socket), the real cgroup hierarchy, and hutch-jail started the way hutchd
// starts it (sys::spawn with CLONE_NEWPID, the spec in a memfd as fd 3).
#pragma once

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "jail/box_ids.h"
#include "jail/cgroup.h"
#include "jail/jail_spec.h"
#include "sys/spawn.h"

namespace hutch::jail::test {

struct Finished {
  int status = 0;  // waitpid status
  std::string out;
  std::string err;
  bool exited(int code) const { return WIFEXITED(status) && WEXITSTATUS(status) == code; }
  bool killedBy(int sig) const { return WIFSIGNALED(status) && WTERMSIG(status) == sig; }
};

// A jailed process we started: its host pid and the read ends of its stdout and stderr.
struct Running {
  pid_t pid = -1;
  UniqueFd out;
  UniqueFd err;
};

class JailTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // A spec for box `box` ("a", "b"...): its directory read-write, the template file read-only,
  // the probe binary read-only and executable, a cgroup with roomy limits.
  JailSpec specFor(const std::string& box);
  std::filesystem::path boxDir(const std::string& box) const { return root_ / "boxes" / box; }

  // Starts hutch-jail with `spec` and `program`; clone_flags as hutchd will pass them;
  // `extra_fds` are passed on too (the spec's keep_fds say which the program keeps).
  Running start(const JailSpec& spec, const std::vector<std::string>& program,
                unsigned long clone_flags = CLONE_NEWPID,
                const std::vector<sys::FdMapping>& extra_fds = {});
  Finished wait(Running running, std::chrono::seconds timeout = std::chrono::seconds(60));
  Finished run(const JailSpec& spec, const std::vector<std::string>& program) {
    return wait(start(spec, program));
  }
  // Runs the probe with `args` ("read", "/etc/shadow", ",", "whoami"...).
  Finished probe(const JailSpec& spec, const std::vector<std::string>& args);
  // Reads stdout until `text` appears (or the deadline passes); returns what was read.
  std::string readUntil(Running& running, const std::string& text,
                        std::chrono::seconds timeout = std::chrono::seconds(30));

  std::filesystem::path root_;      // the fake /var/lib/hutch (and /run/hutch)
  std::filesystem::path db_;        // a fake hutch.db
  std::filesystem::path socket_;    // a listening fake hutchd.sock
  std::filesystem::path template_;  // a template file (vmlinux)
  UniqueFd listener_;
  std::optional<CgroupHost> cgroups_;
  std::vector<BoxCgroup> made_;  // removed on teardown
  std::vector<pid_t> started_;   // killed on teardown
  uint32_t next_index_ = 0;
};

// Lines of `text` that start with `prefix`, the prefix removed.
std::string lineValue(const std::string& text, const std::string& prefix);

// This process's namespace id, e.g. "mnt:[4026531841]".
std::string ownNamespace(const std::string& ns);

}  // namespace hutch::jail::test

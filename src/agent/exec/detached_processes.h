// DetachedProcesses: the processes started with kExec "detach": true (docs/protocol.md,
// "Detached processes"). Each runs in its own session with stdin /dev/null and stdout and stderr
// appended to LOG_DIR/<id>.log; the agent keeps a record of it (running, then its exit status)
// that outlives every session, answers kProcesses from the records and signals a process's group
// for kSignalProcess.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include "agent/exec/spawn_spec.h"
#include "base/result.h"
#include "base/unique_fd.h"
#include "proto/processes.h"

namespace hutch::agent {

// CLOCK_REALTIME in nanoseconds (ProcessInfo::started_ns).
int64_t realtimeNs();

class DetachedProcesses {
 public:
  // Ended processes beyond this many are forgotten, oldest first (running ones never are).
  static constexpr size_t kKeepEnded = 100;

  explicit DetachedProcesses(std::string log_dir) : log_dir_(std::move(log_dir)) {}

  const std::string& logDir() const { return log_dir_; }

  // Starts spec's process detached (the log directory is created if needed); request is what
  // the host asked for (argv and user are recorded as given).
  Result<proto::ProcessInfo> start(const SpawnSpec& spec, const proto::ExecRequest& request);

  // Takes over a process that was started for a session that has ended (the host that asked
  // for it went away: a new kHello, a restored snapshot): it gets an id and a log file like a
  // detached one, and is listed and signalled like one. The log's descriptor is returned for
  // its output.
  struct Adopted {
    proto::ProcessInfo info;
    UniqueFd log;
  };
  Result<Adopted> adopt(pid_t pid, const std::vector<std::string>& argv, const std::string& user,
                        int64_t started_ns);

  // The reaper collected pid: true if it was one of ours (its status is recorded).
  bool onExited(pid_t pid, int wait_status);

  proto::ProcessList list() const { return proto::ProcessList{processes_}; }

  // Signals the process group of the process with that id.
  Result<> signal(const proto::SignalProcess& request);

 private:
  void forgetOldEnded();
  // A new id and its log file, created exclusively.
  Result<std::pair<proto::ProcessInfo, UniqueFd>> newLog();

  std::string log_dir_;
  std::vector<proto::ProcessInfo> processes_;  // in the order they started
};

}  // namespace hutch::agent

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
#include "proto/processes.h"

namespace hutch::agent {

class DetachedProcesses {
 public:
  // Ended processes beyond this many are forgotten, oldest first (running ones never are).
  static constexpr size_t kKeepEnded = 100;

  explicit DetachedProcesses(std::string log_dir) : log_dir_(std::move(log_dir)) {}

  const std::string& logDir() const { return log_dir_; }

  // Starts spec's process detached (the log directory is created if needed); request is what
  // the host asked for (argv and user are recorded as given).
  Result<proto::ProcessInfo> start(const SpawnSpec& spec, const proto::ExecRequest& request);

  // The reaper collected pid: true if it was one of ours (its status is recorded).
  bool onExited(pid_t pid, int wait_status);

  proto::ProcessList list() const { return proto::ProcessList{processes_}; }

  // Signals the process group of the process with that id.
  Result<> signal(const proto::SignalProcess& request);

 private:
  void forgetOldEnded();

  std::string log_dir_;
  std::vector<proto::ProcessInfo> processes_;  // in the order they started
};

}  // namespace hutch::agent

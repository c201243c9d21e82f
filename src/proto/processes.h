// Detached processes (docs/protocol.md, "Detached processes"): kExec with "detach": true starts
// one; kProcesses lists them and kSignalProcess signals one by the id the agent gave it. Both
// are requests (answered by kResult or kError on their stream) and need the "detach" capability.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "proto/messages.h"

namespace hutch::proto {

// One detached process as the agent knows it.
struct ProcessInfo {
  std::string id;                  // assigned by the agent: 8 lowercase hex digits
  int pid = 0;                     // its process (and process group and session) id
  std::vector<std::string> argv;   // as requested (a resolved path is not substituted)
  std::string user;                // as requested; empty: the agent's default (root)
  int64_t started_ns = 0;          // CLOCK_REALTIME when it started
  std::optional<ExitStatus> exit;  // unset while it runs
  std::string log;                 // its stdout and stderr, in the box

  bool running() const { return !exit.has_value(); }
  bool operator==(const ProcessInfo&) const = default;
};

// kResult of kProcesses: the running ones and the most recent that ended, oldest first.
struct ProcessList {
  std::vector<ProcessInfo> processes;

  bool operator==(const ProcessList&) const = default;
};

// kSignalProcess: sends signal (1-64) to the process group of process `id`. kResult {} on
// success; kError not_found (no such id), failed_precondition (it has ended),
// invalid_argument (not a signal number).
struct SignalProcess {
  std::string id;
  int signal = 0;

  bool operator==(const SignalProcess&) const = default;
};

std::string encodeMessage(const ProcessInfo& message);
std::string encodeMessage(const ProcessList& message);
std::string encodeMessage(const SignalProcess& message);
template <>
Result<ProcessInfo> decodeMessage<ProcessInfo>(std::string_view payload);
template <>
Result<ProcessList> decodeMessage<ProcessList>(std::string_view payload);
template <>
Result<SignalProcess> decodeMessage<SignalProcess>(std::string_view payload);

}  // namespace hutch::proto

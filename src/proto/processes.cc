#include "proto/processes.h"

#include "proto/exit_status_schema.h"
#include "proto/json_fields.h"
#include "proto/schema.h"

namespace hutch::proto {
namespace detail {

// A process's exit status goes on the wire flattened: "running", then "code" or "signal" once
// it has ended. Decoding "running": false makes an empty exit status that "code" or "signal"
// fill in (they are listed after it); while running they are read but ignored.
template <>
struct Schema<ProcessInfo> {
  static bool running(const ProcessInfo& p) { return p.running(); }
  static void setRunning(ProcessInfo& p, bool running) {
    p.exit = running ? std::nullopt : std::optional<ExitStatus>(ExitStatus{});
  }
  static std::optional<int> code(const ProcessInfo& p) {
    return p.exit ? p.exit->code : std::nullopt;
  }
  static void setCode(ProcessInfo& p, std::optional<int> code) {
    if (p.exit) p.exit->code = code;
  }
  static std::optional<int> signal(const ProcessInfo& p) {
    return p.exit ? p.exit->signal : std::nullopt;
  }
  static void setSignal(ProcessInfo& p, std::optional<int> signal) {
    if (p.exit) p.exit->signal = signal;
  }

  static constexpr const char* kName = "process";
  static constexpr const char* kElementName = "A process";
  static constexpr auto kFields = std::tuple(
      field("id", &ProcessInfo::id),
      field("pid", &ProcessInfo::pid, kRequired, {.range = Range{1, kMaxInt}}),
      field("argv", &ProcessInfo::argv), field("user", &ProcessInfo::user, kOptional),
      field("started_ns", &ProcessInfo::started_ns, kOptional, {.range = Range{0, kMaxInt64}}),
      field("log", &ProcessInfo::log, kOptional),
      computed<ProcessInfo, bool>("running", &running, &setRunning),
      computed<ProcessInfo, std::optional<int>>("code", &code, &setCode, kOmitEmpty,
                                                {.range = kExitCodes}),
      computed<ProcessInfo, std::optional<int>>("signal", &signal, &setSignal, kOmitEmpty,
                                                {.range = kExitSignals}));

  static Result<> check(const ProcessInfo& p) {
    if (p.exit && p.exit->code.has_value() == p.exit->signal.has_value()) {
      return fail(Errc::kProtocol, "An ended process needs exactly one of \"code\" and \"signal\"");
    }
    return ok();
  }
};

template <>
struct Schema<ProcessList> {
  static constexpr const char* kName = "process list";
  static constexpr auto kFields = std::tuple(field("processes", &ProcessList::processes));
};

template <>
struct Schema<SignalProcess> {
  static constexpr const char* kName = "signal request";
  static constexpr auto kFields =
      std::tuple(field("id", &SignalProcess::id), field("signal", &SignalProcess::signal));
};

}  // namespace detail

HUTCH_PROTO_CODEC(ProcessInfo)
HUTCH_PROTO_CODEC(ProcessList)
HUTCH_PROTO_CODEC(SignalProcess)

}  // namespace hutch::proto

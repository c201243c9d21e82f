// Internal to proto: the description of ExitStatus, the one message others nest (ServiceStatus's
// "last_exit") or flatten (ProcessInfo's "code" and "signal").
#pragma once

#include "proto/messages.h"
#include "proto/schema.h"

namespace hutch::proto::detail {

inline constexpr Range kExitCodes{0, 255};
inline constexpr Range kExitSignals{1, 127};

template <>
struct Schema<ExitStatus> {
  static constexpr const char* kName = "exit status";
  static constexpr auto kFields =
      std::tuple(field("code", &ExitStatus::code, kOmitEmpty, {.range = kExitCodes}),
                 field("signal", &ExitStatus::signal, kOmitEmpty, {.range = kExitSignals}));

  static Result<> check(const ExitStatus& status) {
    if (status.code.has_value() == status.signal.has_value()) {
      return fail(Errc::kProtocol, "Exit status must have exactly one of \"code\" and \"signal\"");
    }
    return ok();
  }
};

}  // namespace hutch::proto::detail

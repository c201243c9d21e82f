#include "proto/messages.h"

#include <limits>
#include <string>

#include "proto/exit_status_schema.h"
#include "proto/json_fields.h"
#include "proto/schema.h"

namespace hutch::proto {
namespace detail {

// Terminal sizes (rows, cols) are uint16_t as in struct winsize: their type is their range.

template <>
struct Schema<Hello> {
  static constexpr const char* kName = "hello";
  static constexpr auto kFields =
      std::tuple(field("version", &Hello::version), field("host", &Hello::host, kOmitEmpty));
};

template <>
struct Schema<HelloAck> {
  static constexpr const char* kName = "hello acknowledgement";
  static constexpr auto kFields =
      std::tuple(field("version", &HelloAck::version), field("agent", &HelloAck::agent),
                 field("capabilities", &HelloAck::capabilities));
};

template <>
struct Schema<ExecRequest> {
  static constexpr const char* kName = "exec request";
  static constexpr auto kFields = std::tuple(
      field("argv", &ExecRequest::argv), field("env", &ExecRequest::env, kOptional),
      field("cwd", &ExecRequest::cwd, kOmitEmpty), field("user", &ExecRequest::user, kOmitEmpty),
      field("stdin", &ExecRequest::pipe_stdin, kOptional),
      field("tty", &ExecRequest::tty, kOmitEmpty),
      field("login_shell", &ExecRequest::login_shell, kOmitEmpty),
      field("detach", &ExecRequest::detach, kOmitEmpty),
      field("rows", &ExecRequest::rows, kOmitEmpty), field("cols", &ExecRequest::cols, kOmitEmpty));

  static Result<> check(const ExecRequest& request) { return validate(request); }
};

template <>
struct Schema<Started> {
  static constexpr const char* kName = "started";
  static constexpr auto kFields =
      std::tuple(field("pid", &Started::pid, kRequired, {.range = Range{1, kMaxInt}}),
                 field("id", &Started::id, kOmitEmpty), field("log", &Started::log, kOmitEmpty));
};

template <>
struct Schema<SignalRequest> {
  static constexpr const char* kName = "signal request";
  static constexpr auto kFields = std::tuple(field("signal", &SignalRequest::signal));
};

template <>
struct Schema<WindowSize> {
  static constexpr const char* kName = "window size";
  static constexpr auto kFields =
      std::tuple(field("rows", &WindowSize::rows), field("cols", &WindowSize::cols));
};

template <>
struct Schema<ErrorMessage> {
  static constexpr const char* kName = "error";
  static constexpr auto kFields = std::tuple(field("code", &ErrorMessage::code),
                                             field("message", &ErrorMessage::message, kOptional));
};

}  // namespace detail

using detail::hasNul;

bool HelloAck::hasCapability(std::string_view name) const {
  for (const auto& c : capabilities) {
    if (c == name) return true;
  }
  return false;
}

Result<> validate(const ExecRequest& request) {
  if (request.login_shell) {
    if (!request.argv.empty()) {
      return fail(Errc::kInvalidArgument,
                  "A login shell request takes no command (argv must be empty)");
    }
  } else {
    if (request.argv.empty()) return fail(Errc::kInvalidArgument, "The command (argv) is empty");
    if (request.argv[0].empty()) return fail(Errc::kInvalidArgument, "The command name is empty");
  }
  for (const auto& arg : request.argv) {
    if (hasNul(arg)) return fail(Errc::kInvalidArgument, "A command argument contains a NUL byte");
  }
  for (const auto& entry : request.env) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) {
      return fail(Errc::kInvalidArgument,
                  "Environment entry \"" + entry + "\" must have the form KEY=VALUE");
    }
    if (hasNul(entry)) {
      return fail(Errc::kInvalidArgument, "An environment entry contains a NUL byte");
    }
  }
  if (hasNul(request.cwd)) return fail(Errc::kInvalidArgument, "The cwd contains a NUL byte");
  if (!request.cwd.empty() && request.cwd[0] != '/') {
    return fail(Errc::kInvalidArgument, "The cwd \"" + request.cwd + "\" must be absolute");
  }
  if (hasNul(request.user)) return fail(Errc::kInvalidArgument, "The user contains a NUL byte");
  if (request.detach && (request.pipe_stdin || request.tty || request.login_shell)) {
    return fail(Errc::kInvalidArgument,
                "A detached process has no stdin and no terminal (drop stdin, tty and "
                "login_shell, or do not detach)");
  }
  return ok();
}

std::optional<Errc> errcFromName(std::string_view name) {
  for (Errc code : kAllErrcs) {
    if (errcName(code) == name) return code;
  }
  return std::nullopt;
}

ErrorMessage ErrorMessage::fromError(const Error& error) {
  return ErrorMessage{std::string(errcName(error.code())), error.describe()};
}

Error ErrorMessage::toError() const {
  if (auto code_value = errcFromName(code)) return Error(*code_value, message);
  return Error(Errc::kInternal, message + " (agent error code \"" + code + "\")");
}

HUTCH_PROTO_CODEC(Hello)
HUTCH_PROTO_CODEC(HelloAck)
HUTCH_PROTO_CODEC(ExecRequest)
HUTCH_PROTO_CODEC(Started)
HUTCH_PROTO_CODEC(ExitStatus)
HUTCH_PROTO_CODEC(SignalRequest)
HUTCH_PROTO_CODEC(WindowSize)
HUTCH_PROTO_CODEC(ErrorMessage)

std::string encodeWindow(uint32_t increment) {
  return std::string{
      static_cast<char>(increment & 0xff), static_cast<char>((increment >> 8) & 0xff),
      static_cast<char>((increment >> 16) & 0xff), static_cast<char>((increment >> 24) & 0xff)};
}

Result<uint32_t> decodeWindow(std::string_view payload) {
  if (payload.size() != 4) {
    return fail(Errc::kProtocol,
                "Window payload must be 4 bytes, got " + std::to_string(payload.size()));
  }
  const auto* u = reinterpret_cast<const unsigned char*>(payload.data());
  return static_cast<uint32_t>(u[0]) | (static_cast<uint32_t>(u[1]) << 8) |
         (static_cast<uint32_t>(u[2]) << 16) | (static_cast<uint32_t>(u[3]) << 24);
}

}  // namespace hutch::proto

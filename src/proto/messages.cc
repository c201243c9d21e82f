#include "proto/messages.h"

#include <limits>
#include <string>

#include "proto/json_fields.h"

namespace hutch::proto {
namespace {

using detail::dump;
using detail::hasNul;
using detail::Json;
using detail::parseObject;
using detail::readBool;
using detail::readInt;
using detail::readString;
using detail::readStringList;

// A terminal dimension in character cells (struct winsize holds unsigned shorts).
constexpr int64_t kMaxCells = std::numeric_limits<uint16_t>::max();

Result<uint32_t> readVersion(const Json& j) {
  std::optional<int64_t> version;
  HUTCH_TRY_VOID(readInt(j, "version", true, 0, std::numeric_limits<uint32_t>::max(), version));
  return static_cast<uint32_t>(*version);
}

}  // namespace

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

std::string encodeMessage(const Hello& message) {
  Json j = {{"version", message.version}};
  if (!message.host.empty()) j["host"] = message.host;
  return dump(j);
}

std::string encodeMessage(const HelloAck& message) {
  return dump({{"version", message.version},
               {"agent", message.agent},
               {"capabilities", message.capabilities}});
}

std::string encodeMessage(const ExecRequest& message) {
  Json j = {{"argv", message.argv}, {"env", message.env}, {"stdin", message.pipe_stdin}};
  if (!message.cwd.empty()) j["cwd"] = message.cwd;
  if (!message.user.empty()) j["user"] = message.user;
  if (message.tty) j["tty"] = true;
  if (message.rows != 0) j["rows"] = message.rows;
  if (message.cols != 0) j["cols"] = message.cols;
  if (message.login_shell) j["login_shell"] = true;
  if (message.detach) j["detach"] = true;
  return dump(j);
}

std::string encodeMessage(const Started& message) {
  Json j = {{"pid", message.pid}};
  if (!message.id.empty()) j["id"] = message.id;
  if (!message.log.empty()) j["log"] = message.log;
  return dump(j);
}

std::string encodeMessage(const ExitStatus& message) {
  Json j = Json::object();
  if (message.code) j["code"] = *message.code;
  if (message.signal) j["signal"] = *message.signal;
  return dump(j);
}

std::string encodeMessage(const SignalRequest& message) {
  return dump({{"signal", message.signal}});
}

std::string encodeMessage(const WindowSize& message) {
  return dump({{"rows", message.rows}, {"cols", message.cols}});
}

std::string encodeMessage(const ErrorMessage& message) {
  return dump({{"code", message.code}, {"message", message.message}});
}

template <>
Result<Hello> decodeMessage<Hello>(std::string_view payload) {
  HUTCH_TRY(Json j, parseObject(payload, "hello"));
  Hello hello;
  HUTCH_TRY(hello.version, readVersion(j));
  HUTCH_TRY_VOID(readString(j, "host", false, hello.host));
  return hello;
}

template <>
Result<HelloAck> decodeMessage<HelloAck>(std::string_view payload) {
  HUTCH_TRY(Json j, parseObject(payload, "hello acknowledgement"));
  HelloAck ack;
  HUTCH_TRY(ack.version, readVersion(j));
  HUTCH_TRY_VOID(readString(j, "agent", true, ack.agent));
  HUTCH_TRY_VOID(readStringList(j, "capabilities", true, ack.capabilities));
  return ack;
}

template <>
Result<ExecRequest> decodeMessage<ExecRequest>(std::string_view payload) {
  HUTCH_TRY(Json j, parseObject(payload, "exec request"));
  ExecRequest request;
  HUTCH_TRY_VOID(readStringList(j, "argv", true, request.argv));
  HUTCH_TRY_VOID(readStringList(j, "env", false, request.env));
  HUTCH_TRY_VOID(readString(j, "cwd", false, request.cwd));
  HUTCH_TRY_VOID(readString(j, "user", false, request.user));
  HUTCH_TRY_VOID(readBool(j, "stdin", false, request.pipe_stdin));
  HUTCH_TRY_VOID(readBool(j, "tty", false, request.tty));
  HUTCH_TRY_VOID(readBool(j, "login_shell", false, request.login_shell));
  HUTCH_TRY_VOID(readBool(j, "detach", false, request.detach));
  std::optional<int64_t> rows;
  std::optional<int64_t> cols;
  HUTCH_TRY_VOID(readInt(j, "rows", false, 0, kMaxCells, rows));
  HUTCH_TRY_VOID(readInt(j, "cols", false, 0, kMaxCells, cols));
  request.rows = static_cast<uint16_t>(rows.value_or(0));
  request.cols = static_cast<uint16_t>(cols.value_or(0));
  HUTCH_TRY_VOID(validate(request));
  return request;
}

template <>
Result<Started> decodeMessage<Started>(std::string_view payload) {
  HUTCH_TRY(Json j, parseObject(payload, "started"));
  std::optional<int64_t> pid;
  HUTCH_TRY_VOID(readInt(j, "pid", true, 1, std::numeric_limits<int>::max(), pid));
  Started started;
  started.pid = static_cast<int>(*pid);
  HUTCH_TRY_VOID(readString(j, "id", false, started.id));
  HUTCH_TRY_VOID(readString(j, "log", false, started.log));
  return started;
}

template <>
Result<ExitStatus> decodeMessage<ExitStatus>(std::string_view payload) {
  HUTCH_TRY(Json j, parseObject(payload, "exit status"));
  std::optional<int64_t> code;
  std::optional<int64_t> signal;
  HUTCH_TRY_VOID(readInt(j, "code", false, 0, 255, code));
  HUTCH_TRY_VOID(readInt(j, "signal", false, 1, 127, signal));
  if (code.has_value() == signal.has_value()) {
    return fail(Errc::kProtocol, "Exit status must have exactly one of \"code\" and \"signal\"");
  }
  ExitStatus status;
  if (code) status.code = static_cast<int>(*code);
  if (signal) status.signal = static_cast<int>(*signal);
  return status;
}

template <>
Result<SignalRequest> decodeMessage<SignalRequest>(std::string_view payload) {
  HUTCH_TRY(Json j, parseObject(payload, "signal request"));
  std::optional<int64_t> signal;
  HUTCH_TRY_VOID(readInt(j, "signal", true, std::numeric_limits<int>::min(),
                         std::numeric_limits<int>::max(), signal));
  return SignalRequest{static_cast<int>(*signal)};
}

template <>
Result<WindowSize> decodeMessage<WindowSize>(std::string_view payload) {
  HUTCH_TRY(Json j, parseObject(payload, "window size"));
  std::optional<int64_t> rows;
  std::optional<int64_t> cols;
  HUTCH_TRY_VOID(readInt(j, "rows", true, 0, kMaxCells, rows));
  HUTCH_TRY_VOID(readInt(j, "cols", true, 0, kMaxCells, cols));
  return WindowSize{static_cast<uint16_t>(*rows), static_cast<uint16_t>(*cols)};
}

template <>
Result<ErrorMessage> decodeMessage<ErrorMessage>(std::string_view payload) {
  HUTCH_TRY(Json j, parseObject(payload, "error"));
  ErrorMessage error;
  HUTCH_TRY_VOID(readString(j, "code", true, error.code));
  HUTCH_TRY_VOID(readString(j, "message", false, error.message));
  return error;
}

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

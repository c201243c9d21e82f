#include "api/exec_model.h"

#include <fmt/format.h>

#include <algorithm>

#include "api/encoding.h"
#include "api/json_model.h"

namespace hutch::api {

namespace {

Result<> readArgv(const json& j, std::vector<std::string>& argv, std::string_view what) {
  auto it = j.find("argv");
  if (it == j.end() || it->is_null()) return ok();
  if (!it->is_array()) {
    return fail(Errc::kInvalidArgument,
                fmt::format("Field 'argv' in {} must be an array of strings", what));
  }
  for (const auto& arg : *it) {
    if (!arg.is_string()) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("Field 'argv' in {} must be an array of strings", what));
    }
    argv.push_back(arg.get<std::string>());
  }
  return ok();
}

Result<> readCommon(const json& j, proto::ExecRequest& exec, std::string_view what) {
  HUTCH_TRY_VOID(readArgv(j, exec.argv, what));
  HUTCH_TRY_VOID(readEnv(j, exec.env, what));
  HUTCH_TRY_VOID(readField(j, "cwd", exec.cwd, what));
  HUTCH_TRY_VOID(readField(j, "user", exec.user, what));
  return ok();
}

template <class T>
Result<std::optional<T>> readOptional(const json& j, const char* key, std::string_view what) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<T>();
  T value{};
  HUTCH_TRY_VOID(readField(j, key, value, what));
  return std::optional<T>(std::move(value));
}

Result<> checked(const proto::ExecRequest& exec) {
  if (auto valid = proto::validate(exec); !valid) {
    return fail(Errc::kInvalidArgument, valid.error().message());
  }
  return ok();
}

Result<uint64_t> readTimeout(const json& j, std::string_view what) {
  HUTCH_TRY(auto timeout, readOptional<int64_t>(j, "timeout_ms", what));
  if (timeout && *timeout < 0) {
    return fail(Errc::kInvalidArgument, "'timeout_ms' must be 0 (none) or more milliseconds");
  }
  return static_cast<uint64_t>(timeout.value_or(0));
}

}  // namespace

Result<> readEnv(const json& j, std::vector<std::string>& out, std::string_view what) {
  auto it = j.find("env");
  if (it == j.end() || it->is_null()) return ok();
  auto wrong = [&] {
    return fail(Errc::kInvalidArgument,
                fmt::format("Field 'env' in {} must be an object of strings ({{\"K\": \"V\"}}) "
                            "or an array of \"K=V\" strings",
                            what));
  };
  if (it->is_object()) {
    for (const auto& [key, value] : it->items()) {
      if (!value.is_string()) return wrong();
      out.push_back(key + "=" + value.get<std::string>());
    }
    return ok();
  }
  if (!it->is_array()) return wrong();
  for (const auto& entry : *it) {
    if (!entry.is_string()) return wrong();
    out.push_back(entry.get<std::string>());
  }
  return ok();
}

Result<ExecRun> parseExecRun(std::string_view body) {
  constexpr std::string_view kWhat = "the exec request";
  HUTCH_TRY(json j, parseObject(body));
  HUTCH_TRY_VOID(rejectUnknownFields(
      j, {"argv", "env", "cwd", "user", "stdin", "stdin_base64", "timeout_ms", "max_output_bytes"},
      kWhat));
  ExecRun run;
  HUTCH_TRY_VOID(readCommon(j, run.exec, kWhat));
  if (run.exec.argv.empty()) {
    return fail(Errc::kInvalidArgument,
                "The exec request needs 'argv': the command and its arguments, e.g. "
                "[\"sh\", \"-c\", \"echo hi\"]");
  }
  HUTCH_TRY(auto text, readOptional<std::string>(j, "stdin", kWhat));
  HUTCH_TRY(auto b64, readOptional<std::string>(j, "stdin_base64", kWhat));
  if (text && b64) {
    return fail(Errc::kInvalidArgument,
                "Give 'stdin' (text) or 'stdin_base64' (bytes) in the exec request, not both");
  }
  if (b64) {
    HUTCH_TRY(std::string bytes, base64Decode(*b64, "Field 'stdin_base64'"));
    run.stdin_data = std::move(bytes);
  } else if (text) {
    run.stdin_data = std::move(*text);
  }
  run.exec.pipe_stdin = run.stdin_data.has_value();
  HUTCH_TRY(run.timeout_ms, readTimeout(j, kWhat));
  HUTCH_TRY(auto max_output, readOptional<int64_t>(j, "max_output_bytes", kWhat));
  if (max_output) {
    if (*max_output < 1 || static_cast<uint64_t>(*max_output) > kMaxMaxOutput) {
      return fail(
          Errc::kInvalidArgument,
          fmt::format("'max_output_bytes' must be 1 to {} (64 MiB) per stream", kMaxMaxOutput));
    }
    run.max_output_bytes = static_cast<uint64_t>(*max_output);
  }
  HUTCH_TRY_VOID(checked(run.exec));
  return run;
}

Result<ExecStart> parseExecStart(std::string_view message) {
  constexpr std::string_view kWhat = "the exec request (the WebSocket's first message)";
  HUTCH_TRY(json j, parseObject(message));
  HUTCH_TRY_VOID(rejectUnknownFields(
      j,
      {"argv", "env", "cwd", "user", "stdin", "tty", "rows", "cols", "login_shell", "timeout_ms"},
      kWhat));
  proto::ExecRequest exec;
  HUTCH_TRY_VOID(readCommon(j, exec, kWhat));
  HUTCH_TRY_VOID(readField(j, "stdin", exec.pipe_stdin, kWhat));
  HUTCH_TRY_VOID(readField(j, "tty", exec.tty, kWhat));
  HUTCH_TRY_VOID(readField(j, "login_shell", exec.login_shell, kWhat));
  HUTCH_TRY(auto rows, readOptional<int64_t>(j, "rows", kWhat));
  HUTCH_TRY(auto cols, readOptional<int64_t>(j, "cols", kWhat));
  for (auto [name, value] : {std::pair{"rows", rows}, std::pair{"cols", cols}}) {
    if (value && (*value < 0 || *value > 10000)) {
      return fail(Errc::kInvalidArgument, fmt::format("'{}' must be 0 to 10000", name));
    }
  }
  exec.rows = static_cast<uint16_t>(rows.value_or(0));
  exec.cols = static_cast<uint16_t>(cols.value_or(0));
  HUTCH_TRY_VOID(checked(exec));
  HUTCH_TRY(uint64_t timeout_ms, readTimeout(j, kWhat));
  return ExecStart{std::move(exec), timeout_ms};
}

std::optional<WsControl> parseWsControl(std::string_view message) {
  json control = json::parse(message, nullptr, false);
  if (!control.is_object()) return std::nullopt;
  auto type = control.find("type");
  if (type == control.end() || !type->is_string()) return std::nullopt;
  auto field = [&](const char* name) -> const json* {
    auto it = control.find(name);
    return it == control.end() ? nullptr : &*it;
  };
  if (*type == "stdin_eof") return WsControl{.kind = WsControl::Kind::kStdinEof};
  if (*type == "resize") {
    const json* rows = field("rows");
    const json* cols = field("cols");
    if (rows == nullptr || cols == nullptr || !rows->is_number_unsigned() ||
        !cols->is_number_unsigned()) {
      return std::nullopt;
    }
    return WsControl{
        .kind = WsControl::Kind::kResize,
        .rows = static_cast<uint16_t>(std::min<uint64_t>(rows->get<uint64_t>(), 10000)),
        .cols = static_cast<uint16_t>(std::min<uint64_t>(cols->get<uint64_t>(), 10000))};
  }
  if (*type == "signal") {
    const json* signal = field("signal");
    if (signal == nullptr || !signal->is_number_integer()) return std::nullopt;
    // Read as the JSON's own kind: a large unsigned number is no signal, not a wrapped one.
    if (signal->is_number_unsigned() && signal->get<uint64_t>() > 64) return std::nullopt;
    int64_t signo = signal->get<int64_t>();
    if (signo < 1 || signo > 64) return std::nullopt;
    return WsControl{.kind = WsControl::Kind::kSignal, .signal = static_cast<int>(signo)};
  }
  return std::nullopt;
}

Result<ExecStart> parseExecRequest(std::string_view body, std::string_view what) {
  HUTCH_TRY(json j, parseObject(body));
  HUTCH_TRY_VOID(rejectUnknownFields(j,
                                     {"argv", "env", "cwd", "user", "stdin", "tty", "rows", "cols",
                                      "login_shell", "detach", "timeout_ms"},
                                     what));
  HUTCH_TRY(uint64_t timeout_ms, readTimeout(j, what));
  j.erase("timeout_ms");  // the host's, not the agent's
  auto request = proto::decodeMessage<proto::ExecRequest>(j.dump());
  if (!request) {
    return fail(Errc::kInvalidArgument,
                fmt::format("Bad request ({}): {}", what, request.error().message()));
  }
  if (request->detach && timeout_ms != 0) {
    return fail(Errc::kInvalidArgument,
                "A detached process has no time limit: leave out 'timeout_ms' or 'detach'");
  }
  return ExecStart{std::move(*request), timeout_ms};
}

json toJson(const ExecOutcome& o) {
  auto text = [](const std::string& bytes) {
    return isValidUtf8(bytes) ? std::pair{bytes, std::string("utf-8")}
                              : std::pair{base64Encode(bytes), std::string("base64")};
  };
  auto [out, out_encoding] = text(o.stdout_data);
  auto [err, err_encoding] = text(o.stderr_data);
  json error = nullptr;
  if (o.error) error = errorJson(*o.error)["error"];
  return json{{"stdout", out},
              {"stderr", err},
              {"stdout_encoding", out_encoding},
              {"stderr_encoding", err_encoding},
              {"exit_code", o.status.code ? json(*o.status.code) : json(nullptr)},
              {"signal", o.status.signal ? json(*o.status.signal) : json(nullptr)},
              {"duration_ms", o.duration_ms},
              {"truncated", o.truncated},
              {"timed_out", o.timed_out},
              {"pid", o.pid},
              {"error", error}};
}

}  // namespace hutch::api

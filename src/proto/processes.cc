#include "proto/processes.h"

#include <limits>

#include "proto/json_fields.h"

namespace hutch::proto {
namespace {

using detail::Json;

Json toJson(const ProcessInfo& p) {
  Json j = {{"id", p.id},
            {"pid", p.pid},
            {"argv", p.argv},
            {"user", p.user},
            {"started_ns", p.started_ns},
            {"running", p.running()},
            {"log", p.log}};
  if (p.exit && p.exit->code) j["code"] = *p.exit->code;
  if (p.exit && p.exit->signal) j["signal"] = *p.exit->signal;
  return j;
}

Result<ProcessInfo> fromJson(const Json& j) {
  if (!j.is_object()) return fail(Errc::kProtocol, "A process must be a JSON object");
  ProcessInfo p;
  HUTCH_TRY_VOID(detail::readString(j, "id", true, p.id));
  std::optional<int64_t> pid;
  HUTCH_TRY_VOID(detail::readInt(j, "pid", true, 1, std::numeric_limits<int>::max(), pid));
  p.pid = static_cast<int>(*pid);
  HUTCH_TRY_VOID(detail::readStringList(j, "argv", true, p.argv));
  HUTCH_TRY_VOID(detail::readString(j, "user", false, p.user));
  std::optional<int64_t> started;
  HUTCH_TRY_VOID(
      detail::readInt(j, "started_ns", false, 0, std::numeric_limits<int64_t>::max(), started));
  p.started_ns = started.value_or(0);
  HUTCH_TRY_VOID(detail::readString(j, "log", false, p.log));
  bool running = true;
  HUTCH_TRY_VOID(detail::readBool(j, "running", true, running));
  std::optional<int64_t> code;
  std::optional<int64_t> signal;
  HUTCH_TRY_VOID(detail::readInt(j, "code", false, 0, 255, code));
  HUTCH_TRY_VOID(detail::readInt(j, "signal", false, 1, 127, signal));
  if (!running) {
    if (code.has_value() == signal.has_value()) {
      return fail(Errc::kProtocol, "An ended process needs exactly one of \"code\" and \"signal\"");
    }
    p.exit = code ? ExitStatus::exited(static_cast<int>(*code))
                  : ExitStatus::signaled(static_cast<int>(*signal));
  }
  return p;
}

}  // namespace

std::string encodeMessage(const ProcessInfo& message) {
  return detail::dump(toJson(message));
}

std::string encodeMessage(const ProcessList& message) {
  Json list = Json::array();
  for (const auto& p : message.processes) list.push_back(toJson(p));
  return detail::dump({{"processes", list}});
}

std::string encodeMessage(const SignalProcess& message) {
  return detail::dump({{"id", message.id}, {"signal", message.signal}});
}

template <>
Result<ProcessInfo> decodeMessage<ProcessInfo>(std::string_view payload) {
  HUTCH_TRY(Json j, detail::parseObject(payload, "process"));
  return fromJson(j);
}

template <>
Result<ProcessList> decodeMessage<ProcessList>(std::string_view payload) {
  HUTCH_TRY(Json j, detail::parseObject(payload, "process list"));
  auto it = j.find("processes");
  if (it == j.end() || !it->is_array()) {
    return fail(Errc::kProtocol, "Field \"processes\" must be an array");
  }
  ProcessList list;
  for (const Json& item : *it) {
    HUTCH_TRY(ProcessInfo p, fromJson(item));
    list.processes.push_back(std::move(p));
  }
  return list;
}

template <>
Result<SignalProcess> decodeMessage<SignalProcess>(std::string_view payload) {
  HUTCH_TRY(Json j, detail::parseObject(payload, "signal request"));
  SignalProcess request;
  HUTCH_TRY_VOID(detail::readString(j, "id", true, request.id));
  std::optional<int64_t> signal;
  HUTCH_TRY_VOID(detail::readInt(j, "signal", true, std::numeric_limits<int>::min(),
                                 std::numeric_limits<int>::max(), signal));
  request.signal = static_cast<int>(*signal);
  return request;
}

}  // namespace hutch::proto

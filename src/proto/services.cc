#include "proto/services.h"

#include <limits>

#include "proto/json_fields.h"

namespace hutch::proto {
namespace {

using detail::Json;

}  // namespace

std::string_view restartPolicyName(RestartPolicy policy) {
  switch (policy) {
    case RestartPolicy::kAlways: return "always";
    case RestartPolicy::kOnFailure: return "on-failure";
    case RestartPolicy::kNever: return "never";
  }
  return "always";
}

bool isValidServiceName(std::string_view name) {
  if (name.empty() || name.size() > 64 || name[0] == '.') return false;
  for (char c : name) {
    const bool good = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '.' || c == '-';
    if (!good) return false;
  }
  return true;
}

Result<ServiceSpec> parseServiceSpec(std::string_view json) {
  HUTCH_TRY(Json j, detail::parseObject(json, "service file"));
  ServiceSpec spec;
  HUTCH_TRY_VOID(detail::readStringList(j, "argv", true, spec.argv));
  HUTCH_TRY_VOID(detail::readStringList(j, "env", false, spec.env));
  HUTCH_TRY_VOID(detail::readString(j, "user", false, spec.user));
  HUTCH_TRY_VOID(detail::readString(j, "cwd", false, spec.cwd));
  std::string restart = "always";
  HUTCH_TRY_VOID(detail::readString(j, "restart", false, restart));
  if (restart == "always") {
    spec.restart = RestartPolicy::kAlways;
  } else if (restart == "on-failure") {
    spec.restart = RestartPolicy::kOnFailure;
  } else if (restart == "never") {
    spec.restart = RestartPolicy::kNever;
  } else {
    return fail(Errc::kInvalidArgument,
                "Restart policy \"" + restart + "\" is not one of always, on-failure, never");
  }
  // The same rules as an exec request's.
  ExecRequest as_exec;
  as_exec.argv = spec.argv;
  as_exec.env = spec.env;
  as_exec.user = spec.user;
  as_exec.cwd = spec.cwd;
  HUTCH_TRY_VOID(validate(as_exec));
  return spec;
}

std::string encodeServiceSpec(const ServiceSpec& spec) {
  Json j = {{"argv", spec.argv}, {"restart", restartPolicyName(spec.restart)}};
  if (!spec.env.empty()) j["env"] = spec.env;
  if (!spec.user.empty()) j["user"] = spec.user;
  if (!spec.cwd.empty()) j["cwd"] = spec.cwd;
  return detail::dump(j);
}

std::string encodeMessage(const ServiceList& message) {
  Json list = Json::array();
  for (const auto& s : message.services) {
    Json j = {{"name", s.name},
              {"state", s.state},
              {"restarts", s.restarts},
              {"started_ns", s.started_ns},
              {"log", s.log}};
    if (s.pid != 0) j["pid"] = s.pid;
    if (s.last_exit && s.last_exit->code) j["last_exit"] = {{"code", *s.last_exit->code}};
    if (s.last_exit && s.last_exit->signal) j["last_exit"] = {{"signal", *s.last_exit->signal}};
    if (!s.error.empty()) j["error"] = s.error;
    list.push_back(std::move(j));
  }
  return detail::dump({{"services", list}});
}

template <>
Result<ServiceList> decodeMessage<ServiceList>(std::string_view payload) {
  HUTCH_TRY(Json j, detail::parseObject(payload, "service list"));
  auto it = j.find("services");
  if (it == j.end() || !it->is_array()) {
    return fail(Errc::kProtocol, "Field \"services\" must be an array");
  }
  ServiceList list;
  for (const Json& item : *it) {
    if (!item.is_object()) return fail(Errc::kProtocol, "A service must be a JSON object");
    ServiceStatus s;
    HUTCH_TRY_VOID(detail::readString(item, "name", true, s.name));
    HUTCH_TRY_VOID(detail::readString(item, "state", true, s.state));
    std::optional<int64_t> pid;
    std::optional<int64_t> restarts;
    std::optional<int64_t> started;
    HUTCH_TRY_VOID(detail::readInt(item, "pid", false, 0, std::numeric_limits<int>::max(), pid));
    HUTCH_TRY_VOID(detail::readInt(item, "restarts", false, 0, std::numeric_limits<uint32_t>::max(),
                                   restarts));
    HUTCH_TRY_VOID(detail::readInt(item, "started_ns", false, 0,
                                   std::numeric_limits<int64_t>::max(), started));
    s.pid = static_cast<int>(pid.value_or(0));
    s.restarts = static_cast<uint32_t>(restarts.value_or(0));
    s.started_ns = started.value_or(0);
    if (auto exit = item.find("last_exit"); exit != item.end()) {
      HUTCH_TRY(s.last_exit, decodeMessage<ExitStatus>(exit->dump()));
    }
    HUTCH_TRY_VOID(detail::readString(item, "error", false, s.error));
    HUTCH_TRY_VOID(detail::readString(item, "log", false, s.log));
    list.services.push_back(std::move(s));
  }
  return list;
}

}  // namespace hutch::proto

#include "proto/services.h"

#include <array>
#include <string>
#include <utility>

#include "proto/exit_status_schema.h"
#include "proto/json_fields.h"
#include "proto/schema.h"

namespace hutch::proto {
namespace detail {

template <>
struct EnumNames<RestartPolicy> {
  static constexpr std::array<std::pair<RestartPolicy, std::string_view>, 3> kNames = {{
      {RestartPolicy::kAlways, "always"},
      {RestartPolicy::kOnFailure, "on-failure"},
      {RestartPolicy::kNever, "never"},
  }};
  // A service file is the image's, not a peer's: a bad value, not a broken protocol.
  static Error unknown(std::string_view name) {
    return Error(Errc::kInvalidArgument, "Restart policy \"" + std::string(name) +
                                             "\" is not one of always, on-failure, never");
  }
};

template <>
struct Schema<ServiceSpec> {
  static constexpr const char* kName = "service file";
  static constexpr auto kFields = std::tuple(
      field("argv", &ServiceSpec::argv), field("env", &ServiceSpec::env, kOmitEmpty),
      field("user", &ServiceSpec::user, kOmitEmpty), field("cwd", &ServiceSpec::cwd, kOmitEmpty),
      field("restart", &ServiceSpec::restart, kOptional));

  // The same rules as an exec request's.
  static Result<> check(const ServiceSpec& spec) {
    ExecRequest as_exec;
    as_exec.argv = spec.argv;
    as_exec.env = spec.env;
    as_exec.user = spec.user;
    as_exec.cwd = spec.cwd;
    return validate(as_exec);
  }
};

template <>
struct Schema<ServiceStatus> {
  static constexpr const char* kName = "service";
  static constexpr const char* kElementName = "A service";
  static constexpr auto kFields = std::tuple(
      field("name", &ServiceStatus::name), field("state", &ServiceStatus::state),
      field("pid", &ServiceStatus::pid, kOmitEmpty, {.range = Range{0, kMaxInt}}),
      field("restarts", &ServiceStatus::restarts, kOptional),
      field("started_ns", &ServiceStatus::started_ns, kOptional, {.range = Range{0, kMaxInt64}}),
      field("last_exit", &ServiceStatus::last_exit, kOmitEmpty),
      field("error", &ServiceStatus::error, kOmitEmpty),
      field("log", &ServiceStatus::log, kOptional));
};

template <>
struct Schema<ServiceList> {
  static constexpr const char* kName = "service list";
  static constexpr auto kFields = std::tuple(field("services", &ServiceList::services));
};

}  // namespace detail

std::string_view restartPolicyName(RestartPolicy policy) {
  return detail::enumName(policy);
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
  return detail::decode<ServiceSpec>(json);
}

std::string encodeServiceSpec(const ServiceSpec& spec) {
  return detail::encode(spec);
}

HUTCH_PROTO_CODEC(ServiceList)

}  // namespace hutch::proto

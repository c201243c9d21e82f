// Supervised services (docs/protocol.md, "Services"): long-running daemons an image declares in
// /etc/hutch/services/<name>.json (dockerd in the docker template). The agent starts them at
// boot, restarts them when they die and stops them at power-off; kServices (a request, needs the
// "services" capability) reports their state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "proto/messages.h"

namespace hutch::proto {

enum class RestartPolicy { kAlways, kOnFailure, kNever };

std::string_view restartPolicyName(RestartPolicy policy);

// The content of /etc/hutch/services/<name>.json:
//   {"argv": ["/usr/sbin/dockerd"], "env": ["K=V"], "user": "root", "cwd": "/",
//    "restart": "always" | "on-failure" | "never"}
// Only argv is required; user defaults to root, restart to "always".
struct ServiceSpec {
  std::vector<std::string> argv;
  std::vector<std::string> env;
  std::string user;
  std::string cwd;
  RestartPolicy restart = RestartPolicy::kAlways;

  bool operator==(const ServiceSpec&) const = default;
};

// A service name: 1-64 of [A-Za-z0-9_.-], not starting with '.'.
bool isValidServiceName(std::string_view name);

// Parses a service file; malformed JSON and mistyped fields are kProtocol, bad values (empty
// argv, unknown restart policy, relative cwd, an env entry without '=') kInvalidArgument.
Result<ServiceSpec> parseServiceSpec(std::string_view json);
std::string encodeServiceSpec(const ServiceSpec& spec);

// One service as kServices reports it.
struct ServiceStatus {
  std::string name;
  // "running"; "restarting" (waiting to be started again after it ended or failed to start);
  // "stopped" (ended and not restarted, by its policy or at power-off); "failed" (its file is
  // invalid: it is never started; see error).
  std::string state;
  int pid = 0;             // while running
  uint32_t restarts = 0;   // starts after the first
  int64_t started_ns = 0;  // CLOCK_REALTIME of the last start; 0 if never started
  std::optional<ExitStatus> last_exit;
  std::string error;  // why it failed or could not be started the last time; empty otherwise
  std::string log;    // its stdout and stderr, in the box

  bool operator==(const ServiceStatus&) const = default;
};

// kResult of kServices, by name.
struct ServiceList {
  std::vector<ServiceStatus> services;

  bool operator==(const ServiceList&) const = default;
};

std::string encodeMessage(const ServiceList& message);
template <>
Result<ServiceList> decodeMessage<ServiceList>(std::string_view payload);

}  // namespace hutch::proto

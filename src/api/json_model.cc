#include "api/json_model.h"

#include <fmt/format.h>

#include <set>

#include "api/error_mapping.h"

namespace hutch::api {

Result<> rejectUnknownFields(const json& j, const std::set<std::string>& known,
                             std::string_view what) {
  for (const auto& [key, _] : j.items()) {
    if (!known.contains(key)) {
      return fail(Errc::kInvalidArgument, fmt::format("Unknown field '{}' in {}; known fields: {}",
                                                      key, what, fmt::join(known, ", ")));
    }
  }
  return ok();
}

Result<json> parseObject(std::string_view body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return fail(Errc::kInvalidArgument, "The request body is not valid JSON");
  }
  if (!j.is_object()) {
    return fail(Errc::kInvalidArgument,
                fmt::format("The request body must be a JSON object, not {}", j.type_name()));
  }
  return j;
}

namespace {

std::vector<std::string> secretNames(const box::Box& b) {
  std::vector<std::string> names;
  for (const auto& s : b.secrets) names.push_back(s.name);
  return names;
}

}  // namespace

namespace {

Result<Lifetime> readLifetime(const json& j) {
  constexpr std::string_view kWhat = "the timeout";
  Lifetime l;
  HUTCH_TRY_VOID(readField(j, "timeout_s", l.timeout_s, kWhat));
  if (l.timeout_s < 0 || l.timeout_s > int64_t{366} * 86400) {
    return fail(Errc::kInvalidArgument, "timeout_s must be 0 (none) to 31622400 seconds (a year)");
  }
  std::string on;
  HUTCH_TRY_VOID(readField(j, "on_timeout", on, kWhat));
  if (!on.empty()) {
    HUTCH_TRY(l.on_expiry, box::parseExpiry(on));
  }
  return l;
}

}  // namespace

Result<Lifetime> parseLifetime(std::string_view body) {
  HUTCH_TRY(json j, parseObject(body));
  HUTCH_TRY_VOID(rejectUnknownFields(j, {"timeout_s", "on_timeout"}, "the timeout request"));
  if (!j.contains("timeout_s") || j["timeout_s"].is_null()) {
    return fail(Errc::kInvalidArgument, "Give timeout_s: seconds from now (0: no timeout)");
  }
  if (j.contains("on_timeout") && j["on_timeout"].is_null()) {
    return fail(Errc::kInvalidArgument,
                "on_timeout is stop, suspend or remove; leave it out to keep the box's own");
  }
  return readLifetime(j);
}

namespace {

json sharesJson(const std::vector<box::BoxShare>& shares) {
  json list = json::array();
  for (const auto& s : shares) {
    list.push_back({{"host_dir", s.host_dir}, {"box_dir", s.box_dir}, {"read_only", s.read_only}});
  }
  return list;
}

// "shares": [{"host_dir": "/abs", "box_dir": "/abs", "read_only"?: bool}], absent or null: none.
Result<std::vector<box::BoxShare>> readShares(const json& j) {
  std::vector<box::BoxShare> out;
  auto it = j.find("shares");
  if (it == j.end() || it->is_null()) return out;
  constexpr std::string_view kForm =
      "shares is a list of {\"host_dir\": \"/abs/path\", \"box_dir\": \"/abs/path\", "
      "\"read_only\": false}";
  if (!it->is_array()) return fail(Errc::kInvalidArgument, std::string(kForm));
  for (const auto& item : *it) {
    if (!item.is_object()) return fail(Errc::kInvalidArgument, std::string(kForm));
    HUTCH_TRY_VOID(rejectUnknownFields(item, {"host_dir", "box_dir", "read_only"}, "a share"));
    box::BoxShare share;
    HUTCH_TRY_VOID(readField(item, "host_dir", share.host_dir, "a share"));
    HUTCH_TRY_VOID(readField(item, "box_dir", share.box_dir, "a share"));
    HUTCH_TRY_VOID(readField(item, "read_only", share.read_only, "a share"));
    out.push_back(std::move(share));
  }
  HUTCH_TRY_VOID(box::validateShares(out));
  return out;
}

}  // namespace

json toJson(const box::Box& b) {
  return json{{"id", b.id},
              {"name", b.name},
              {"template", b.config.template_name},
              {"cpus", b.config.cpus},
              {"memory_mib", b.config.memory_mib},
              {"disk_mib", b.config.disk_mib},
              {"max_exec_ms", b.config.max_exec_ms},
              {"idle_pause_ms", b.config.idle_pause_ms},
              {"expires_at", b.expires_at},
              {"on_timeout", box::expiryName(b.on_expiry)},
              {"state", box::stateName(b.state)},
              {"reason", b.reason},
              {"accel", b.accel},
              {"pid", b.pid},
              {"boot", b.boot},
              {"secrets", secretNames(b)},
              {"owner", b.owner.name},
              {"env", b.env},
              {"shares", sharesJson(b.shares)},
              {"created_at", b.created_at},
              {"updated_at", b.updated_at}};
}

Result<box::Box> boxFromJson(const json& j) {
  if (!j.is_object()) return fail(Errc::kProtocol, "Box is not a JSON object");
  box::Box b;
  std::string state;
  constexpr std::string_view kWhat = "box";
  HUTCH_TRY_VOID(readField(j, "id", b.id, kWhat));
  HUTCH_TRY_VOID(readField(j, "name", b.name, kWhat));
  HUTCH_TRY_VOID(readField(j, "template", b.config.template_name, kWhat));
  HUTCH_TRY_VOID(readField(j, "cpus", b.config.cpus, kWhat));
  HUTCH_TRY_VOID(readField(j, "memory_mib", b.config.memory_mib, kWhat));
  HUTCH_TRY_VOID(readField(j, "disk_mib", b.config.disk_mib, kWhat));
  HUTCH_TRY_VOID(readField(j, "max_exec_ms", b.config.max_exec_ms, kWhat));
  HUTCH_TRY_VOID(readField(j, "idle_pause_ms", b.config.idle_pause_ms, kWhat));
  HUTCH_TRY_VOID(readField(j, "expires_at", b.expires_at, kWhat));
  std::string on_timeout;
  HUTCH_TRY_VOID(readField(j, "on_timeout", on_timeout, kWhat));
  HUTCH_TRY(b.on_expiry, box::parseExpiry(on_timeout));
  HUTCH_TRY_VOID(readField(j, "state", state, kWhat));
  HUTCH_TRY_VOID(readField(j, "reason", b.reason, kWhat));
  HUTCH_TRY_VOID(readField(j, "accel", b.accel, kWhat));
  HUTCH_TRY_VOID(readField(j, "pid", b.pid, kWhat));
  HUTCH_TRY_VOID(readField(j, "boot", b.boot, kWhat));
  std::vector<std::string> secrets;
  HUTCH_TRY_VOID(readField(j, "secrets", secrets, kWhat));
  for (auto& name : secrets) b.secrets.push_back({std::move(name), ""});
  HUTCH_TRY_VOID(readField(j, "created_at", b.created_at, kWhat));
  HUTCH_TRY_VOID(readField(j, "updated_at", b.updated_at, kWhat));
  HUTCH_TRY_VOID(readField(j, "owner", b.owner.name, kWhat));
  HUTCH_TRY_VOID(readField(j, "env", b.env, kWhat));
  HUTCH_TRY(b.shares, readShares(j));
  HUTCH_TRY(b.state, box::parseState(state));
  return b;
}

json toJson(const CreateBoxRequest& r) {
  json j{{"template", r.config.template_name},
         {"cpus", r.config.cpus},
         {"memory_mib", r.config.memory_mib}};
  if (r.config.disk_mib != 0) j["disk_mib"] = r.config.disk_mib;
  if (r.config.max_exec_ms != 0) j["max_exec_ms"] = r.config.max_exec_ms;
  if (r.config.idle_pause_ms >= 0) j["idle_pause_ms"] = r.config.idle_pause_ms;
  if (!r.name.empty()) j["name"] = r.name;
  if (!r.network_policy.empty()) {
    json policy = json::parse(r.network_policy, nullptr, false);
    j["network_policy"] = policy.is_object() ? policy : json(r.network_policy);
  }
  if (!r.secrets.empty()) j["secrets"] = r.secrets;
  if (!r.env.empty()) j["env"] = r.env;
  if (!r.shares.empty()) j["shares"] = sharesJson(r.shares);
  return j;
}

Result<CreateBoxRequest> parseCreateBox(std::string_view body) {
  HUTCH_TRY(json j, parseObject(body));
  constexpr std::string_view kWhat = "the create request";
  HUTCH_TRY_VOID(rejectUnknownFields(
      j,
      {"name", "template", "cpus", "memory_mib", "disk_mib", "max_exec_ms", "idle_pause_ms",
       "timeout_s", "on_timeout", "network_policy", "secrets", "env", "shares"},
      kWhat));
  CreateBoxRequest r;
  int64_t cpus = r.config.cpus;
  int64_t memory = static_cast<int64_t>(r.config.memory_mib);
  HUTCH_TRY_VOID(readField(j, "name", r.name, kWhat));
  HUTCH_TRY_VOID(readField(j, "template", r.config.template_name, kWhat));
  HUTCH_TRY_VOID(readField(j, "cpus", cpus, kWhat));
  HUTCH_TRY_VOID(readField(j, "memory_mib", memory, kWhat));
  int64_t disk = 0;
  HUTCH_TRY_VOID(readField(j, "disk_mib", disk, kWhat));
  int64_t max_exec = 0;
  HUTCH_TRY_VOID(readField(j, "max_exec_ms", max_exec, kWhat));
  if (max_exec < 0) {
    return fail(Errc::kInvalidArgument, "max_exec_ms must be 0 (no limit) or more milliseconds");
  }
  r.config.max_exec_ms = static_cast<uint64_t>(max_exec);
  int64_t idle = -1;
  HUTCH_TRY_VOID(readField(j, "idle_pause_ms", idle, kWhat));
  if (idle < -1) {
    return fail(Errc::kInvalidArgument,
                "idle_pause_ms must be -1 (the daemon's default), 0 (never) or more milliseconds");
  }
  r.config.idle_pause_ms = idle;
  HUTCH_TRY(Lifetime lifetime, readLifetime(j));
  if (lifetime.timeout_s != 0) {
    r.expires_at = box::unixNow() + lifetime.timeout_s;
    r.on_expiry =
        lifetime.on_expiry == box::Expiry::kNone ? box::Expiry::kRemove : lifetime.on_expiry;
  } else if (lifetime.on_expiry != box::Expiry::kNone) {
    return fail(Errc::kInvalidArgument, "on_timeout needs timeout_s");
  }
  if (auto policy = j.find("network_policy"); policy != j.end() && !policy->is_null()) {
    if (policy->is_string()) {
      r.network_policy = policy->get<std::string>();
    } else if (policy->is_object()) {
      r.network_policy = policy->dump();
    } else {
      return fail(Errc::kInvalidArgument,
                  "network_policy is a preset name (none, allow-all, debian-mirrors, npm, pypi) or "
                  "a policy "
                  "object");
    }
  }
  HUTCH_TRY_VOID(readField(j, "secrets", r.secrets, kWhat));
  if (auto env = j.find("env"); env != j.end() && !env->is_null()) {
    if (!env->is_object()) {
      return fail(Errc::kInvalidArgument, "env must be an object of strings: {\"K\": \"V\"}");
    }
    for (const auto& [key, value] : env->items()) {
      if (!value.is_string()) {
        return fail(Errc::kInvalidArgument, fmt::format("env value of {} must be a string, not {}",
                                                        key, value.type_name()));
      }
      r.env[key] = value.get<std::string>();
    }
    HUTCH_TRY_VOID(box::validateEnv(r.env));
  }
  HUTCH_TRY(r.shares, readShares(j));
  if (disk < 0) return fail(Errc::kInvalidArgument, "disk_mib must not be negative");
  r.config.disk_mib = static_cast<uint64_t>(disk);
  if (cpus < 1 || cpus > 64) {
    return fail(Errc::kInvalidArgument, fmt::format("cpus must be 1 to 64, got {}", cpus));
  }
  if (memory < 128 || memory > 65536) {
    return fail(Errc::kInvalidArgument,
                fmt::format("memory_mib must be 128 to 65536, got {}", memory));
  }
  r.config.cpus = static_cast<unsigned>(cpus);
  r.config.memory_mib = static_cast<uint64_t>(memory);
  if (!r.name.empty()) HUTCH_TRY_VOID(box::validateName(r.name));
  HUTCH_TRY_VOID(r.config.validate());
  return r;
}

json errorJson(const Error& e) {
  return json{{"error", {{"code", errcName(e.code())}, {"message", e.describe()}}}};
}

Error errorFromResponse(int status, std::string_view body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_object()) {
    const json& e = j["error"];
    std::string code = e.value("code", "");
    std::string message = e.value("message", "");
    return Error(errcFromHttp(status, code), message);
  }
  return Error(errcFromHttp(status, ""),
               fmt::format("hutchd answered HTTP {}: {}", status, body.substr(0, 200)));
}

Result<box::ForkSpec> parseFork(std::string_view body) {
  box::ForkSpec spec;
  if (body.empty()) return spec;
  HUTCH_TRY(json j, parseObject(body));
  constexpr std::string_view kWhat = "a fork request";
  HUTCH_TRY_VOID(rejectUnknownFields(j, {"count", "names"}, kWhat));
  HUTCH_TRY_VOID(readField(j, "count", spec.count, kWhat));
  HUTCH_TRY_VOID(readField(j, "names", spec.names, kWhat));
  if (!j.contains("count") && !spec.names.empty()) {
    spec.count = static_cast<unsigned>(spec.names.size());
  }
  return spec;
}

Result<std::string> parseCheckpoint(std::string_view body) {
  std::string name;
  if (body.empty()) return name;
  HUTCH_TRY(json j, parseObject(body));
  HUTCH_TRY_VOID(rejectUnknownFields(j, {"name"}, "a checkpoint request"));
  HUTCH_TRY_VOID(readField(j, "name", name, "a checkpoint request"));
  return name;
}

Result<std::string> parseRollback(std::string_view body) {
  HUTCH_TRY(json j, parseObject(body));
  std::string checkpoint;
  HUTCH_TRY_VOID(rejectUnknownFields(j, {"checkpoint"}, "a rollback request"));
  HUTCH_TRY_VOID(readField(j, "checkpoint", checkpoint, "a rollback request"));
  if (checkpoint.empty()) {
    return fail(Errc::kInvalidArgument,
                "A rollback request names the checkpoint: {\"checkpoint\": \"NAME\"}");
  }
  return checkpoint;
}

json toJson(const box::Snapshot& s) {
  return json{{"id", s.id},
              {"kind", box::snapshotKindName(s.kind)},
              {"box_id", s.box_id},
              {"name", s.name},
              {"size_bytes", s.size_bytes},
              {"created_at", s.created_at}};
}

json toJson(const box::DiskUsage& usage) {
  auto line = [](const box::DiskUsage::Line& l) {
    return json{{"count", l.count}, {"bytes", l.bytes}};
  };
  return json{{"templates", line(usage.templates)},
              {"template_snapshots", line(usage.template_snapshots)},
              {"checkpoints", line(usage.checkpoints)},
              {"layers", line(usage.layers)},
              {"boxes", line(usage.boxes)}};
}

json toJson(const box::PoolStatus& pool) {
  return json{{"template", pool.template_name},
              {"cpus", pool.cpus},
              {"memory_mib", pool.memory_mib},
              {"ready", pool.ready},
              {"size", pool.size},
              {"filling", pool.filling}};
}

Result<box::PortForward> parsePortForward(std::string_view body) {
  HUTCH_TRY(json j, parseObject(body));
  constexpr std::string_view kWhat = "a port request";
  HUTCH_TRY_VOID(rejectUnknownFields(j, {"host_port", "box_port", "address"}, kWhat));
  int64_t host_port = 0;
  int64_t box_port = 0;
  box::PortForward forward;
  HUTCH_TRY_VOID(readField(j, "host_port", host_port, kWhat));
  HUTCH_TRY_VOID(readField(j, "box_port", box_port, kWhat));
  HUTCH_TRY_VOID(readField(j, "address", forward.host_address, kWhat));
  if (host_port < 1 || host_port > 65535 || box_port < 1 || box_port > 65535) {
    return fail(Errc::kInvalidArgument,
                "A port request needs host_port and box_port, each 1-65535");
  }
  forward.host_port = static_cast<uint16_t>(host_port);
  forward.box_port = static_cast<uint16_t>(box_port);
  HUTCH_TRY_VOID(box::validatePortForward(forward));
  return forward;
}

json toJson(const box::PortForward& f) {
  return json{{"address", f.host_address}, {"host_port", f.host_port}, {"box_port", f.box_port}};
}

json toJson(const box::PortStatus& s) {
  return json{{"box_id", s.forward.box_id},        {"address", s.forward.host_address},
              {"host_port", s.forward.host_port},  {"box_port", s.forward.box_port},
              {"listening", s.listening},          {"error", s.error},
              {"connections", s.connections},      {"accepted", s.accepted},
              {"created_at", s.forward.created_at}};
}

Result<box::PortStatus> portStatusFromJson(const json& j) {
  if (!j.is_object()) return fail(Errc::kProtocol, "A port is not a JSON object");
  box::PortStatus s;
  constexpr std::string_view kWhat = "a port";
  HUTCH_TRY_VOID(readField(j, "box_id", s.forward.box_id, kWhat));
  HUTCH_TRY_VOID(readField(j, "address", s.forward.host_address, kWhat));
  HUTCH_TRY_VOID(readField(j, "host_port", s.forward.host_port, kWhat));
  HUTCH_TRY_VOID(readField(j, "box_port", s.forward.box_port, kWhat));
  HUTCH_TRY_VOID(readField(j, "created_at", s.forward.created_at, kWhat));
  if (auto it = j.find("listening"); it != j.end() && it->is_boolean())
    s.listening = it->get<bool>();
  HUTCH_TRY_VOID(readField(j, "error", s.error, kWhat));
  HUTCH_TRY_VOID(readField(j, "connections", s.connections, kWhat));
  HUTCH_TRY_VOID(readField(j, "accepted", s.accepted, kWhat));
  return s;
}

}  // namespace hutch::api

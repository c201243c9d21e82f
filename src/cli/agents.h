// Agent presets for `hutch run --agent NAME` (docs/agents.md): a coding agent's CLI as a recipe
// of what to install into a template, what it may reach, and the keys it needs, bound to its
// provider's domain so that the box holds only a placeholder.
//
// A preset is a small JSON file:
//   {"name": "claude", "description": "Claude Code",
//    "template": "node",                                   (the template the agent's is made from)
//    "install": ["npm", "install", "-g", "@anthropic-ai/claude-code"],     (run as root, once)
//    "command": ["claude"],                                  (what `hutch run --agent` runs)
//    "version": ["claude", "--version"],
//    "network": {"presets": ["npm"], "allow": [{"domain": "api.anthropic.com", "ports": [443]}]},
//    "secrets": [{"name": "ANTHROPIC_API_KEY", "domain": "api.anthropic.com",
//                 "header": "x-api-key", "format": "{value}"}],
//    "env": {"DISABLE_AUTOUPDATER": "1"}}
// hutch ships presets for Claude Code, Codex, Gemini CLI and OpenCode; a file NAME.json in the
// user's agents directory ($HUTCH_AGENTS_DIR, else $XDG_CONFIG_HOME/hutch/agents, else
// ~/.config/hutch/agents) adds one or replaces the built-in of that name.
#pragma once

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/result.h"

namespace hutch::cli {

struct AgentSecret {
  std::string name;  // the environment variable the agent reads, and the hutch secret's name
  std::string domain;
  std::string header;
  std::string format;  // "{value}" or "Bearer {value}"
};

struct AgentPreset {
  std::string name;
  std::string description;
  std::string template_name = "node";
  std::vector<std::string> install;
  std::vector<std::string> command;
  std::vector<std::string> version;
  nlohmann::json network;  // an egress policy document (docs/network.md)
  std::vector<AgentSecret> secrets;
  std::map<std::string, std::string> env;
  std::string source;  // "built-in" or the file it came from

  // The template the agent is installed in: agent-NAME-<12 hex of what goes into it>, so that a
  // changed preset makes a new one.
  std::string templateName() const;
};

// One preset from its JSON text; errors name the field and `origin`.
Result<AgentPreset> parseAgentPreset(const std::string& text, const std::string& origin);

// The directory user presets are read from (see above); may not exist.
std::filesystem::path agentsDir();

// Every preset by name: the built-ins, then the user's files over them.
Result<std::map<std::string, AgentPreset>> loadAgentPresets(const std::filesystem::path& dir);

}  // namespace hutch::cli

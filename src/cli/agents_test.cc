#include "cli/agents.h"

#include <gtest/gtest.h>

#include <fstream>

namespace hutch::cli {
namespace {

namespace fs = std::filesystem;

class AgentPresetsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hutch-agents-" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& file, const std::string& text) {
    std::ofstream(dir_ / file) << text;
  }
  fs::path dir_;
};

TEST_F(AgentPresetsTest, TheBuiltInsEachInstallACommandAndBindTheirKeysToAnAllowedDomain) {
  auto presets = loadAgentPresets(dir_);
  ASSERT_TRUE(presets) << presets.error().describe();
  for (const char* name : {"claude", "codex", "gemini", "opencode"}) {
    ASSERT_TRUE(presets->contains(name)) << name;
    const AgentPreset& p = presets->at(name);
    EXPECT_EQ(p.source, "built-in");
    EXPECT_EQ(p.template_name, "node");
    EXPECT_FALSE(p.install.empty());
    EXPECT_FALSE(p.command.empty());
    ASSERT_FALSE(p.secrets.empty()) << name;
    for (const AgentSecret& s : p.secrets) {
      bool allowed = false;
      for (const auto& rule : p.network["allow"]) allowed = allowed || rule["domain"] == s.domain;
      EXPECT_TRUE(allowed) << name << ": its key's domain " << s.domain << " is not allowed";
    }
    EXPECT_EQ(p.network["presets"], nlohmann::json::array({"npm"})) << name;
    EXPECT_TRUE(p.templateName().starts_with("agent-" + std::string(name) + "-"));
  }
}

TEST_F(AgentPresetsTest, AUserFileAddsOneOrReplacesABuiltIn) {
  write("claude.json", R"({"name": "claude", "install": ["true"], "command": ["mine"]})");
  write("tiny.json", R"({"name": "tiny", "template": "base", "install": ["true"],
                        "command": ["sh"], "env": {"A": "b"}})");
  write("notes.txt", "ignored");
  auto presets = loadAgentPresets(dir_);
  ASSERT_TRUE(presets) << presets.error().describe();
  EXPECT_EQ(presets->at("claude").command, std::vector<std::string>{"mine"});
  EXPECT_EQ(presets->at("claude").source, (dir_ / "claude.json").string());
  EXPECT_EQ(presets->at("tiny").template_name, "base");
  EXPECT_EQ(presets->at("tiny").env.at("A"), "b");
  EXPECT_TRUE(presets->at("tiny").secrets.empty());
  EXPECT_TRUE(presets->contains("codex"));
}

TEST_F(AgentPresetsTest, TheTemplateNameFollowsWhatIsInstalled) {
  auto a = parseAgentPreset(R"({"name": "x", "install": ["npm", "i", "-g", "a"],
                                "command": ["a"]})",
                            "test");
  auto b = parseAgentPreset(R"({"name": "x", "install": ["npm", "i", "-g", "b"],
                                "command": ["a"], "description": "other words"})",
                            "test");
  ASSERT_TRUE(a && b);
  EXPECT_NE(a->templateName(), b->templateName());
  auto c = parseAgentPreset(R"({"name": "x", "install": ["npm", "i", "-g", "a"],
                                "command": ["other"]})",
                            "test");
  ASSERT_TRUE(c);
  EXPECT_EQ(a->templateName(), c->templateName()) << "the command is not in the template";
}

TEST_F(AgentPresetsTest, BadPresetsAreRefusedNamingTheFieldAndTheFile) {
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c : {
           Case{"not json", "not a JSON object"},
           Case{R"({"name": "x", "command": ["a"]})", "\"install\" is missing"},
           Case{R"({"name": "x", "install": [], "command": ["a"]})", "non-empty list"},
           Case{R"({"name": "x", "install": ["a"], "command": ["a"], "colour": 1})",
                "unknown field \"colour\""},
           Case{R"({"name": "Bad Name", "install": ["a"], "command": ["a"]})", "must be 1-40"},
           Case{R"({"name": "x", "install": ["a"], "command": ["a"], "network": []})",
                "policy object"},
           Case{R"({"name": "x", "install": ["a"], "command": ["a"],
                    "secrets": [{"name": "K", "domain": "d.example"}]})",
                "\"header\""},
       }) {
    auto parsed = parseAgentPreset(c.text, "file.json");
    ASSERT_FALSE(parsed) << c.text;
    EXPECT_NE(parsed.error().message().find(c.says), std::string::npos) << parsed.error().message();
    EXPECT_NE(parsed.error().message().find("file.json"), std::string::npos);
  }
  write("other.json", R"({"name": "x", "install": ["a"], "command": ["a"]})");
  auto mismatched = loadAgentPresets(dir_);
  ASSERT_FALSE(mismatched);
  EXPECT_NE(mismatched.error().message().find("must be x.json"), std::string::npos);
}

}  // namespace
}  // namespace hutch::cli

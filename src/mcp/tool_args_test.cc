#include "mcp/tool_args.h"

#include <gtest/gtest.h>

#include "mcp/tool_catalog.h"

namespace hutch::mcp {
namespace {

json parse(const char* text) {
  return json::parse(text);
}

TEST(ToolArgs, RunCommandTakesACommandLineOrArgv) {
  auto shell = runCommandArgs(parse(R"({"box":"dev","command":"uname -a"})"));
  ASSERT_TRUE(shell) << shell.error().message();
  EXPECT_EQ(shell->box, "dev");
  EXPECT_EQ(shell->run.exec.argv, (std::vector<std::string>{"sh", "-c", "uname -a"}));
  EXPECT_EQ(shell->run.timeout_ms, kDefaultCommandTimeoutSeconds * 1000);
  EXPECT_EQ(shell->run.max_output_bytes, kMaxCommandOutput);
  EXPECT_FALSE(shell->run.stdin_data);

  auto argv = runCommandArgs(parse(
      R"({"box":"b","argv":["ls","-l"],"cwd":"/tmp","env":{"A":"1"},"user":"root",
          "stdin":"hi","timeout_seconds":5})"));
  ASSERT_TRUE(argv) << argv.error().message();
  EXPECT_EQ(argv->run.exec.argv, (std::vector<std::string>{"ls", "-l"}));
  EXPECT_EQ(argv->run.exec.cwd, "/tmp");
  EXPECT_EQ(argv->run.exec.env, (std::vector<std::string>{"A=1"}));
  EXPECT_EQ(argv->run.exec.user, "root");
  EXPECT_EQ(argv->run.stdin_data, "hi");
  EXPECT_TRUE(argv->run.exec.pipe_stdin);
  EXPECT_EQ(argv->run.timeout_ms, 5000u);
}

TEST(ToolArgs, RunCommandRefusesWhatItCannotRun) {
  for (const char* text : {
           R"({"command":"ls"})",                                // no box
           R"({"box":"","command":"ls"})",                       // empty box
           R"({"box":"b"})",                                     // nothing to run
           R"({"box":"b","command":"ls","argv":["ls"]})",        // both
           R"({"box":"b","command":""})",                        // empty command
           R"({"box":"b","command":"ls","timeout_seconds":0})",  // out of range
           R"({"box":"b","command":"ls","timeout_seconds":3601})",
           R"({"box":"b","command":"ls","timeout_seconds":"5"})",  // wrong type
           R"({"box":"b","command":"ls","shell":"bash"})",         // unknown
           R"({"box":"b","argv":"ls"})",
       }) {
    auto parsed = runCommandArgs(parse(text));
    ASSERT_FALSE(parsed) << text;
    EXPECT_EQ(parsed.error().code(), Errc::kInvalidArgument) << text;
  }
  auto missing = runCommandArgs(parse(R"({"command":"ls"})"));
  EXPECT_NE(missing.error().message().find("list_boxes"), std::string::npos);
  auto unknown = runCommandArgs(parse(R"({"box":"b","command":"ls","shell":"bash"})"));
  EXPECT_NE(unknown.error().message().find("'shell'"), std::string::npos);
}

TEST(ToolArgs, FilesArguments) {
  auto read = readFileArgs(parse(R"({"box":"b","path":"/etc/hostname"})"));
  ASSERT_TRUE(read);
  EXPECT_EQ(read->path, "/etc/hostname");
  EXPECT_TRUE(read->user.empty());
  EXPECT_FALSE(readFileArgs(parse(R"({"box":"b"})")));

  auto text = writeFileArgs(parse(R"({"box":"b","path":"a.txt","content":"hi\n","mode":"0755"})"));
  ASSERT_TRUE(text) << text.error().message();
  EXPECT_EQ(text->content, "hi\n");
  EXPECT_EQ(text->mode, 0755u);
  auto bytes = writeFileArgs(
      parse(R"({"box":"b","path":"a.bin","content":"AAEC","encoding":"base64","mode":420})"));
  ASSERT_TRUE(bytes) << bytes.error().message();
  EXPECT_EQ(bytes->content, std::string("\0\1\2", 3));
  EXPECT_EQ(bytes->mode, 0644u);
  auto empty = writeFileArgs(parse(R"({"box":"b","path":"e","content":""})"));
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->content.empty());
  EXPECT_FALSE(writeFileArgs(parse(R"({"box":"b","path":"a"})")));  // no content
  EXPECT_FALSE(writeFileArgs(parse(R"({"box":"b","path":"a","content":"x","encoding":"hex"})")));
  EXPECT_FALSE(
      writeFileArgs(parse(R"({"box":"b","path":"a","content":"!!","encoding":"base64"})")));
  EXPECT_FALSE(writeFileArgs(parse(R"({"box":"b","path":"a","content":"x","mode":"999"})")));

  auto list = listFilesArgs(parse(R"({"box":"b","path":"/","depth":2})"));
  ASSERT_TRUE(list);
  EXPECT_EQ(list->depth, 2u);
  EXPECT_FALSE(listFilesArgs(parse(R"({"box":"b","path":"/","depth":0})")));
  EXPECT_FALSE(listFilesArgs(parse(R"({"box":"b","path":"/","depth":99})")));
}

TEST(ToolArgs, BoxLifecycleArguments) {
  auto created = createBoxArgs(parse(
      R"({"name":"dev","template":"base","cpus":2,"memory_mib":1024,"network_policy":"allow-all",
          "env":{"A":"1"}})"));
  ASSERT_TRUE(created) << created.error().message();
  EXPECT_EQ(created->name, "dev");
  EXPECT_EQ(created->config.cpus, 2u);
  EXPECT_EQ(created->network_policy, "allow-all");
  EXPECT_TRUE(created->owner.id.empty());  // the caller's, set by the tool, never from here
  auto policy = createBoxArgs(parse(R"({"network_policy":{"allow":[{"domain":"pypi.org"}]}})"));
  ASSERT_TRUE(policy);
  EXPECT_NE(policy->network_policy.find("pypi.org"), std::string::npos);
  EXPECT_FALSE(createBoxArgs(parse(R"({"cpus":0})")));
  EXPECT_FALSE(createBoxArgs(parse(R"({"owner":"someone"})")));
  auto shares = createBoxArgs(parse(R"({"shares":[{"host_dir":"/home/u","box_dir":"/work"}]})"));
  ASSERT_FALSE(shares) << "an agent never shares the host's folders";
  EXPECT_NE(shares.error().message().find("hutch run -v"), std::string::npos);

  auto fork = forkBoxArgs(parse(R"({"box":"b","count":2})"));
  ASSERT_TRUE(fork);
  EXPECT_EQ(fork->spec.count, 2u);
  auto checkpoint = checkpointBoxArgs(parse(R"({"box":"b"})"));
  ASSERT_TRUE(checkpoint);
  EXPECT_TRUE(checkpoint->name.empty());
  auto rollback = rollbackBoxArgs(parse(R"({"box":"b","checkpoint":"cp-1"})"));
  ASSERT_TRUE(rollback);
  EXPECT_EQ(rollback->checkpoint, "cp-1");
  auto no_checkpoint = rollbackBoxArgs(parse(R"({"box":"b"})"));
  ASSERT_FALSE(no_checkpoint);
  EXPECT_NE(no_checkpoint.error().message().find("list_checkpoints"), std::string::npos);

  auto port = publishPortArgs(parse(R"({"box":"b","box_port":8080})"));
  ASSERT_TRUE(port) << port.error().message();
  EXPECT_EQ(port->forward.box_port, 8080);
  EXPECT_EQ(port->forward.host_port, 8080);  // the box's port unless told otherwise
  auto other = publishPortArgs(parse(R"({"box":"b","box_port":80,"host_port":8081})"));
  ASSERT_TRUE(other);
  EXPECT_EQ(other->forward.host_port, 8081);
  EXPECT_FALSE(publishPortArgs(parse(R"({"box":"b"})")));
  EXPECT_FALSE(publishPortArgs(parse(R"({"box":"b","box_port":70000})")));

  auto remove = removeBoxArgs(parse(R"({"box":"b","force":true})"));
  ASSERT_TRUE(remove);
  EXPECT_TRUE(remove->force);
  EXPECT_FALSE(removeBoxArgs(parse(R"({"box":"b","force":"yes"})")));
  EXPECT_TRUE(stopBoxArgs(parse(R"({"box":"b"})")));
  EXPECT_TRUE(stopBoxArgs(parse(R"({"box":"b","shutdown":true})"))->shutdown);
  EXPECT_FALSE(stopBoxArgs(parse(R"({"box":"b","now":true})")));
  EXPECT_FALSE(stopBoxArgs(parse(R"({"box":"b","shutdown":"yes"})")));
  EXPECT_TRUE(noArgs(json::object(), "list_boxes"));
  EXPECT_FALSE(noArgs(parse(R"({"all":true})"), "list_boxes"));
}

// A value of the schema's type, for the check below.
json sampleFor(const std::string& tool, const std::string& property, const json& schema) {
  if (property == "box") return "b";
  if (tool == "run_command" && property == "argv") return json();  // with "command" given
  if (property == "network_policy") return "none";
  if (property == "mode") return "0644";
  if (property == "cwd") return "/tmp";
  if (property == "disk_mib") return 1024;
  if (property == "address") return "127.0.0.1";
  if (property == "encoding") return "utf-8";
  if (property == "names") return json::array({"n1"});
  std::string type = schema.value("type", "");
  if (type == "string") return "x";
  if (type == "integer") return schema.value("minimum", 1) > 0 ? schema.value("minimum", 1) : 1;
  if (type == "boolean") return true;
  if (type == "array") return json::array({"x"});
  if (type == "object") return json::object();
  return json();
}

Result<> parseFor(const std::string& tool, const json& args) {
  if (tool == "list_boxes") return noArgs(args, tool);
  if (tool == "create_box") return createBoxArgs(args).map([](auto&&) {});
  if (tool == "run_command") return runCommandArgs(args).map([](auto&&) {});
  if (tool == "read_file") return readFileArgs(args).map([](auto&&) {});
  if (tool == "write_file") return writeFileArgs(args).map([](auto&&) {});
  if (tool == "list_files") return listFilesArgs(args).map([](auto&&) {});
  if (tool == "fork_box") return forkBoxArgs(args).map([](auto&&) {});
  if (tool == "checkpoint_box") return checkpointBoxArgs(args).map([](auto&&) {});
  if (tool == "rollback_box") return rollbackBoxArgs(args).map([](auto&&) {});
  if (tool == "publish_port") return publishPortArgs(args).map([](auto&&) {});
  if (tool == "remove_box") return removeBoxArgs(args).map([](auto&&) {});
  if (tool == "stop_box") return stopBoxArgs(args).map([](auto&&) {});
  return boxOnlyArgs(args, tool).map([](auto&&) {});
}

// The schemas say what the parsers take: every property is accepted, the required ones are
// needed, anything else is refused.
TEST(ToolCatalog, SchemasMatchTheParsers) {
  const json& tools = toolCatalog();
  ASSERT_EQ(tools.size(), 14u);
  std::set<std::string> names;
  for (const json& t : tools) {
    const std::string name = t["name"];
    SCOPED_TRACE(name);
    EXPECT_TRUE(names.insert(name).second);
    EXPECT_FALSE(t["description"].get<std::string>().empty());
    const json& schema = t["inputSchema"];
    EXPECT_EQ(schema["type"], "object");
    EXPECT_EQ(schema["additionalProperties"], false);
    json full = json::object();
    for (const auto& [property, sub] : schema["properties"].items()) {
      json value = sampleFor(name, property, sub);
      if (!value.is_null()) full[property] = value;
    }
    if (name == "run_command") full["command"] = "true";
    if (name == "fork_box") full.erase("count");  // names alone give the count
    auto accepted = parseFor(name, full);
    EXPECT_TRUE(accepted) << full.dump() << ": " << accepted.error().message();
    for (const json& required : schema.value("required", json::array())) {
      json without = full;
      without.erase(required.get<std::string>());
      EXPECT_FALSE(parseFor(name, without)) << "without " << required;
    }
    json extra = full;
    extra["surprise"] = 1;
    EXPECT_FALSE(parseFor(name, extra));
  }
}

}  // namespace
}  // namespace hutch::mcp

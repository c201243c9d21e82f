#include "mcp/server.h"

#include <gtest/gtest.h>

#include "mcp/testing_tools.h"

namespace hutch::mcp {
namespace {

using testing::FakeTools;
using testing::runCoroutine;

json call(Server& server, Session& session, const char* text,
          api::Principal caller = api::Principal::host()) {
  Message m = classify(json::parse(text));
  return runCoroutine(server.request(session, std::get<Request>(m), caller));
}

TEST(McpVersions, NegotiationAndBatches) {
  EXPECT_EQ(negotiateVersion("2025-11-25"), "2025-11-25");
  EXPECT_EQ(negotiateVersion("2025-06-18"), "2025-06-18");
  EXPECT_EQ(negotiateVersion("2025-03-26"), "2025-03-26");
  EXPECT_EQ(negotiateVersion("2024-11-05"), "2024-11-05");
  // Unknown (older, newer, garbage): our latest, for the client to accept or leave.
  EXPECT_EQ(negotiateVersion("2024-10-07"), std::string(kLatestVersion));
  EXPECT_EQ(negotiateVersion("2026-07-28"), std::string(kLatestVersion));
  EXPECT_EQ(negotiateVersion("x"), std::string(kLatestVersion));
  EXPECT_TRUE(allowsBatches("2025-03-26"));
  EXPECT_TRUE(allowsBatches("2024-11-05"));
  EXPECT_FALSE(allowsBatches("2025-06-18"));
  EXPECT_FALSE(allowsBatches("2025-11-25"));
}

TEST(McpServer, InitializeNegotiatesAndDeclaresTools) {
  FakeTools tools;
  Server server(tools, {.name = "hutch", .version = "1.2.3", .instructions = "Use boxes."});
  Session session;
  json r = call(server, session,
                R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
                    "protocolVersion":"2025-06-18","capabilities":{},
                    "clientInfo":{"name":"test","version":"0"}}})");
  ASSERT_TRUE(r.contains("result")) << r.dump();
  EXPECT_EQ(r["id"], 1);
  EXPECT_EQ(r["result"]["protocolVersion"], "2025-06-18");
  EXPECT_EQ(r["result"]["capabilities"], json::parse(R"({"tools":{"listChanged":false}})"));
  EXPECT_EQ(r["result"]["serverInfo"]["name"], "hutch");
  EXPECT_EQ(r["result"]["serverInfo"]["version"], "1.2.3");
  EXPECT_EQ(r["result"]["instructions"], "Use boxes.");
  EXPECT_EQ(session.version, "2025-06-18");
  EXPECT_EQ(session.client_info["name"], "test");
  EXPECT_FALSE(session.initialized);
  Server::notification(session, Notification{"notifications/initialized", nullptr});
  EXPECT_TRUE(session.initialized);

  // Once per session.
  json again = call(server, session,
                    R"({"jsonrpc":"2.0","id":2,"method":"initialize","params":{
                        "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{}}})");
  EXPECT_EQ(again["error"]["code"], kInvalidRequest);
  EXPECT_EQ(session.version, "2025-06-18");
}

TEST(McpServer, InitializeAnswersOurLatestForAnUnknownVersion) {
  FakeTools tools;
  Server server(tools, {});
  Session session;
  json r = call(server, session,
                R"({"jsonrpc":"2.0","id":"i","method":"initialize","params":{
                    "protocolVersion":"2099-01-01","capabilities":{},"clientInfo":{}}})");
  EXPECT_EQ(r["result"]["protocolVersion"], std::string(kLatestVersion));
  // 2024-11-05 had no title in Implementation.
  Session old;
  json o = call(server, old,
                R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
                    "protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{}}})");
  EXPECT_FALSE(o["result"]["serverInfo"].contains("title"));
  EXPECT_FALSE(o["result"].contains("instructions"));  // none configured
}

TEST(McpServer, InitializeNeedsAVersion) {
  FakeTools tools;
  Server server(tools, {});
  Session session;
  for (const char* text :
       {R"({"jsonrpc":"2.0","id":1,"method":"initialize"})",
        R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":5}})",
        R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",
            "capabilities":[]}})"}) {
    json r = call(server, session, text);
    EXPECT_EQ(r["error"]["code"], kInvalidParams) << text;
    EXPECT_TRUE(session.version.empty());
  }
}

TEST(McpServer, RequestsBeforeInitializeAreRefusedButPing) {
  FakeTools tools;
  Server server(tools, {});
  Session session;
  EXPECT_EQ(call(server, session, R"({"jsonrpc":"2.0","id":1,"method":"ping"})"),
            json::parse(R"({"jsonrpc":"2.0","id":1,"result":{}})"));
  json r = call(server, session, R"({"jsonrpc":"2.0","id":2,"method":"tools/list"})");
  EXPECT_EQ(r["error"]["code"], kInvalidRequest);
  EXPECT_NE(r["error"]["message"].get<std::string>().find("initialize"), std::string::npos);
}

class Initialized : public ::testing::Test {
 protected:
  void SetUp() override {
    json r = call(server_, session_,
                  R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
                      "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{}}})");
    ASSERT_TRUE(r.contains("result"));
  }
  FakeTools tools_;
  Server server_{tools_, {}};
  Session session_;
};

TEST_F(Initialized, ToolsList) {
  json r = call(server_, session_, R"({"jsonrpc":"2.0","id":1,"method":"tools/list"})");
  ASSERT_EQ(r["result"]["tools"].size(), 2u);
  EXPECT_EQ(r["result"]["tools"][0]["name"], "echo");
  EXPECT_FALSE(r["result"].contains("nextCursor"));
  json cursor = call(server_, session_,
                     R"({"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"cursor":"x"}})");
  EXPECT_EQ(cursor["error"]["code"], kInvalidParams);
}

TEST_F(Initialized, ToolsCallAnswersStructuredAndTextContent) {
  api::Principal alice;
  alice.kind = api::Principal::Kind::kKey;
  alice.key_id = "k1";
  alice.key_name = "alice";
  alice.admin = false;
  json r = call(server_, session_,
                R"({"jsonrpc":"2.0","id":3,"method":"tools/call",
                    "params":{"name":"echo","arguments":{"a":1}}})",
                alice);
  ASSERT_TRUE(r.contains("result")) << r.dump();
  const json& result = r["result"];
  EXPECT_FALSE(result.contains("isError"));
  EXPECT_EQ(result["structuredContent"]["arguments"]["a"], 1);
  EXPECT_EQ(result["structuredContent"]["caller"], alice.describe());
  ASSERT_EQ(result["content"].size(), 1u);
  EXPECT_EQ(result["content"][0]["type"], "text");
  std::string text = result["content"][0]["text"];
  EXPECT_TRUE(text.starts_with("a note\n")) << text;
  EXPECT_EQ(json::parse(text.substr(7)), result["structuredContent"]);
  EXPECT_EQ(tools_.calls, std::vector<std::string>{"echo"});
}

TEST_F(Initialized, ToolFailuresAreResultsWithIsError) {
  json r = call(server_, session_,
                R"({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"fail"}})");
  ASSERT_TRUE(r.contains("result")) << r.dump();
  EXPECT_EQ(r["result"]["isError"], true);
  EXPECT_EQ(r["result"]["structuredContent"]["error"]["code"], "not_found");
}

TEST_F(Initialized, ProtocolErrors) {
  auto code = [&](const char* text) {
    return call(server_, session_, text)["error"]["code"].get<int>();
  };
  EXPECT_EQ(code(R"({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"nope"}})"),
            kInvalidParams);
  EXPECT_EQ(code(R"({"jsonrpc":"2.0","id":6,"method":"tools/call"})"), kInvalidParams);
  EXPECT_EQ(code(R"({"jsonrpc":"2.0","id":7,"method":"tools/call",
                     "params":{"name":"echo","arguments":[1]}})"),
            kInvalidParams);
  EXPECT_EQ(code(R"({"jsonrpc":"2.0","id":8,"method":"resources/list"})"), kMethodNotFound);
  EXPECT_EQ(code(R"({"jsonrpc":"2.0","id":9,"method":"logging/setLevel",
                     "params":{"level":"info"}})"),
            kMethodNotFound);
  EXPECT_TRUE(tools_.calls.empty());
}

TEST(McpServer, StructuredContentFromVersion20250618) {
  ToolResult result{{{"k", "v"}}, false, {}};
  EXPECT_TRUE(callToolResult(result, "2025-06-18").contains("structuredContent"));
  EXPECT_TRUE(callToolResult(result, "2025-11-25").contains("structuredContent"));
  json old = callToolResult(result, "2025-03-26");
  EXPECT_FALSE(old.contains("structuredContent"));
  EXPECT_EQ(json::parse(old["content"][0]["text"].get<std::string>()), result.structured);
}

}  // namespace
}  // namespace hutch::mcp

#include "cli/mcp_relay.h"

#include <gtest/gtest.h>

namespace hutch::cli {
namespace {

// hutchd's /mcp as the relay sees it: scripted answers, and what was sent.
struct FakeHutchd {
  struct Sent {
    std::map<std::string, std::string> headers;
    std::string body;
  };
  std::vector<Sent> sent;
  int sessions = 0;
  std::string live;  // the session hutchd knows
  bool down = false;

  Result<RawResponse> post(const std::map<std::string, std::string>& headers,
                           const std::string& body) {
    sent.push_back({headers, body});
    if (down) return fail(Errc::kUnavailable, "hutchd is not running");
    json m = json::parse(body, nullptr, false);
    if (!m.is_object()) {
      return RawResponse{
          400,
          {},
          R"({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}})"};
    }
    if (m.value("method", "") == "initialize") {
      live = "s" + std::to_string(++sessions);
      return RawResponse{
          200,
          {{"mcp-session-id", live}},
          json{{"jsonrpc", "2.0"}, {"id", m["id"]}, {"result", {{"protocolVersion", "2025-06-18"}}}}
                  .dump() +
              "\n"};
    }
    auto session = headers.find("Mcp-Session-Id");
    if (session == headers.end()) {
      return RawResponse{
          400, {}, R"({"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"no session"}})"};
    }
    if (session->second != live) {
      return RawResponse{
          404,
          {},
          R"({"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Session not found"}})"};
    }
    if (!m.contains("id")) return RawResponse{202, {}, ""};
    return RawResponse{
        200, {}, json{{"jsonrpc", "2.0"}, {"id", m["id"]}, {"result", json::object()}}.dump()};
  }
};

class Relay : public ::testing::Test {
 protected:
  FakeHutchd hutchd_;
  std::vector<std::string> out_;
  std::vector<std::string> log_;
  McpRelay relay_{[this](const auto& h, const auto& b) { return hutchd_.post(h, b); },
                  [this](const std::string& line) { out_.push_back(line); },
                  [this](const std::string& text) { log_.push_back(text); }};

  void initialize() {
    relay_.handleLine(
        R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18"}})");
    relay_.handleLine(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  }
};

TEST_F(Relay, CarriesTheSession) {
  EXPECT_FALSE(relay_.initialized());
  initialize();
  EXPECT_TRUE(relay_.initialized());
  ASSERT_EQ(out_.size(), 1u);  // the initialize result; nothing for the notification
  EXPECT_EQ(json::parse(out_[0])["result"]["protocolVersion"], "2025-06-18");
  EXPECT_EQ(out_[0].find('\n'), std::string::npos);  // one line
  EXPECT_FALSE(hutchd_.sent[0].headers.contains("Mcp-Session-Id"));
  EXPECT_EQ(hutchd_.sent[1].headers.at("Mcp-Session-Id"), "s1");
  EXPECT_EQ(hutchd_.sent[1].headers.at("MCP-Protocol-Version"), "2025-06-18");
  EXPECT_EQ(hutchd_.sent[1].headers.at("Accept"), "application/json, text/event-stream");
  relay_.handleLine(R"({"jsonrpc":"2.0","id":7,"method":"ping"})");
  ASSERT_EQ(out_.size(), 2u);
  EXPECT_EQ(json::parse(out_[1])["id"], 7);
  relay_.handleLine("   ");  // blank lines are not messages
  EXPECT_EQ(hutchd_.sent.size(), 3u);
  EXPECT_EQ(relay_.sessionHeaders().at("Mcp-Session-Id"), "s1");
}

TEST_F(Relay, StartsANewSessionWhenHutchdForgotIt) {
  initialize();
  hutchd_.live = "restarted";  // hutchd restarted: s1 is unknown now
  relay_.handleLine(R"({"jsonrpc":"2.0","id":8,"method":"tools/list"})");
  ASSERT_EQ(out_.size(), 2u);
  json answer = json::parse(out_[1]);
  EXPECT_EQ(answer["id"], 8);
  EXPECT_TRUE(answer.contains("result"));
  EXPECT_EQ(hutchd_.sessions, 2);
  EXPECT_EQ(relay_.sessionHeaders().at("Mcp-Session-Id"), "s2");
  // The client's initialize was sent again, then initialized, then the request.
  ASSERT_GE(hutchd_.sent.size(), 6u);
  EXPECT_NE(hutchd_.sent[3].body.find("initialize"), std::string::npos);
  EXPECT_NE(hutchd_.sent[4].body.find("notifications/initialized"), std::string::npos);
  EXPECT_EQ(hutchd_.sent[5].headers.at("Mcp-Session-Id"), "s2");
  EXPECT_FALSE(log_.empty());
}

TEST_F(Relay, RequestsAlwaysGetAnAnswer) {
  // Before initialize, hutchd refuses without a session: the request gets an error with its id.
  relay_.handleLine(R"({"jsonrpc":"2.0","id":"a","method":"tools/list"})");
  ASSERT_EQ(out_.size(), 1u);
  json refused = json::parse(out_[0]);
  EXPECT_EQ(refused["id"], "a");
  EXPECT_EQ(refused["error"]["message"], "no session");
  // hutchd down: the same, with why.
  initialize();
  hutchd_.down = true;
  relay_.handleLine(R"({"jsonrpc":"2.0","id":3,"method":"ping"})");
  json down = json::parse(out_.back());
  EXPECT_EQ(down["id"], 3);
  EXPECT_NE(down["error"]["message"].get<std::string>().find("not running"), std::string::npos);
  // A notification gets nothing, only a log line.
  size_t before = out_.size();
  relay_.handleLine(R"({"jsonrpc":"2.0","method":"notifications/cancelled"})");
  EXPECT_EQ(out_.size(), before);
  // Bad JSON: hutchd's parse error, as it came.
  hutchd_.down = false;
  relay_.handleLine("{oops");
  EXPECT_EQ(json::parse(out_.back())["error"]["code"], -32700);
}

}  // namespace
}  // namespace hutch::cli

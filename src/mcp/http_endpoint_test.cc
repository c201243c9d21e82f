#include "mcp/http_endpoint.h"

#include <gtest/gtest.h>

#include "mcp/testing_tools.h"

namespace hutch::mcp {
namespace {

namespace http = boost::beast::http;
using testing::FakeTools;
using testing::runCoroutine;

api::Principal key(const std::string& id) {
  api::Principal p;
  p.kind = api::Principal::Kind::kKey;
  p.key_id = id;
  p.key_name = id;
  p.admin = false;
  return p;
}

class Endpoint : public ::testing::Test {
 protected:
  Endpoint() { endpoint_.addRoutes(router_); }

  api::Response send(http::verb method, const std::string& body,
                     std::map<std::string, std::string> headers = {},
                     const api::Principal& caller = api::Principal::host()) {
    api::Request req{method, "/mcp", 11};
    if (!headers.contains("Content-Type")) headers["Content-Type"] = "application/json";
    if (!headers.contains("Accept")) headers["Accept"] = "application/json, text/event-stream";
    for (const auto& [name, value] : headers) {
      if (!value.empty()) req.set(name, value);
    }
    req.body() = body;
    auto match = router_.match(method, "/mcp");
    EXPECT_TRUE(match) << match.error().message();
    api::RequestContext ctx{req, match->params, {}, nullptr, caller};
    auto res = runCoroutine(match->handler->handler(ctx));
    EXPECT_TRUE(res.has_value());
    return std::move(*res);
  }

  // A session of `version`, initialized; its id.
  std::string open(const std::string& version = "2025-11-25",
                   const api::Principal& caller = api::Principal::host()) {
    api::Response res = send(http::verb::post,
                             R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
                                 "protocolVersion":")" +
                                 version + R"(","capabilities":{},"clientInfo":{}}})",
                             {}, caller);
    EXPECT_EQ(res.result_int(), 200u) << res.body();
    auto header = res["Mcp-Session-Id"];
    std::string id(header.data(), header.size());
    EXPECT_EQ(id.size(), 64u);
    api::Response initialized =
        send(http::verb::post, R"({"jsonrpc":"2.0","method":"notifications/initialized"})",
             {{"Mcp-Session-Id", id}, {"MCP-Protocol-Version", version}}, caller);
    EXPECT_EQ(initialized.result_int(), 202u);
    EXPECT_TRUE(initialized.body().empty());
    return id;
  }

  static json body(const api::Response& res) { return json::parse(res.body()); }

  FakeTools tools_;
  Server server_{tools_, {}};
  HttpEndpoint endpoint_{server_};
  api::ApiRouter router_;
};

TEST_F(Endpoint, SessionCarriesRequests) {
  std::string id = open();
  api::Response res = send(http::verb::post, R"({"jsonrpc":"2.0","id":2,"method":"tools/list"})",
                           {{"Mcp-Session-Id", id}, {"MCP-Protocol-Version", "2025-11-25"}});
  EXPECT_EQ(res.result_int(), 200u);
  EXPECT_EQ(res[http::field::content_type], "application/json");
  EXPECT_EQ(body(res)["result"]["tools"].size(), 2u);
  // Without the version header: the session's version is used.
  res = send(http::verb::post, R"({"jsonrpc":"2.0","id":3,"method":"ping"})",
             {{"Mcp-Session-Id", id}});
  EXPECT_EQ(body(res)["result"], json::object());
  // Another initialize gets another session.
  std::string second = open();
  EXPECT_NE(second, id);
  EXPECT_EQ(endpoint_.sessionCount(), 2u);
}

TEST_F(Endpoint, SessionsAreRequiredAndBelongToTheirCaller) {
  const char* ping = R"({"jsonrpc":"2.0","id":2,"method":"ping"})";
  EXPECT_EQ(send(http::verb::post, ping).result_int(), 400u);
  EXPECT_EQ(send(http::verb::post, ping, {{"Mcp-Session-Id", "nope"}}).result_int(), 404u);
  std::string alice = open("2025-11-25", key("alice"));
  EXPECT_EQ(send(http::verb::post, ping, {{"Mcp-Session-Id", alice}}, key("alice")).result_int(),
            200u);
  // Another key, or the host, with alice's session id: as if it did not exist.
  EXPECT_EQ(send(http::verb::post, ping, {{"Mcp-Session-Id", alice}}, key("bob")).result_int(),
            404u);
  EXPECT_EQ(send(http::verb::post, ping, {{"Mcp-Session-Id", alice}}).result_int(), 404u);
  // Bob cannot end it either; alice can.
  EXPECT_EQ(send(http::verb::delete_, "", {{"Mcp-Session-Id", alice}}, key("bob")).result_int(),
            404u);
  EXPECT_EQ(send(http::verb::delete_, "", {{"Mcp-Session-Id", alice}}, key("alice")).result_int(),
            204u);
  EXPECT_EQ(send(http::verb::post, ping, {{"Mcp-Session-Id", alice}}, key("alice")).result_int(),
            404u);
  // initialize never joins a session.
  std::string host = open();
  api::Response init = send(http::verb::post,
                            R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
                                "protocolVersion":"2025-11-25"}})",
                            {{"Mcp-Session-Id", host}});
  EXPECT_EQ(init.result_int(), 400u);
}

TEST_F(Endpoint, ASessionsFailedInitializeIsNotKept) {
  api::Response res =
      send(http::verb::post, R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{}})");
  EXPECT_EQ(res.result_int(), 200u);  // a JSON-RPC error is still the request's answer
  EXPECT_EQ(body(res)["error"]["code"], kInvalidParams);
  EXPECT_TRUE(res["Mcp-Session-Id"].empty());
  EXPECT_EQ(endpoint_.sessionCount(), 0u);
}

TEST_F(Endpoint, HeadersAreChecked) {
  std::string id = open();
  const char* ping = R"({"jsonrpc":"2.0","id":2,"method":"ping"})";
  EXPECT_EQ(send(http::verb::post, ping, {{"Mcp-Session-Id", id}, {"Content-Type", "text/plain"}})
                .result_int(),
            415u);
  EXPECT_EQ(
      send(http::verb::post, ping, {{"Mcp-Session-Id", id}, {"Accept", "text/html"}}).result_int(),
      406u);
  api::Response wrong = send(http::verb::post, ping,
                             {{"Mcp-Session-Id", id}, {"MCP-Protocol-Version", "2025-06-18"}});
  EXPECT_EQ(wrong.result_int(), 400u);
  EXPECT_EQ(
      send(http::verb::post, ping, {{"Mcp-Session-Id", id}, {"MCP-Protocol-Version", "2031-01-01"}})
          .result_int(),
      400u);
  // Origin: another site is refused (DNS rebinding); this server's own is fine.
  api::Response foreign =
      send(http::verb::post, ping,
           {{"Mcp-Session-Id", id}, {"Host", "127.0.0.1:8080"}, {"Origin", "http://evil.example"}});
  EXPECT_EQ(foreign.result_int(), 403u);
  EXPECT_TRUE(body(foreign)["id"].is_null());
  EXPECT_EQ(
      send(
          http::verb::post, ping,
          {{"Mcp-Session-Id", id}, {"Host", "127.0.0.1:8080"}, {"Origin", "http://127.0.0.1:8080"}})
          .result_int(),
      200u);
}

TEST_F(Endpoint, BadBodies) {
  std::string id = open();
  api::Response parse = send(http::verb::post, "{oops", {{"Mcp-Session-Id", id}});
  EXPECT_EQ(parse.result_int(), 400u);
  EXPECT_EQ(body(parse)["error"]["code"], kParseError);
  // A broken notification cannot be accepted; a broken request is answered as a request.
  api::Response note =
      send(http::verb::post, R"({"jsonrpc":"2.0","method":5})", {{"Mcp-Session-Id", id}});
  EXPECT_EQ(note.result_int(), 400u);
  api::Response request =
      send(http::verb::post, R"({"jsonrpc":"2.0","id":9,"method":5})", {{"Mcp-Session-Id", id}});
  EXPECT_EQ(request.result_int(), 200u);
  EXPECT_EQ(body(request)["id"], 9);
  EXPECT_EQ(body(request)["error"]["code"], kInvalidRequest);
  // A client's response to a request of ours (we send none): accepted.
  EXPECT_EQ(
      send(http::verb::post, R"({"jsonrpc":"2.0","id":1,"result":{}})", {{"Mcp-Session-Id", id}})
          .result_int(),
      202u);
}

TEST_F(Endpoint, BatchesOnlyWhereTheVersionHasThem) {
  const std::string batch =
      R"([{"jsonrpc":"2.0","id":1,"method":"ping"},
          {"jsonrpc":"2.0","method":"notifications/initialized"},
          {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"}},
          {"jsonrpc":"2.0","id":3,"method":"nope"}])";
  std::string modern = open("2025-06-18");
  api::Response refused = send(http::verb::post, batch, {{"Mcp-Session-Id", modern}});
  EXPECT_EQ(refused.result_int(), 400u);
  EXPECT_EQ(body(refused)["error"]["code"], kInvalidRequest);

  std::string old = open("2025-03-26");
  api::Response res = send(http::verb::post, batch, {{"Mcp-Session-Id", old}});
  EXPECT_EQ(res.result_int(), 200u);
  json answers = body(res);
  ASSERT_TRUE(answers.is_array());
  ASSERT_EQ(answers.size(), 3u);  // no answer for the notification
  EXPECT_EQ(answers[0]["id"], 1);
  EXPECT_EQ(answers[1]["id"], 2);
  EXPECT_FALSE(answers[1]["result"].contains("structuredContent"));  // not in 2025-03-26
  EXPECT_EQ(answers[2]["error"]["code"], kMethodNotFound);
  EXPECT_EQ(send(http::verb::post, "[]", {{"Mcp-Session-Id", old}}).result_int(), 400u);
  // Only notifications: accepted without a body.
  EXPECT_EQ(send(http::verb::post, R"([{"jsonrpc":"2.0","method":"notifications/cancelled"}])",
                 {{"Mcp-Session-Id", old}})
                .result_int(),
            202u);
}

TEST_F(Endpoint, GetIsNotOffered) {
  auto match = router_.match(http::verb::get, "/mcp");
  ASSERT_FALSE(match);
  EXPECT_EQ(match.error().code(), Errc::kUnsupported);  // the server answers 405
  auto allowed = router_.methodsFor("/mcp");
  EXPECT_EQ(allowed, (std::vector<http::verb>{http::verb::post, http::verb::delete_}));
}

TEST(McpHttpRules, Origin) {
  EXPECT_TRUE(checkOrigin("", "anything"));
  EXPECT_TRUE(checkOrigin("http://127.0.0.1:8080", "127.0.0.1:8080"));
  EXPECT_TRUE(checkOrigin("HTTPS://Host.Example:8443/", "host.example:8443"));
  EXPECT_FALSE(checkOrigin("http://127.0.0.1:9999", "127.0.0.1:8080"));
  EXPECT_FALSE(checkOrigin("http://evil.example", "127.0.0.1:8080"));
  EXPECT_FALSE(checkOrigin("null", "127.0.0.1:8080"));
  EXPECT_FALSE(checkOrigin("http://127.0.0.1:8080/path", "127.0.0.1:8080"));
  EXPECT_FALSE(checkOrigin("file://", ""));
}

TEST(McpHttpRules, AcceptAndContentType) {
  EXPECT_TRUE(acceptsJson(""));
  EXPECT_TRUE(acceptsJson("application/json, text/event-stream"));
  EXPECT_TRUE(acceptsJson("text/event-stream, application/json;q=0.5"));
  EXPECT_TRUE(acceptsJson("*/*"));
  EXPECT_TRUE(acceptsJson("application/*"));
  EXPECT_FALSE(acceptsJson("text/event-stream"));
  EXPECT_FALSE(acceptsJson("application/json;q=0"));
  EXPECT_TRUE(isJsonContentType("application/json"));
  EXPECT_TRUE(isJsonContentType("Application/JSON; charset=utf-8"));
  EXPECT_FALSE(isJsonContentType("text/plain"));
  EXPECT_FALSE(isJsonContentType(""));
}

}  // namespace
}  // namespace hutch::mcp

#include "mcp/json_rpc.h"

#include <gtest/gtest.h>

namespace hutch::mcp {
namespace {

TEST(JsonRpc, ClassifiesRequestsNotificationsAndResponses) {
  auto request = classify(json::parse(R"({"jsonrpc":"2.0","id":7,"method":"ping"})"));
  ASSERT_TRUE(std::holds_alternative<Request>(request));
  EXPECT_EQ(std::get<Request>(request).id, 7);
  EXPECT_EQ(std::get<Request>(request).method, "ping");
  EXPECT_TRUE(std::get<Request>(request).params.is_null());

  auto string_id = classify(json::parse(R"({"jsonrpc":"2.0","id":"a","method":"x","params":{}})"));
  ASSERT_TRUE(std::holds_alternative<Request>(string_id));
  EXPECT_EQ(std::get<Request>(string_id).id, "a");

  auto note = classify(json::parse(R"({"jsonrpc":"2.0","method":"notifications/initialized"})"));
  ASSERT_TRUE(std::holds_alternative<Notification>(note));
  EXPECT_EQ(std::get<Notification>(note).method, "notifications/initialized");

  auto response = classify(json::parse(R"({"jsonrpc":"2.0","id":3,"result":{}})"));
  ASSERT_TRUE(std::holds_alternative<Response>(response));
  auto error = classify(json::parse(R"({"jsonrpc":"2.0","id":null,"error":{"code":1}})"));
  ASSERT_TRUE(std::holds_alternative<Response>(error));
}

int errorCode(const Message& m) {
  return std::get<Invalid>(m).error_response["error"]["code"].get<int>();
}

TEST(JsonRpc, RefusesWhatIsNotAMessage) {
  // Not an object, no version, a wrong version.
  for (const char* text : {R"([1])", R"("x")", R"({"id":1,"method":"ping"})",
                           R"({"jsonrpc":"1.0","id":1,"method":"ping"})"}) {
    auto m = classify(json::parse(text));
    ASSERT_TRUE(std::holds_alternative<Invalid>(m)) << text;
    EXPECT_EQ(errorCode(m), kInvalidRequest) << text;
  }
  // MCP forbids a null id, and ids are strings or integers.
  for (const char* text : {R"({"jsonrpc":"2.0","id":null,"method":"ping"})",
                           R"({"jsonrpc":"2.0","id":1.5,"method":"ping"})",
                           R"({"jsonrpc":"2.0","id":{},"method":"ping"})"}) {
    auto m = classify(json::parse(text));
    ASSERT_TRUE(std::holds_alternative<Invalid>(m)) << text;
    EXPECT_EQ(errorCode(m), kInvalidRequest);
    EXPECT_TRUE(std::get<Invalid>(m).error_response["id"].is_null());
  }
  // A bad method keeps the id it can answer to.
  auto bad_method = classify(json::parse(R"({"jsonrpc":"2.0","id":4,"method":3})"));
  ASSERT_TRUE(std::holds_alternative<Invalid>(bad_method));
  EXPECT_EQ(std::get<Invalid>(bad_method).error_response["id"], 4);
  // Params are objects in MCP.
  auto array_params =
      classify(json::parse(R"({"jsonrpc":"2.0","id":5,"method":"x","params":[1]})"));
  ASSERT_TRUE(std::holds_alternative<Invalid>(array_params));
  EXPECT_EQ(errorCode(array_params), kInvalidParams);
  EXPECT_EQ(std::get<Invalid>(array_params).error_response["id"], 5);
  // Neither a method nor a result.
  auto nothing = classify(json::parse(R"({"jsonrpc":"2.0","id":5})"));
  ASSERT_TRUE(std::holds_alternative<Invalid>(nothing));
}

TEST(JsonRpc, ParseErrorsAndResponses) {
  auto bad = parseBody("{not json");
  ASSERT_TRUE(std::holds_alternative<Invalid>(bad));
  const json& e = std::get<Invalid>(bad).error_response;
  EXPECT_EQ(e["jsonrpc"], "2.0");
  EXPECT_TRUE(e["id"].is_null());
  EXPECT_EQ(e["error"]["code"], kParseError);
  ASSERT_TRUE(std::holds_alternative<json>(parseBody(R"({"a":1})")));

  EXPECT_EQ(resultResponse(1, json::object()),
            json::parse(R"({"jsonrpc":"2.0","id":1,"result":{}})"));
  json error = errorResponse("x", kMethodNotFound, "nope", json{{"k", 1}});
  EXPECT_EQ(error["error"]["code"], kMethodNotFound);
  EXPECT_EQ(error["error"]["message"], "nope");
  EXPECT_EQ(error["error"]["data"]["k"], 1);
  EXPECT_FALSE(errorResponse(1, kInternalError, "m")["error"].contains("data"));
}

}  // namespace
}  // namespace hutch::mcp

// Test helpers for the MCP server: a ToolSet with two tools and a way to run a coroutine.
#pragma once

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include "mcp/server.h"

namespace hutch::mcp::testing {

// "echo" answers its arguments and the caller; "fail" answers an isError result.
class FakeTools : public ToolSet {
 public:
  const nlohmann::json& definitions() const override { return definitions_; }
  bool has(std::string_view name) const override { return name == "echo" || name == "fail"; }
  boost::asio::awaitable<ToolResult> call(std::string name, nlohmann::json arguments,
                                          api::Principal caller) override {
    calls.push_back(name);
    if (name == "fail") {
      co_return ToolResult{
          {{"error", {{"code", "not_found"}, {"message", "No such box"}}}}, true, {}};
    }
    co_return ToolResult{
        {{"arguments", arguments}, {"caller", caller.describe()}}, false, "a note"};
  }
  std::vector<std::string> calls;

 private:
  nlohmann::json definitions_ =
      nlohmann::json::array({{{"name", "echo"}, {"inputSchema", {{"type", "object"}}}},
                             {{"name", "fail"}, {"inputSchema", {{"type", "object"}}}}});
};

template <class T>
T runCoroutine(boost::asio::awaitable<T> coroutine) {
  boost::asio::io_context io;
  auto future = boost::asio::co_spawn(io, std::move(coroutine), boost::asio::use_future);
  io.run();
  return future.get();
}

}  // namespace hutch::mcp::testing

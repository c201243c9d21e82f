// hutch's MCP tools (docs/mcp.md) over the box service: each decodes its arguments with the
// API's parsers (tool_args.h), resolves "box" through the API's scoper (a key sees only its own
// boxes, exactly as on the HTTP API), calls BoxService and answers the API's JSON objects.
// Failures are results with isError and the error's message, which says what to do.
#pragma once

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on

#include <map>
#include <string>

#include "api/http_server.h"
#include "box/box_service.h"
#include "box/port_forwards.h"
#include "mcp/server.h"

namespace hutch::mcp {

class BoxTools : public ToolSet {
 public:
  // `scoper` resolves {"box": KEY} for a principal (api::boxScoper). All must outlive this.
  BoxTools(box::BoxService& service, box::PortForwards& ports, api::ParamScoper scoper);

  const nlohmann::json& definitions() const override;
  bool has(std::string_view name) const override;
  boost::asio::awaitable<ToolResult> call(std::string name, nlohmann::json arguments,
                                          api::Principal caller) override;

 private:
  using Call = boost::asio::awaitable<Result<ToolResult>> (BoxTools::*)(const nlohmann::json&,
                                                                        const api::Principal&);
  // The id of the box `key` names among those `caller` may see.
  Result<std::string> resolve(const api::Principal& caller, const std::string& key) const;

  boost::asio::awaitable<Result<ToolResult>> listBoxes(const nlohmann::json& args,
                                                       const api::Principal& caller);
  boost::asio::awaitable<Result<ToolResult>> createBox(const nlohmann::json& args,
                                                       const api::Principal& caller);
  boost::asio::awaitable<Result<ToolResult>> runCommand(const nlohmann::json& args,
                                                        const api::Principal& caller);
  boost::asio::awaitable<Result<ToolResult>> readFile(const nlohmann::json& args,
                                                      const api::Principal& caller);
  boost::asio::awaitable<Result<ToolResult>> writeFile(const nlohmann::json& args,
                                                       const api::Principal& caller);
  boost::asio::awaitable<Result<ToolResult>> listFiles(const nlohmann::json& args,
                                                       const api::Principal& caller);
  boost::asio::awaitable<Result<ToolResult>> forkBox(const nlohmann::json& args,
                                                     const api::Principal& caller);
  boost::asio::awaitable<Result<ToolResult>> checkpointBox(const nlohmann::json& args,
                                                           const api::Principal& caller);
  boost::asio::awaitable<Result<ToolResult>> listCheckpoints(const nlohmann::json& args,
                                                             const api::Principal& caller);
  boost::asio::awaitable<Result<ToolResult>> rollbackBox(const nlohmann::json& args,
                                                         const api::Principal& caller);
  boost::asio::awaitable<Result<ToolResult>> publishPort(const nlohmann::json& args,
                                                         const api::Principal& caller);
  boost::asio::awaitable<Result<ToolResult>> stopBox(const nlohmann::json& args,
                                                     const api::Principal& caller);
  boost::asio::awaitable<Result<ToolResult>> startBox(const nlohmann::json& args,
                                                      const api::Principal& caller);
  boost::asio::awaitable<Result<ToolResult>> removeBox(const nlohmann::json& args,
                                                       const api::Principal& caller);

  box::BoxService& service_;
  box::PortForwards& ports_;
  api::ParamScoper scoper_;
  std::map<std::string, Call, std::less<>> calls_;
};

// A failed call as the model sees it: {"error": {"code", "message"}}, isError, the message
// completed with the tool that helps where hutch's own message names a CLI command.
ToolResult toolError(const Error& error);

}  // namespace hutch::mcp

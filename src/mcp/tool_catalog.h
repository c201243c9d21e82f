// The tools hutch offers over MCP (docs/mcp.md): names, descriptions, JSON Schemas of their
// arguments (what tool_args.h accepts) and behaviour hints, as tools/list answers them.
#pragma once

#include <nlohmann/json.hpp>

namespace hutch::mcp {

// The Tool objects, in a fixed order (clients may cache them).
const nlohmann::json& toolCatalog();

}  // namespace hutch::mcp

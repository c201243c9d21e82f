#pragma once

#include <string_view>

namespace hutch::api {

// docs/openapi.yaml as compact JSON (generated at build time by scripts/openapi_json.py):
// what GET /v1/openapi.json answers.
std::string_view openApiJson();

}  // namespace hutch::api

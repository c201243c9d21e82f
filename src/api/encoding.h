// Text and bytes in JSON: UTF-8 checks and base64 (RFC 4648, with padding), for exec output and
// stdin in the JSON API and byte fields in the E2B façade.
#pragma once

#include <string>
#include <string_view>

#include "base/result.h"

namespace hutch::api {

// Whether `bytes` is well-formed UTF-8 (no overlong forms, surrogates or values past U+10FFFF):
// what a JSON string can carry as it is.
bool isValidUtf8(std::string_view bytes);

std::string base64Encode(std::string_view bytes);
// Lowercase hex, two digits a byte (hashes, keys, tokens).
std::string hexEncode(const unsigned char* data, size_t size);
// kInvalidArgument naming `what` for anything that is not padded base64 (whitespace is not
// accepted).
Result<std::string> base64Decode(std::string_view text, std::string_view what);

}  // namespace hutch::api

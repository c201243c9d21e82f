// ASCII text helpers for protocol words (HTTP header names, tool messages): locale-free, bytes
// above 0x7f left as they are.
#pragma once

#include <string>
#include <string_view>

namespace hutch::base {

// "Digest Did Not Match" -> "digest did not match".
inline std::string asciiLower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace hutch::base

#include "base/path_text.h"

namespace hutch::base {

std::vector<std::string_view> lexicalParts(std::string_view path, bool* climbed) {
  std::vector<std::string_view> parts;
  if (climbed != nullptr) *climbed = false;
  while (!path.empty()) {
    const size_t slash = path.find('/');
    const std::string_view part = path.substr(0, slash);
    path = slash == std::string_view::npos ? std::string_view() : path.substr(slash + 1);
    if (part.empty() || part == ".") continue;
    if (part != "..") {
      parts.push_back(part);
    } else if (!parts.empty()) {
      parts.pop_back();
    } else if (climbed != nullptr) {
      *climbed = true;
    }
  }
  return parts;
}

std::string joinParts(const std::vector<std::string_view>& parts, std::string_view lead) {
  std::string out(lead);
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out.push_back('/');
    out.append(parts[i]);
  }
  return out;
}

std::string lexicalAbsolute(std::string_view path) {
  return joinParts(lexicalParts(path), "/");
}

}  // namespace hutch::base

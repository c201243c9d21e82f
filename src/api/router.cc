#include "api/router.h"

#include <cctype>

namespace hutch::api {

namespace {
std::string percentDecode(std::string_view in, bool plus_is_space = true) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '%' && i + 2 < in.size() && std::isxdigit(static_cast<unsigned char>(in[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(in[i + 2]))) {
      out.push_back(static_cast<char>(std::stoi(std::string(in.substr(i + 1, 2)), nullptr, 16)));
      i += 2;
    } else if (in[i] == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(in[i]);
    }
  }
  return out;
}
}  // namespace

std::string decodePathSegment(std::string_view segment) {
  return percentDecode(segment, false);
}

PathParams parseQuery(std::string_view query) {
  PathParams out;
  size_t start = 0;
  while (start < query.size()) {
    size_t end = query.find('&', start);
    if (end == std::string_view::npos) end = query.size();
    std::string_view part = query.substr(start, end - start);
    size_t eq = part.find('=');
    if (!part.empty()) {
      if (eq == std::string_view::npos) {
        out[percentDecode(part)] = "";
      } else {
        out[percentDecode(part.substr(0, eq))] = percentDecode(part.substr(eq + 1));
      }
    }
    start = end + 1;
  }
  return out;
}

bool queryFlag(const PathParams& query, std::string_view key) {
  auto it = query.find(key);
  if (it == query.end()) return false;
  return it->second.empty() || it->second == "1" || it->second == "true" || it->second == "yes";
}

}  // namespace hutch::api

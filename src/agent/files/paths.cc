#include "agent/files/paths.h"

#include <vector>

#include "base/path_text.h"

namespace hutch::agent {

std::string resolvePath(std::string_view path, std::string_view home) {
  std::string joined;
  if (path.empty() || path[0] != '/') {
    joined.reserve(home.size() + 1 + path.size());
    joined.append(home);
    joined.push_back('/');
  }
  joined.append(path);
  return base::lexicalAbsolute(joined);
}

std::string baseName(const std::string& path) {
  if (path == "/") return "/";
  return path.substr(path.rfind('/') + 1);
}

std::string parentOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == 0 || slash == std::string::npos) return "/";
  return path.substr(0, slash);
}

std::string childPath(const std::string& dir, std::string_view name) {
  std::string path = dir;
  if (path != "/") path.push_back('/');
  path.append(name);
  return path;
}

bool isUnder(const std::string& path, const std::string& dir) {
  if (dir == "/") return true;
  return path.size() >= dir.size() && path.compare(0, dir.size(), dir) == 0 &&
         (path.size() == dir.size() || path[dir.size()] == '/');
}

}  // namespace hutch::agent

// Paths of file requests: absolute and clean before anything touches the filesystem.
#pragma once

#include <string>
#include <string_view>

namespace hutch::agent {

// path made absolute (a relative one is taken from home) and clean: empty and "." components
// dropped, ".." removes the component before it, as in Go's filepath.Clean (in the text, not
// through symlinks), no trailing slash. "/.." is "/".
std::string resolvePath(std::string_view path, std::string_view home);

// For a clean absolute path: its last component ("/" for "/") and its directory ("/" for "/"
// and "/a").
std::string baseName(const std::string& path);
std::string parentOf(const std::string& path);
// dir + "/" + name without doubling the slash of "/".
std::string childPath(const std::string& dir, std::string_view name);
// True when path is dir itself or inside it ("/a/b" is under "/a", "/ab" is not).
bool isUnder(const std::string& path, const std::string& dir);

}  // namespace hutch::agent

// Paths as text: "." and ".." taken lexically, never looking at a file system. Shared by every
// place that names a path inside something else (an image's tree, a box's files, E2B's paths):
// ".." never climbs above the root, as the kernel's RESOLVE_IN_ROOT resolves it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hutch::base {

// The components of `path` with empty ones and "." dropped and each ".." taking back the one
// before it. A ".." at the root is dropped, and `climbed` (when given) is set to say so.
std::vector<std::string_view> lexicalParts(std::string_view path, bool* climbed = nullptr);

// The components joined by `separator`, after `lead` ("/a/b" with lead "/"; "a/b" with "").
std::string joinParts(const std::vector<std::string_view>& parts, std::string_view lead);

// "/a/b": the absolute form of `path` ("/" for the root or an empty path).
std::string lexicalAbsolute(std::string_view path);

}  // namespace hutch::base

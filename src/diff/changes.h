// What changed between two trees of one filesystem (before: a template snapshot's or a
// checkpoint's disk; after: the box's disk now), and which changes are noise to hide.
// Pure functions over tree.h's values: unit-tested without an image.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "diff/tree.h"

namespace hutch::diff {

enum class ChangeKind { kAdded, kChanged, kDeleted };
std::string_view changeName(ChangeKind kind);  // "added", "changed", "deleted"

struct Change {
  ChangeKind change = ChangeKind::kAdded;
  Entry entry;                  // as it is now; deleted: as it was
  std::optional<Entry> before;  // changed: as it was
  // changed: what differs, of "type", "content", "mode", "owner", "target" (in that order).
  std::vector<std::string> what;
  bool operator==(const Change&) const = default;
};

// Whether two regular files of equal size hold the same bytes (read from the images).
using SameContent = std::function<Result<bool>(const Entry& before, const Entry& after)>;

// Every path added, deleted or changed from `before` to `after` (both sorted by path), in path
// order. An entry whose inode, size, times and block map are all the same is unchanged without
// reading it; otherwise regular files of equal size are compared byte for byte (same_content).
// A change of times alone (touch) is no change.
Result<std::vector<Change>> compare(const Tree& before, const Tree& after,
                                    const SameContent& same_content);

// Which paths are hidden from a diff: hutch's own writes and caches by default (rules()), and
// the caller's patterns. A pattern with a '/' is anchored at the root and matched (fnmatch,
// FNM_PATHNAME) against the path and each of its parent directories, so "/var/cache/apt" hides
// everything under it; a pattern without one matches any component's name ("*.pyc",
// "__pycache__"). A trailing "/**" or "/" is dropped.
class Filter {
 public:
  struct Rule {
    std::string name;  // what the hidden count is reported under
    std::vector<std::string> patterns;
  };
  // The built-in rules (docs/diff.md lists them).
  static const std::vector<Rule>& defaults();

  // all: no built-in rules; ignore: the caller's patterns, counted as "ignored".
  Filter(bool all, const std::vector<std::string>& ignore);
  // The name of the rule that hides `path`, or nullopt.
  std::optional<std::string> hiddenBy(std::string_view path) const;

 private:
  std::vector<Rule> rules_;
};

// Checks a caller's pattern: non-empty, at most 1024 bytes, no NUL or newline.
Result<> validatePattern(std::string_view pattern);

// The changes the filter leaves, and how many each rule hid.
struct Filtered {
  std::vector<Change> changes;
  std::map<std::string, uint64_t> hidden;
};
Filtered applyFilter(std::vector<Change> changes, const Filter& filter);

// A change as the API shows it (docs/api.md "Diff").
nlohmann::json toJson(const Change& change);

}  // namespace hutch::diff

// The value parts of tree.h, without libext2fs (hutchd links these).
#include <algorithm>

#include "diff/tree.h"

namespace hutch::diff {

std::string_view kindName(Kind kind) {
  switch (kind) {
    case Kind::kFile: return "file";
    case Kind::kDir: return "dir";
    case Kind::kSymlink: return "symlink";
    case Kind::kCharDevice: return "char-device";
    case Kind::kBlockDevice: return "block-device";
    case Kind::kFifo: return "fifo";
    case Kind::kSocket: return "socket";
  }
  return "file";
}

const Entry* Tree::find(std::string_view path) const {
  auto it = std::lower_bound(entries.begin(), entries.end(), path,
                             [](const Entry& e, std::string_view p) { return e.path < p; });
  return it != entries.end() && it->path == path ? &*it : nullptr;
}

}  // namespace hutch::diff

// `hutch cp`: files and directory trees between this host and a box, as a tar stream over the
// exec API (GNU tar in the box, libarchive here). Path semantics are docker cp's (copy_plan.h).
#pragma once

#include <string>

namespace hutch::cli {

struct CopyOptions {
  std::string source;       // PATH or BOX:PATH
  std::string destination;  // PATH or BOX:PATH; exactly one of the two names a box
  // -a: keep numeric uid/gid. Otherwise files copied into a box belong to the owner of the
  // directory that receives them, and files copied here to whoever runs hutch.
  bool archive = false;
  bool progress = false;  // --progress: the progress line even when stderr is not a terminal
  bool quiet = false;     // -q: no progress line, no summary
};

}  // namespace hutch::cli

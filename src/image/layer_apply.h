// Applies one image layer (a tar, plain or gzip- or zstd-compressed) onto an image tree with OCI
// semantics (image-spec layer.md), reading the blob once: its compressed bytes are hashed for
// the layer digest and its uncompressed tar for the diff_id as entries are written.
//
// Entries:
//  - names are cleaned ("./a//b" -> "a/b"; a leading '/' is dropped: "/abs" is "abs" in the
//    tree); a name that climbs above the root ("../../etc/x", "a/../../x") is refused, as Docker
//    does, rather than silently clamped. A name or link target with a NUL byte is refused.
//  - ".wh.NAME" removes NAME as lower layers left it; ".wh..wh..opq" empties its directory of
//    what lower layers left (entries of this layer are kept); neither is created. Other
//    ".wh..wh.*" names (aufs bookkeeping) are skipped.
//  - directories that exist stay (their contents too) and take the entry's metadata; any other
//    entry replaces what had its name, a directory included (removed with its contents), and a
//    directory entry replaces a non-directory (Docker's rule).
//  - regular files, directories, symlinks (the target stored verbatim, never resolved on the
//    host), hard links (the target cleaned like a name and resolved inside the tree; it must
//    exist already and not be a directory), FIFOs. Device nodes and sockets are refused.
//  - owner (when keep_owners), mode with setuid/setgid/sticky, mtime (and atime when given),
//    xattrs user.* and security.capability; other xattrs (trusted.*, security.selinux, ACLs)
//    are skipped. Directory times are set after the whole layer, so later entries keep them.
//  - parents missing from the tree are created 0755 root:root, as Docker does.
// Every write goes through RootDir: whatever the tar holds, nothing outside the tree is touched.
// A failed apply may leave the tree half-written: discard it.
#pragma once

#include <cstdint>
#include <string>

#include "base/result.h"
#include "image/manifest.h"
#include "image/root_dir.h"

namespace hutch::image {

struct ApplyLimits {
  uint64_t max_total_bytes = uint64_t{64} << 30;  // uncompressed tar bytes over all layers
  uint64_t max_entries = 2'000'000;               // tar entries over all layers
  size_t max_path_length = 4096;                  // an entry name or link target, in bytes
  uint64_t max_file_bytes = uint64_t{32} << 30;   // one file's size
  // false only for fuzzing and tests: the compressed digest and size are not checked.
  bool verify_digest = true;
  // false only for tests and fuzzing as an unprivileged user: files stay the caller's.
  bool keep_owners = true;
  // false for a tar that is not an image layer (a build's context): a `.wh.*` name is a file
  // like any other, not a whiteout.
  bool whiteouts = true;
};

// What the layers applied so far used, against ApplyLimits; one per image, passed to every
// applyLayer call in order.
struct ApplyUsage {
  uint64_t bytes = 0;    // uncompressed tar bytes
  uint64_t entries = 0;  // tar entries
};

struct LayerStats {
  std::string diff_id;            // "sha256:…" of the uncompressed tar: compare with the config
  uint64_t compressed_bytes = 0;  // read from blob_fd
  uint64_t uncompressed_bytes = 0;
  uint64_t entries = 0;
  uint64_t whiteouts = 0;  // .wh.* and opaque markers applied
};

// Applies the layer read from `blob_fd` (from offset 0; positional reads, the fd's offset is
// not used) to `root`. `layer` gives the digest, size and compression (Manifest::layers).
// Errors name the layer's digest and the entry:
//  kInvalidArgument: the blob's digest or size differs from `layer` (checked at the end: the
//    tree holds the entries already), the compression differs from the media type, a damaged tar,
//    a name escaping the root, a hard link to a missing entry or a directory;
//  kUnsupported: device nodes, sockets, other entry types;
//  kResourceExhausted: a limit of `limits` passed (named in the message);
//  kInternal: a write into the tree failed (disk full, permissions).
Result<LayerStats> applyLayer(RootDir& root, int blob_fd, const Descriptor& layer,
                              const ApplyLimits& limits, ApplyUsage& usage);

}  // namespace hutch::image

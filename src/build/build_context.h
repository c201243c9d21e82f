// The build context: the directory `hutch template build ... CONTEXT` names, as the build sees
// it — listed once (minus what .dockerignore leaves out), hashed for the cache keys of COPY and
// ADD steps, and the place their sources are resolved.
//
// Symlinks are never followed out of the context. The walk lists a symlink as a symlink with its
// target, and opens everything with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) below the
// context directory, so a link swapped in while the build runs cannot make it read outside.
// A COPY source that is a symlink (or passes through one) is followed, as Docker does, but only
// while it stays inside the context: a source whose path or link climbs out is an error.
// Needs Linux 5.6 (openat2).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "build/dockerignore.h"

namespace hutch::build {

// At most this many entries in a context (the walk stops with an error beyond it).
inline constexpr size_t kMaxContextEntries = 1000000;

struct ContextEntry {
  enum class Type { kFile, kDirectory, kSymlink };
  std::string path;  // relative to the context, '/'-separated, clean: "src/main.py"
  Type type = Type::kFile;
  mode_t mode = 0;     // permission bits, with setuid/setgid/sticky (st_mode & 07777)
  uint64_t size = 0;   // kFile: bytes
  std::string target;  // kSymlink: the link's target as stored
  bool operator==(const ContextEntry&) const = default;
};

// Every entry below `dir` that `ignore` does not exclude, parents before their children and
// siblings in byte order of their names. A directory excluded as a whole is not entered unless
// some exception pattern might include something inside it; the parents of an included entry
// are listed even when excluded themselves (the entry needs them). Sockets, FIFOs and devices are
// skipped (a COPY cannot carry them). kNotFound when `dir` is missing, kInvalidArgument when it
// is not a directory or holds more than kMaxContextEntries entries, kInternal (with errno) for
// other I/O failures.
Result<std::vector<ContextEntry>> listContext(const std::filesystem::path& dir,
                                              const DockerIgnore& ignore);

// "sha256:<hex>" over the entries in the order given: for each its path, type and mode, a
// symlink's target, and a file's contents as read now (not its listed size). Never mtimes, owners
// or anything else that differs between two checkouts of the same tree, so equal trees hash
// equal on any machine. Files are opened below `dir` without following symlinks; a file that
// vanished or became something else since it was listed is kFailedPrecondition (list again).
Result<std::string> hashSources(const std::filesystem::path& dir,
                                const std::vector<ContextEntry>& entries);

// One thing a COPY or ADD puts in the image.
struct CopyItem {
  ContextEntry entry;  // what is copied (for a source symlink, what it leads to)
  std::string source;  // the context path it was selected by ("app/run.sh")
  // Where it goes: a path relative to the destination directory ("run.sh", "lib/x.py"), or ""
  // when the destination is the file itself (plan.dest_is_dir false).
  std::string target;
  // ADD only: a source file named directly (or by a wildcard) rather than found inside a source
  // directory, unless --unpack=false — a tar archive then is unpacked instead (detectArchives
  // decides from the contents, as Docker does).
  bool archive_candidate = false;
  bool extract = false;  // set by detectArchives: unpack it into the destination directory
  bool operator==(const CopyItem&) const = default;
};

struct CopyPlan {
  // True when the destination is a directory: it ends with '/', or there are several sources
  // (heredoc files included), or a wildcard selected several entries, or a source is a
  // directory. Otherwise there is one item, a file, and it becomes the destination itself —
  // unless the destination is an existing directory in the image, where Docker puts it inside
  // under its own name (Path(item.source).filename()); only the engine can tell.
  bool dest_is_dir = false;
  std::vector<CopyItem> items;  // in copy order; a later item with the same target wins
  // The entries of the items, for hashSources.
  std::vector<ContextEntry> entries() const;
  bool operator==(const CopyPlan&) const = default;
};

struct CopyOptions {
  bool is_add = false;
  std::optional<bool> unpack;  // ADD --unpack
  size_t inline_files = 0;     // heredoc files of the same instruction (they count as sources)
  // What the listing is, for messages: "" for the build context, else e.g. "stage 'build'" or
  // "image busybox:1.36" (COPY --from resolves against a listing of that tree).
  std::string origin;
};

// Resolves COPY/ADD sources (already expanded) against a listing of the context — or of a stage's
// tree, the rules being the same — the way Docker does:
//   - a source is a path relative to the root ("/x" is "x"; a trailing '/' is ignored); one that
//     climbs out of it with ".." is kInvalidArgument;
//   - with Go filepath.Match wildcards (* ? [...], not escaped), it selects every matching entry
//     (none is fine); without, the entry must exist: kNotFound naming it otherwise (missing, or
//     left out by .dockerignore);
//   - a symlink selected as a source is followed to what it points to, inside the listing only:
//     a link out of it (absolute, or climbing above the root) is kInvalidArgument;
//   - a directory source copies its contents (not itself) into the destination;
//   - a file source goes to dest/<its name> when the destination is a directory, else to dest.
// `dest` is only looked at for its trailing '/'. A source that is a URL is kUnsupported.
Result<CopyPlan> resolveCopySources(const std::vector<ContextEntry>& listing,
                                    const std::vector<std::string>& sources, std::string_view dest,
                                    const CopyOptions& options = {});

// For ADD: marks `extract` on each archive_candidate that is a tar archive (uncompressed, gzip,
// bzip2 or xz), read from `dir` by its contents as Docker does (a name ending in .tar.gz does not
// make an archive). Errors as hashSources.
Result<> detectArchives(const std::filesystem::path& dir, CopyPlan& plan);

}  // namespace hutch::build

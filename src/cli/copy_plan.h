// The path semantics of `hutch cp`, as pure functions: which side is the box, where the archive
// is made from, which existing directory receives it and under which name. They follow
// `docker cp`: an existing directory destination receives the source inside it, a missing one is
// created under the destination's name, a trailing "/." copies a directory's contents, and a
// missing destination parent is an error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace hutch::cli {

// One side of `hutch cp`: "BOX:PATH" or a local PATH.
struct CopyEndpoint {
  std::string box;  // empty: this host
  std::string path;

  bool operator==(const CopyEndpoint&) const = default;
};

// "dev:/tmp/x" is in box dev; "/a:b", "./a:b" and "a/b:c" are local (a colon before the first
// '/' marks a box, as for docker cp). "dev:" without a path is an error.
Result<CopyEndpoint> parseCopyEndpoint(std::string_view text);

// What a path is, as far as the plan cares.
enum class FileKind {
  kMissing,
  kDirectory,
  kOther,  // a regular file, a symlink that is not followed, a device...
};

struct CopyRequest {
  std::string source;           // as written, without "BOX:"
  FileKind source_kind;         // lstat(source): a trailing "/" or "/." follows a symlink
  std::string destination;      // as written, without "BOX:"
  FileKind destination_kind;    // stat(destination): follows symlinks
  FileKind destination_parent;  // stat(parentPath(destination))
  // Appended to messages about each side: " in box dev", or "" for this host.
  std::string source_where;
  std::string destination_where;
};

// How a copy is carried out. The archive holds `source_name` made from `source_dir` (tar -C
// source_dir source_name); its entries are renamed so that `source_name` becomes `target_name`,
// and it is unpacked in `target_dir`, a directory that exists.
struct CopyPlan {
  std::string source_dir;
  std::string source_name;  // "." when the source is a directory: archived from inside it
  std::string target_dir;
  std::string target_name;  // "." for a directory's contents into target_dir (no root entry)

  bool operator==(const CopyPlan&) const = default;
};

// The plan, or the error for a copy that must not start (nothing is written then):
// kNotFound for a missing source or destination directory, kInvalidArgument for a directory onto
// a file or "/." on a file.
Result<CopyPlan> planCopy(const CopyRequest& request);

// Lexical path helpers: trailing slashes ignored. parentPath("a") is ".", parentPath("/a") is
// "/"; baseName("/a/b/") is "b", baseName("/") is "".
std::string parentPath(std::string_view path);
std::string baseName(std::string_view path);

// Maps an archive entry name from the plan's source to its name in the target directory.
// "./a/b/" and "a/b" are the same entry. Returns nullopt for an entry to skip (the root of a
// directory whose contents go into an existing directory). An entry outside the source, an
// absolute name or one with a ".." component is refused (kProtocol): an archive from a box is
// untrusted.
Result<std::optional<std::string>> renameEntry(std::string_view entry, const CopyPlan& plan);

// What `stat -c '%f %u %g'` says about a path in the box, for lstat and for stat.
struct RemoteStat {
  std::optional<uint32_t> lmode;  // nullopt: missing
  std::optional<uint32_t> mode;   // followed; nullopt: missing or dangling
  uint32_t uid = 0;               // of the followed file
  uint32_t gid = 0;
};
FileKind kindOfMode(std::optional<uint32_t> mode);
// Parses one line of the probe's output: "<lmode-hex> <uid> <gid> <mode-hex> <uid> <gid>", with
// "-" for each field of a missing path.
Result<RemoteStat> parseRemoteStat(std::string_view line);

}  // namespace hutch::cli

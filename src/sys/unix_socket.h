// Unix stream sockets made before a child process starts: a listener the child inherits and a
// client end connected to it at once (the connection waits in the backlog until the child
// accepts). So the parent never polls for a socket file to appear, and a child that dies before
// it accepts shows up as a closed connection instead of a timeout.
#pragma once

#include <sys/types.h>

#include <filesystem>

#include "base/result.h"
#include "base/unique_fd.h"

namespace hutch::sys {

// A SOCK_STREAM socket bound to `path` (which must not exist) and listening, O_CLOEXEC, with
// the socket file's mode set to `mode`. kInvalidArgument for a path too long for sockaddr_un.
Result<UniqueFd> listenUnix(const std::filesystem::path& path, int backlog = 8, mode_t mode = 0600);

// A non-blocking, O_CLOEXEC client connected to the listener at `path`. Connecting to a
// listening unix socket completes at once even before anyone accepts.
Result<UniqueFd> connectUnix(const std::filesystem::path& path);

// A socket file that an untrusted user may have replaced (it sits in a directory that user
// owns): an O_PATH descriptor of `path` itself, never followed through a symlink, and only if it
// is a socket owned by `owner`. Connect through `procPath()` while the descriptor is open, so no
// rename or symlink after the check can send the connection elsewhere.
struct TrustedSocket {
  UniqueFd path_fd;
  std::filesystem::path procPath() const;  // /proc/self/fd/N
};
Result<TrustedSocket> openTrustedSocket(const std::filesystem::path& path, uid_t owner);

}  // namespace hutch::sys

// Runs a command in a box with its stdin, stdout and stderr on descriptors the caller chooses:
// how `hutch cp` streams a tar archive through the exec API. Kept apart from runExec
// (commands/exec_stream.h), which owns the user's terminal (raw mode, signals, window size) and
// always uses our fds 0, 1 and 2.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "cli/api_client.h"

namespace hutch::cli {

struct ExecFds {
  int in = -1;   // read up to EOF into the command's stdin; -1: its stdin is /dev/null
  int out = -1;  // the command's stdout goes here; -1: dropped
  int err = -1;  // the command's stderr goes here; -1: dropped
};

// Runs `argv` as `user` (empty: the box's default exec user, as for `hutch exec` without -u) in
// that user's home directory.
// The command's exit code (128+N if signal N killed it), or an Error for everything else: hutch's
// own failures, and the agent refusing to start the command (kNotFound when it does not exist).
// A failed write to `out` or `err` ends the exec with that error: hutchd kills the command when
// the connection closes. Back-pressure is end to end: `in` is read only as fast as the box takes
// it, and output arrives only as fast as `out` accepts it. Writes to the connection never raise
// SIGPIPE.
Result<int> runExecFds(const ApiClient& client, const std::string& box,
                       const std::vector<std::string>& argv, const std::string& user,
                       const ExecFds& fds);

}  // namespace hutch::cli

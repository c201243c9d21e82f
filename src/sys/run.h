// Running a tool to completion: the blocking "run qemu-img / the image builder" helper.
// Call it from the worker pool, never from the event loop.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace hutch::sys {

// Set by whoever no longer wants a tool's result (an API client that went away); read by the
// worker running it.
using CancelFlag = std::shared_ptr<std::atomic<bool>>;

// When a tool is stopped before it ends by itself: past `timeout` (zero: never) or once `cancel`
// is set (null: never). It is killed (SIGKILL; a tool's own children are not looked for) and the
// call fails with kTimeout or kCancelled, saying which. Both are checked every 100 ms.
struct RunLimits {
  std::chrono::milliseconds timeout{0};
  CancelFlag cancel;
};

// Runs argv with stdin /dev/null and stdout+stderr captured (the first 1 MiB is kept). Returns
// the output if it exits 0; otherwise kInternal with the tool's name, status and output.
// `on_output`, if given, sees every piece of output as it arrives (on the calling thread).
Result<std::string> runCapture(std::vector<std::string> argv,
                               const std::function<void(std::string_view)>& on_output = {},
                               const RunLimits& limits = {});

// Runs argv with stdin /dev/null and returns what it wrote to stdout if it exits 0. More than
// `limit` bytes of stdout is kResourceExhausted (the tool is killed): for output that a remote
// party controls (a registry's manifest). Otherwise kInternal with the tool's name, status and
// the end of its stderr (64 KiB are kept).
Result<std::string> runStdout(std::vector<std::string> argv, size_t limit,
                              const RunLimits& limits = {});

// Runs argv in a session of its own, its stdin /dev/null and its stdout and stderr written to
// `log` (created or truncated), so that nothing ties it to this process: if hutchd dies, it
// runs to its end. (The image builder, fed a pipe, died of SIGPIPE with hutchd, half-way
// through mmdebstrap, which left its chroot and the proc, sys and devpts mounted in it.)
// `on_output` sees what it writes as it comes (the log is read every 100 ms, on the calling
// thread). Returns the last 1 MiB of the log if it exits 0; otherwise kInternal with the
// tool's name, status and that output.
Result<std::string> runLogged(std::vector<std::string> argv, const std::filesystem::path& log,
                              const std::function<void(std::string_view)>& on_output = {});

}  // namespace hutch::sys

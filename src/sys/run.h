// Running a tool to completion: the blocking "run qemu-img / the image builder" helper.
// Call it from the worker pool, never from the event loop.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace hutch::sys {

// Runs argv with stdin /dev/null and stdout+stderr captured (the first 1 MiB is kept). Returns
// the output if it exits 0; otherwise kInternal with the tool's name, status and output.
// `on_output`, if given, sees every piece of output as it arrives (on the calling thread).
Result<std::string> runCapture(std::vector<std::string> argv,
                               const std::function<void(std::string_view)>& on_output = {});

}  // namespace hutch::sys

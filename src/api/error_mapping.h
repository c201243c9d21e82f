// The one table that maps error codes to HTTP statuses and CLI exit codes.
#pragma once

#include <string_view>

#include "base/error.h"

namespace hutch::api {

int httpStatus(Errc code);
// The Errc an HTTP error response stands for, from its JSON "code" (errcName) or, if absent,
// from the status.
Errc errcFromHttp(int status, std::string_view code_name);
// Exit codes of the CLI for errors that are hutch's own (a command run in a box exits with its
// own code instead). 1 is the generic failure; the others let scripts tell causes apart.
int cliExitCode(Errc code);

}  // namespace hutch::api

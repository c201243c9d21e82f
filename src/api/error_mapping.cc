#include "api/error_mapping.h"

#include <array>

namespace hutch::api {

namespace {
struct Row {
  Errc code;
  int http;
  int exit;
};
// Exit codes follow sysexits.h where one fits.
constexpr std::array<Row, 13> kTable{{
    {Errc::kInvalidArgument, 400, 64},     // EX_USAGE
    {Errc::kNotFound, 404, 66},            // EX_NOINPUT
    {Errc::kAlreadyExists, 409, 73},       // EX_CANTCREAT
    {Errc::kFailedPrecondition, 409, 65},  // EX_DATAERR
    {Errc::kUnavailable, 503, 69},         // EX_UNAVAILABLE
    {Errc::kTimeout, 504, 75},             // EX_TEMPFAIL
    {Errc::kProtocol, 502, 76},            // EX_PROTOCOL
    {Errc::kUnsupported, 501, 69},
    {Errc::kCancelled, 499, 75},
    {Errc::kInternal, 500, 70},           // EX_SOFTWARE
    {Errc::kUnauthenticated, 401, 77},    // EX_NOPERM
    {Errc::kPermissionDenied, 403, 77},   // EX_NOPERM
    {Errc::kResourceExhausted, 429, 75},  // EX_TEMPFAIL
}};
static_assert(kTable.size() == std::size(kAllErrcs), "every Errc needs a row");
}  // namespace

int httpStatus(Errc code) {
  for (const Row& r : kTable) {
    if (r.code == code) return r.http;
  }
  return 500;
}

int cliExitCode(Errc code) {
  for (const Row& r : kTable) {
    if (r.code == code) return r.exit;
  }
  return 1;
}

Errc errcFromHttp(int status, std::string_view code_name) {
  for (const Row& r : kTable) {
    if (errcName(r.code) == code_name) return r.code;
  }
  for (const Row& r : kTable) {
    if (r.http == status) return r.code;
  }
  return Errc::kInternal;
}

}  // namespace hutch::api

// What a failed skopeo command means, in hutch's error codes. skopeo ends a failure with one
// line, `time=... level=fatal msg="..."`, in the words of containers/image: the registry's error
// codes (MANIFEST_UNKNOWN, UNAUTHORIZED, TOOMANYREQUESTS...), an HTTP status it did not expect,
// Go's "context deadline exceeded" when --command-timeout passed, "Digest did not match" when a
// blob was not what its digest says. Pure functions on that text, tested on what skopeo 1.9
// prints (skopeo_error_test.cc); the words were read against the hostile registry of
// tests/registry/hostile_registry.py.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "base/error.h"

namespace hutch::image {

struct SkopeoFailure {
  enum class Kind {
    kUnauthorized,    // 401 (or 403: denied)
    kNotFound,        // 404: no such repository, tag, manifest or blob
    kRateLimited,     // 429
    kServerError,     // 5xx
    kTimedOut,        // --command-timeout passed (a registry that hangs)
    kDigestMismatch,  // a manifest or blob whose bytes are not those of its digest (or size)
    kOther,           // anything else (unreachable, TLS, a broken answer)
  };
  Kind kind = Kind::kOther;
  int status = 0;       // the HTTP status it implies (401, 403, 404, 429, 5xx), 0 when none
  bool blob = false;    // the failure came while reading a blob, not the manifest
  std::string message;  // skopeo's own words: its fatal line's msg, else its whole output
};

// Reads skopeo's output (or an error message quoting it).
SkopeoFailure classifySkopeoFailure(std::string_view output);

// "401 Unauthorized", "429 Too Many Requests", "502 Bad Gateway"; "HTTP 418" for others.
std::string httpStatusText(int status);

// The error a pull from a registry ends with: it names the registry, the image and the status,
// says what to do, and quotes skopeo. kPermissionDenied (401, 403), kNotFound (404),
// kResourceExhausted (429), kUnavailable (5xx and anything else), kTimeout (past `timeout`,
// hutchd's --image-pull-timeout), kProtocol (a digest or size mismatch).
Error registryPullError(const SkopeoFailure& failure, std::string_view registry,
                        std::string_view image, std::chrono::seconds timeout);

}  // namespace hutch::image

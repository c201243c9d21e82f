// The one error type of hutch: a small closed set of codes, a message that says what to do,
// and the errno when the cause was a system call.
#pragma once

#include <string>
#include <string_view>

namespace hutch {

// Closed set of error codes. Every code maps to one HTTP status and one CLI exit code
// (api/error_mapping.h); adding a code means adding a row there and a test.
enum class Errc {
  kInvalidArgument,     // the request is malformed or a value is out of range
  kNotFound,            // the named thing does not exist
  kAlreadyExists,       // a thing with that name exists
  kFailedPrecondition,  // the thing exists but is in the wrong state (exec in a stopped box)
  kUnavailable,         // a dependency (QEMU, guest agent, daemon) cannot be reached now
  kTimeout,             // a deadline passed
  kProtocol,            // a peer sent bytes that break the protocol
  kUnsupported,         // this host or backend cannot do it
  kCancelled,           // the operation was cancelled (box removed, client gone)
  kInternal,            // anything else: an I/O failure, an unexpected system error
  kUnauthenticated,     // no credentials, or ones that are not valid (a missing or removed key)
  kPermissionDenied,    // the caller is known but may not do this
  kResourceExhausted,   // a quota or rate limit was reached, or the disk is full
};

// Every code, for tables and tests that must cover them all.
inline constexpr Errc kAllErrcs[] = {
    Errc::kInvalidArgument,  Errc::kNotFound, Errc::kAlreadyExists,   Errc::kFailedPrecondition,
    Errc::kUnavailable,      Errc::kTimeout,  Errc::kProtocol,        Errc::kUnsupported,
    Errc::kCancelled,        Errc::kInternal, Errc::kUnauthenticated, Errc::kPermissionDenied,
    Errc::kResourceExhausted};

std::string_view errcName(Errc code);

class Error {
 public:
  Error(Errc code, std::string message, int sys_errno = 0)
      : code_(code), message_(std::move(message)), errno_(sys_errno) {}

  Errc code() const { return code_; }
  const std::string& message() const { return message_; }
  int sysErrno() const { return errno_; }

  // "context: message" — wraps a lower-level error with what was being done.
  Error withContext(std::string_view context) const;

  // The message with the errno text appended, for logs and the CLI.
  std::string describe() const;

  bool operator==(const Error&) const = default;

 private:
  Errc code_;
  std::string message_;
  int errno_;
};

// An error from the current errno: "what: strerror(errno)".
Error sysError(std::string_view what, int err);

}  // namespace hutch

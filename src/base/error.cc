#include "base/error.h"

#include <cstring>
#include <string>

namespace hutch {

std::string_view errcName(Errc code) {
  switch (code) {
    case Errc::kInvalidArgument: return "invalid_argument";
    case Errc::kNotFound: return "not_found";
    case Errc::kAlreadyExists: return "already_exists";
    case Errc::kFailedPrecondition: return "failed_precondition";
    case Errc::kUnavailable: return "unavailable";
    case Errc::kTimeout: return "timeout";
    case Errc::kProtocol: return "protocol";
    case Errc::kUnsupported: return "unsupported";
    case Errc::kCancelled: return "cancelled";
    case Errc::kInternal: return "internal";
    case Errc::kUnauthenticated: return "unauthenticated";
    case Errc::kPermissionDenied: return "permission_denied";
    case Errc::kResourceExhausted: return "resource_exhausted";
  }
  return "internal";
}

Error Error::withContext(std::string_view context) const {
  return Error(code_, std::string(context) + ": " + message_, errno_);
}

std::string Error::describe() const {
  if (errno_ == 0) return message_;
  return message_ + " (" + std::strerror(errno_) + ")";
}

Error sysError(std::string_view what, int err) {
  return Error(err == ENOENT ? Errc::kNotFound : Errc::kInternal, std::string(what), err);
}

}  // namespace hutch

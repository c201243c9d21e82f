#include "sys/unix_socket.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>

namespace hutch::sys {
namespace {

Result<sockaddr_un> addressOf(const std::filesystem::path& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string& s = path.native();
  if (s.empty() || s.size() >= sizeof(addr.sun_path)) {
    return fail(Errc::kInvalidArgument,
                "Socket path \"" + s + "\" is empty or longer than a unix socket allows (" +
                    std::to_string(sizeof(addr.sun_path) - 1) + " bytes): use a shorter state dir");
  }
  std::memcpy(addr.sun_path, s.data(), s.size());
  return addr;
}

}  // namespace

Result<UniqueFd> listenUnix(const std::filesystem::path& path, int backlog, mode_t mode) {
  HUTCH_TRY(sockaddr_un addr, addressOf(path));
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return fail(sysError("Cannot create a unix socket for " + path.string(), errno));
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    return fail(sysError("Cannot bind " + path.string(), errno));
  }
  if (::chmod(path.c_str(), mode) != 0) {
    return fail(sysError("Cannot set the mode of " + path.string(), errno));
  }
  if (::listen(fd.get(), backlog) != 0) {
    return fail(sysError("Cannot listen on " + path.string(), errno));
  }
  return fd;
}

Result<UniqueFd> connectUnix(const std::filesystem::path& path) {
  HUTCH_TRY(sockaddr_un addr, addressOf(path));
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return fail(sysError("Cannot create a unix socket for " + path.string(), errno));
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    return fail(sysError("Cannot connect to " + path.string(), errno));
  }
  return fd;
}

std::filesystem::path TrustedSocket::procPath() const {
  return "/proc/self/fd/" + std::to_string(path_fd.get());
}

Result<TrustedSocket> openTrustedSocket(const std::filesystem::path& path, uid_t owner) {
  UniqueFd fd(::open(path.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return fail(sysError("Cannot open the socket " + path.string(), errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return fail(sysError("Cannot check the socket " + path.string(), errno));
  }
  if (!S_ISSOCK(st.st_mode) || st.st_uid != owner) {
    return fail(Errc::kFailedPrecondition,
                path.string() + " is " +
                    (S_ISLNK(st.st_mode)     ? std::string("a symlink")
                     : !S_ISSOCK(st.st_mode) ? std::string("not a socket")
                                             : "a socket of uid " + std::to_string(st.st_uid)) +
                    ", not the socket uid " + std::to_string(owner) +
                    " made: someone replaced it; not connecting");
  }
  return TrustedSocket{std::move(fd)};
}

}  // namespace hutch::sys

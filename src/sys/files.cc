#include "sys/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace hutch::sys {

namespace {

// A regular file only: O_NOFOLLOW refuses a symlink (ELOOP), O_NONBLOCK keeps a FIFO from
// blocking the open, and the fstat check refuses FIFOs, sockets and devices.
Result<> checkRegular(int fd, const std::filesystem::path& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return fail(sysError("Cannot stat " + path.string(), errno));
  if (!S_ISREG(st.st_mode)) {
    return fail(Errc::kInvalidArgument, path.string() + " is not a regular file");
  }
  return ok();
}

Result<UniqueFd> openRead(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return fail(sysError("Cannot open " + path.string(), errno));
  UniqueFd owned(fd);
  HUTCH_TRY_VOID(checkRegular(owned.get(), path));
  return owned;
}

Result<> writeAll(int fd, std::string_view data, const std::filesystem::path& path) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(sysError("Cannot write " + path.string(), errno));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return ok();
}

}  // namespace

Result<std::string> readFile(const std::filesystem::path& path, size_t max_bytes) {
  HUTCH_TRY(UniqueFd fd, openRead(path));
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(sysError("Cannot read " + path.string(), errno));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_bytes) {
      return fail(Errc::kInvalidArgument,
                  path.string() + " is larger than " + std::to_string(max_bytes) + " bytes");
    }
  }
  return out;
}

Result<std::string> readTail(const std::filesystem::path& path, size_t max_bytes) {
  HUTCH_TRY(UniqueFd fd, openRead(path));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return fail(sysError("Cannot stat " + path.string(), errno));
  off_t size = st.st_size;
  off_t start = size > static_cast<off_t>(max_bytes) ? size - static_cast<off_t>(max_bytes) : 0;
  std::string out(static_cast<size_t>(size - start), '\0');
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::pread(fd.get(), out.data() + got, out.size() - got, start + got);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(sysError("Cannot read " + path.string(), errno));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  if (start > 0) {
    size_t nl = out.find('\n');
    if (nl != std::string::npos && nl + 1 < out.size()) out.erase(0, nl + 1);
  }
  return out;
}

Result<> writeFileAtomic(const std::filesystem::path& path, std::string_view content, mode_t mode) {
  // Named by the thread, not the process: two workers of one hutchd writing the same file at
  // once (two image pulls writing the store's policy.json) must not share a temporary file. A
  // thread id is unique on the host while it lives (the main thread's is the pid).
  std::filesystem::path tmp = path;
  tmp += ".tmp." + std::to_string(::gettid());
  // Exclusive: whatever already has the name (a crash's leftover, or a symlink planted in a box
  // directory) is removed, never written through.
  constexpr int kFlags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int raw = ::open(tmp.c_str(), kFlags, mode);
  if (raw < 0 && errno == EEXIST && ::unlink(tmp.c_str()) == 0)
    raw = ::open(tmp.c_str(), kFlags, mode);
  if (raw < 0) return fail(sysError("Cannot create " + tmp.string(), errno));
  UniqueFd fd(raw);
  auto written = writeAll(fd.get(), content, tmp);
  if (written && ::fsync(fd.get()) != 0) {
    written = fail(sysError("Cannot fsync " + tmp.string(), errno));
  }
  fd.reset();
  if (written && ::rename(tmp.c_str(), path.c_str()) != 0) {
    written = fail(sysError("Cannot rename " + tmp.string() + " to " + path.string(), errno));
  }
  if (!written) ::unlink(tmp.c_str());
  return written;
}

Result<UniqueFd> openForAppend(const std::filesystem::path& path, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK,
                  mode);
  if (fd < 0) return fail(sysError("Cannot open " + path.string() + " for appending", errno));
  UniqueFd owned(fd);
  HUTCH_TRY_VOID(checkRegular(owned.get(), path));
  if (::fcntl(owned.get(), F_SETFL, O_WRONLY | O_APPEND) != 0) {
    return fail(sysError("Cannot set the flags of " + path.string(), errno));
  }
  return owned;
}

Result<> linkFile(const std::filesystem::path& from, const std::filesystem::path& to) {
  UniqueFd fd(::open(from.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return fail(sysError("Cannot open " + from.string(), errno));
  HUTCH_TRY_VOID(checkRegular(fd.get(), from));
  // Link the inode we checked, not whatever the name points to by now. AT_EMPTY_PATH needs
  // CAP_DAC_READ_SEARCH; the /proc link works without it.
  if (::linkat(fd.get(), "", AT_FDCWD, to.c_str(), AT_EMPTY_PATH) == 0) return ok();
  std::string self = "/proc/self/fd/" + std::to_string(fd.get());
  if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, to.c_str(), AT_SYMLINK_FOLLOW) == 0) return ok();
  return fail(sysError("Cannot link " + from.string() + " to " + to.string(), errno));
}

Result<> freezeFile(const std::filesystem::path& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd) return fail(sysError("Cannot open " + path.string() + " to freeze it", errno));
  HUTCH_TRY_VOID(checkRegular(fd.get(), path));
  if (::fchown(fd.get(), 0, 0) != 0 || ::fchmod(fd.get(), 0444) != 0) {
    return fail(sysError("Cannot make " + path.string() + " root's and read-only", errno));
  }
  return ok();
}

}  // namespace hutch::sys

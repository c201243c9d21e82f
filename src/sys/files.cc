#include "sys/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace hutch::sys {

namespace {

Result<UniqueFd> openRead(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(sysError("Cannot open " + path.string(), errno));
  return UniqueFd(fd);
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
  std::filesystem::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());
  int raw = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
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
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, mode);
  if (fd < 0) return fail(sysError("Cannot open " + path.string() + " for appending", errno));
  return UniqueFd(fd);
}

}  // namespace hutch::sys

#include "storage/overlay.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "sys/spawn.h"

namespace hutch::storage {

namespace {

// Runs argv to completion with stdout+stderr captured; kInternal with the output if it fails.
Result<> runTool(std::vector<std::string> argv) {
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return fail(sysError("Cannot create a pipe", errno));
  UniqueFd read_end(pipefd[0]);
  UniqueFd write_end(pipefd[1]);
  std::string tool = argv.front();
  HUTCH_TRY(pid_t pid, sys::spawn({.argv = std::move(argv),
                                   .fds = {{write_end.get(), 1}, {write_end.get(), 2}}}));
  write_end.reset();
  std::string output;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(read_end.get(), buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0 && output.size() < size_t{64} * 1024) output.append(buf, static_cast<size_t>(n));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return fail(Errc::kInternal, fmt::format("{} failed: {}", tool, output));
  }
  return ok();
}

}  // namespace

Result<> createOverlay(const std::filesystem::path& base, const std::filesystem::path& overlay) {
  return runTool({"qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", base.string(),
                  overlay.string()});
}

}  // namespace hutch::storage

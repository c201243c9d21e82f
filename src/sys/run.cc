#include "sys/run.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "base/unique_fd.h"
#include "sys/pidfd.h"
#include "sys/spawn.h"

namespace hutch::sys {

Result<std::string> runCapture(std::vector<std::string> argv,
                               const std::function<void(std::string_view)>& on_output) {
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return fail(sysError("Cannot create a pipe", errno));
  UniqueFd read_end(pipefd[0]);
  UniqueFd write_end(pipefd[1]);
  std::string tool = argv.front();
  HUTCH_TRY(pid_t pid,
            spawn({.argv = std::move(argv), .fds = {{write_end.get(), 1}, {write_end.get(), 2}}}));
  write_end.reset();
  std::string output;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(read_end.get(), buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0 && output.size() < (size_t{1} << 20)) output.append(buf, static_cast<size_t>(n));
    if (n > 0 && on_output) on_output(std::string_view(buf, static_cast<size_t>(n)));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  ExitStatus how = ExitStatus::fromWaitStatus(status);
  if (how != ExitStatus::exited(0)) {
    return fail(Errc::kInternal, tool + " " + how.describe() + ": " + output);
  }
  return output;
}

}  // namespace hutch::sys

#include "sys/run.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "base/unique_fd.h"
#include "sys/pidfd.h"
#include "sys/spawn.h"

namespace hutch::sys {

namespace {

constexpr size_t kKeptOutput = size_t{1} << 20;

ExitStatus waitFor(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return ExitStatus::fromWaitStatus(status);
}

// The tool's output if it exited 0, else an error that quotes it.
Result<std::string> outcome(const std::string& tool, ExitStatus how, std::string output) {
  if (how != ExitStatus::exited(0)) {
    return fail(Errc::kInternal, tool + " " + how.describe() + ": " + output);
  }
  return output;
}

}  // namespace

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
    if (n > 0 && output.size() < kKeptOutput) output.append(buf, static_cast<size_t>(n));
    if (n > 0 && on_output) on_output(std::string_view(buf, static_cast<size_t>(n)));
  }
  return outcome(tool, waitFor(pid), std::move(output));
}

Result<std::string> runLogged(std::vector<std::string> argv, const std::filesystem::path& log,
                              const std::function<void(std::string_view)>& on_output) {
  // O_APPEND: a tool of an earlier run still writing to the same log (it outlived its hutchd)
  // adds its lines after ours instead of writing over them.
  UniqueFd write_end(
      ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0640));
  if (!write_end) return fail(sysError("Cannot create " + log.string(), errno));
  UniqueFd read_end(::open(log.c_str(), O_RDONLY | O_CLOEXEC));
  if (!read_end) return fail(sysError("Cannot read " + log.string(), errno));
  std::string tool = argv.front();
  HUTCH_TRY(pid_t pid, spawn({.argv = std::move(argv),
                              .fds = {{write_end.get(), 1}, {write_end.get(), 2}},
                              .new_session = true}));
  write_end.reset();
  auto pidfd = pidfdOpen(pid);
  std::string output;
  auto read_new = [&] {
    char buf[65536];
    ssize_t n;
    while ((n = ::read(read_end.get(), buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
      if (n <= 0) continue;
      const std::string_view piece(buf, static_cast<size_t>(n));
      output.append(piece);
      if (output.size() > kKeptOutput) output.erase(0, output.size() - kKeptOutput);
      if (on_output) on_output(piece);
    }
  };
  // Without a pidfd (a kernel before 5.3) the log is read once, when waitpid returns.
  while (pidfd) {
    pollfd exited{pidfd->get(), POLLIN, 0};
    const int ready = ::poll(&exited, 1, 100);
    read_new();
    if (ready > 0 || (ready < 0 && errno != EINTR)) break;
  }
  ExitStatus how = waitFor(pid);
  read_new();
  return outcome(tool, how, std::move(output));
}

}  // namespace hutch::sys

#include "sys/run.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <string>

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

// RunLimits as the loops reading a tool's output use them: how long a poll may wait, and
// whether the tool must be stopped now (the error to return once it is).
class Stopper {
 public:
  Stopper(const std::string& tool, const RunLimits& limits)
      : tool_(tool),
        limits_(limits),
        deadline_(std::chrono::steady_clock::now() + limits.timeout) {}

  // -1 (no limit: wait for output) or 100 ms.
  int pollMs() const { return limits_.timeout.count() > 0 || limits_.cancel ? 100 : -1; }

  // Kills `pid` and keeps the reason when a limit was reached; true then.
  bool stopIfDue(pid_t pid) {
    if (error_) return true;
    if (limits_.cancel && limits_.cancel->load()) {
      error_ = Error(Errc::kCancelled, tool_ + " was stopped: its result is no longer wanted");
    } else if (limits_.timeout.count() > 0 && std::chrono::steady_clock::now() >= deadline_) {
      error_ = Error(Errc::kTimeout,
                     fmt(tool_ + " did not finish within ", limits_.timeout) + " and was stopped");
    }
    if (error_) ::kill(pid, SIGKILL);
    return error_.has_value();
  }
  const std::optional<Error>& error() const { return error_; }

 private:
  static std::string fmt(const std::string& head, std::chrono::milliseconds timeout) {
    if (timeout.count() % 1000 == 0) return head + std::to_string(timeout.count() / 1000) + " s";
    return head + std::to_string(timeout.count()) + " ms";
  }

  std::string tool_;
  RunLimits limits_;
  std::chrono::steady_clock::time_point deadline_;
  std::optional<Error> error_;
};

}  // namespace

Result<std::string> runCapture(std::vector<std::string> argv,
                               const std::function<void(std::string_view)>& on_output,
                               const RunLimits& limits) {
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return fail(sysError("Cannot create a pipe", errno));
  UniqueFd read_end(pipefd[0]);
  UniqueFd write_end(pipefd[1]);
  std::string tool = argv.front();
  HUTCH_TRY(pid_t pid, spawn({.argv = std::move(argv),
                              .fds = {{write_end.get(), 1}, {write_end.get(), 2}},
                              .die_with_parent = true}));
  write_end.reset();
  Stopper stopper(tool, limits);
  std::string output;
  char buf[4096];
  pollfd readable{read_end.get(), POLLIN, 0};
  while (!stopper.stopIfDue(pid)) {
    const int ready = ::poll(&readable, 1, stopper.pollMs());
    if (ready == 0 || (ready < 0 && errno == EINTR)) continue;
    if (ready < 0) break;
    const ssize_t n = ::read(read_end.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (output.size() < kKeptOutput) output.append(buf, static_cast<size_t>(n));
    if (on_output) on_output(std::string_view(buf, static_cast<size_t>(n)));
  }
  read_end.reset();
  ExitStatus how = waitFor(pid);
  if (stopper.error()) return fail(*stopper.error());
  return outcome(tool, how, std::move(output));
}

Result<std::string> runStdout(std::vector<std::string> argv, size_t limit,
                              const RunLimits& limits) {
  int out_pipe[2];
  int err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return fail(sysError("Cannot create a pipe", errno));
  UniqueFd out_read(out_pipe[0]);
  UniqueFd out_write(out_pipe[1]);
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) return fail(sysError("Cannot create a pipe", errno));
  UniqueFd err_read(err_pipe[0]);
  UniqueFd err_write(err_pipe[1]);
  std::string tool = argv.front();
  HUTCH_TRY(pid_t pid, spawn({.argv = std::move(argv),
                              .fds = {{out_write.get(), 1}, {err_write.get(), 2}},
                              .die_with_parent = true}));
  out_write.reset();
  err_write.reset();
  constexpr size_t kKeptErrors = size_t{64} << 10;
  std::string out;
  std::string err;
  bool too_much = false;
  Stopper stopper(tool, limits);
  pollfd fds[2] = {{out_read.get(), POLLIN, 0}, {err_read.get(), POLLIN, 0}};
  while (!too_much && (fds[0].fd >= 0 || fds[1].fd >= 0) && !stopper.stopIfDue(pid)) {
    const int ready = ::poll(fds, 2, stopper.pollMs());
    if (ready == 0) continue;
    if (ready < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[65536];
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        fds[i].fd = -1;
        continue;
      }
      std::string& into = i == 0 ? out : err;
      into.append(buf, static_cast<size_t>(n));
      if (i == 1 && err.size() > kKeptErrors) err.erase(0, err.size() - kKeptErrors);
      if (i == 0 && out.size() > limit) {
        // Stopped, and not read further: a child it left holding the pipe gets SIGPIPE.
        too_much = true;
        ::kill(pid, SIGKILL);
        break;
      }
    }
  }
  out_read.reset();
  err_read.reset();
  ExitStatus how = waitFor(pid);
  if (stopper.error()) return fail(*stopper.error());
  if (too_much) {
    return fail(Errc::kResourceExhausted,
                tool + " wrote more than " + std::to_string(limit) + " bytes; it was stopped");
  }
  if (how != ExitStatus::exited(0)) {
    return fail(Errc::kInternal, tool + " " + how.describe() + ": " + err);
  }
  return out;
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

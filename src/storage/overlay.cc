#include "storage/overlay.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "base/unique_fd.h"

extern char** environ;

namespace hutch::storage {

namespace {

// Runs argv to completion, capturing stdout+stderr; kInternal with the output if it fails.
Result<> runTool(const std::vector<std::string>& argv) {
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return fail(sysError("Cannot create a pipe", errno));
  UniqueFd read_end(pipefd[0]);
  UniqueFd write_end(pipefd[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), 1);
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  write_end.reset();
  if (rc != 0) return fail(sysError(fmt::format("Cannot run {}", argv[0]), rc));
  std::string output;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(read_end.get(), buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0 && output.size() < 64 * 1024) output.append(buf, static_cast<size_t>(n));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return fail(Errc::kInternal, fmt::format("{} failed: {}", argv[0], output));
  }
  return ok();
}

}  // namespace

Result<> createOverlay(const std::filesystem::path& base, const std::filesystem::path& overlay) {
  return runTool({"qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", base.string(),
                  overlay.string()});
}

}  // namespace hutch::storage

#include "agent/exec/spawn_spec.h"

#include <sys/stat.h>
#include <unistd.h>

#include <string>

namespace hutch::agent {
namespace {

bool isDirectory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool isExecutableFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111) != 0;
}

}  // namespace

const std::string* findEnv(const std::vector<std::string>& env, std::string_view key) {
  for (const auto& entry : env) {
    if (entry.size() > key.size() && entry.compare(0, key.size(), key) == 0 &&
        entry[key.size()] == '=') {
      return &entry;
    }
  }
  return nullptr;
}

std::string searchPath(std::string_view name, std::string_view search_path) {
  size_t start = 0;
  while (start <= search_path.size()) {
    size_t end = search_path.find(':', start);
    if (end == std::string_view::npos) end = search_path.size();
    std::string_view dir = search_path.substr(start, end - start);
    // Relative entries (including the empty one, "the current directory") are skipped: they
    // would resolve against the agent's directory, not the command's.
    if (!dir.empty() && dir[0] == '/') {
      std::string candidate(dir);
      if (candidate.back() != '/') candidate += '/';
      candidate += name;
      if (isExecutableFile(candidate)) return candidate;
    }
    start = end + 1;
  }
  return {};
}

std::vector<std::string> loginShell(const std::string& bash_path) {
  if (isExecutableFile(bash_path)) return {bash_path, "-l"};
  return {"/bin/sh", "-l"};
}

Result<SpawnSpec> makeSpawnSpec(const proto::ExecRequest& request, const UserDb& users) {
  HUTCH_TRY_VOID(proto::validate(request));
  // No user means root in the box; an unprivileged agent (--listen in tests) can only run
  // commands as itself.
  const std::string who =
      request.user.empty() && ::geteuid() != 0 ? std::to_string(::geteuid()) : request.user;
  HUTCH_TRY(UserInfo user, users.lookup(who));

  SpawnSpec spec;
  spec.argv = request.login_shell ? loginShell() : request.argv;
  spec.env = request.env;
  spec.user = user.name.empty() ? std::to_string(user.uid) : user.name;
  spec.uid = user.uid;
  spec.gid = user.gid;
  spec.groups = user.groups;
  spec.pipe_stdin = request.pipe_stdin;
  spec.tty = request.tty;
  spec.rows = request.rows;
  spec.cols = request.cols;

  if (!findEnv(spec.env, "PATH")) spec.env.push_back(std::string("PATH=") + kDefaultPath);
  if (!findEnv(spec.env, "HOME")) spec.env.push_back("HOME=" + user.home);
  if (!findEnv(spec.env, "USER")) spec.env.push_back("USER=" + spec.user);
  if (spec.tty && !findEnv(spec.env, "TERM"))
    spec.env.push_back(std::string("TERM=") + kDefaultTerm);

  if (!request.cwd.empty()) {
    spec.cwd = request.cwd;
  } else {
    spec.cwd = isDirectory(user.home) ? user.home : "/";
  }
  // The child chdir()s as the user and reports its own failures; this check only makes the
  // common mistake's message clear without starting a process.
  if (!isDirectory(spec.cwd)) {
    return fail(Errc::kNotFound, "Working directory \"" + spec.cwd + "\" does not exist");
  }

  const std::string& name = spec.argv[0];
  if (name.find('/') != std::string::npos) {
    spec.path = name;
  } else {
    const std::string search = findEnv(spec.env, "PATH")->substr(5);
    spec.path = searchPath(name, search);
    if (spec.path.empty()) {
      return fail(Errc::kNotFound,
                  "Command \"" + name + "\" was not found in PATH (" + search + ")");
    }
  }
  return spec;
}

}  // namespace hutch::agent

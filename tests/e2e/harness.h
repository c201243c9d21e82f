// The e2e harness: a temp directory, a real hutchd on a short socket path, and the real CLI run
// as a child process. Kills and reaps what it started on teardown.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace hutch::e2e {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

class Daemon {
 public:
  // Starts hutchd with a fresh state dir whose template "base" is $HUTCH_TEST_IMAGE.
  Daemon();
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Runs `hutch ARGS...` with optional stdin; waits for it.
  CommandResult hutch(const std::vector<std::string>& args, const std::string& stdin_data = {},
                      bool feed_stdin = false) const;
  // Starts `hutch ARGS...` without waiting; collect() waits and returns its result.
  pid_t start(const std::vector<std::string>& args, const std::filesystem::path& out,
              const std::filesystem::path& err) const;
  nlohmann::json inspect(const std::string& box) const;

  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path stateDir() const { return dir_ / "state"; }
  std::string socket() const { return (dir_ / "hutchd.sock").string(); }

 private:
  std::filesystem::path dir_;
  pid_t pid_ = -1;
};

// Waits for a child started with Daemon::start and reads its output files.
CommandResult collect(pid_t pid, const std::filesystem::path& out,
                      const std::filesystem::path& err);
std::string readFile(const std::filesystem::path& path);
bool processAlive(pid_t pid);
// A process table scan: pids whose command line mentions `needle`.
std::vector<pid_t> pidsMentioning(const std::string& needle);

}  // namespace hutch::e2e

// The e2e harness: a temp directory, a real hutchd on a short socket path, and the real CLI run
// as a child process. Kills and reaps what it started on teardown.
#pragma once

#include <sys/types.h>
#include <termios.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace hutch::e2e {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// How a CLI reaches hutchd when not over the unix socket: flags (--host, --fingerprint or
// --ca-cert) and the key it sends (HUTCH_API_KEY).
struct RemoteCli {
  std::vector<std::string> flags;
  std::string api_key;
};

class Daemon {
 public:
  // Starts hutchd with a fresh state dir whose template "base" is $HUTCH_TEST_IMAGE, with
  // `extra_args` (e.g. {"--pool-size", "2"}) on its command line, restarts included.
  explicit Daemon(std::vector<std::string> extra_args = {});
  // The same, with hutchd running in the named network namespace (nsenter --net): the test's
  // own "host" network.
  Daemon(std::vector<std::string> extra_args, std::string netns);
  // The same, with `prepare(stateDir())` run on the new, empty state directory before hutchd
  // first starts (DiskFullTest mounts a small filesystem there).
  Daemon(std::vector<std::string> extra_args, std::string netns,
         const std::function<void(const std::filesystem::path&)>& prepare);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Runs `hutch ARGS...` with optional stdin; waits for it.
  CommandResult hutch(const std::vector<std::string>& args, const std::string& stdin_data = {},
                      bool feed_stdin = false) const;
  // The same over TCP: `hutch FLAGS... ARGS...` with HUTCH_API_KEY set from `remote`.
  CommandResult hutchAs(const RemoteCli& remote, const std::vector<std::string>& args,
                        const std::string& stdin_data = {}, bool feed_stdin = false) const;
  // Starts `hutch ARGS...` without waiting; collect() waits and returns its result.
  pid_t start(const std::vector<std::string>& args, const std::filesystem::path& out,
              const std::filesystem::path& err) const;
  pid_t startAs(const RemoteCli& remote, const std::vector<std::string>& args,
                const std::filesystem::path& out, const std::filesystem::path& err) const;
  nlohmann::json inspect(const std::string& box) const;
  // Polls inspect until the box reaches `state` or a minute passes; returns the last object.
  nlohmann::json waitForState(const std::string& box, const std::string& state) const;

  // Kills hutchd with SIGKILL (boxes keep running), then starts a new one on the same state.
  void crashAndRestart();
  // Kills hutchd with SIGKILL, runs `between` while no daemon runs, then starts a new one.
  void crashAndRestart(const std::function<void()>& between);
  // Kills hutchd with SIGKILL and starts a new one with other `extra_args` (a changed setting).
  void crashAndRestartWith(std::vector<std::string> extra_args);
  pid_t pid() const { return pid_; }

  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path stateDir() const { return dir_ / "state"; }
  std::string socket() const { return (dir_ / "hutchd.sock").string(); }

 private:
  // The last 16 KiB of hutchd's log.
  std::string logTail() const;
  void startDaemon();
  // At the end: names and removes what hutchd left on the host (its boxes' network namespaces
  // and cgroups).
  void reportLeftovers() const;
  pid_t startCli(const RemoteCli* remote, const std::vector<std::string>& args,
                 const std::filesystem::path& out, const std::filesystem::path& err) const;
  CommandResult runCli(const RemoteCli* remote, const std::vector<std::string>& args,
                       const std::string& stdin_data, bool feed_stdin) const;

  std::filesystem::path dir_;
  std::vector<std::string> extra_args_;
  std::string netns_;
  pid_t pid_ = -1;
};

// Waits for a child started with Daemon::start and reads its output files.
CommandResult collect(pid_t pid, const std::filesystem::path& out,
                      const std::filesystem::path& err);
std::string readFile(const std::filesystem::path& path);
// Runs a command line with /bin/sh: its exit code, stdout and stderr (for tools that are not
// hutch: curl, openssl).
CommandResult shell(const std::string& command);
// `s` as one single-quoted word for /bin/sh.
std::string quoted(const std::string& s);

// A daemon's TCP listeners, as `hutch doctor` reports them.
struct Endpoints {
  std::string https;  // https://127.0.0.1:PORT
  std::string http;   // http://127.0.0.1:PORT
  std::string fingerprint;
  std::filesystem::path ca;
};
Endpoints endpointsOf(const Daemon& d);
// A key made over the unix socket (the host administrator); `args` after `key create`.
std::string makeKey(const Daemon& d, const std::vector<std::string>& args);
std::string sha256Hex(const std::string& data);
bool processAlive(pid_t pid);
// Polls `condition` until it holds or `timeout` passes; whether it held. For what hutchd does in
// the background after answering (rm's cleanup).
bool eventually(const std::function<bool()>& condition,
                std::chrono::seconds timeout = std::chrono::seconds(30));
// A process table scan: pids whose command line mentions `needle`.
std::vector<pid_t> pidsMentioning(const std::string& needle);
// Every box jail cgroup on the host (the children of each hutch-boxes directory, in every
// hierarchy), by name: a box's id, or a template or pool VM's run directory's name.
std::map<std::string, std::vector<std::filesystem::path>> boxCgroups();
// Those of box `id`.
std::vector<std::filesystem::path> boxCgroupsOf(const std::string& id);

// The CLI run as if typed at a terminal: the test makes a pty pair, the CLI gets the slave as
// 0, 1 and 2 and as its controlling terminal (its own session, so it is the terminal's
// foreground process and gets SIGWINCH), and the test drives the master. The test keeps its own
// descriptor of the slave, to resize it and to read its modes after the CLI is gone. Kills and
// reaps a CLI still running on destruction.
class PtyCli {
 public:
  PtyCli(const Daemon& daemon, const std::vector<std::string>& args, uint16_t rows, uint16_t cols,
         const RemoteCli* remote = nullptr);
  ~PtyCli();
  PtyCli(const PtyCli&) = delete;
  PtyCli& operator=(const PtyCli&) = delete;

  pid_t pid() const { return pid_; }
  bool write(const std::string& bytes);
  // Reads the CLI's output until what arrived since the last match contains needle (true), or
  // until the CLI's output ends or a deadline only meant to stop hangs passes (false).
  bool waitFor(const std::string& needle);
  const std::string& output() const { return output_; }
  // TIOCSWINSZ on the slave: the kernel sends SIGWINCH to the CLI.
  void resize(uint16_t rows, uint16_t cols);
  // The slave's current modes, and those it had before the CLI started.
  struct termios modes() const;
  const struct termios& initialModes() const { return initial_modes_; }
  // Waits for the CLI to exit, reading its output meanwhile; its exit code (128+N for signal
  // N), or -1 if it did not exit before the hang deadline.
  int wait();

 private:
  // One read from the master, waiting up to timeout; false at end of output or on timeout.
  bool readSome(std::chrono::milliseconds timeout);

  int master_ = -1;
  int slave_ = -1;
  pid_t pid_ = -1;
  int exit_code_ = -1;
  struct termios initial_modes_ {};
  std::string output_;
  size_t matched_ = 0;
};

// True if the modes that matter for a shell's terminal are the same.
bool sameModes(const struct termios& a, const struct termios& b);

}  // namespace hutch::e2e

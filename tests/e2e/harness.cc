#include "harness.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/unique_fd.h"
#include "sys/spawn.h"

namespace hutch::e2e {

namespace {

std::filesystem::path hutchBin() {
  return std::filesystem::path(HUTCH_BIN_DIR) / "hutch";
}
std::filesystem::path hutchdBin() {
  return std::filesystem::path(HUTCHD_BIN_DIR) / "hutchd";
}

UniqueFd openOrDie(const std::filesystem::path& path, int flags) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
  if (fd < 0) {
    ADD_FAILURE() << "cannot open " << path << ": " << std::strerror(errno);
    std::abort();
  }
  return UniqueFd(fd);
}

std::vector<std::string> cliArgv(const std::string& socket, const std::vector<std::string>& args) {
  std::vector<std::string> argv{hutchBin().string(), "--socket", socket};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

}  // namespace

std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

Daemon::Daemon() {
  const char* image = std::getenv("HUTCH_TEST_IMAGE");
  if (image == nullptr || !std::filesystem::exists(std::filesystem::path(image) / "rootfs.img")) {
    ADD_FAILURE() << "HUTCH_TEST_IMAGE must name a built guest image directory (scripts/test.sh "
                     "builds one and sets it)";
    std::abort();
  }
  char tmpl[] = "/tmp/hutch-e2e-XXXXXX";
  dir_ = ::mkdtemp(tmpl);
  std::filesystem::create_directories(stateDir() / "templates");
  std::filesystem::create_symlink(image, stateDir() / "templates" / "base");
  UniqueFd log = openOrDie(dir_ / "hutchd.log", O_WRONLY | O_CREAT | O_APPEND);
  auto pid = sys::spawn({.argv = {hutchdBin().string(), "--socket", socket(), "--state-dir",
                                  stateDir().string(), "--log-level", "debug"},
                         .fds = {{log.get(), 1}, {log.get(), 2}}});
  if (!pid) {
    ADD_FAILURE() << "cannot start hutchd: " << pid.error().describe();
    std::abort();
  }
  pid_ = *pid;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    if (hutch({"ls"}).exit_code == 0) return;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ADD_FAILURE() << "hutchd did not come up; its log:\n" << readFile(dir_ / "hutchd.log");
  std::abort();
}

Daemon::~Daemon() {
  // Remove every box first so no QEMU outlives the test, then stop hutchd.
  auto listed = hutch({"--json", "ls"});
  if (listed.exit_code == 0) {
    for (const auto& b : nlohmann::json::parse(listed.out, nullptr, false)) {
      if (b.is_object()) hutch({"rm", "-f", b.value("id", "")});
    }
  }
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  if (std::getenv("HUTCH_TEST_KEEP") == nullptr) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

pid_t Daemon::start(const std::vector<std::string>& args, const std::filesystem::path& out,
                    const std::filesystem::path& err) const {
  UniqueFd out_fd = openOrDie(out, O_WRONLY | O_CREAT | O_TRUNC);
  UniqueFd err_fd = openOrDie(err, O_WRONLY | O_CREAT | O_TRUNC);
  auto pid =
      sys::spawn({.argv = cliArgv(socket(), args), .fds = {{out_fd.get(), 1}, {err_fd.get(), 2}}});
  if (!pid) {
    ADD_FAILURE() << "cannot start hutch: " << pid.error().describe();
    return -1;
  }
  return *pid;
}

CommandResult collect(pid_t pid, const std::filesystem::path& out,
                      const std::filesystem::path& err) {
  CommandResult r;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = readFile(out);
  r.err = readFile(err);
  return r;
}

CommandResult Daemon::hutch(const std::vector<std::string>& args, const std::string& stdin_data,
                            bool feed_stdin) const {
  static std::atomic<int> counter{0};
  int n = counter++;
  auto out = dir_ / ("cmd-" + std::to_string(n) + ".out");
  auto err = dir_ / ("cmd-" + std::to_string(n) + ".err");
  auto in = dir_ / ("cmd-" + std::to_string(n) + ".in");
  {
    std::ofstream f(in, std::ios::binary);
    f << stdin_data;
  }
  UniqueFd in_fd = openOrDie(feed_stdin ? in : std::filesystem::path("/dev/null"), O_RDONLY);
  UniqueFd out_fd = openOrDie(out, O_WRONLY | O_CREAT | O_TRUNC);
  UniqueFd err_fd = openOrDie(err, O_WRONLY | O_CREAT | O_TRUNC);
  auto pid = sys::spawn({.argv = cliArgv(socket(), args),
                         .fds = {{in_fd.get(), 0}, {out_fd.get(), 1}, {err_fd.get(), 2}}});
  if (!pid) {
    ADD_FAILURE() << "cannot start hutch: " << pid.error().describe();
    return {};
  }
  CommandResult r = collect(*pid, out, err);
  std::error_code ec;
  std::filesystem::remove(out, ec);
  std::filesystem::remove(err, ec);
  std::filesystem::remove(in, ec);
  return r;
}

nlohmann::json Daemon::inspect(const std::string& box) const {
  auto r = hutch({"inspect", box});
  if (r.exit_code != 0) return nullptr;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  return j.is_array() && !j.empty() ? j[0] : nlohmann::json();
}

bool processAlive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  // A zombie is dead for our purposes.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  auto close = line.rfind(')');
  return close == std::string::npos || line.size() < close + 3 || line[close + 2] != 'Z';
}

std::vector<pid_t> pidsMentioning(const std::string& needle) {
  std::vector<pid_t> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = readFile(entry.path() / "cmdline");
    if (cmdline.find(needle) != std::string::npos) out.push_back(std::stoi(name));
  }
  return out;
}

}  // namespace hutch::e2e

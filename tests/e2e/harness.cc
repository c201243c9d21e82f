#include "harness.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/unique_fd.h"
#include "sys/run.h"
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

std::vector<std::string> cliArgv(const std::string& socket, const std::vector<std::string>& args,
                                 const RemoteCli* remote = nullptr) {
  std::vector<std::string> argv{hutchBin().string()};
  if (remote) {
    argv.insert(argv.end(), remote->flags.begin(), remote->flags.end());
  } else {
    argv.insert(argv.end(), {"--socket", socket});
  }
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// This process's environment with the remote CLI's key, and no HUTCH_* of our own.
std::vector<std::string> cliEnv(const RemoteCli& remote) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    if (entry.starts_with("HUTCH_HOST=") || entry.starts_with("HUTCH_API_KEY=") ||
        entry.starts_with("HUTCH_FINGERPRINT=") || entry.starts_with("HUTCH_CA_CERT=")) {
      continue;
    }
    env.push_back(std::move(entry));
  }
  if (!remote.api_key.empty()) env.push_back("HUTCH_API_KEY=" + remote.api_key);
  return env;
}

}  // namespace

std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

CommandResult shell(const std::string& command) {
  static int counter = 0;
  std::string out_path = "/tmp/hutch-e2e-shell-" + std::to_string(::getpid()) + "-" +
                         std::to_string(counter++) + ".out";
  std::string err_path = out_path + ".err";
  int status = std::system((command + " >" + out_path + " 2>" + err_path).c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  r.out = readFile(out_path);
  r.err = readFile(err_path);
  std::filesystem::remove(out_path);
  std::filesystem::remove(err_path);
  return r;
}

std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

Endpoints endpointsOf(const Daemon& d) {
  auto info = d.hutch({"--json", "doctor"});
  auto j = nlohmann::json::parse(info.out, nullptr, false);
  Endpoints e;
  if (!j.is_object()) {
    ADD_FAILURE() << "doctor: " << info.out << info.err;
    return e;
  }
  for (const auto& l : j["hutchd"]["info"]["listeners"]) {
    std::string s = l.get<std::string>();
    if (s.starts_with("https://")) e.https = s;
    if (s.starts_with("http://")) e.http = s;
  }
  if (j["hutchd"]["info"]["tls"].is_object()) {
    e.fingerprint = j["hutchd"]["info"]["tls"]["fingerprint_sha256"];
  }
  e.ca = d.stateDir() / "tls" / "cert.pem";
  return e;
}

std::string makeKey(const Daemon& d, const std::vector<std::string>& args) {
  std::vector<std::string> argv{"--json", "key", "create"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = d.hutch(argv);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  return j.is_object() ? j.value("key", "") : "";
}

Daemon::Daemon(std::vector<std::string> extra_args) : Daemon(std::move(extra_args), "") {}

Daemon::Daemon(std::vector<std::string> extra_args, std::string netns)
    : Daemon(std::move(extra_args), std::move(netns), {}) {}

Daemon::Daemon(std::vector<std::string> extra_args, std::string netns,
               const std::function<void(const std::filesystem::path&)>& prepare)
    : extra_args_(std::move(extra_args)), netns_(std::move(netns)) {
  const char* image = std::getenv("HUTCH_TEST_IMAGE");
  if (image == nullptr || !std::filesystem::exists(std::filesystem::path(image) / "rootfs.img")) {
    ADD_FAILURE() << "HUTCH_TEST_IMAGE must name a built guest image directory (scripts/test.sh "
                     "builds one and sets it)";
    std::abort();
  }
  char tmpl[] = "/tmp/hutch-e2e-XXXXXX";
  dir_ = ::mkdtemp(tmpl);
  std::filesystem::create_directories(stateDir());
  if (prepare) prepare(stateDir());
  std::filesystem::create_directories(stateDir() / "templates");
  std::filesystem::create_symlink(image, stateDir() / "templates" / "base");
  // The other templates, when built (scripts/test.sh: HUTCH_TEST_DOCKER_IMAGE and so on).
  for (const auto& [name, variable] :
       {std::pair{"docker", "HUTCH_TEST_DOCKER_IMAGE"}, std::pair{"node", "HUTCH_TEST_NODE_IMAGE"},
        std::pair{"python", "HUTCH_TEST_PYTHON_IMAGE"}, std::pair{"web", "HUTCH_TEST_WEB_IMAGE"},
        std::pair{"systemd", "HUTCH_TEST_SYSTEMD_IMAGE"}}) {
    const char* built = std::getenv(variable);
    if (built != nullptr && std::filesystem::exists(std::filesystem::path(built) / "rootfs.img")) {
      std::filesystem::create_symlink(built, stateDir() / "templates" / name);
    }
  }
  startDaemon();
}

void Daemon::crashAndRestart() {
  crashAndRestart([] {});
}

void Daemon::crashAndRestart(const std::function<void()>& between) {
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  between();
  startDaemon();
}

void Daemon::crashAndRestartWith(std::vector<std::string> extra_args) {
  crashAndRestart([&] { extra_args_ = std::move(extra_args); });
}

void Daemon::startDaemon() {
  UniqueFd log = openOrDie(dir_ / "hutchd.log", O_WRONLY | O_CREAT | O_APPEND);
  // No --uid-base: hutchd takes a range of its own that no other hutchd on the host holds
  // (a host-wide lock, jail::lockIdRange) and keeps it in the state directory, so that tests
  // run beside other suites' daemons never share uids or the namespaces named after them.
  std::vector<std::string> argv = {hutchdBin().string(), "--socket",    socket(), "--state-dir",
                                   stateDir().string(),  "--log-level", "debug"};
  // The warm pool (on by default) refills in the background after every create: tests of
  // other features keep it off so that what runs in a box is only what they started.
  // WarmPoolTest turns it on.
  if (std::find(extra_args_.begin(), extra_args_.end(), "--pool-size") == extra_args_.end()) {
    argv.insert(argv.end(), {"--pool-size", "0"});
  }
  argv.insert(argv.end(), extra_args_.begin(), extra_args_.end());
  // nsenter, not `ip netns exec`: that remounts /sys, hiding the cgroup hierarchies.
  if (!netns_.empty()) argv.insert(argv.begin(), {"nsenter", "--net=/run/netns/" + netns_});
  auto pid = sys::spawn({.argv = argv, .fds = {{log.get(), 1}, {log.get(), 2}}});
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
  // Its end, where the reason is (a whole log of restarts is cut short in CI's summary).
  ADD_FAILURE() << "hutchd did not come up; the end of its log:\n" << logTail();
  // abort() runs no destructor: the QEMUs of this daemon's boxes go now, or they hold their
  // uids for good (a later hutchd whose range is this one's found them taken).
  for (pid_t left : pidsMentioning(dir_.string())) ::kill(left, SIGKILL);
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
  // hutchd finishes removed boxes' cleanup before it exits, and leaves running boxes running by
  // design: with every box removed, nothing of this daemon may be left. Whatever is (a test that
  // killed hutchd mid-create) is named here and killed, so no QEMU outlives the test run.
  for (pid_t left : pidsMentioning(dir_.string())) {
    std::string cmdline = readFile("/proc/" + std::to_string(left) + "/cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    std::fprintf(stderr, "[harness] pid %d outlived hutchd (%s): %s; killed\n", left, dir_.c_str(),
                 cmdline.substr(0, 300).c_str());
    ::kill(left, SIGKILL);
  }
  reportLeftovers();
  // A failure in CI is read from its output alone: the end of hutchd's log goes with it.
  if (::testing::Test::HasFailure()) {
    std::fprintf(stderr, "--- the end of hutchd's log (%s) ---\n%s--- end of hutchd's log ---\n",
                 (dir_ / "hutchd.log").c_str(), logTail().c_str());
  }
  if (std::getenv("HUTCH_TEST_KEEP") == nullptr) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

std::string Daemon::logTail() const {
  std::string log = readFile(dir_ / "hutchd.log");
  constexpr size_t kTail = 16 * 1024;
  if (log.size() > kTail) log = "[...]\n" + log.substr(log.size() - kTail);
  return log;
}

void Daemon::reportLeftovers() const {
  // Besides processes, a box keeps on the host its network namespace (named by its hutchd's uid
  // base, kept in the state directory) and its jail cgroups (named by its id; every id this
  // daemon had is in its debug log). With every box removed and hutchd gone, none may be left.
  // Each is a failure of the test, named on stderr and appended to $HUTCH_TEST_LEAK_LOG (test.sh
  // prints it at the end), then removed so the host stays clean.
  std::vector<std::string> left;
  const std::string base_text = readFile(stateDir() / "uid-base");
  uint32_t base = 0;
  if (std::from_chars(base_text.data(), base_text.data() + base_text.size(), base).ec ==
      std::errc()) {
    const std::string prefix = fmt::format("hutch-{:x}-", base);
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/run/netns", ec)) {
      const std::string name = entry.path().filename();
      if (!name.starts_with(prefix)) continue;
      left.push_back("network namespace " + name);
      (void)sys::runCapture({"ip", "netns", "delete", name});
    }
  }
  const std::string log = readFile(dir_ / "hutchd.log");
  for (const auto& [name, dirs] : boxCgroups()) {
    if (name.size() < 12 || log.find(name) == std::string::npos) continue;
    for (const auto& dir : dirs) {
      left.push_back("cgroup " + dir.string());
      ::rmdir(dir.c_str());
    }
  }
  if (left.empty()) return;
  const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string who = test ? fmt::format("{}.{}", test->test_suite_name(), test->name()) : "";
  std::string report;
  for (const std::string& what : left) report += fmt::format("{}: left behind: {}\n", who, what);
  std::fprintf(stderr, "[harness] %s", report.c_str());
  if (const char* path = std::getenv("HUTCH_TEST_LEAK_LOG"); path != nullptr && *path) {
    std::ofstream(path, std::ios::app) << report;
  }
  ADD_FAILURE() << "hutchd left on the host what its removed boxes had:\n" << report;
}

pid_t Daemon::start(const std::vector<std::string>& args, const std::filesystem::path& out,
                    const std::filesystem::path& err) const {
  return startCli(nullptr, args, out, err);
}

pid_t Daemon::startAs(const RemoteCli& remote, const std::vector<std::string>& args,
                      const std::filesystem::path& out, const std::filesystem::path& err) const {
  return startCli(&remote, args, out, err);
}

pid_t Daemon::startCli(const RemoteCli* remote, const std::vector<std::string>& args,
                       const std::filesystem::path& out, const std::filesystem::path& err) const {
  UniqueFd out_fd = openOrDie(out, O_WRONLY | O_CREAT | O_TRUNC);
  UniqueFd err_fd = openOrDie(err, O_WRONLY | O_CREAT | O_TRUNC);
  sys::SpawnOptions spec{.argv = cliArgv(socket(), args, remote),
                         .fds = {{out_fd.get(), 1}, {err_fd.get(), 2}}};
  if (remote) spec.env = cliEnv(*remote);
  auto pid = sys::spawn(spec);
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
  return runCli(nullptr, args, stdin_data, feed_stdin);
}

CommandResult Daemon::hutchAs(const RemoteCli& remote, const std::vector<std::string>& args,
                              const std::string& stdin_data, bool feed_stdin) const {
  return runCli(&remote, args, stdin_data, feed_stdin);
}

CommandResult Daemon::runCli(const RemoteCli* remote, const std::vector<std::string>& args,
                             const std::string& stdin_data, bool feed_stdin) const {
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
  sys::SpawnOptions spec{.argv = cliArgv(socket(), args, remote),
                         .fds = {{in_fd.get(), 0}, {out_fd.get(), 1}, {err_fd.get(), 2}}};
  if (remote) spec.env = cliEnv(*remote);
  auto pid = sys::spawn(spec);
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

nlohmann::json Daemon::waitForState(const std::string& box, const std::string& state) const {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  nlohmann::json j;
  while (std::chrono::steady_clock::now() < deadline) {
    j = inspect(box);
    if (j.is_object() && j.value("state", "") == state) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return j;
}

std::string sha256Hex(const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

bool eventually(const std::function<bool()>& condition, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
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

std::map<std::string, std::vector<std::filesystem::path>> boxCgroups() {
  namespace fs = std::filesystem;
  std::map<std::string, std::vector<fs::path>> found;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator("/sys/fs/cgroup", ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (it.depth() > 8 || !it->is_directory(ec) || it->is_symlink(ec)) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->path().filename() == "hutch-boxes") {
      for (const auto& box : fs::directory_iterator(it->path(), ec)) {
        if (box.is_directory(ec)) found[box.path().filename()].push_back(box.path());
      }
      it.disable_recursion_pending();
    }
  }
  return found;
}

std::vector<std::filesystem::path> boxCgroupsOf(const std::string& id) {
  auto all = boxCgroups();
  auto it = all.find(id);
  return it == all.end() ? std::vector<std::filesystem::path>{} : it->second;
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

namespace {
// Only a guard against hangs: no test asserts on how long anything takes.
constexpr auto kPtyHangGuard = std::chrono::seconds(120);
}  // namespace

PtyCli::PtyCli(const Daemon& daemon, const std::vector<std::string>& args, uint16_t rows,
               uint16_t cols, const RemoteCli* remote) {
  struct winsize size {};
  size.ws_row = rows;
  size.ws_col = cols;
  if (::openpty(&master_, &slave_, nullptr, nullptr, &size) != 0) {
    ADD_FAILURE() << "openpty: " << std::strerror(errno);
    return;
  }
  ::fcntl(master_, F_SETFD, FD_CLOEXEC);
  ::fcntl(slave_, F_SETFD, FD_CLOEXEC);
  ::tcgetattr(slave_, &initial_modes_);
  // Built before fork: the child of a threaded process may only make system calls.
  const std::vector<std::string> argv = cliArgv(daemon.socket(), args, remote);
  std::vector<char*> c_argv;
  c_argv.reserve(argv.size() + 1);
  for (const auto& arg : argv) c_argv.push_back(const_cast<char*>(arg.c_str()));
  c_argv.push_back(nullptr);
  const std::vector<std::string> env = remote ? cliEnv(*remote) : std::vector<std::string>{};
  std::vector<char*> c_env;
  c_env.reserve(env.size() + 1);
  for (const auto& entry : env) c_env.push_back(const_cast<char*>(entry.c_str()));
  c_env.push_back(nullptr);
  pid_ = ::fork();
  if (pid_ < 0) {
    ADD_FAILURE() << "fork: " << std::strerror(errno);
    return;
  }
  if (pid_ == 0) {
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (::setsid() < 0 || ::ioctl(slave_, TIOCSCTTY, 0) != 0) ::_exit(126);
    for (int fd = 0; fd < 3; ++fd) {
      if (::dup2(slave_, fd) < 0) ::_exit(126);
    }
    if (remote) {
      ::execve(c_argv[0], c_argv.data(), c_env.data());
    } else {
      ::execv(c_argv[0], c_argv.data());
    }
    ::_exit(127);
  }
}

PtyCli::~PtyCli() {
  if (pid_ > 0 && exit_code_ < 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  if (master_ >= 0) ::close(master_);
  if (slave_ >= 0) ::close(slave_);
}

bool PtyCli::write(const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(master_, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

bool PtyCli::readSome(std::chrono::milliseconds timeout) {
  pollfd p{master_, POLLIN, 0};
  const int ready = ::poll(&p, 1, static_cast<int>(timeout.count()));
  if (ready <= 0) return ready < 0 && errno == EINTR;
  char buffer[4096];
  const ssize_t n = ::read(master_, buffer, sizeof buffer);
  if (n <= 0) return n < 0 && errno == EINTR;
  output_.append(buffer, static_cast<size_t>(n));
  return true;
}

bool PtyCli::waitFor(const std::string& needle) {
  const auto deadline = std::chrono::steady_clock::now() + kPtyHangGuard;
  while (true) {
    const size_t found = output_.find(needle, matched_);
    if (found != std::string::npos) {
      matched_ = found + needle.size();
      return true;
    }
    if (exit_code_ >= 0 || std::chrono::steady_clock::now() >= deadline) return false;
    if (!readSome(std::chrono::milliseconds(200))) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        while (readSome(std::chrono::milliseconds(0))) {
        }
      }
    }
  }
}

void PtyCli::resize(uint16_t rows, uint16_t cols) {
  struct winsize size {};
  size.ws_row = rows;
  size.ws_col = cols;
  if (::ioctl(slave_, TIOCSWINSZ, &size) != 0) ADD_FAILURE() << "TIOCSWINSZ failed";
}

struct termios PtyCli::modes() const {
  struct termios now {};
  if (::tcgetattr(slave_, &now) != 0) ADD_FAILURE() << "tcgetattr failed";
  return now;
}

int PtyCli::wait() {
  const auto deadline = std::chrono::steady_clock::now() + kPtyHangGuard;
  while (exit_code_ < 0 && std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    const pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    readSome(std::chrono::milliseconds(50));
  }
  while (readSome(std::chrono::milliseconds(0))) {
  }
  return exit_code_;
}

bool sameModes(const struct termios& a, const struct termios& b) {
  return a.c_iflag == b.c_iflag && a.c_oflag == b.c_oflag && a.c_cflag == b.c_cflag &&
         a.c_lflag == b.c_lflag && std::memcmp(a.c_cc, b.c_cc, sizeof a.c_cc) == 0;
}

}  // namespace hutch::e2e

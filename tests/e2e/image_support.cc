#include "image_support.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <sstream>
#include <thread>

namespace hutch::e2e {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path registryScripts() {
  return fs::path(HUTCH_E2E_SOURCE_DIR) / ".." / "registry";
}

std::map<std::string, fs::path> buildTestImages(const fs::path& out,
                                                const std::vector<std::string>& names) {
  std::string command =
      "bash " + quoted((registryScripts() / "images.sh").string()) + " " + quoted(out.string());
  for (const std::string& n : names) command += " " + quoted(n);
  auto built = shell(command);
  EXPECT_EQ(built.exit_code, 0) << built.out << built.err;
  std::map<std::string, fs::path> images;
  std::istringstream lines(built.out);
  for (std::string name, path; lines >> name >> path;) images[name] = path;
  return images;
}

json templateNamed(const Daemon& d, const std::string& name) {
  auto listed = json::parse(d.hutch({"--json", "template", "ls"}).out, nullptr, false);
  if (!listed.is_array()) return json();
  for (const auto& t : listed) {
    if (t.value("name", "") == name) return t;
  }
  return json();
}

std::string leftoversOf(const Daemon& d, const std::string& name) {
  std::string left;
  if (!templateNamed(d, name).is_null()) left += "the template " + name + "; ";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(d.stateDir() / "images", ec)) {
    const std::string file = e.path().filename().string();
    if (file.starts_with(name + "-image-") || file.ends_with(".tmp")) left += file + "; ";
  }
  for (const auto& e : fs::directory_iterator(d.stateDir() / "oci" / "tmp", ec)) {
    left += "oci/tmp/" + e.path().filename().string() + "; ";
  }
  return left;
}

std::string poisonedBlob(const Daemon& d) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(d.stateDir() / "oci" / "blobs" / "sha256", ec)) {
    if (!e.is_regular_file()) return e.path().string() + " is not a regular file";
    if (sha256Hex(readFile(e.path())) != e.path().filename().string()) {
      return e.path().string() + " does not hold what its name says";
    }
  }
  return "";
}

BoundedRun runBounded(const Daemon& d, const std::vector<std::string>& args,
                      std::chrono::seconds bound) {
  static std::atomic<int> counter{0};
  const int n = counter++;
  const fs::path out = d.dir() / ("bounded-" + std::to_string(n) + ".out");
  const fs::path err = d.dir() / ("bounded-" + std::to_string(n) + ".err");
  const auto start = std::chrono::steady_clock::now();
  BoundedRun run;
  pid_t pid = d.start(args, out, err);
  if (pid < 0) return run;
  run.ended = eventually(
      [pid] {
        siginfo_t info{};  // exited, not reaped yet: collect() reaps it
        return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
               info.si_pid == pid;
      },
      bound);
  if (!run.ended) ::kill(pid, SIGKILL);
  run.result = collect(pid, out, err);
  run.took = std::chrono::steady_clock::now() - start;
  return run;
}

}  // namespace hutch::e2e

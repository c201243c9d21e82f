#include "agent/services/supervisor.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <sstream>

#include "agent/exec/spawn.h"
#include "agent/exec/spawn_spec.h"
#include "agent/exec/user_db.h"
#include "agent/log.h"
#include "base/unique_fd.h"

namespace hutch::agent {
namespace {

constexpr std::string_view kSuffix = ".json";

int64_t realtimeNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// mkdir -p with mode 0755.
Result<> makeDirectories(const std::string& path) {
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const std::string prefix = path.substr(0, slash);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return fail(sysError("Cannot create " + prefix, errno));
    }
    if (slash == std::string::npos) return ok();
  }
}

std::string describe(const proto::ExitStatus& exit) {
  if (exit.signal) return "killed by signal " + std::to_string(*exit.signal);
  return "exited with code " + std::to_string(exit.code.value_or(0));
}

proto::ExitStatus exitStatus(int wait_status) {
  if (WIFSIGNALED(wait_status)) return proto::ExitStatus::signaled(WTERMSIG(wait_status));
  return proto::ExitStatus::exited(WEXITSTATUS(wait_status));
}

}  // namespace

Supervisor::Supervisor(EventLoop& loop, SupervisorOptions options)
    : loop_(loop), options_(std::move(options)) {}

Supervisor::~Supervisor() {
  for (auto& service : services_) {
    if (service->restart_timer) loop_.cancelTimer(*service->restart_timer);
  }
}

void Supervisor::start() {
  std::vector<std::string> names;
  if (DIR* dir = ::opendir(options_.config_dir.c_str())) {
    while (dirent* entry = ::readdir(dir)) {
      const std::string file = entry->d_name;
      if (file.size() <= kSuffix.size() ||
          file.compare(file.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) {
        continue;
      }
      names.push_back(file.substr(0, file.size() - kSuffix.size()));
    }
    ::closedir(dir);
  }
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    auto service = std::make_unique<Service>();
    service->status.name = name;
    service->status.log = options_.log_dir + "/" + name + ".log";
    service->backoff = options_.first_backoff;
    const std::string path = options_.config_dir + "/" + name + std::string(kSuffix);
    if (!proto::isValidServiceName(name)) {
      service->status.error = "\"" + name + "\" is not a valid service name";
    } else {
      std::ifstream in(path);
      std::ostringstream text;
      text << in.rdbuf();
      auto spec = in ? proto::parseServiceSpec(text.str())
                     : Result<proto::ServiceSpec>(fail(Errc::kNotFound, "Cannot read " + path));
      if (spec) {
        service->spec = std::move(*spec);
      } else {
        service->status.error = path + ": " + spec.error().message();
      }
    }
    if (!service->spec) {
      service->status.state = "failed";
      logWarning("Service " + name + " cannot be started: " + service->status.error);
    }
    services_.push_back(std::move(service));
  }
  for (auto& service : services_) {
    if (service->spec) launch(*service);
  }
  if (!services_.empty()) {
    logInfo("Supervising " + std::to_string(services_.size()) + " service(s) from " +
            options_.config_dir);
  }
}

void Supervisor::note(const Service& service, const std::string& line) const {
  UniqueFd log(::open(service.status.log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!log) return;
  const std::string text = "--- hutch-agent: " + line + " ---\n";
  [[maybe_unused]] const ssize_t n = ::write(log.get(), text.data(), text.size());
}

void Supervisor::launch(Service& service) {
  service.restart_timer.reset();
  if (stopping_) return;
  const proto::ServiceSpec& spec = *service.spec;
  proto::ExecRequest request;
  request.argv = spec.argv;
  request.env = spec.env;
  request.user = spec.user;
  request.cwd = spec.cwd;
  if (service.ever_started) ++service.status.restarts;
  service.ever_started = true;
  auto started = [&]() -> Result<pid_t> {
    HUTCH_TRY_VOID(makeDirectories(options_.log_dir));
    HUTCH_TRY(SpawnSpec spawn,
              makeSpawnSpec(request, UserDb::load(options_.passwd_path, options_.group_path)));
    UniqueFd log(
        ::open(service.status.log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
    if (!log) return fail(sysError("Cannot open " + service.status.log, errno));
    const std::string marker = "--- hutch-agent: starting " + service.status.name + " ---\n";
    [[maybe_unused]] const ssize_t n = ::write(log.get(), marker.data(), marker.size());
    return spawnDetached(spawn, log.get());
  }();
  service.status.started_ns = realtimeNs();
  service.started_at = EventLoop::Clock::now();
  if (!started) {
    logWarning("Service " + service.status.name + " did not start: " + started.error().describe());
    return ended(service, std::nullopt, started.error().describe());
  }
  service.status.pid = *started;
  service.status.state = "running";
  service.status.error.clear();
}

bool Supervisor::onExited(pid_t pid, int wait_status) {
  for (auto& service : services_) {
    if (service->status.pid != pid || service->status.state != "running") continue;
    ended(*service, exitStatus(wait_status), "");
    return true;
  }
  return false;
}

void Supervisor::ended(Service& service, std::optional<proto::ExitStatus> exit, std::string error) {
  service.status.pid = 0;
  service.status.error = std::move(error);
  if (exit) {
    service.status.last_exit = exit;
    note(service, service.status.name + " " + describe(*exit));
  }
  const bool clean = exit && exit->code == 0;
  const auto policy = service.spec->restart;
  if (stopping_ || policy == proto::RestartPolicy::kNever ||
      (policy == proto::RestartPolicy::kOnFailure && clean)) {
    service.status.state = "stopped";
    if (!stopping_) {
      logInfo("Service " + service.status.name + " " +
              (exit ? describe(*exit) : std::string("did not start")) + "; not restarted");
    }
    return;
  }
  // Back-off: reset after a healthy run, doubled after each quick death.
  if (EventLoop::Clock::now() - service.started_at >= options_.healthy_after) {
    service.backoff = options_.first_backoff;
  }
  const auto delay = service.backoff;
  service.backoff = std::min(service.backoff * 2, options_.max_backoff);
  service.status.state = "restarting";
  logWarning("Service " + service.status.name + " " +
             (exit ? describe(*exit) : std::string("did not start")) + "; restarting in " +
             std::to_string(delay.count()) + " ms");
  Service* target = &service;
  service.restart_timer = loop_.addTimer(delay, [this, target] { launch(*target); });
}

proto::ServiceList Supervisor::status() const {
  proto::ServiceList list;
  for (const auto& service : services_) list.services.push_back(service->status);
  return list;
}

void Supervisor::stopAll(std::chrono::milliseconds grace) {
  stopping_ = true;
  std::vector<Service*> running;
  for (auto& service : services_) {
    if (service->restart_timer) {
      loop_.cancelTimer(*service->restart_timer);
      service->restart_timer.reset();
      service->status.state = "stopped";
    }
    if (service->status.state == "running") running.push_back(service.get());
  }
  if (running.empty()) return;
  logInfo("Stopping " + std::to_string(running.size()) + " service(s)");
  for (Service* service : running) ::kill(-service->status.pid, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  bool killed = false;
  while (!running.empty()) {
    for (auto it = running.begin(); it != running.end();) {
      int status = 0;
      const pid_t r = ::waitpid((*it)->status.pid, &status, WNOHANG);
      if (r == (*it)->status.pid || (r < 0 && errno == ECHILD)) {
        ended(**it, r > 0 ? std::optional(exitStatus(status)) : std::nullopt, "");
        it = running.erase(it);
      } else {
        ++it;
      }
    }
    if (running.empty()) break;
    const auto now = std::chrono::steady_clock::now();
    if (killed && now >= deadline + std::chrono::seconds(2)) break;  // unkillable: give up
    if (!killed && now >= deadline) {
      for (Service* service : running) {
        logWarning("Service " + service->status.name + " did not stop in time: killing it");
        ::kill(-service->status.pid, SIGKILL);
      }
      killed = true;
    }
    ::usleep(20 * 1000);
  }
}

}  // namespace hutch::agent

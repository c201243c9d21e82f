// Supervisor: the services an image declares in /etc/hutch/services/<name>.json (docs/protocol.md,
// "Services"), e.g. dockerd in the docker template.
//
// start() reads the files once and starts every valid service, by name, each in its own session
// with stdin /dev/null and stdout and stderr appended to LOG_DIR/<name>.log. When one dies it is
// started again according to its restart policy, after a back-off that doubles from 0.5 s up to
// 30 s while it keeps dying within 10 s of starting. stopAll() (power-off) sends SIGTERM to each
// running service's process group, SIGKILL after the grace period, and restarts nothing more.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/event_loop.h"
#include "proto/services.h"

namespace hutch::agent {

struct SupervisorOptions {
  std::string config_dir = "/etc/hutch/services";
  std::string log_dir = "/var/log/hutch/services";
  std::string passwd_path = "/etc/passwd";
  std::string group_path = "/etc/group";
  std::chrono::milliseconds first_backoff{500};
  std::chrono::milliseconds max_backoff{30000};
  // A service that ran at least this long starts again after first_backoff.
  std::chrono::milliseconds healthy_after{10000};
};

// How long stopAll() waits for services at power-off before SIGKILL.
inline constexpr std::chrono::milliseconds kServiceStopGrace{10000};

class Supervisor {
 public:
  Supervisor(EventLoop& loop, SupervisorOptions options);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Loads the service files (a missing directory means no services) and starts the services.
  void start();

  // The reaper collected pid: true if it was a service's (which is then restarted or stopped).
  bool onExited(pid_t pid, int wait_status);

  // Every service, by name.
  proto::ServiceList status() const;

  // SIGTERM to every running service's process group; waits (reaping them) up to grace, then
  // SIGKILL to those left. Blocks the loop; nothing is restarted afterwards.
  void stopAll(std::chrono::milliseconds grace = kServiceStopGrace);

 private:
  struct Service {
    std::optional<proto::ServiceSpec> spec;  // unset: its file is invalid
    proto::ServiceStatus status;
    std::optional<EventLoop::TimerId> restart_timer;
    std::chrono::milliseconds backoff{0};
    EventLoop::Clock::time_point started_at;
    bool ever_started = false;
  };

  void launch(Service& service);
  void ended(Service& service, std::optional<proto::ExitStatus> exit, std::string error);
  void note(const Service& service, const std::string& line) const;

  EventLoop& loop_;
  SupervisorOptions options_;
  std::vector<std::unique_ptr<Service>> services_;  // by name
  bool stopping_ = false;
};

}  // namespace hutch::agent

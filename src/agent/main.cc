// hutch-agent: the box's PID 1 and the server of the host protocol (docs/protocol.md).
//
//   hutch-agent                         as PID 1 in the guest: init duties, then serve the
//                                       virtio-serial port named hutch.agent
//   hutch-agent --service               as a service of the box's init (systemd, in the systemd
//                                       template): the hostname, network and root growth, then
//                                       serve the port; a power-off is asked of the init
//   hutch-agent --listen SOCKET_PATH    on a host, for tests: no init duties, serve each
//                                       connection to the unix socket as a session
//     [--root DIR]                      the box's files the agent manages (identity files,
//                                       /var/log/hutch, ...) are taken under DIR; the clock,
//                                       hostname, RNG and disk operations are only recorded in
//                                       DIR/system.log (never the host's own)
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>

#include "agent/channel/unix_listener.h"
#include "agent/channel/virtio_port.h"
#include "agent/event_loop.h"
#include "agent/init/pid1.h"
#include "agent/init/power.h"
#include "agent/init/reaper.h"
#include "agent/init/signal_fd.h"
#include "agent/init/system_control.h"
#include "agent/log.h"
#include "agent/server.h"
#include "agent/services/supervisor.h"

namespace hutch::agent {
namespace {

constexpr const char* kUsage =
    "usage: hutch-agent [--service | --listen SOCKET_PATH [--root DIR]] [--port-name NAME]\n"
    "  Without --listen the agent must be PID 1 (the box's init) and serves the virtio-serial\n"
    "  port NAME (default hutch.agent). --service does the same as a service of another init\n"
    "  (systemd): no mounts, and a power-off is asked of PID 1 (SIGRTMIN+4). --listen serves a\n"
    "  unix socket instead, skipping every PID-1 duty (for tests on a host). --root gives a\n"
    "  --listen agent a pretend box under DIR: identity files, logs of detached processes and\n"
    "  services are there, and clock, hostname and RNG changes are recorded in DIR/system.log\n"
    "  instead of being made.\n";

// Logs of detached processes in a box.
constexpr const char* kExecLogDir = "/var/log/hutch/exec";

// How the agent runs: as the box's init, as a service of the box's init, or on a host for tests.
enum class Mode { kInit, kService, kListen };

struct Options {
  bool service = false;
  std::string listen_path;
  std::string port_name = "hutch.agent";
  std::string root;
};

// 0, 1 and 2 must be open: otherwise a pipe could land on them and be clobbered in a child.
void ensureStandardFds() {
  for (int fd = 0; fd < 3; ++fd) {
    if (::fcntl(fd, F_GETFD) < 0) {
      const int null_fd = ::open("/dev/null", O_RDWR);
      if (null_fd >= 0 && null_fd != fd) {
        ::dup2(null_fd, fd);
        ::close(null_fd);
      }
    }
  }
}

int serve(const Options& options, Mode mode) {
  const bool as_pid1 = mode == Mode::kInit;
  const bool in_box = mode != Mode::kListen;
  auto loop_or = EventLoop::create();
  if (!loop_or) {
    logError(loop_or.error().describe());
    return 1;
  }
  EventLoop& loop = **loop_or;

  auto signals = openSignalFd({SIGCHLD, SIGTERM, SIGINT, SIGPWR, SIGHUP});
  if (!signals) {
    logError(signals.error().describe());
    return 1;
  }

  std::unique_ptr<ChannelSource> source;
  if (in_box) {
    source = std::make_unique<VirtioPort>(loop, options.port_name);
  } else {
    source = std::make_unique<UnixListener>(loop, options.listen_path);
  }

  // Declared before use in the callbacks below; the server outlives the loop's run().
  std::unique_ptr<SystemControl> system;
  std::unique_ptr<Supervisor> supervisor;
  std::unique_ptr<Server> server;
  auto shutdown = [&] {
    if (supervisor) supervisor->stopAll();  // services first, with their own grace period
    server->finishFileWork();               // unfinished writes' temporary files go
    if (as_pid1) powerOff();                // never returns
    server->closeAllStreams();
    loop.stop();
  };
  // As a service, the host's power-off goes to the init, which stops the agent (SIGTERM: the
  // shutdown above) with the other services; until then the agent serves.
  auto power_off_via_init = [&] {
    if (supervisor) supervisor->stopAll();
    server->finishFileWork();
    if (!askInitToPowerOff()) powerOff();  // the init is gone or deaf: power off as PID 1 would
  };

  ServerOptions server_options;
  server_options.agent_version = HUTCH_VERSION;
  server_options.on_poweroff = mode == Mode::kService ? std::function<void()>(power_off_via_init)
                                                      : std::function<void()>(shutdown);
  if (in_box) {
    system = realSystemControl();
    server_options.exec_log_dir = kExecLogDir;
    supervisor = std::make_unique<Supervisor>(loop, SupervisorOptions{});
  } else if (!options.root.empty()) {
    system = recordingSystemControl(options.root);
    server_options.identity_files = IdentityFiles::under(options.root);
    server_options.exec_log_dir = options.root + kExecLogDir;
    SupervisorOptions services;
    services.config_dir = options.root + services.config_dir;
    services.log_dir = options.root + services.log_dir;
    supervisor = std::make_unique<Supervisor>(loop, services);
  }
  server_options.services = supervisor.get();
  server_options.system = system.get();
  server = std::make_unique<Server>(loop, *source, server_options);

  auto watched = loop.add(signals->get(), EPOLLIN, [&](uint32_t) {
    while (int sig = readSignal(signals->get())) {
      if (sig == SIGCHLD) {
        reapChildren([&](pid_t pid, int status) {
          if (!supervisor || !supervisor->onExited(pid, status)) server->onChildExited(pid, status);
        });
      } else if (sig == SIGHUP) {
        continue;  // a console hangup is not a reason to stop
      } else {
        logInfo(std::string("Received ") + ::strsignal(sig));
        shutdown();
      }
    }
  });
  if (!watched) {
    logError(watched.error().describe());
    return 1;
  }

  logInfo(std::string("Agent ") + HUTCH_VERSION + " serving " + source->describe());
  if (auto started = server->start(); !started) {
    logError(started.error().describe());
    return 1;
  }
  if (supervisor) supervisor->start();
  loop.run();
  return 0;
}

}  // namespace
}  // namespace hutch::agent

int main(int argc, char** argv) {
  using namespace hutch::agent;
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--service") {
      options.service = true;
    } else if (arg == "--listen" && i + 1 < argc) {
      options.listen_path = argv[++i];
    } else if (arg == "--port-name" && i + 1 < argc) {
      options.port_name = argv[++i];
    } else if (arg == "--root" && i + 1 < argc) {
      options.root = argv[++i];
    } else if (arg == "--version") {
      std::printf("hutch-agent %s\n", HUTCH_VERSION);
      return 0;
    } else if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (::getpid() != 1) {
      std::fprintf(stderr, "hutch-agent: unknown argument \"%s\"\n%s", arg.c_str(), kUsage);
      return 2;
    }
    // As PID 1, unknown arguments (the kernel passes some) are ignored: init must not exit.
  }

  ensureStandardFds();
  ::signal(SIGPIPE, SIG_IGN);  // a closed pipe or socket is an EPIPE, handled where it happens

  if (options.service && !options.listen_path.empty()) {
    std::fprintf(stderr, "hutch-agent: --service and --listen exclude each other\n%s", kUsage);
    return 2;
  }
  const Mode mode = options.service               ? Mode::kService
                    : options.listen_path.empty() ? Mode::kInit
                                                  : Mode::kListen;
  const bool as_pid1 = mode == Mode::kInit;
  if (mode != Mode::kListen && !options.root.empty() && ::getpid() != 1) {
    std::fprintf(stderr, "hutch-agent: --root needs --listen\n%s", kUsage);
    return 2;
  }
  if (mode == Mode::kService) {
    // Orphans of exec'd processes come to the agent, as they would to it as PID 1.
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    setUpAsService();
  } else if (as_pid1) {
    if (::getpid() != 1) {
      std::fprintf(stderr,
                   "hutch-agent: without --listen the agent must run as PID 1 (the box's init)\n"
                   "%s",
                   kUsage);
      return 2;
    }
    setUpAsPid1();
  } else {
    // Orphans of exec'd processes come to us, as they would to PID 1 in a box.
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  }

  const int code = serve(options, mode);
  if (as_pid1) {
    // PID 1 exiting panics the kernel; power off instead.
    logError("The agent cannot serve; powering off");
    powerOff();
  }
  return code;
}

// hutch-egress: the unprivileged egress proxy hutchd starts (src/egress/README.md).
//   hutch-egress --control-fd 3 [--upstream-ca FILE] [--resolv-conf FILE] [--user UID:GID]
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>

#include "egress/dns.h"
#include "egress/proxy/asio.h"
#include "egress/proxy/control_channel.h"
#include "egress/proxy/egress_proxy.h"
#include "egress/proxy/log.h"

namespace {

using namespace hutch;
using namespace hutch::egress::proxy;

struct UserSpec {
  uid_t uid = 0;
  gid_t gid = 0;
};

Result<UserSpec> parseUser(const std::string& text) {
  size_t colon = text.find(':');
  auto number = [](std::string_view s, unsigned long& out) {
    if (s.empty() || s.size() > 10) return false;
    out = 0;
    for (char c : s) {
      if (c < '0' || c > '9') return false;
      out = out * 10 + static_cast<unsigned long>(c - '0');
    }
    return out < 0xffffffffUL;
  };
  unsigned long uid = 0;
  unsigned long gid = 0;
  if (colon == std::string::npos || !number(std::string_view(text).substr(0, colon), uid) ||
      !number(std::string_view(text).substr(colon + 1), gid)) {
    return fail(Errc::kInvalidArgument, "--user takes numeric UID:GID, like 990:990");
  }
  return UserSpec{static_cast<uid_t>(uid), static_cast<gid_t>(gid)};
}

// No supplementary groups, then the group, then the user; then checks that it holds.
Result<> dropTo(const UserSpec& user) {
  if (setgroups(0, nullptr) != 0) return fail(sysError("setgroups(0)", errno));
  if (setresgid(user.gid, user.gid, user.gid) != 0) return fail(sysError("setresgid", errno));
  if (setresuid(user.uid, user.uid, user.uid) != 0) return fail(sysError("setresuid", errno));
  uid_t r = 0, e = 0, s = 0;
  gid_t rg = 0, eg = 0, sg = 0;
  if (getresuid(&r, &e, &s) != 0 || getresgid(&rg, &eg, &sg) != 0 || r != user.uid ||
      e != user.uid || s != user.uid || rg != user.gid || eg != user.gid || sg != user.gid ||
      getgroups(0, nullptr) != 0) {
    return fail(Errc::kInternal, "Dropping to --user did not take; refusing to run");
  }
  if (user.uid != 0 && setuid(0) == 0) {
    return fail(Errc::kInternal, "Could regain root after dropping to --user; refusing to run");
  }
  return ok();
}

Result<> checkControlFd(int fd) {
  int type = 0;
  socklen_t len = sizeof type;
  if (fcntl(fd, F_GETFD) < 0) {
    return fail(Errc::kInvalidArgument,
                "--control-fd " + std::to_string(fd) + " is not an open descriptor");
  }
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_SEQPACKET) {
    return fail(Errc::kInvalidArgument,
                "--control-fd " + std::to_string(fd) + " must be a SOCK_SEQPACKET unix socket");
  }
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  return ok();
}

Result<> useResolvConf(const std::filesystem::path& file) {
  if (::unshare(CLONE_NEWNS) != 0) {
    return fail(sysError("Cannot make a mount namespace for --resolv-conf", errno));
  }
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return fail(sysError("Cannot make the mounts private for --resolv-conf", errno));
  }
  if (::mount(file.c_str(), "/etc/resolv.conf", nullptr, MS_BIND, nullptr) != 0) {
    return fail(sysError("Cannot bind " + file.string() + " over /etc/resolv.conf", errno));
  }
  return ok();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hutch-egress: the per-box egress proxy hutchd starts (deny by default)"};
  int control_fd = -1;
  std::string upstream_ca;
  std::string resolv_conf;
  std::string user_text;
  app.add_option("--control-fd", control_fd,
                 "SOCK_SEQPACKET unix socket to hutchd (src/egress/README.md)")
      ->required();
  app.add_option("--upstream-ca", upstream_ca,
                 "Extra PEM CA certificates trusted for upstream TLS (besides the system's)")
      ->check(CLI::ExistingFile);
  app.add_option("--resolv-conf", resolv_conf,
                 "resolv.conf naming the servers the boxes' DNS questions go to "
                 "(default /etc/resolv.conf)")
      ->check(CLI::ExistingFile);
  app.add_option("--user", user_text, "Run as UID:GID after setup");
  CLI11_PARSE(app, argc, argv);

  spdlog::set_default_logger(spdlog::stderr_color_mt("hutch-egress"));
  std::signal(SIGPIPE, SIG_IGN);

  std::optional<UserSpec> user;
  if (!user_text.empty()) {
    auto parsed = parseUser(user_text);
    if (!parsed) {
      spdlog::error("{}", parsed.error().describe());
      return 2;
    }
    user = *parsed;
  }
  if (auto checked = checkControlFd(control_fd); !checked) {
    spdlog::error("{}", checked.error().describe());
    return 2;
  }

  asio::io_context io;
  ControlChannel channel(io.get_executor(), UniqueFd(control_fd));
  ProxyOptions options;
  if (!upstream_ca.empty()) options.upstream_ca = upstream_ca;
  std::filesystem::path resolv = resolv_conf.empty() ? "/etc/resolv.conf" : resolv_conf;
  if (!resolv_conf.empty()) {
    // Upstream names resolve through getaddrinfo, which reads /etc/resolv.conf: in a mount
    // namespace of our own that file is the one given, so the proxy and the boxes' DNS ask the
    // same servers.
    if (auto seen = useResolvConf(resolv); !seen) {
      spdlog::error("{}", seen.error().describe());
      return 1;
    }
  }
  auto nameservers = hutch::egress::nameserversFrom(resolv);
  if (!nameservers) {
    spdlog::error("{}; pass --resolv-conf FILE naming the name servers boxes may use",
                  nameservers.error().describe());
    return 1;
  }
  options.dns_upstreams = std::move(*nameservers);
  options.log = [&channel](const hutch::egress::LogEntry& entry) { channel.sendLog(entry); };
  auto proxy = EgressProxy::create(io, std::move(options));
  if (!proxy) {
    spdlog::error("{}", proxy.error().describe());
    return 1;
  }
  if (user) {
    if (auto dropped = dropTo(*user); !dropped) {
      spdlog::error("{}", dropped.error().describe());
      return 1;
    }
  }
  egressLog().info("hutch-egress ready (uid {})", getuid());
  int status = 0;
  asio::co_spawn(io, channel.run(**proxy), [&io, &status](const std::exception_ptr& e) {
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        spdlog::error("control loop failed: {}", x.what());
      }
      status = 1;
    }
    io.stop();
  });
  io.run();
  egressLog().info("control socket closed; exiting");
  return status;
}

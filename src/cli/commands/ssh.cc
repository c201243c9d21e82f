// hutch ssh-proxy, ssh-known-hosts, ssh-config and ssh (docs/ssh.md): OpenSSH reaches a box
// through hutchd's API, with hutchd's host key checked and no key of the user's needed.
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/commands/commands.h"
#include "ssh/ssh_model.h"

namespace hutch::cli {

namespace {

namespace http = boost::beast::http;

bool writeAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// The flags that make another `hutch` reach the same hutchd as this one (the API key, if any,
// stays in the environment: HUTCH_API_KEY).
std::vector<std::string> endpointFlags(const Endpoint& endpoint) {
  std::vector<std::string> flags;
  if (endpoint.kind == Endpoint::Kind::kUnix) {
    if (endpoint.socket_path != defaultSocketPath() || std::getenv("HUTCH_SOCKET") != nullptr) {
      flags = {"--socket", endpoint.socket_path};
    }
    return flags;
  }
  const char* scheme = endpoint.kind == Endpoint::Kind::kHttps ? "https" : "http";
  const bool v6 = endpoint.host.find(':') != std::string::npos;
  flags = {"--host", fmt::format("{}://{}{}{}:{}", scheme, v6 ? "[" : "", endpoint.host,
                                 v6 ? "]" : "", endpoint.port)};
  if (!endpoint.ca_cert.empty()) {
    flags.push_back("--ca-cert");
    flags.push_back(std::filesystem::absolute(endpoint.ca_cert).string());
  }
  if (!endpoint.fingerprint.empty()) {
    flags.push_back("--fingerprint");
    flags.push_back(endpoint.fingerprint);
  }
  return flags;
}

Result<std::string> configFor(const ApiClient& client) {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return fail(Errc::kInternal, "Cannot tell where this hutch is (/proc/self/exe)");
  return ssh::sshConfigText(
      {.hutch_path = self.string(), .global_flags = endpointFlags(client.endpoint())});
}

std::filesystem::path sshDir() {
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home != nullptr ? home : "/root") / ".ssh";
}

}  // namespace

int cmdSshProxy(const ApiClient& client, const Output& out, const std::string& host) {
  std::signal(SIGPIPE, SIG_IGN);
  auto box = ssh::parseBoxHost(host);
  if (!box) return reportError(out, box.error());
  auto stream =
      client.upgradeTo(http::verb::get, fmt::format("/v1/boxes/{}/ssh", *box), "ssh", std::nullopt);
  if (!stream) return reportError(out, stream.error());
  const int fd = stream->fd.get();
  if (!stream->leftover.empty() &&
      !writeAll(STDOUT_FILENO, stream->leftover.data(), stream->leftover.size())) {
    return 1;
  }
  // stdin -> hutchd, hutchd -> stdout, until hutchd ends the stream.
  std::string buf(size_t{64} << 10, '\0');
  bool stdin_open = true;
  while (true) {
    struct pollfd fds[2] = {{.fd = fd, .events = POLLIN, .revents = 0},
                            {.fd = STDIN_FILENO, .events = POLLIN, .revents = 0}};
    const int n = ::poll(fds, stdin_open ? 2 : 1, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return 1;
    if ((fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      ssize_t got = ::read(fd, buf.data(), buf.size());
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (got <= 0) return 0;
      if (!writeAll(STDOUT_FILENO, buf.data(), static_cast<size_t>(got))) return 0;
    }
    if (stdin_open && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      ssize_t got = ::read(STDIN_FILENO, buf.data(), buf.size());
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (got <= 0) {
        stdin_open = false;
        ::shutdown(fd, SHUT_WR);
        continue;
      }
      if (!writeAll(fd, buf.data(), static_cast<size_t>(got))) return 0;
    }
  }
}

int cmdSshKnownHosts(const ApiClient& client, const Output& out, const std::string& host) {
  auto key = client.call(http::verb::get, "/v1/ssh/host-key");
  if (!key) return reportError(out, key.error());
  if (out.json) {
    std::printf("%s\n", key->dump(2).c_str());
    return 0;
  }
  std::printf("%s\n", ssh::knownHostsLine(host, key->value("public_key", "")).c_str());
  return 0;
}

int cmdSshConfig(const ApiClient& client, const Output& out, bool install) {
  auto text = configFor(client);
  if (!text) return reportError(out, text.error());
  if (!install) {
    std::fputs(text->c_str(), stdout);
    return 0;
  }
  const auto dir = sshDir();
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) {
    std::filesystem::create_directories(dir, ec);
    ::chmod(dir.c_str(), 0700);
  }
  const auto ours = dir / "hutch_config";
  {
    std::ofstream f(ours, std::ios::trunc);
    f << *text;
    if (!f) {
      return reportError(out,
                         Error(Errc::kInternal, fmt::format("Cannot write {}", ours.string())));
    }
  }
  const auto config = dir / "config";
  std::string current;
  if (std::ifstream in(config); in) {
    std::stringstream ss;
    ss << in.rdbuf();
    current = ss.str();
  }
  const std::string updated = ssh::withInclude(current, "Include " + ours.string());
  if (updated != current) {
    const bool existed = std::filesystem::exists(config, ec);
    std::ofstream f(config, std::ios::trunc);
    f << updated;
    if (!f) {
      return reportError(out,
                         Error(Errc::kInternal, fmt::format("Cannot write {}", config.string())));
    }
    if (!existed) ::chmod(config.c_str(), 0600);
  }
  std::fprintf(stderr, "hutch: wrote %s%s; try: ssh BOX.hutch\n", ours.c_str(),
               updated != current ? (" and included it from " + config.string()).c_str() : "");
  return 0;
}

int cmdSsh(const ApiClient& client, const Output& out, const std::string& box,
           const std::vector<std::string>& command, const std::vector<std::string>& ssh_args) {
  auto name = ssh::parseBoxHost(box);
  if (!name) return reportError(out, name.error());
  auto text = configFor(client);
  if (!text) return reportError(out, text.error());
  // The block in a file named after its content (ssh closes every descriptor above stderr at
  // start, so /dev/fd cannot carry it; and ssh replaces this process, so nothing could remove a
  // temporary file): the same flags reuse the same file.
  uint64_t hash = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : *text) hash = (hash ^ c) * 1099511628211ull;
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  const std::filesystem::path dir = runtime != nullptr && *runtime != '\0'
                                        ? std::filesystem::path(runtime) / "hutch"
                                        : sshDir().parent_path() / ".cache" / "hutch";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const auto path = dir / fmt::format("ssh_config-{:016x}", hash);
  if (!std::filesystem::exists(path, ec)) {
    const auto tmp = dir / fmt::format("ssh_config-{:016x}.{}", hash, ::getpid());
    {
      std::ofstream f(tmp, std::ios::trunc);
      f << *text;
      if (!f) {
        return reportError(
            out, Error(Errc::kInternal,
                       fmt::format("Cannot write ssh's configuration in {}", dir.string())));
      }
    }
    std::filesystem::rename(tmp, path, ec);
  }
  std::vector<std::string> args{"ssh", "-F", path.string()};
  args.insert(args.end(), ssh_args.begin(), ssh_args.end());
  args.push_back(*name + std::string(ssh::kHostSuffix));
  if (!command.empty()) {
    args.emplace_back("--");
    args.insert(args.end(), command.begin(), command.end());
  }
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execvp("ssh", argv.data());
  return reportError(out, Error(Errc::kNotFound,
                                "Cannot run ssh: install OpenSSH's client (apt-get install "
                                "openssh-client)",
                                errno));
}

int cmdSshKeyAdd(const ApiClient& client, const Output& out, const std::string& name,
                 const std::string& file) {
  std::string text;
  if (file == "-") {
    std::stringstream ss;
    ss << std::cin.rdbuf();
    text = ss.str();
  } else {
    std::ifstream in(file);
    if (!in) {
      return reportError(out, Error(Errc::kNotFound, fmt::format("Cannot read {}", file), errno));
    }
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  auto added =
      client.call(http::verb::post, "/v1/ssh/keys", json{{"name", name}, {"public_key", text}});
  if (!added) return reportError(out, added.error());
  if (out.json) {
    printJson(*added);
    return 0;
  }
  fmt::print("{} {}\n", name, added->value("fingerprint", ""));
  return 0;
}

int cmdSshKeyList(const ApiClient& client, const Output& out) {
  auto listed = client.call(http::verb::get, "/v1/ssh/keys");
  if (!listed) return reportError(out, listed.error());
  if (out.json) {
    printJson((*listed)["keys"]);
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& k : (*listed)["keys"]) {
    const std::string key = k.value("public_key", "");
    rows.push_back({k.value("name", ""), key.substr(0, key.find(' ')), k.value("fingerprint", ""),
                    humanAge(k.value("created_at", int64_t{0}))});
  }
  printTable({"NAME", "TYPE", "FINGERPRINT", "ADDED"}, rows);
  return 0;
}

int cmdSshKeyRemove(const ApiClient& client, const Output& out,
                    const std::vector<std::string>& names) {
  return removeEach(client, out, "/v1/ssh/keys", names);
}

}  // namespace hutch::cli

#include "ssh/ssh_model.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <array>
#include <csignal>
#include <utility>

namespace hutch::ssh {

namespace {

constexpr size_t kMaxBoxName = 128;
constexpr size_t kMaxUserName = 64;

bool lowerEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (x != b[i]) return false;
  }
  return true;
}

bool boxNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

bool variableName(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    const bool digit = c >= '0' && c <= '9';
    if (!alpha && !(digit && i > 0)) return false;
  }
  return true;
}

// RFC 4254 section 6.10's signal names.
constexpr std::array<std::pair<std::string_view, int>, 13> kRfcSignals{{
    {"ABRT", SIGABRT},
    {"ALRM", SIGALRM},
    {"FPE", SIGFPE},
    {"HUP", SIGHUP},
    {"ILL", SIGILL},
    {"INT", SIGINT},
    {"KILL", SIGKILL},
    {"PIPE", SIGPIPE},
    {"QUIT", SIGQUIT},
    {"SEGV", SIGSEGV},
    {"TERM", SIGTERM},
    {"USR1", SIGUSR1},
    {"USR2", SIGUSR2},
}};

// Others Linux has, named as OpenSSH's sshd names them ("NAME@openssh.com").
constexpr std::array<std::pair<std::string_view, int>, 15> kOtherSignals{{
    {"BUS", SIGBUS},
    {"CHLD", SIGCHLD},
    {"CONT", SIGCONT},
    {"STOP", SIGSTOP},
    {"TSTP", SIGTSTP},
    {"TTIN", SIGTTIN},
    {"TTOU", SIGTTOU},
    {"URG", SIGURG},
    {"XCPU", SIGXCPU},
    {"XFSZ", SIGXFSZ},
    {"VTALRM", SIGVTALRM},
    {"PROF", SIGPROF},
    {"WINCH", SIGWINCH},
    {"SYS", SIGSYS},
    {"TRAP", SIGTRAP},
}};

// A word of ssh_config: double-quoted when it has a space; '%' doubled (ssh expands %-tokens in
// ProxyCommand and KnownHostsCommand).
Result<std::string> configWord(std::string_view word) {
  std::string out;
  bool space = word.empty();
  for (char c : word) {
    if (c == '"' || c == '\\' || c == '\'' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("'{}' cannot be written in an ssh_config file (it has a quote, a "
                              "backslash or a control character); move hutch or the socket to a "
                              "plainer path",
                              word));
    }
    if (c == ' ' || c == '\t') space = true;
    if (c == '%') out += '%';
    out += c;
  }
  return space ? "\"" + out + "\"" : out;
}

}  // namespace

Result<std::string> parseBoxHost(std::string_view host) {
  if (!host.empty() && host.back() == '.') host.remove_suffix(1);
  if (host.size() > kHostSuffix.size() &&
      lowerEquals(host.substr(host.size() - kHostSuffix.size()), kHostSuffix)) {
    host.remove_suffix(kHostSuffix.size());
  }
  if (host.empty()) {
    return fail(Errc::kInvalidArgument, "No box named: give BOX.hutch or BOX (hutch ls)");
  }
  if (host.size() > kMaxBoxName) {
    return fail(Errc::kInvalidArgument,
                fmt::format("A box name is at most {} characters", kMaxBoxName));
  }
  for (char c : host) {
    if (!boxNameChar(c)) {
      return fail(Errc::kInvalidArgument,
                  "A box host is BOX.hutch or BOX, where BOX is a box's name or id (letters, "
                  "digits, '.', '_' and '-')");
    }
  }
  if (host.front() == '.' || host.front() == '-') {
    return fail(Errc::kInvalidArgument, "A box name does not start with '.' or '-'");
  }
  return std::string(host);
}

bool envAllowed(std::string_view name, std::string_view value) {
  if (!variableName(name) || value.find('\0') != std::string_view::npos) return false;
  return name == "LANG" || name == "TERM" || name == "COLORTERM" || name.starts_with("LC_");
}

Result<std::optional<std::string>> boxUserOf(std::string_view ssh_user) {
  if (ssh_user.empty() || ssh_user == kDefaultUser) return std::optional<std::string>();
  if (ssh_user.size() > kMaxUserName) {
    return fail(Errc::kInvalidArgument,
                fmt::format("A user name is at most {} characters", kMaxUserName));
  }
  for (char c : ssh_user) {
    if (c == '/' || c == ':' || c == ' ' || static_cast<unsigned char>(c) < 0x21 || c == 0x7f) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("'{}' is not a user name (the SSH user is the user in the box, or "
                              "{} for the box's default)",
                              ssh_user, kDefaultUser));
    }
  }
  return std::optional<std::string>(std::string(ssh_user));
}

std::optional<int> signalNumber(std::string_view name) {
  for (const auto& [n, signo] : kRfcSignals) {
    if (n == name) return signo;
  }
  return std::nullopt;
}

std::string signalName(int signo) {
  for (const auto& [n, s] : kRfcSignals) {
    if (s == signo) return std::string(n);
  }
  for (const auto& [n, s] : kOtherSignals) {
    if (s == signo) return fmt::format("{}@openssh.com", n);
  }
  return fmt::format("SIG{}@openssh.com", signo);
}

std::optional<std::string> boxLocalAddress(std::string_view host,
                                           const std::vector<std::string>& box_names) {
  if (host == "::1" || host == "[::1]") return std::string("::1");
  if (lowerEquals(host, "localhost") || lowerEquals(host, "localhost.")) {
    return std::string("127.0.0.1");
  }
  // 127.0.0.0/8 in dotted decimal: inet_pton takes four numbers 0-255 and nothing else.
  if (host.starts_with("127.")) {
    in_addr address{};
    const std::string text(host);
    if (::inet_pton(AF_INET, text.c_str(), &address) == 1) return text;
    return std::nullopt;
  }
  std::string_view name = host;
  if (name.size() > kHostSuffix.size() &&
      lowerEquals(name.substr(name.size() - kHostSuffix.size()), kHostSuffix)) {
    name.remove_suffix(kHostSuffix.size());
  }
  for (const std::string& own : box_names) {
    if (!own.empty() && lowerEquals(name, own)) return std::string("127.0.0.1");
  }
  return std::nullopt;
}

std::vector<std::string> execArgv(std::string_view command) {
  // $1 is the command; the login shell comes from /etc/passwd's entry for $USER (the agent sets
  // it), read with shell builtins only: getent, cut and id cost ~150 ms of forks in a box.
  static constexpr std::string_view kLauncher =
      "s=; while IFS=: read -r n _ _ _ _ _ l; do "
      "if [ \"$n\" = \"$USER\" ]; then s=$l; break; fi; done < /etc/passwd; "
      "[ -n \"$s\" ] && [ -x \"$s\" ] || s=/bin/sh; exec \"$s\" -c \"$1\"";
  return {"/bin/sh", "-c", std::string(kLauncher), "sh", std::string(command)};
}

Result<std::string> sshConfigText(const SshConfig& config) {
  std::string command;
  HUTCH_TRY(command, configWord(config.hutch_path));
  for (const std::string& flag : config.global_flags) {
    HUTCH_TRY(std::string word, configWord(flag));
    command += " " + word;
  }
  return fmt::format(
      "# Written by `hutch ssh-config` (docs/ssh.md): `ssh BOX.hutch` reaches box BOX through\n"
      "# hutchd. No key is needed: hutchd authenticates the ProxyCommand's API connection, and\n"
      "# its host key comes from hutchd through KnownHostsCommand.\n"
      "Host *.hutch\n"
      "  ProxyCommand {0} ssh-proxy %h\n"
      "  User {1}\n"
      "  KnownHostsCommand {0} ssh-known-hosts %H\n"
      "  UserKnownHostsFile /dev/null\n"
      "  GlobalKnownHostsFile /dev/null\n"
      "  StrictHostKeyChecking yes\n"
      "  CheckHostIP no\n"
      "  IdentityAgent none\n"
      "  IdentityFile /dev/null\n"
      "  PasswordAuthentication no\n"
      "  KbdInteractiveAuthentication no\n"
      "  ForwardAgent no\n"
      "  ForwardX11 no\n"
      "  SendEnv LANG LC_* COLORTERM\n",
      command, kDefaultUser);
}

std::string withInclude(std::string_view config, std::string_view include_line) {
  std::string_view rest = config;
  while (!rest.empty()) {
    size_t eol = rest.find('\n');
    std::string_view line = rest.substr(0, eol);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) {
      line.remove_suffix(1);
    }
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    if (line == include_line) return std::string(config);
    if (eol == std::string_view::npos) break;
    rest.remove_prefix(eol + 1);
  }
  std::string out(include_line);
  out += "\n";
  if (!config.empty()) out += "\n";
  out += config;
  return out;
}

std::string knownHostsLine(std::string_view host, std::string_view public_key) {
  return fmt::format("{} {}", host, public_key);
}

}  // namespace hutch::ssh

// The pure parts of SSH into boxes (docs/ssh.md): what a host name, a user name, an env request,
// a signal name and a direct-tcpip destination mean to hutch, what a session's exec request
// runs, and the OpenSSH configuration `hutch ssh-config` writes. No libssh here: the CLI links
// it, and every function is unit-tested (ssh_model_test.cc) and fuzzable.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace hutch::ssh {

// The SSH user name that means "the box's own default user" (what `hutch exec` runs as): the
// one `hutch ssh-config` writes. Any other user name runs as that user inside the box.
inline constexpr std::string_view kDefaultUser = "_default_";
// The suffix of host names that `hutch ssh-config`'s block matches (ssh BOX.hutch).
inline constexpr std::string_view kHostSuffix = ".hutch";
// The SFTP server run in the box for `subsystem sftp` (Debian's openssh-sftp-server).
inline constexpr std::string_view kSftpServer = "/usr/lib/openssh/sftp-server";

// The box a ProxyCommand's host names: "BOX.hutch" or "BOX" (the suffix is taken off in any
// case; a trailing dot is tolerated, as DNS names have one). kInvalidArgument for an empty name,
// one longer than 128 bytes, or one with a character a box name or id cannot have (only
// A-Z a-z 0-9 . _ - are allowed, and it cannot start with '.' or '-').
Result<std::string> parseBoxHost(std::string_view host);

// Whether a client's `env` request may set `name` in the box: LANG, LC_* (locale), TERM and
// COLORTERM, as Debian's sshd accepts by default plus the terminal's. Everything else
// (credentials, PATH, LD_PRELOAD) is refused. The name must be a valid variable name and the
// value must not contain NUL.
bool envAllowed(std::string_view name, std::string_view value);

// The user an SSH user name runs as in the box: nullopt for kDefaultUser and an empty name (the
// box's default), else the name itself (a user name or numeric uid inside the box).
// kInvalidArgument for names that no user can have (over 64 bytes, '/', ':', control
// characters, whitespace).
Result<std::optional<std::string>> boxUserOf(std::string_view ssh_user);

// The signal an SSH "signal" request names (RFC 4254 6.9: "TERM", "INT", ...; without "SIG"):
// its number, or nullopt for names RFC 4254 does not list.
std::optional<int> signalNumber(std::string_view name);
// How an "exit-signal" names signal `signo`: RFC 4254's names for its signals, else OpenSSH's
// form for others ("BUS@openssh.com"), or "SIG<n>@openssh.com" for numbers without a name.
std::string signalName(int signo);

// Whether a direct-tcpip channel may go to `host`: only inside the box. "localhost",
// "127.0.0.1" (any 127.0.0.0/8), "::1" and the box's own name or id (`box_names`) are the box
// itself; the address the agent connects to is returned ("127.0.0.1" or "::1"). nullopt for
// anything else (other hosts are not reachable through SSH: the box's egress policy applies to
// what the box itself does).
std::optional<std::string> boxLocalAddress(std::string_view host,
                                           const std::vector<std::string>& box_names);

// What an `exec` request runs: the user's login shell from the box's /etc/passwd with
// -c COMMAND, as sshd does (`sh` when the entry names none or none that runs, or for a user
// only NSS knows).
std::vector<std::string> execArgv(std::string_view command);

// `hutch ssh-config`'s block, for the CLI at `hutch_path` with `global_flags` (--socket PATH,
// --host URL, ...: how that CLI reaches hutchd).
struct SshConfig {
  std::string hutch_path;
  std::vector<std::string> global_flags;
};
// kInvalidArgument when a path or flag cannot be written in ssh_config (a quote, a backslash or
// a control character in it).
Result<std::string> sshConfigText(const SshConfig& config);

// The ~/.ssh/config with `include_line` first (idempotent: unchanged when a line of the file is
// already `include_line`, leading and trailing blanks aside).
std::string withInclude(std::string_view config, std::string_view include_line);

// One known_hosts line for `host` (as ssh passed %H) and a public key ("ssh-ed25519 AAAA...").
std::string knownHostsLine(std::string_view host, std::string_view public_key);

}  // namespace hutch::ssh

// The box's identity inside the guest: its hostname (from hutch.hostname=NAME on the kernel
// command line at boot) and, for a box restored from a snapshot, everything the host sends in
// kIdentity: clock, RNG seed, machine id, hostname (docs/protocol.md, "Identity").
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "agent/init/system_control.h"
#include "base/result.h"
#include "proto/identity.h"

namespace hutch::agent {

inline constexpr std::string_view kHostnameParam = "hutch.hostname";

using proto::isValidHostname;

// The files that carry the identity. Tests point them into a temp directory.
struct IdentityFiles {
  std::string hostname = "/etc/hostname";
  std::string hosts = "/etc/hosts";
  std::string machine_id = "/etc/machine-id";
  // Written only if it exists and is not a symlink (Debian links it to /etc/machine-id).
  std::string dbus_machine_id = "/var/lib/dbus/machine-id";

  // The same paths below root ("/tmp/x" -> "/tmp/x/etc/hostname", ...).
  static IdentityFiles under(const std::string& root);
};

// Sets the hostname from hutch.hostname= in cmdline (sethostname, /etc/hostname, /etc/hosts);
// no parameter leaves it unchanged.
Result<> applyHostname(std::string_view cmdline, SystemControl& system,
                       const IdentityFiles& files = {});

// sethostname, then `files.hostname` and the 127.0.1.1 line of `files.hosts`.
Result<> setHostname(std::string_view name, SystemControl& system, const IdentityFiles& files);

// Applies every part of identity except grow_root, in this order: the clock (first, so that
// files written next get the right times), the RNG seed, the machine id, the hostname. Every
// part is attempted even if an earlier one fails; the error names all that failed.
// identity must be valid (proto::validate).
Result<> applyIdentity(const proto::Identity& identity, SystemControl& system,
                       const IdentityFiles& files);

// The hosts file text with name on the 127.0.1.1 line: the first 127.0.1.1 line becomes
// "127.0.1.1\tNAME" and other 127.0.1.1 lines are dropped (the previous box's name must not
// linger); with no such line one is appended, unless a line already names name.
std::string withHostsEntry(std::string_view hosts, std::string_view name);

// Rewrites the hosts file through withHostsEntry (nothing is written if nothing changes).
Result<> setHostsEntry(const std::string& hosts_path, std::string_view name);

// Replaces path's content: a temp file renamed over it, or an in-place rewrite where rename
// cannot replace it (a bind mount).
Result<> replaceFile(const std::string& path, std::string_view content, mode_t mode);
// replaceFile unless path already has exactly that content (a read-only root stays untouched).
Result<> updateFile(const std::string& path, std::string_view content, mode_t mode);

}  // namespace hutch::agent

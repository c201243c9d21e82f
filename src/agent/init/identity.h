// The box's identity inside the guest: today its hostname, from the kernel command line
// (hutch.hostname=NAME). A restored clone will get a new identity from the host the same way
// (hostname, RNG reseed, clock) - that lands here.
#pragma once

#include <string>
#include <string_view>

#include "base/result.h"

namespace hutch::agent {

inline constexpr std::string_view kHostnameParam = "hutch.hostname";

// A valid hostname: 1-64 characters of [A-Za-z0-9-.], not starting with '-' or '.'.
bool isValidHostname(std::string_view name);

// Sets the hostname from hutch.hostname= in cmdline (and makes it resolvable through
// /etc/hosts); no parameter leaves it unchanged.
Result<> applyHostname(std::string_view cmdline);

// Appends "127.0.1.1 NAME" to the hosts file unless a line already names NAME.
Result<> addHostsEntry(const std::string& hosts_path, std::string_view name);

}  // namespace hutch::agent

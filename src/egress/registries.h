// The package registries this host's npm and pip are configured to reach, read from their own
// configuration at run time (never written down in hutch): the `npm` and `pypi` presets of the
// egress policy (policy.h).
//
//   npm:  `npm config list --json` (what npm itself resolves: its environment variables, user
//         and global npmrc, its built-in default): "registry" and every "@scope:registry".
//   pypi: the index pip uses, `python3 -m pip config list` and PIP_INDEX_URL,
//         PIP_EXTRA_INDEX_URL, PIP_FIND_LINKS (URLs only); when no index is configured, pip's
//         built-in one and the domain it serves files from (pip's own PyPI model).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace hutch::egress {

// One registry: the URL it was configured as, the host and the port a box connects to, and the
// configuration key it came from: npm's "registry" or "@scope:registry"; pip's "index-url",
// "extra-index-url" or "find-links"; "" for pip's built-in index and its files domain (a box's
// pip has the same default, so there is nothing to tell it).
struct Registry {
  std::string url;
  std::string host;
  uint16_t port = 443;
  std::string key;
  bool operator==(const Registry&) const = default;
};

// What the readers run and read: a command's standard output (or why it failed), and the
// environment. Tests give fakes; hostProbe() runs the host's npm and python3.
struct RegistryProbe {
  std::function<Result<std::string>(const std::vector<std::string>& argv)> run;
  std::map<std::string, std::string> env;
};
RegistryProbe hostProbe();

// "https://registry.example.org/some/path" -> host registry.example.org, port 443. URLs that are
// not http(s) (local paths, file:) are kInvalidArgument.
Result<Registry> parseRegistryUrl(const std::string& url);

Result<std::vector<Registry>> npmRegistries(const RegistryProbe& probe);
Result<std::vector<Registry>> pypiRegistries(const RegistryProbe& probe);

// npmRegistries or pypiRegistries ("npm", "pypi") of this host, asked at most once a minute:
// asking runs npm or python3 (~0.3 s), and policies are parsed on hutchd's event loop.
Result<std::vector<Registry>> hostRegistries(std::string_view name);

// What a box's npm and pip are told, so that they use the registries the wall lets them reach
// (the host's, which may not be npm's and pip's defaults): /etc/npmrc and /etc/pip.conf, each
// holding the host's registries that `allowed` accepts (host and port), with any credentials
// in their URLs left out (a key stays on the host). Empty when there is nothing to say. Each
// starts with kBoxRegistryMark.
//
// When the host's npm or pip trusts certificate authorities of its own for its registries (npm's
// `cafile`, pip's `cert`: a TLS-inspecting proxy's, a private registry's), the box gets that
// bundle too (ca_pem, written to kBoxRegistryCa) and its npmrc and pip.conf point at it: TLS to
// a registry goes through end to end, so the box must trust what the host trusts there.
struct BoxRegistryFiles {
  std::string npmrc;
  std::string pip_conf;
  std::string ca_pem;
};
inline constexpr std::string_view kBoxRegistryMark = "# Written by hutch";
inline constexpr std::string_view kBoxRegistryCa = "/etc/hutch/registry-ca.pem";
BoxRegistryFiles boxRegistryFiles(const std::vector<Registry>& npm,
                                  const std::vector<Registry>& pypi,
                                  const std::function<bool(const Registry&)>& allowed,
                                  const std::string& ca_pem = {});

// The CA bundles this host's npm (`npm config get cafile`) and pip (PIP_CERT, `pip config list`
// cert) are configured with: the files' paths, each once. Empty when they use their defaults.
std::vector<std::string> registryCaFiles(const RegistryProbe& probe);
// The certificates of those files on this host, concatenated (each file once), asked at most
// once a minute; empty when there are none or they cannot be read.
std::string hostRegistryCa();

}  // namespace hutch::egress

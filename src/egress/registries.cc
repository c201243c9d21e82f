#include "egress/registries.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sys/run.h"

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX, not in unistd.h

namespace hutch::egress {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// The value of an environment variable whatever its case (npm reads npm_config_* in any case).
std::string envValue(const RegistryProbe& probe, const std::string& name) {
  for (const auto& [key, value] : probe.env) {
    if (lower(key) == lower(name)) return value;
  }
  return "";
}

// Each configured URL once (two scopes on one host are two entries: a box's npmrc names both).
void addUnique(std::vector<Registry>& out, Registry r, std::string key) {
  r.key = std::move(key);
  if (std::find(out.begin(), out.end(), r) == out.end()) out.push_back(std::move(r));
}

// Whitespace-separated URLs (pip's extra-index-url and find-links take several); local paths
// and file: URLs are not registries a box reaches and are skipped.
void addUrls(std::vector<Registry>& out, const std::string& text, const std::string& key) {
  std::istringstream in(text);
  for (std::string url; in >> url;) {
    if (auto r = parseRegistryUrl(url)) addUnique(out, std::move(*r), key);
  }
}

// "https://user:secret@host/x" -> "https://host/x": credentials stay on the host.
std::string withoutCredentials(const std::string& url) {
  auto scheme = url.find("://");
  if (scheme == std::string::npos) return url;
  auto authority_end = url.find_first_of("/?#", scheme + 3);
  auto at = url.rfind('@', authority_end == std::string::npos ? url.size() : authority_end);
  if (at == std::string::npos || at < scheme + 3) return url;
  return url.substr(0, scheme + 3) + url.substr(at + 1);
}

std::string unquote(std::string s) {
  if (s.size() >= 2 && (s.front() == '\'' || s.front() == '"') && s.back() == s.front()) {
    s = s.substr(1, s.size() - 2);
  }
  return s;
}

// `pip config list` as key -> value (section dropped, quotes removed; the first of a key wins,
// as pip lists the files it merges in order).
std::map<std::string, std::string> pipConfig(const RegistryProbe& probe) {
  std::map<std::string, std::string> config;
  auto listed = probe.run({"python3", "-m", "pip", "config", "list"});
  if (!listed) return config;
  std::istringstream in(*listed);
  for (std::string line; std::getline(in, line);) {
    auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string key = line.substr(0, eq);
    key = key.substr(key.find('.') == std::string::npos ? 0 : key.find('.') + 1);
    config.emplace(key, unquote(line.substr(eq + 1)));
  }
  return config;
}

}  // namespace

RegistryProbe hostProbe() {
  RegistryProbe probe;
  probe.run = [](const std::vector<std::string>& argv) { return sys::runCapture(argv); };
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    auto eq = entry.find('=');
    if (eq != std::string::npos) probe.env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return probe;
}

Result<Registry> parseRegistryUrl(const std::string& url) {
  std::string rest;
  uint16_t port = 0;
  if (lower(url).starts_with("https://")) {
    rest = url.substr(8);
    port = 443;
  } else if (lower(url).starts_with("http://")) {
    rest = url.substr(7);
    port = 80;
  } else {
    return fail(Errc::kInvalidArgument, fmt::format("'{}' is not an http(s) URL", url));
  }
  std::string authority = rest.substr(0, rest.find_first_of("/?#"));
  if (auto at = authority.rfind('@'); at != std::string::npos) authority = authority.substr(at + 1);
  std::string host = authority;
  if (auto colon = authority.rfind(':');
      colon != std::string::npos && authority.find(']') == std::string::npos) {
    host = authority.substr(0, colon);
    std::string digits = authority.substr(colon + 1);
    if (digits.empty() || digits.size() > 5 ||
        !std::all_of(digits.begin(), digits.end(),
                     [](unsigned char c) { return std::isdigit(c); }) ||
        std::stoul(digits) == 0 || std::stoul(digits) > 65535) {
      return fail(Errc::kInvalidArgument, fmt::format("'{}' has a bad port", url));
    }
    port = static_cast<uint16_t>(std::stoul(digits));
  }
  if (host.empty()) return fail(Errc::kInvalidArgument, fmt::format("'{}' names no host", url));
  return Registry{url, lower(host), port};
}

Result<std::vector<Registry>> npmRegistries(const RegistryProbe& probe) {
  auto listed = probe.run({"npm", "config", "list", "--json"});
  if (!listed) {
    return fail(Errc::kFailedPrecondition,
                fmt::format("The npm preset reads the registry from this host's npm "
                            "configuration, and `npm config list --json` failed ({}): install "
                            "npm on the host, or allow the registry's domain in an allow rule",
                            listed.error().message()));
  }
  // npm may print warnings around the document.
  const std::string& text = *listed;
  auto open = text.find('{');
  auto close = text.rfind('}');
  nlohmann::json config =
      open == std::string::npos || close == std::string::npos
          ? nlohmann::json()
          : nlohmann::json::parse(text.substr(open, close - open + 1), nullptr, false);
  if (!config.is_object()) {
    return fail(Errc::kFailedPrecondition,
                "The npm preset could not read `npm config list --json` on this host (not a JSON "
                "object): allow the registry's domain in an allow rule instead");
  }
  std::vector<Registry> out;
  for (const auto& [key, value] : config.items()) {
    const bool registry = key == "registry" || (key.starts_with("@") && key.ends_with(":registry"));
    if (registry && value.is_string()) {
      if (auto r = parseRegistryUrl(value.get<std::string>())) addUnique(out, std::move(*r), key);
    }
  }
  if (out.empty()) {
    return fail(Errc::kFailedPrecondition,
                "This host's npm configuration names no http(s) registry: set `registry=` in "
                "its npmrc, or allow the registry's domain in an allow rule");
  }
  return out;
}

Result<std::vector<Registry>> pypiRegistries(const RegistryProbe& probe) {
  std::string index = envValue(probe, "PIP_INDEX_URL");
  std::string extra = envValue(probe, "PIP_EXTRA_INDEX_URL");
  std::string links = envValue(probe, "PIP_FIND_LINKS");
  // Configuration files (global, user, site), as pip itself merges them.
  const auto config = pipConfig(probe);
  auto configured = [&](const char* key, std::string& value) {
    if (auto it = config.find(key); it != config.end() && value.empty()) value = it->second;
  };
  configured("index-url", index);
  configured("extra-index-url", extra);
  configured("find-links", links);
  std::vector<Registry> out;
  if (!index.empty()) {
    auto r = parseRegistryUrl(index);
    if (!r) {
      return fail(Errc::kFailedPrecondition,
                  fmt::format("This host's pip index-url {} is not an http(s) URL a box can "
                              "reach",
                              index));
    }
    addUnique(out, std::move(*r), "index-url");
  } else {
    // pip's built-in index, and the domain its pages send downloads to.
    auto builtin = probe.run({"python3", "-c",
                              "from pip._internal.models.index import PyPI\n"
                              "print(PyPI.url)\nprint(PyPI.file_storage_domain)"});
    if (!builtin) {
      return fail(Errc::kFailedPrecondition,
                  fmt::format("The pypi preset reads the index from this host's pip, and pip "
                              "could not be asked ({}): install python3-pip on the host, set "
                              "PIP_INDEX_URL, or allow the index's domains in an allow rule",
                              builtin.error().message()));
    }
    std::istringstream in(*builtin);
    std::string url;
    std::string files;
    std::getline(in, url);
    std::getline(in, files);
    auto r = parseRegistryUrl(url);
    if (!r || files.empty()) {
      return fail(Errc::kFailedPrecondition,
                  "pip on this host did not say which index it uses: set PIP_INDEX_URL, or allow "
                  "the index's domains in an allow rule");
    }
    addUnique(out, std::move(*r), "");
    addUnique(out, Registry{"https://" + files + "/", lower(files), 443}, "");
  }
  addUrls(out, extra, "extra-index-url");
  addUrls(out, links, "find-links");
  return out;
}

Result<std::vector<Registry>> hostRegistries(std::string_view name) {
  struct Cached {
    std::chrono::steady_clock::time_point at;
    Result<std::vector<Registry>> registries = std::vector<Registry>{};
  };
  static std::mutex mutex;
  static std::map<std::string, Cached, std::less<>> cache;
  std::lock_guard lock(mutex);
  auto now = std::chrono::steady_clock::now();
  auto it = cache.find(name);
  if (it == cache.end() || now - it->second.at > std::chrono::minutes(1)) {
    RegistryProbe probe = hostProbe();
    Cached fresh{now, name == "npm" ? npmRegistries(probe) : pypiRegistries(probe)};
    it = cache.insert_or_assign(std::string(name), std::move(fresh)).first;
  }
  return it->second.registries;
}

std::vector<std::string> registryCaFiles(const RegistryProbe& probe) {
  std::vector<std::string> files;
  auto add = [&](std::string path) {
    while (!path.empty() && std::isspace(static_cast<unsigned char>(path.back()))) path.pop_back();
    path = unquote(path);
    if (path.empty() || path == "null" || path == "undefined" || path[0] != '/') return;
    if (std::find(files.begin(), files.end(), path) == files.end()) files.push_back(path);
  };
  if (auto cafile = probe.run({"npm", "config", "get", "cafile"})) add(*cafile);
  std::string cert = envValue(probe, "PIP_CERT");
  if (cert.empty()) {
    const auto config = pipConfig(probe);
    if (auto it = config.find("cert"); it != config.end()) cert = it->second;
  }
  add(cert);
  return files;
}

std::string hostRegistryCa() {
  static std::mutex mutex;
  static std::chrono::steady_clock::time_point at;
  static std::string pem;
  std::lock_guard lock(mutex);
  auto now = std::chrono::steady_clock::now();
  if (at == std::chrono::steady_clock::time_point() || now - at > std::chrono::minutes(1)) {
    at = now;
    pem.clear();
    for (const std::string& file : registryCaFiles(hostProbe())) {
      std::ifstream in(file);
      std::stringstream text;
      text << in.rdbuf();
      // Certificates only: nothing else of the file goes into a box.
      if (in && text.str().find("-----BEGIN CERTIFICATE-----") != std::string::npos &&
          text.str().find("PRIVATE KEY") == std::string::npos) {
        pem += text.str();
        if (!pem.empty() && pem.back() != '\n') pem += '\n';
      }
    }
  }
  return pem;
}

BoxRegistryFiles boxRegistryFiles(const std::vector<Registry>& npm,
                                  const std::vector<Registry>& pypi,
                                  const std::function<bool(const Registry&)>& allowed,
                                  const std::string& ca_pem) {
  BoxRegistryFiles files;
  const std::string ca_path(kBoxRegistryCa);
  std::string npm_lines;
  for (const Registry& r : npm) {
    if (!r.key.empty() && allowed(r)) npm_lines += r.key + "=" + withoutCredentials(r.url) + "\n";
  }
  if (!npm_lines.empty() && !ca_pem.empty()) npm_lines += "cafile=" + ca_path + "\n";
  if (!npm_lines.empty()) {
    files.npmrc = fmt::format(
        "{} from this host's npm configuration: the registries this box's network policy lets "
        "it reach.\n# hutch rewrites it when the box starts or its policy changes; take this "
        "first line out to keep a file of your own.\n{}",
        kBoxRegistryMark, npm_lines);
  }
  // pip takes one value per key; extra-index-url and find-links take several, space-separated.
  std::map<std::string, std::string> pip;
  for (const Registry& r : pypi) {
    if (r.key.empty() || !allowed(r)) continue;
    std::string& value = pip[r.key];
    if (r.key == "index-url" && !value.empty()) continue;
    value += (value.empty() ? "" : " ") + withoutCredentials(r.url);
    // pip ignores an index over plain HTTP unless its host is trusted (the host's pip must have
    // been told the same to use it).
    if (lower(r.url).starts_with("http://")) {
      std::string& trusted = pip["trusted-host"];
      if ((" " + trusted + " ").find(" " + r.host + " ") == std::string::npos) {
        trusted += (trusted.empty() ? "" : " ") + r.host;
      }
    }
  }
  // A box whose pip keeps its built-in index (PyPI) still needs the host's CA to reach it
  // through a TLS-inspecting proxy: then pip.conf says only that.
  const bool pypi_reachable = std::any_of(pypi.begin(), pypi.end(), allowed);
  if (!pip.empty() || (pypi_reachable && !ca_pem.empty())) {
    files.pip_conf = fmt::format(
        "{} from this host's pip configuration: the indexes this box's network policy lets it "
        "reach.\n# hutch rewrites it when the box starts or its policy changes; take this "
        "first line out to keep a file of your own.\n[global]\n",
        kBoxRegistryMark);
    for (const auto& [key, value] : pip) files.pip_conf += key + " = " + value + "\n";
    if (!ca_pem.empty()) files.pip_conf += "cert = " + ca_path + "\n";
  }
  if (!ca_pem.empty() && (!files.npmrc.empty() || !files.pip_conf.empty())) files.ca_pem = ca_pem;
  return files;
}

}  // namespace hutch::egress

#include "net/secrets.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <regex>

#include "egress/policy.h"
#include "sys/files.h"

namespace hutch::net {

namespace fs = std::filesystem;
using nlohmann::json;

Result<> validateSecret(const Secret& s) {
  static const std::regex kName("^[A-Z_][A-Z0-9_]{0,63}$");
  if (!std::regex_match(s.name, kName)) {
    return fail(Errc::kInvalidArgument,
                fmt::format("'{}' is not a secret name: use A-Z, 0-9 and _ (up to 64, not starting "
                            "with a digit); the box sees it as that environment variable",
                            s.name));
  }
  if (s.value.empty()) {
    return fail(Errc::kInvalidArgument, "The secret's value is empty: pass it on standard input");
  }
  if (s.value.find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos ||
      s.value.size() > 16384) {
    return fail(Errc::kInvalidArgument,
                "A secret's value must be one line of at most 16384 bytes without NUL bytes (it "
                "goes into a header)");
  }
  if (s.domains.empty()) {
    return fail(Errc::kInvalidArgument,
                "Bind the secret to at least one domain (--domain api.example.com): it is only "
                "ever sent there");
  }
  json allow = json::array();
  for (const auto& d : s.domains) allow.push_back({{"domain", d}});
  if (auto parsed = egress::parsePolicy(json{{"allow", allow}}); !parsed) {
    return fail(parsed.error().withContext("Bad secret domain"));
  }
  for (const auto& d : s.domains) {
    if (auto problem = egress::secretDomainProblem(d)) {
      return fail(Errc::kInvalidArgument, "Bad secret domain: " + *problem);
    }
  }
  static const std::regex kHeader("^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$");
  if (!s.header.empty() && !std::regex_match(s.header, kHeader)) {
    return fail(Errc::kInvalidArgument, fmt::format("'{}' is not an HTTP header name", s.header));
  }
  auto at = s.format.find("{value}");
  if (at == std::string::npos || s.format.find("{value}", at + 1) != std::string::npos ||
      s.format.find_first_of("\r\n") != std::string::npos) {
    return fail(Errc::kInvalidArgument,
                "The format must contain {value} exactly once and no line breaks, like "
                "'Bearer {value}'");
  }
  return ok();
}

json describeSecret(const Secret& s) {
  return {{"name", s.name},
          {"domains", s.domains},
          {"header", s.header},
          {"format", s.format},
          {"updated_at", s.updated_at}};
}

std::string makePlaceholder(const std::string& name) {
  unsigned char bytes[16];
  RAND_bytes(bytes, sizeof bytes);
  std::string hex;
  for (unsigned char b : bytes) hex += fmt::format("{:02x}", b);
  return "hutch-secret-" + name + "-" + hex;
}

Result<SecretStore> SecretStore::open(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail(Errc::kInternal, "Cannot create " + dir.string() + ": " + ec.message());
  if (::chmod(dir.c_str(), 0700) != 0) {
    return fail(sysError("Cannot make " + dir.string() + " private", errno));
  }
  return SecretStore(dir);
}

SecretStore SecretStore::forOwner(const std::string& owner_id) const {
  if (owner_id.empty()) return *this;
  // Key ids are hex digits; anything else must never become a path.
  std::string safe;
  for (char c : owner_id) safe += std::isxdigit(static_cast<unsigned char>(c)) ? c : '_';
  return SecretStore(dir_ / "owners" / safe);
}

Result<> SecretStore::ensureDir() const {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return fail(Errc::kInternal, "Cannot create " + dir_.string() + ": " + ec.message());
  if (::chmod(dir_.c_str(), 0700) != 0) {
    return fail(sysError("Cannot make " + dir_.string() + " private", errno));
  }
  return ok();
}

fs::path SecretStore::fileFor(const std::string& name) const {
  return dir_ / (name + ".json");
}

Result<> SecretStore::put(Secret secret) {
  HUTCH_TRY_VOID(validateSecret(secret));
  secret.updated_at = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  json doc = describeSecret(secret);
  doc["value"] = secret.value;
  HUTCH_TRY_VOID(ensureDir());
  return sys::writeFileAtomic(fileFor(secret.name), doc.dump(), 0600);
}

Result<Secret> SecretStore::get(const std::string& name) const {
  Secret probe{.name = name, .value = "x", .domains = {"x.test"}};
  if (!validateSecret(probe)) {
    return fail(Errc::kNotFound, fmt::format("No secret named '{}'", name));
  }
  auto text = sys::readFile(fileFor(name));
  if (!text) {
    return fail(Errc::kNotFound,
                fmt::format("No secret named '{}': set it with 'hutch secret set {}'", name, name));
  }
  json doc = json::parse(*text, nullptr, false);
  if (!doc.is_object()) {
    return fail(Errc::kInternal, fmt::format("The secret file of '{}' is corrupt", name));
  }
  Secret s;
  try {
    s.name = doc.at("name").get<std::string>();
    s.value = doc.at("value").get<std::string>();
    s.domains = doc.at("domains").get<std::vector<std::string>>();
    s.header = doc.value("header", "");
    s.format = doc.value("format", "{value}");
    s.updated_at = doc.value("updated_at", int64_t{0});
  } catch (const json::exception&) {
    return fail(Errc::kInternal, fmt::format("The secret file of '{}' is corrupt", name));
  }
  return s;
}

Result<std::vector<Secret>> SecretStore::list() const {
  std::vector<Secret> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    if (entry.path().extension() != ".json") continue;
    HUTCH_TRY(Secret s, get(entry.path().stem().string()));
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(),
            [](const Secret& a, const Secret& b) { return a.name < b.name; });
  return out;
}

Result<> SecretStore::remove(const std::string& name) {
  HUTCH_TRY(Secret s, get(name));
  std::error_code ec;
  fs::remove(fileFor(s.name), ec);
  if (ec) return fail(Errc::kInternal, "Cannot remove the secret " + name + ": " + ec.message());
  return ok();
}

}  // namespace hutch::net

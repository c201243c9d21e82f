#include "image/registry_auth.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sys/files.h"

namespace hutch::image {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string base64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(bytes.data()),
                          static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string unbase64(std::string_view text) {
  std::string out(3 * ((text.size() + 3) / 4), '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()),
                          static_cast<int>(text.size()));
  if (n < 0) return {};
  out.resize(static_cast<size_t>(n));
  while (!text.empty() && text.back() == '=') {  // EVP_DecodeBlock counts padding as zeros
    text.remove_suffix(1);
    if (!out.empty()) out.pop_back();
  }
  return out;
}

Result<json> load(const fs::path& authfile) {
  std::error_code ec;
  if (!fs::exists(authfile, ec)) return json{{"auths", json::object()}};
  std::ifstream in(authfile);
  std::stringstream text;
  text << in.rdbuf();
  json j = json::parse(text.str(), nullptr, false);
  if (!j.is_object() || (j.contains("auths") && !j["auths"].is_object())) {
    return fail(Errc::kFailedPrecondition,
                fmt::format("{} is not a registry auth file; remove it and log in again",
                            authfile.string()));
  }
  if (!j.contains("auths")) j["auths"] = json::object();
  return j;
}

Result<> store(const fs::path& authfile, const json& j) {
  return sys::writeFileAtomic(authfile, j.dump(2) + "\n", 0600);
}

}  // namespace

Result<std::string> normalizeRegistry(std::string_view host) {
  std::string h;
  for (char c : host) h += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (h == "index.docker.io" || h == "registry-1.docker.io") return std::string("docker.io");
  auto bad = [&host] {
    return fail(Errc::kInvalidArgument,
                fmt::format("'{}' is not a registry: give a host name or address with an "
                            "optional port, such as registry.example:5000 or docker.io",
                            host));
  };
  std::string_view rest(h);
  if (rest.starts_with('[')) {
    size_t close = rest.find(']');
    if (close == std::string_view::npos || close == 1) return bad();
    for (char c : rest.substr(1, close - 1)) {
      if (!std::isxdigit(static_cast<unsigned char>(c)) && c != ':' && c != '.') return bad();
    }
    rest.remove_prefix(close + 1);
  } else {
    size_t end = rest.find(':');
    std::string_view name = rest.substr(0, end);
    if (name.empty() || name.size() > 253 || name.front() == '.' || name.front() == '-') {
      return bad();
    }
    for (char c : name) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') return bad();
    }
    rest.remove_prefix(name.size());
  }
  if (!rest.empty()) {
    if (rest.front() != ':' || rest.size() < 2 || rest.size() > 6) return bad();
    for (char c : rest.substr(1)) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return bad();
    }
  }
  return h;
}

Result<std::vector<RegistryLogin>> listLogins(const fs::path& authfile) {
  HUTCH_TRY(json j, load(authfile));
  std::vector<RegistryLogin> out;
  for (const auto& [registry, entry] : j["auths"].items()) {
    std::string user;
    if (entry.is_object() && entry.value("auth", json()).is_string()) {
      std::string pair = unbase64(entry["auth"].get<std::string>());
      user = pair.substr(0, pair.find(':'));
    }
    out.push_back({registry, user});
  }
  return out;
}

Result<> saveLogin(const fs::path& authfile, const std::string& registry, std::string_view username,
                   std::string_view password) {
  if (username.empty() || username.find(':') != std::string_view::npos) {
    return fail(Errc::kInvalidArgument, "Give a user name without ':' (--username)");
  }
  if (password.empty()) {
    return fail(Errc::kInvalidArgument, "Give a password or token (--password-stdin)");
  }
  HUTCH_TRY(json j, load(authfile));
  j["auths"][registry] =
      json{{"auth", base64(std::string(username) + ":" + std::string(password))}};
  return store(authfile, j);
}

Result<> removeLogin(const fs::path& authfile, const std::string& registry) {
  HUTCH_TRY(json j, load(authfile));
  if (!j["auths"].contains(registry)) {
    return fail(Errc::kNotFound, fmt::format("Not logged in to {}", registry));
  }
  j["auths"].erase(registry);
  return store(authfile, j);
}

}  // namespace hutch::image

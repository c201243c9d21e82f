#include "api/auth.h"

#include <fmt/format.h>
#include <openssl/evp.h>
#include <spdlog/spdlog.h>
#include <sys/random.h>

#include <boost/beast/http/field.hpp>
#include <cerrno>

#include "api/encoding.h"

namespace hutch::api {

namespace http = boost::beast::http;

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool startsWithNoCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) !=
        std::tolower(static_cast<unsigned char>(prefix[i]))) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::string Principal::describe() const {
  return kind == Kind::kHost ? std::string("the host administrator") : "key " + key_name;
}

std::string generateKeySecret() {
  unsigned char bytes[20];
  size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) std::abort();  // the kernel's RNG cannot fail here; a key without it is no key
    got += static_cast<size_t>(n);
  }
  return "e2b_" + hexEncode(bytes, sizeof bytes);
}

std::string hashKeySecret(std::string_view secret) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(secret.data(), secret.size(), md, &n, EVP_sha256(), nullptr);
  return hexEncode(md, n);
}

std::string offeredKey(const http::fields& headers) {
  if (auto it = headers.find(http::field::authorization); it != headers.end()) {
    std::string_view value(it->value().data(), it->value().size());
    value = trim(value);
    if (startsWithNoCase(value, "bearer ")) return std::string(trim(value.substr(7)));
  }
  if (auto it = headers.find("X-API-Key"); it != headers.end()) {
    return std::string(trim(std::string_view(it->value().data(), it->value().size())));
  }
  if (auto it = headers.find(http::field::sec_websocket_protocol); it != headers.end()) {
    std::string_view list(it->value().data(), it->value().size());
    while (!list.empty()) {
      size_t comma = list.find(',');
      std::string_view item = trim(list.substr(0, comma));
      if (item.starts_with("hutch.key.")) return std::string(item.substr(10));
      if (comma == std::string_view::npos) break;
      list.remove_prefix(comma + 1);
    }
  }
  return {};
}

void KeyService::report(const std::string& what, const storage::ApiKey& key,
                        const observe::Actor& actor) {
  nlohmann::json data{{"key_id", key.id}, {"name", key.name}, {"admin", key.admin}};
  if (events_) events_->publish("key." + what, {.owner_id = key.id}, data);
  if (!audit_) return;
  auto written = audit_->append({.type = "key." + what.substr(0, what.size() - 1),
                                 .actor = actor,
                                 .owner_id = key.id,
                                 .data = std::move(data)});
  if (!written) spdlog::error("audit: key.{} not recorded: {}", what, written.error().describe());
}

Result<KeyService::Created> KeyService::create(const NewKey& spec, const observe::Actor& actor) {
  HUTCH_TRY_VOID(box::validateName(spec.name));
  Created created;
  created.secret = generateKeySecret();
  created.key.id = box::randomId();
  created.key.name = spec.name;
  created.key.hash = hashKeySecret(created.secret);
  created.key.admin = spec.admin;
  created.key.quota = spec.quota;
  created.key.created_at = box::unixNow();
  HUTCH_TRY_VOID(store_.insert(created.key));
  report("created", created.key, actor);
  return created;
}

Result<std::vector<storage::ApiKey>> KeyService::list() {
  return store_.list();
}

Result<storage::ApiKey> KeyService::remove(const std::string& name, const observe::Actor& actor) {
  HUTCH_TRY(storage::ApiKey key, store_.findByName(name));
  HUTCH_TRY_VOID(store_.remove(name));
  touched_.erase(key.id);
  report("removed", key, actor);
  return key;
}

Result<Principal> KeyService::authenticate(std::string_view secret) {
  if (secret.empty()) {
    return fail(Errc::kUnauthenticated,
                "This endpoint needs an API key: send 'Authorization: Bearer KEY' (hutch key "
                "create makes one)");
  }
  auto key = store_.findByHash(hashKeySecret(secret));
  if (!key) {
    if (key.error().code() != Errc::kNotFound) return fail(key.error());
    return fail(Errc::kUnauthenticated,
                "The API key is not valid (unknown or removed); ask for a new one (hutch key "
                "create)");
  }
  auto now = std::chrono::steady_clock::now();
  auto& last = touched_[key->id];
  if (last == std::chrono::steady_clock::time_point{} || now - last > std::chrono::minutes(1)) {
    last = now;
    (void)store_.touch(key->id, box::unixNow());
  }
  Principal p;
  p.kind = Principal::Kind::kKey;
  p.key_id = key->id;
  p.key_name = key->name;
  p.admin = key->admin;
  p.quota = key->quota;
  return p;
}

box::Quota KeyService::quotaOf(const std::string& owner_id) {
  if (owner_id.empty()) return {};
  auto key = store_.findById(owner_id);
  return key ? key->quota : box::Quota{};
}

void FailureLimiter::prune(Clock::time_point now) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    it = now - it->second.first >= window_ ? entries_.erase(it) : std::next(it);
  }
}

std::optional<int64_t> FailureLimiter::refused(const std::string& address, Clock::time_point now) {
  prune(now);
  auto it = entries_.find(address);
  if (it == entries_.end() || it->second.failures < limit_) return std::nullopt;
  auto left = std::chrono::duration_cast<std::chrono::seconds>(window_ - (now - it->second.first));
  return std::max<int64_t>(1, left.count());
}

void FailureLimiter::recordFailure(const std::string& address, Clock::time_point now) {
  prune(now);
  // Bounded: a client with many addresses cannot grow this without limit.
  if (entries_.size() >= kMaxTracked && !entries_.contains(address)) {
    entries_.erase(entries_.begin());
  }
  auto [it, fresh] = entries_.try_emplace(address, Entry{now, 0});
  ++it->second.failures;
}

}  // namespace hutch::api

// Who a request comes from, and the keys that say so. The HTTP server runs every request through
// authenticate() (TCP) or takes the unix socket's caller as the host administrator; handlers
// receive the Principal and never check credentials themselves (docs/api.md "Remote access").
#pragma once

#include <boost/beast/http/fields.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <ostream>  // boost 1.74 string_view needs it before beast
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "box/box.h"
#include "observe/audit_log.h"
#include "observe/event_bus.h"
#include "storage/key_store.h"

namespace hutch::api {

struct Principal {
  enum class Kind { kHost, kKey };
  Kind kind = Kind::kHost;
  std::string key_id;    // kKey only
  std::string key_name;  // kKey only
  bool admin = true;     // the host is; a key only if made with admin
  box::Quota quota;      // the key's limits (none for the host)

  static Principal host() { return {}; }
  // Admins and the host see every owner's boxes; other keys only their own.
  bool seesEverything() const { return kind == Kind::kHost || admin; }
  // What boxes made by this principal record as their owner.
  box::Owner owner() const {
    return kind == Kind::kHost ? box::Owner{} : box::Owner{key_id, key_name};
  }
  // For messages: "the host administrator" or "key alice".
  std::string describe() const;
  // Who the audit log and events say acted (docs/observability.md).
  observe::Actor actor() const {
    return kind == Kind::kHost ? observe::Actor{} : observe::Actor{key_id, key_name};
  }
};

// A key's secret: "e2b_" and 40 lowercase hex digits (160 bits from getrandom). The prefix is
// the form older E2B SDKs insist on (docs/e2b.md).
std::string generateKeySecret();
// SHA-256 of the secret, lowercase hex: what the store keeps.
std::string hashKeySecret(std::string_view secret);

// The key a request offers: "Authorization: Bearer KEY", "X-API-Key: KEY", or (WebSocket
// upgrades from browsers, which cannot set headers) a "hutch.key.KEY" entry in
// Sec-WebSocket-Protocol. Empty when it offers none.
std::string offeredKey(const boost::beast::http::fields& headers);

struct NewKey {
  std::string name;
  bool admin = false;
  box::Quota quota;
};

class KeyService {
 public:
  explicit KeyService(storage::KeyStore& store) : store_(store) {}

  struct Created {
    storage::ApiKey key;
    std::string secret;  // shown once
  };
  // Key changes are events and audit records of `actor` (docs/observability.md).
  Result<Created> create(const NewKey& spec, const observe::Actor& actor = {});
  Result<std::vector<storage::ApiKey>> list();
  // Removes the key; returns its record (its id is what to close sessions of).
  Result<storage::ApiKey> remove(const std::string& name, const observe::Actor& actor = {});
  // Where key changes are reported; both may be null. They must outlive the service.
  void setActivity(observe::EventBus* events, observe::AuditLog* audit) {
    events_ = events;
    audit_ = audit;
  }
  // The principal a secret stands for; kUnauthenticated for an unknown or removed one.
  Result<Principal> authenticate(std::string_view secret);
  // The limits of the key that owns boxes recorded with owner id `owner_id` (none for the host
  // or a removed key).
  box::Quota quotaOf(const std::string& owner_id);

 private:
  void report(const std::string& what, const storage::ApiKey& key, const observe::Actor& actor);

  storage::KeyStore& store_;
  observe::EventBus* events_ = nullptr;
  observe::AuditLog* audit_ = nullptr;
  // last_used_at is written at most once a minute per key: not one SQLite write per request.
  std::map<std::string, std::chrono::steady_clock::time_point> touched_;
};

// Failed authentications per client address: after `limit` failures within `window`, further
// failed attempts from the address are answered 429 until the window since its first counted
// failure has passed. Requests whose key authenticates are never refused (the server checks the
// key first): many clients may share an address, and one bad key must not lock out the others.
class FailureLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  explicit FailureLimiter(unsigned limit = 10, Clock::duration window = std::chrono::minutes(1))
      : limit_(limit), window_(window) {}

  // Seconds to wait when `address` is refused now, else nullopt.
  std::optional<int64_t> refused(const std::string& address, Clock::time_point now);
  void recordFailure(const std::string& address, Clock::time_point now);

 private:
  struct Entry {
    Clock::time_point first;
    unsigned failures = 0;
  };
  static constexpr size_t kMaxTracked = 4096;
  void prune(Clock::time_point now);
  unsigned limit_;
  Clock::duration window_;
  std::map<std::string, Entry> entries_;
};

}  // namespace hutch::api

// SecretService: host secrets (docs/api.md "Network", docs/network.md) below the faces, beside
// KeyService. Every face that lists, sets or removes a secret goes through it; a face only
// translates. It
//   - scopes the store to the caller's own secrets (docs/api.md "Owners"): every principal, admin
//     keys and the host administrator included, sees and changes only the secrets it set (the
//     host's are the store's top level, a key's are under owners/<key id>/), because a box can
//     use only its owner's secrets;
//   - validates what is stored (net::validateSecret: name, value, domains, header, format);
//   - reports each change (created, replaced, removed) as an event and an audit record
//     (docs/observability.md) naming the secret, its owner and who acted, never its value.
// Values go in and never come out: every secret it returns has an empty value. Event loop only.
#pragma once

#include <string>
#include <vector>

#include "api/auth.h"
#include "base/result.h"
#include "net/secrets.h"
#include "observe/audit_log.h"
#include "observe/event_bus.h"

namespace hutch::api {

class SecretService {
 public:
  // `store` is the host's whole store (every owner's). `events` and `audit` may be null (hutchd
  // --no-events, --no-audit). All must outlive the service.
  SecretService(net::SecretStore& store, observe::EventBus* events, observe::AuditLog* audit)
      : store_(store), events_(events), audit_(audit) {}

  // The caller's secrets, sorted by name, without their values.
  Result<std::vector<net::Secret>> list(const Principal& caller) const;

  struct Stored {
    net::Secret secret;     // as stored (updated_at set), without its value
    bool replaced = false;  // the caller had a secret of that name before
  };
  // Creates or replaces the caller's secret of that name. kInvalidArgument (nothing stored,
  // nothing reported) when net::validateSecret refuses it.
  Result<Stored> put(const Principal& caller, const net::Secret& secret);

  // Removes the caller's secret; kNotFound when the caller has none of that name (another
  // owner's of the same name is not touched, nor named).
  Result<> remove(const Principal& caller, const std::string& name);

 private:
  net::SecretStore storeOf(const Principal& caller) const;
  // The event "secret.<done>" and the audit record "secret.<verb>".
  void report(const Principal& caller, const std::string& done, const std::string& verb,
              const std::string& name);

  net::SecretStore& store_;
  observe::EventBus* events_;
  observe::AuditLog* audit_;
};

}  // namespace hutch::api

// Host secrets: values that never enter a box. Each is a file <dir>/<NAME>.json, mode 0600 in a
// 0700 directory owned by root; values are never logged. A box gets a placeholder in its
// environment; hutch-egress swaps in the value for the secret's domains on the way out.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/result.h"

namespace hutch::net {

struct Secret {
  std::string name;   // [A-Z_][A-Z0-9_]{0,63}: also the variable name in the box's environment
  std::string value;  // never logged, never returned by the API
  std::vector<std::string> domains;  // where it may go: policy domain patterns (egress/policy.h)
  // The injection rule: with a header, requests to the domains get `header: format` with
  // {value} replaced (e.g. Authorization: Bearer {value}) and nothing else is touched; without,
  // the placeholder is replaced in request header values, never in the request target or body.
  std::string header;
  std::string format = "{value}";
  int64_t updated_at = 0;
  bool operator==(const Secret&) const = default;
};

// Checks the name, the domains (at least one, each a valid pattern and none as broad as "*" or
// "*.com": egress::secretDomainProblem), the header and the format ({value} once, no CR or LF);
// errors say what is accepted.
Result<> validateSecret(const Secret& secret);
// The JSON the API shows: everything but the value.
nlohmann::json describeSecret(const Secret& secret);
// A fresh placeholder for `name`: hutch-secret-NAME-<32 hex>, unguessable and never a value.
std::string makePlaceholder(const std::string& name);

// Secrets belong to their owner (docs/api.md "Owners"): the host's are <dir>/<NAME>.json, a
// key's are under <dir>/owners/<key id>/. A store object is one owner's view.
class SecretStore {
 public:
  static Result<SecretStore> open(const std::filesystem::path& dir);
  // The secrets of the owner with this key id ("": the host's, this store itself).
  SecretStore forOwner(const std::string& owner_id) const;
  Result<> put(Secret secret);  // replaces one of the same name
  Result<Secret> get(const std::string& name) const;
  Result<std::vector<Secret>> list() const;  // sorted by name
  Result<> remove(const std::string& name);

 private:
  explicit SecretStore(std::filesystem::path dir) : dir_(std::move(dir)) {}
  Result<> ensureDir() const;
  std::filesystem::path fileFor(const std::string& name) const;
  std::filesystem::path dir_;
};

}  // namespace hutch::net

// SshKeyStore: the SSH public keys with which an API key's owner reaches its boxes through
// hutchd --listen-ssh (docs/ssh.md), in the same SQLite database as the boxes (the schema is
// BoxStore's, one migration list). Event loop only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "storage/sqlite.h"

namespace hutch::storage {

struct SshKey {
  std::string owner_id;     // the API key's id; "" for the host administrator
  std::string owner_name;   // the API key's name, for messages
  std::string name;         // unique per owner
  std::string public_key;   // "ssh-ed25519 AAAA..." (type and base64, no comment)
  std::string fingerprint;  // "SHA256:...": unique among all keys
  int64_t created_at = 0;   // unix seconds
  bool operator==(const SshKey&) const = default;
};

class SshKeyStore {
 public:
  // `db` must outlive the store (BoxStore::database()).
  explicit SshKeyStore(Database& db) : db_(db) {}

  // kAlreadyExists if the owner has a key of that name, or any owner has that key.
  Result<> insert(const SshKey& key);
  Result<SshKey> findByFingerprint(const std::string& fingerprint);
  Result<std::vector<SshKey>> listOf(const std::string& owner_id);  // by name
  Result<> remove(const std::string& owner_id, const std::string& name);
  // Every key of an owner (its API key was removed).
  Result<> removeAllOf(const std::string& owner_id);

 private:
  Database& db_;
};

}  // namespace hutch::storage

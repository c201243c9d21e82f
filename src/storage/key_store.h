// KeyStore: the API keys hutchd accepts on TCP, in the same SQLite database as the boxes (the
// schema is BoxStore's, one migration list). Only hashes of the keys are kept. Event loop only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "box/box.h"
#include "storage/sqlite.h"

namespace hutch::storage {

struct ApiKey {
  std::string id;    // 12 hex digits: what boxes record as their owner
  std::string name;  // unique among keys; what people type
  std::string hash;  // SHA-256 of the key, lowercase hex
  bool admin = false;
  box::Quota quota;
  int64_t created_at = 0;    // unix seconds
  int64_t last_used_at = 0;  // unix seconds, 0: never
  bool operator==(const ApiKey&) const = default;
};

class KeyStore {
 public:
  // `db` must outlive the store (BoxStore::database()).
  explicit KeyStore(Database& db) : db_(db) {}

  Result<> insert(const ApiKey& key);  // kAlreadyExists if the name is taken
  Result<ApiKey> findByHash(const std::string& hash);
  Result<ApiKey> findByName(const std::string& name);
  Result<ApiKey> findById(const std::string& id);
  Result<std::vector<ApiKey>> list();  // by name
  Result<> remove(const std::string& name);
  Result<> touch(const std::string& id, int64_t when);

 private:
  Result<ApiKey> findOne(const char* column, const std::string& value, const std::string& what);
  Database& db_;
};

}  // namespace hutch::storage

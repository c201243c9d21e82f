#include "storage/key_store.h"

#include <fmt/format.h>

namespace hutch::storage {

namespace {

constexpr const char* kKeyColumns =
    "id, name, hash, admin, max_boxes, max_cpus, max_memory_mib, max_disk_mib, created_at, "
    "last_used_at";

ApiKey readKey(const Statement& st) {
  ApiKey k;
  k.id = st.columnText(0);
  k.name = st.columnText(1);
  k.hash = st.columnText(2);
  k.admin = st.columnInt(3) != 0;
  k.quota.max_boxes = static_cast<uint64_t>(st.columnInt(4));
  k.quota.max_cpus = static_cast<uint64_t>(st.columnInt(5));
  k.quota.max_memory_mib = static_cast<uint64_t>(st.columnInt(6));
  k.quota.max_disk_mib = static_cast<uint64_t>(st.columnInt(7));
  k.created_at = st.columnInt(8);
  k.last_used_at = st.columnInt(9);
  return k;
}

}  // namespace

Result<> KeyStore::insert(const ApiKey& key) {
  HUTCH_TRY(Statement exists, db_.prepare("SELECT 1 FROM api_keys WHERE name=?1"));
  exists.bind(1, key.name);
  HUTCH_TRY(bool taken, exists.step());
  if (taken) {
    return fail(Errc::kAlreadyExists,
                fmt::format("A key named '{}' exists; choose another name or remove it first "
                            "(hutch key rm {})",
                            key.name, key.name));
  }
  HUTCH_TRY(Statement st,
            db_.prepare(fmt::format("INSERT INTO api_keys ({}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, "
                                    "?8, ?9, ?10)",
                                    kKeyColumns)));
  st.bind(1, key.id)
      .bind(2, key.name)
      .bind(3, key.hash)
      .bind(4, int64_t{key.admin ? 1 : 0})
      .bind(5, static_cast<int64_t>(key.quota.max_boxes))
      .bind(6, static_cast<int64_t>(key.quota.max_cpus))
      .bind(7, static_cast<int64_t>(key.quota.max_memory_mib))
      .bind(8, static_cast<int64_t>(key.quota.max_disk_mib))
      .bind(9, key.created_at)
      .bind(10, key.last_used_at);
  return st.run();
}

Result<ApiKey> KeyStore::findOne(const char* column, const std::string& value,
                                 const std::string& what) {
  HUTCH_TRY(Statement st,
            db_.prepare(fmt::format("SELECT {} FROM api_keys WHERE {}=?1", kKeyColumns, column)));
  st.bind(1, value);
  HUTCH_TRY(bool row, st.step());
  if (!row) return fail(Errc::kNotFound, what);
  return readKey(st);
}

Result<ApiKey> KeyStore::findByHash(const std::string& hash) {
  return findOne("hash", hash, "No such key");
}

Result<ApiKey> KeyStore::findByName(const std::string& name) {
  return findOne("name", name,
                 fmt::format("No key named '{}' (see 'hutch key ls' for the keys)", name));
}

Result<ApiKey> KeyStore::findById(const std::string& id) {
  return findOne("id", id, fmt::format("No key with id '{}'", id));
}

Result<std::vector<ApiKey>> KeyStore::list() {
  HUTCH_TRY(Statement st,
            db_.prepare(fmt::format("SELECT {} FROM api_keys ORDER BY name", kKeyColumns)));
  std::vector<ApiKey> out;
  while (true) {
    HUTCH_TRY(bool row, st.step());
    if (!row) break;
    out.push_back(readKey(st));
  }
  return out;
}

Result<> KeyStore::remove(const std::string& name) {
  HUTCH_TRY(Statement st, db_.prepare("DELETE FROM api_keys WHERE name=?1"));
  st.bind(1, name);
  HUTCH_TRY_VOID(st.run());
  if (db_.changes() == 0) {
    return fail(Errc::kNotFound,
                fmt::format("No key named '{}' (see 'hutch key ls' for the keys)", name));
  }
  return ok();
}

Result<> KeyStore::touch(const std::string& id, int64_t when) {
  HUTCH_TRY(Statement st, db_.prepare("UPDATE api_keys SET last_used_at=?2 WHERE id=?1"));
  st.bind(1, id).bind(2, when);
  return st.run();
}

}  // namespace hutch::storage

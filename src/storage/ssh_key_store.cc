#include "storage/ssh_key_store.h"

#include <fmt/format.h>

namespace hutch::storage {

namespace {

constexpr const char* kColumns = "owner_id, owner_name, name, public_key, fingerprint, created_at";

SshKey readKey(const Statement& st) {
  SshKey k;
  k.owner_id = st.columnText(0);
  k.owner_name = st.columnText(1);
  k.name = st.columnText(2);
  k.public_key = st.columnText(3);
  k.fingerprint = st.columnText(4);
  k.created_at = st.columnInt(5);
  return k;
}

}  // namespace

Result<> SshKeyStore::insert(const SshKey& key) {
  HUTCH_TRY(Statement named, db_.prepare("SELECT 1 FROM ssh_keys WHERE owner_id=?1 AND name=?2"));
  named.bind(1, key.owner_id).bind(2, key.name);
  HUTCH_TRY(bool taken, named.step());
  if (taken) {
    return fail(Errc::kAlreadyExists,
                fmt::format("You have an SSH key named '{}'; choose another name or remove it "
                            "first (hutch key ssh rm {})",
                            key.name, key.name));
  }
  HUTCH_TRY(Statement same, db_.prepare("SELECT 1 FROM ssh_keys WHERE fingerprint=?1"));
  same.bind(1, key.fingerprint);
  HUTCH_TRY(bool known, same.step());
  if (known) {
    return fail(Errc::kAlreadyExists,
                fmt::format("The SSH key {} is registered already (a key belongs to one owner)",
                            key.fingerprint));
  }
  HUTCH_TRY(Statement st,
            db_.prepare(fmt::format("INSERT INTO ssh_keys ({}) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                                    kColumns)));
  st.bind(1, key.owner_id)
      .bind(2, key.owner_name)
      .bind(3, key.name)
      .bind(4, key.public_key)
      .bind(5, key.fingerprint)
      .bind(6, key.created_at);
  return st.run();
}

Result<SshKey> SshKeyStore::findByFingerprint(const std::string& fingerprint) {
  HUTCH_TRY(Statement st,
            db_.prepare(fmt::format("SELECT {} FROM ssh_keys WHERE fingerprint=?1", kColumns)));
  st.bind(1, fingerprint);
  HUTCH_TRY(bool row, st.step());
  if (!row) return fail(Errc::kNotFound, "No such SSH key");
  return readKey(st);
}

Result<std::vector<SshKey>> SshKeyStore::listOf(const std::string& owner_id) {
  HUTCH_TRY(Statement st,
            db_.prepare(
                fmt::format("SELECT {} FROM ssh_keys WHERE owner_id=?1 ORDER BY name", kColumns)));
  st.bind(1, owner_id);
  std::vector<SshKey> out;
  while (true) {
    HUTCH_TRY(bool row, st.step());
    if (!row) break;
    out.push_back(readKey(st));
  }
  return out;
}

Result<> SshKeyStore::remove(const std::string& owner_id, const std::string& name) {
  HUTCH_TRY(Statement st, db_.prepare("DELETE FROM ssh_keys WHERE owner_id=?1 AND name=?2"));
  st.bind(1, owner_id).bind(2, name);
  HUTCH_TRY_VOID(st.run());
  if (db_.changes() == 0) {
    return fail(Errc::kNotFound,
                fmt::format("No SSH key named '{}' (see 'hutch key ssh ls')", name));
  }
  return ok();
}

Result<> SshKeyStore::removeAllOf(const std::string& owner_id) {
  HUTCH_TRY(Statement st, db_.prepare("DELETE FROM ssh_keys WHERE owner_id=?1"));
  st.bind(1, owner_id);
  return st.run();
}

}  // namespace hutch::storage

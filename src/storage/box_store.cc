#include "storage/box_store.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace hutch::storage {

namespace {

// Schema versions, applied in order; PRAGMA user_version records how many ran.
constexpr const char* kMigrations[] = {
    R"sql(
CREATE TABLE boxes (
  id          TEXT PRIMARY KEY,
  name        TEXT NOT NULL UNIQUE,
  template    TEXT NOT NULL,
  cpus        INTEGER NOT NULL,
  memory_mib  INTEGER NOT NULL,
  state       TEXT NOT NULL,
  reason      TEXT NOT NULL DEFAULT '',
  accel       TEXT NOT NULL DEFAULT '',
  pid         INTEGER NOT NULL DEFAULT 0,
  created_at  INTEGER NOT NULL,
  updated_at  INTEGER NOT NULL
);)sql",
    R"sql(
ALTER TABLE boxes ADD COLUMN disk_mib INTEGER NOT NULL DEFAULT 0;
ALTER TABLE boxes ADD COLUMN image_dir TEXT NOT NULL DEFAULT '';
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);)sql",
    R"sql(
ALTER TABLE boxes ADD COLUMN boot TEXT NOT NULL DEFAULT '';
ALTER TABLE boxes ADD COLUMN disk TEXT NOT NULL DEFAULT 'disk.qcow2';
CREATE TABLE snapshots (
  id            TEXT PRIMARY KEY,
  kind          TEXT NOT NULL,
  box_id        TEXT NOT NULL DEFAULT '',
  name          TEXT NOT NULL DEFAULT '',
  template_key  TEXT NOT NULL DEFAULT '',
  dir           TEXT NOT NULL,
  layer         TEXT NOT NULL,
  size_bytes    INTEGER NOT NULL DEFAULT 0,
  created_at    INTEGER NOT NULL
);
CREATE UNIQUE INDEX checkpoint_names ON snapshots (box_id, name) WHERE kind = 'checkpoint';
CREATE INDEX template_snapshots ON snapshots (template_key) WHERE kind = 'template';)sql",
    // v4: each box's own uid and gid (jail::boxIds). Boxes from before get 0, 1, 2... in order.
    R"sql(
ALTER TABLE boxes ADD COLUMN uid_index INTEGER NOT NULL DEFAULT -1;
UPDATE boxes SET uid_index = (SELECT COUNT(*) FROM boxes AS older WHERE older.rowid < boxes.rowid);
CREATE UNIQUE INDEX box_uid_index ON boxes (uid_index) WHERE uid_index >= 0;)sql",
    // Published ports (issue 5). Kept while the box exists, listened on while it runs.
    R"sql(
CREATE TABLE ports (
  box_id        TEXT NOT NULL,
  host_address  TEXT NOT NULL,
  host_port     INTEGER NOT NULL,
  box_port      INTEGER NOT NULL,
  created_at    INTEGER NOT NULL,
  PRIMARY KEY (host_address, host_port)
);
CREATE INDEX ports_by_box ON ports (box_id);)sql",
    // Egress (issue 6): the box's policy (JSON) and its secrets ([{name, placeholder}]).
    R"sql(
ALTER TABLE boxes ADD COLUMN network_policy TEXT NOT NULL DEFAULT '';
ALTER TABLE boxes ADD COLUMN secrets TEXT NOT NULL DEFAULT '[]';)sql",
    // Remote API (issue 12): owners, box environment, API keys (only their hashes).
    R"sql(
ALTER TABLE boxes ADD COLUMN owner_id TEXT NOT NULL DEFAULT '';
ALTER TABLE boxes ADD COLUMN owner_name TEXT NOT NULL DEFAULT '';
ALTER TABLE boxes ADD COLUMN env TEXT NOT NULL DEFAULT '{}';
CREATE INDEX boxes_by_owner ON boxes (owner_id);
CREATE TABLE api_keys (
  id             TEXT PRIMARY KEY,
  name           TEXT NOT NULL UNIQUE,
  hash           TEXT NOT NULL UNIQUE,
  admin          INTEGER NOT NULL DEFAULT 0,
  max_boxes      INTEGER NOT NULL DEFAULT 0,
  max_cpus       INTEGER NOT NULL DEFAULT 0,
  max_memory_mib INTEGER NOT NULL DEFAULT 0,
  max_disk_mib   INTEGER NOT NULL DEFAULT 0,
  created_at     INTEGER NOT NULL,
  last_used_at   INTEGER NOT NULL DEFAULT 0
);)sql",
    // E2B façade (issue 13): metadata, and a lifetime (when the box expires, and what then).
    R"sql(
ALTER TABLE boxes ADD COLUMN metadata TEXT NOT NULL DEFAULT '{}';
ALTER TABLE boxes ADD COLUMN expires_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE boxes ADD COLUMN on_expiry TEXT NOT NULL DEFAULT '';)sql",
    // Saved boxes (E2B's snapshots): owned, named per owner, with the captured box's record.
    R"sql(
ALTER TABLE snapshots ADD COLUMN owner_id TEXT NOT NULL DEFAULT '';
ALTER TABLE snapshots ADD COLUMN source TEXT NOT NULL DEFAULT '';
ALTER TABLE boxes ADD COLUMN max_exec_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE boxes ADD COLUMN idle_pause_ms INTEGER NOT NULL DEFAULT -1;
CREATE UNIQUE INDEX saved_names ON snapshots (owner_id, name) WHERE kind = 'saved';)sql",
    // Events (issue 14, storage/event_store.h): ids never reused, so readers resume by id.
    R"sql(
CREATE TABLE events (
  id        INTEGER PRIMARY KEY AUTOINCREMENT,
  time      INTEGER NOT NULL,
  type      TEXT NOT NULL,
  box_id    TEXT NOT NULL DEFAULT '',
  box_name  TEXT NOT NULL DEFAULT '',
  owner_id  TEXT NOT NULL DEFAULT '',
  data      TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX events_by_box ON events (box_id, id);
-- The audit log's newest record (observe/audit_log.h): its file is checked against it.
CREATE TABLE audit_head (
  id   INTEGER PRIMARY KEY CHECK (id = 1),
  seq  INTEGER NOT NULL,
  hash TEXT NOT NULL
);)sql",
    // Shared folders (issue 16): [{"host_dir","box_dir","read_only"}].
    R"sql(
ALTER TABLE boxes ADD COLUMN shares TEXT NOT NULL DEFAULT '[]';)sql",
    // SSH keys for hutchd --listen-ssh (issue 35, storage/ssh_key_store.h).
    R"sql(
CREATE TABLE ssh_keys (
  owner_id    TEXT NOT NULL,
  owner_name  TEXT NOT NULL,
  name        TEXT NOT NULL,
  public_key  TEXT NOT NULL,
  fingerprint TEXT NOT NULL UNIQUE,
  created_at  INTEGER NOT NULL,
  PRIMARY KEY (owner_id, name)
);)sql",
};

constexpr const char* kColumns =
    "id, name, template, cpus, memory_mib, state, reason, accel, pid, created_at, updated_at, "
    "disk_mib, image_dir, boot, disk, uid_index, network_policy, secrets, owner_id, owner_name, "
    "env, metadata, expires_at, on_expiry, max_exec_ms, idle_pause_ms, shares";

constexpr const char* kSnapshotColumns =
    "id, kind, box_id, name, template_key, dir, layer, size_bytes, created_at, owner_id, source";

Result<box::Snapshot> readSnapshot(const Statement& st) {
  box::Snapshot s;
  s.id = st.columnText(0);
  HUTCH_TRY(s.kind, box::parseSnapshotKind(st.columnText(1)));
  s.box_id = st.columnText(2);
  s.name = st.columnText(3);
  s.template_key = st.columnText(4);
  s.dir = st.columnText(5);
  s.layer = st.columnText(6);
  s.size_bytes = static_cast<uint64_t>(st.columnInt(7));
  s.created_at = st.columnInt(8);
  s.owner_id = st.columnText(9);
  s.source = st.columnText(10);
  return s;
}

Result<std::vector<box::Snapshot>> readSnapshots(Statement& st) {
  std::vector<box::Snapshot> out;
  while (true) {
    HUTCH_TRY(bool row, st.step());
    if (!row) break;
    HUTCH_TRY(box::Snapshot s, readSnapshot(st));
    out.push_back(std::move(s));
  }
  return out;
}

std::string secretsJson(const std::vector<box::BoxSecret>& secrets) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& s : secrets) {
    nlohmann::json entry = {{"name", s.name}, {"placeholder", s.placeholder}};
    if (s.owner) entry["owner"] = *s.owner;
    list.push_back(std::move(entry));
  }
  return list.dump();
}

std::string sharesJson(const std::vector<box::BoxShare>& shares) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& s : shares) {
    list.push_back({{"host_dir", s.host_dir}, {"box_dir", s.box_dir}, {"read_only", s.read_only}});
  }
  return list.dump();
}

Result<box::Box> readRow(const Statement& st) {
  box::Box b;
  b.id = st.columnText(0);
  b.name = st.columnText(1);
  b.config.template_name = st.columnText(2);
  b.config.cpus = static_cast<unsigned>(st.columnInt(3));
  b.config.memory_mib = static_cast<uint64_t>(st.columnInt(4));
  HUTCH_TRY(b.state, box::parseState(st.columnText(5)));
  b.reason = st.columnText(6);
  b.accel = st.columnText(7);
  b.pid = st.columnInt(8);
  b.created_at = st.columnInt(9);
  b.updated_at = st.columnInt(10);
  b.config.disk_mib = static_cast<uint64_t>(st.columnInt(11));
  b.image_dir = st.columnText(12);
  b.boot = st.columnText(13);
  b.disk = st.columnText(14);
  b.uid_index = st.columnInt(15);
  b.network_policy = st.columnText(16);
  auto secrets = nlohmann::json::parse(st.columnText(17), nullptr, false);
  if (!secrets.is_array()) {
    return fail(Errc::kInternal, fmt::format("Box {} has a corrupt secrets column", b.id));
  }
  for (const auto& s : secrets) {
    box::BoxSecret secret{s.value("name", ""), s.value("placeholder", ""), std::nullopt};
    if (s.contains("owner") && s["owner"].is_string()) secret.owner = s["owner"].get<std::string>();
    b.secrets.push_back(std::move(secret));
  }
  b.owner.id = st.columnText(18);
  b.owner.name = st.columnText(19);
  auto env = nlohmann::json::parse(st.columnText(20), nullptr, false);
  if (!env.is_object()) {
    return fail(Errc::kInternal, fmt::format("Box {} has a corrupt env column", b.id));
  }
  for (const auto& [key, value] : env.items()) {
    if (value.is_string()) b.env[key] = value.get<std::string>();
  }
  auto metadata = nlohmann::json::parse(st.columnText(21), nullptr, false);
  if (!metadata.is_object()) {
    return fail(Errc::kInternal, fmt::format("Box {} has a corrupt metadata column", b.id));
  }
  for (const auto& [key, value] : metadata.items()) {
    if (value.is_string()) b.metadata[key] = value.get<std::string>();
  }
  b.expires_at = st.columnInt(22);
  HUTCH_TRY(b.on_expiry, box::parseExpiry(st.columnText(23)));
  b.config.max_exec_ms = static_cast<uint64_t>(st.columnInt(24));
  b.config.idle_pause_ms = st.columnInt(25);
  auto shares = nlohmann::json::parse(st.columnText(26), nullptr, false);
  if (!shares.is_array()) {
    return fail(Errc::kInternal, fmt::format("Box {} has a corrupt shares column", b.id));
  }
  for (const auto& s : shares) {
    b.shares.push_back(
        {s.value("host_dir", ""), s.value("box_dir", ""), s.value("read_only", false)});
  }
  return b;
}

void bindRow(Statement& st, const box::Box& b) {
  st.bind(1, b.id)
      .bind(2, b.name)
      .bind(3, b.config.template_name)
      .bind(4, static_cast<int64_t>(b.config.cpus))
      .bind(5, static_cast<int64_t>(b.config.memory_mib))
      .bind(6, box::stateName(b.state))
      .bind(7, b.reason)
      .bind(8, b.accel)
      .bind(9, b.pid)
      .bind(10, b.created_at)
      .bind(11, b.updated_at)
      .bind(12, static_cast<int64_t>(b.config.disk_mib))
      .bind(13, b.image_dir)
      .bind(14, b.boot)
      .bind(15, b.disk)
      .bind(16, b.uid_index)
      .bind(17, b.network_policy)
      .bind(18, secretsJson(b.secrets))
      .bind(19, b.owner.id)
      .bind(20, b.owner.name)
      .bind(21, nlohmann::json(b.env).dump())
      .bind(22, nlohmann::json(b.metadata).dump())
      .bind(23, b.expires_at)
      .bind(24, box::expiryName(b.on_expiry))
      .bind(25, static_cast<int64_t>(b.config.max_exec_ms))
      .bind(26, b.config.idle_pause_ms)
      .bind(27, sharesJson(b.shares));
}

}  // namespace

Result<BoxStore> BoxStore::open(const std::string& path) {
  HUTCH_TRY(Database db, Database::open(path));
  BoxStore store(std::move(db));
  HUTCH_TRY_VOID(store.migrate());
  return store;
}

Result<> BoxStore::migrate() {
  HUTCH_TRY(Statement st, db_.prepare("PRAGMA user_version"));
  HUTCH_TRY_VOID(st.step());
  auto version = static_cast<size_t>(st.columnInt(0));
  constexpr size_t kCount = std::size(kMigrations);
  if (version > kCount) {
    return fail(Errc::kFailedPrecondition,
                fmt::format("The database schema (version {}) is newer than this hutchd "
                            "(version {}); upgrade hutchd",
                            version, kCount));
  }
  for (size_t i = version; i < kCount; ++i) {
    HUTCH_TRY_VOID(db_.exec(
        fmt::format("BEGIN; {} PRAGMA user_version = {}; COMMIT;", kMigrations[i], i + 1)));
  }
  return ok();
}

Result<> BoxStore::insert(const box::Box& b) {
  HUTCH_TRY(
      Statement st,
      db_.prepare(fmt::format(
          "INSERT INTO boxes ({}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
          kColumns)));
  bindRow(st, b);
  auto r = st.run();
  if (!r && r.error().code() == Errc::kAlreadyExists) {
    return fail(
        Errc::kAlreadyExists,
        fmt::format("A box named '{}' already exists; choose another name or remove it", b.name));
  }
  return r;
}

Result<> BoxStore::update(const box::Box& b) {
  HUTCH_TRY(
      Statement st,
      db_.prepare(
          "UPDATE boxes SET id=?1, name=?2, template=?3, cpus=?4, "
          "memory_mib=?5, state=?6, reason=?7, accel=?8, pid=?9, "
          "created_at=?10, updated_at=?11, disk_mib=?12, image_dir=?13, boot=?14, disk=?15, "
          "uid_index=?16, network_policy=?17, secrets=?18, owner_id=?19, owner_name=?20, env=?21, "
          "metadata=?22, expires_at=?23, on_expiry=?24, max_exec_ms=?25, idle_pause_ms=?26, "
          "shares=?27 "
          "WHERE id=?1"));
  bindRow(st, b);
  HUTCH_TRY_VOID(st.run());
  if (db_.changes() == 0) return fail(Errc::kNotFound, fmt::format("No box with id {}", b.id));
  return ok();
}

Result<> BoxStore::remove(const std::string& id) {
  HUTCH_TRY(Statement st, db_.prepare("DELETE FROM boxes WHERE id=?"));
  st.bind(1, id);
  return st.run();
}

Result<> BoxStore::removeWithItsSnapshots(const std::string& id) {
  HUTCH_TRY_VOID(db_.exec("BEGIN IMMEDIATE"));
  auto removed = [&]() -> Result<> {
    HUTCH_TRY(Statement snapshots, db_.prepare("DELETE FROM snapshots WHERE box_id=? AND kind IN "
                                               "('checkpoint', 'suspend')"));
    snapshots.bind(1, id);
    HUTCH_TRY_VOID(snapshots.run());
    HUTCH_TRY_VOID(remove(id));
    return db_.exec("COMMIT");
  }();
  if (!removed) (void)db_.exec("ROLLBACK");
  return removed;
}

Result<box::Box> BoxStore::find(const std::string& key, const OwnerFilter& owner) {
  // Exact id or name first, then a unique id prefix (as Docker does); only among the owner's
  // boxes when a filter is given, so that other owners' boxes neither match nor make a prefix
  // ambiguous.
  HUTCH_TRY(Statement st,
            db_.prepare(fmt::format("SELECT {} FROM boxes WHERE (id=?1 OR name=?1) AND (?2 = 0 OR "
                                    "owner_id = ?3)",
                                    kColumns)));
  st.bind(1, key).bind(2, int64_t{owner ? 1 : 0}).bind(3, owner.value_or(""));
  HUTCH_TRY(bool row, st.step());
  if (row) return readRow(st);
  if (!key.empty() && key.find_first_not_of("0123456789abcdef") == std::string::npos) {
    HUTCH_TRY(Statement pre,
              db_.prepare(fmt::format("SELECT {} FROM boxes WHERE substr(id, 1, ?2) = ?1 AND "
                                      "(?3 = 0 OR owner_id = ?4)",
                                      kColumns)));
    pre.bind(1, key)
        .bind(2, static_cast<int64_t>(key.size()))
        .bind(3, int64_t{owner ? 1 : 0})
        .bind(4, owner.value_or(""));
    std::vector<box::Box> found;
    while (true) {
      HUTCH_TRY(bool more, pre.step());
      if (!more) break;
      HUTCH_TRY(box::Box b, readRow(pre));
      found.push_back(std::move(b));
    }
    if (found.size() == 1) return found.front();
    if (found.size() > 1) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("Box id prefix '{}' is ambiguous; give more digits", key));
    }
  }
  return fail(Errc::kNotFound,
              fmt::format("No such box: '{}' (see 'hutch ls' for the boxes that exist)", key));
}

Result<bool> BoxStore::nameTaken(const std::string& name) {
  HUTCH_TRY(Statement st, db_.prepare("SELECT 1 FROM boxes WHERE name=?1"));
  st.bind(1, name);
  return st.step();
}

Result<std::string> BoxStore::getMeta(const std::string& key) {
  HUTCH_TRY(Statement st, db_.prepare("SELECT value FROM meta WHERE key=?"));
  st.bind(1, key);
  HUTCH_TRY(bool row, st.step());
  return row ? st.columnText(0) : std::string();
}

Result<> BoxStore::setMeta(const std::string& key, const std::string& value) {
  HUTCH_TRY(Statement st, db_.prepare("INSERT INTO meta (key, value) VALUES (?1, ?2) "
                                      "ON CONFLICT(key) DO UPDATE SET value=?2"));
  st.bind(1, key).bind(2, value);
  return st.run();
}

Result<std::vector<box::Box>> BoxStore::list(const OwnerFilter& owner) {
  HUTCH_TRY(Statement st,
            db_.prepare(fmt::format("SELECT {} FROM boxes WHERE ?1 = 0 OR owner_id = ?2 ORDER BY "
                                    "created_at, name",
                                    kColumns)));
  st.bind(1, int64_t{owner ? 1 : 0}).bind(2, owner.value_or(""));
  std::vector<box::Box> out;
  while (true) {
    HUTCH_TRY(bool row, st.step());
    if (!row) break;
    HUTCH_TRY(box::Box b, readRow(st));
    out.push_back(std::move(b));
  }
  return out;
}

Result<std::vector<uint32_t>> BoxStore::uidIndices() {
  HUTCH_TRY(Statement st, db_.prepare("SELECT uid_index FROM boxes WHERE uid_index >= 0"));
  std::vector<uint32_t> out;
  while (true) {
    HUTCH_TRY(bool row, st.step());
    if (!row) break;
    out.push_back(static_cast<uint32_t>(st.columnInt(0)));
  }
  return out;
}

}  // namespace hutch::storage

namespace hutch::storage {

Result<> BoxStore::insertSnapshot(const box::Snapshot& s) {
  HUTCH_TRY(Statement st,
            db_.prepare(fmt::format("INSERT INTO snapshots ({}) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                                    kSnapshotColumns)));
  st.bind(1, s.id)
      .bind(2, box::snapshotKindName(s.kind))
      .bind(3, s.box_id)
      .bind(4, s.name)
      .bind(5, s.template_key)
      .bind(6, s.dir.string())
      .bind(7, s.layer.string())
      .bind(8, static_cast<int64_t>(s.size_bytes))
      .bind(9, s.created_at)
      .bind(10, s.owner_id)
      .bind(11, s.source);
  auto r = st.run();
  if (!r && r.error().code() == Errc::kAlreadyExists && s.kind == box::SnapshotKind::kSaved) {
    return fail(Errc::kAlreadyExists,
                fmt::format("A snapshot named '{}' already exists; choose another name", s.name));
  }
  if (!r && r.error().code() == Errc::kAlreadyExists) {
    return fail(Errc::kAlreadyExists,
                fmt::format("The box already has a checkpoint named '{}'; choose another name "
                            "or remove that one",
                            s.name));
  }
  return r;
}

Result<> BoxStore::removeSnapshot(const std::string& id) {
  HUTCH_TRY(Statement st, db_.prepare("DELETE FROM snapshots WHERE id=?"));
  st.bind(1, id);
  return st.run();
}

Result<std::vector<box::Snapshot>> BoxStore::listSnapshots() {
  HUTCH_TRY(Statement st,
            db_.prepare(fmt::format("SELECT {} FROM snapshots ORDER BY created_at, rowid",
                                    kSnapshotColumns)));
  return readSnapshots(st);
}

Result<std::vector<box::Snapshot>> BoxStore::checkpoints(const std::string& box_id) {
  HUTCH_TRY(Statement st,
            db_.prepare(fmt::format("SELECT {} FROM snapshots WHERE kind='checkpoint' AND "
                                    "box_id=? ORDER BY created_at, rowid",
                                    kSnapshotColumns)));
  st.bind(1, box_id);
  return readSnapshots(st);
}

Result<box::Snapshot> BoxStore::findCheckpoint(const std::string& box_id, const std::string& name) {
  HUTCH_TRY(Statement st,
            db_.prepare(fmt::format("SELECT {} FROM snapshots WHERE kind='checkpoint' AND "
                                    "box_id=?1 AND (name=?2 OR id=?2)",
                                    kSnapshotColumns)));
  st.bind(1, box_id).bind(2, name);
  HUTCH_TRY(auto found, readSnapshots(st));
  if (found.empty()) {
    return fail(Errc::kNotFound, fmt::format("The box has no checkpoint '{}' (see 'hutch "
                                             "checkpoint ls BOX')",
                                             name));
  }
  return found.front();
}

Result<std::vector<box::Snapshot>> BoxStore::savedSnapshots(
    const std::optional<std::string>& owner) {
  HUTCH_TRY(Statement st,
            db_.prepare(fmt::format("SELECT {} FROM snapshots WHERE kind='saved' AND "
                                    "(?1 = 0 OR owner_id = ?2) ORDER BY created_at, rowid",
                                    kSnapshotColumns)));
  st.bind(1, int64_t{owner ? 1 : 0}).bind(2, owner.value_or(""));
  return readSnapshots(st);
}

Result<box::Snapshot> BoxStore::findSaved(const std::optional<std::string>& owner,
                                          const std::string& key) {
  HUTCH_TRY(Statement st,
            db_.prepare(fmt::format("SELECT {} FROM snapshots WHERE kind='saved' AND "
                                    "(?1 = 0 OR owner_id = ?2) AND (id = ?3 OR name = ?3) "
                                    "ORDER BY id = ?3 DESC LIMIT 1",
                                    kSnapshotColumns)));
  st.bind(1, int64_t{owner ? 1 : 0}).bind(2, owner.value_or("")).bind(3, key);
  HUTCH_TRY(auto found, readSnapshots(st));
  if (found.empty()) {
    return fail(Errc::kNotFound, fmt::format("No snapshot '{}'", key));
  }
  return found.front();
}

Result<box::Snapshot> BoxStore::findSuspend(const std::string& box_id) {
  HUTCH_TRY(Statement st,
            db_.prepare(fmt::format("SELECT {} FROM snapshots WHERE kind='suspend' AND box_id=?1 "
                                    "ORDER BY created_at DESC, rowid DESC LIMIT 1",
                                    kSnapshotColumns)));
  st.bind(1, box_id);
  HUTCH_TRY(auto found, readSnapshots(st));
  if (found.empty()) {
    return fail(Errc::kNotFound, fmt::format("Box {} has no suspended state", box_id));
  }
  return found.front();
}

Result<std::optional<box::Snapshot>> BoxStore::findTemplateSnapshot(const std::string& key) {
  HUTCH_TRY(Statement st,
            db_.prepare(fmt::format("SELECT {} FROM snapshots WHERE kind='template' AND "
                                    "template_key=? ORDER BY created_at DESC LIMIT 1",
                                    kSnapshotColumns)));
  st.bind(1, key);
  HUTCH_TRY(auto found, readSnapshots(st));
  if (found.empty()) return std::optional<box::Snapshot>();
  return std::optional<box::Snapshot>(found.front());
}

}  // namespace hutch::storage

// BoxStore: the durable record of every box, in SQLite. Only the event loop thread uses it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "box/box.h"
#include "box/port_forward.h"
#include "box/snapshot.h"
#include "storage/sqlite.h"

namespace hutch::storage {

// Which owner's boxes a query sees: nullopt for every owner (the host, admin keys), else the
// owner id (box::Owner::id).
using OwnerFilter = std::optional<std::string>;

class BoxStore {
 public:
  // Opens the database and applies schema migrations.
  static Result<BoxStore> open(const std::string& path);

  // Inserts a new box; kAlreadyExists if the id or name is taken.
  Result<> insert(const box::Box& box);
  // Replaces the stored row of box.id; kNotFound if there is none.
  Result<> update(const box::Box& box);
  Result<> remove(const std::string& id);
  // The box's row and the records of its checkpoints and suspended state, all or none (one
  // transaction: a full disk refuses the whole removal, never half of it).
  Result<> removeWithItsSnapshots(const std::string& id);
  // Finds by id, unique id prefix, or name, among the boxes `owner` sees.
  Result<box::Box> find(const std::string& id_or_name, const OwnerFilter& owner = std::nullopt);
  // Whether a box has exactly this name (no id or prefix matching: a new name that happens to
  // be a prefix of some box's id is still free).
  Result<bool> nameTaken(const std::string& name);
  Result<std::vector<box::Box>> list(const OwnerFilter& owner = std::nullopt);
  // The uid indices boxes hold (Box::uid_index), to pick a free one for a new box.
  Result<std::vector<uint32_t>> uidIndices();

  // Snapshots: template snapshots, checkpoints, fork captures.
  Result<> insertSnapshot(const box::Snapshot& snapshot);  // kAlreadyExists: checkpoint name taken
  Result<> removeSnapshot(const std::string& id);
  Result<std::vector<box::Snapshot>> listSnapshots();
  Result<std::vector<box::Snapshot>> checkpoints(const std::string& box_id);
  // By checkpoint name or snapshot id; kNotFound says how to list them.
  Result<box::Snapshot> findCheckpoint(const std::string& box_id, const std::string& name);
  // Saved boxes (SnapshotKind::kSaved) of `owner` (an Owner::id; nullopt: everyone's), oldest
  // first; findSaved by id or name, kNotFound if the owner has none such.
  Result<std::vector<box::Snapshot>> savedSnapshots(const std::optional<std::string>& owner);
  Result<box::Snapshot> findSaved(const std::optional<std::string>& owner, const std::string& key);
  // The suspended state of a box (SnapshotKind::kSuspend); kNotFound if it has none.
  Result<box::Snapshot> findSuspend(const std::string& box_id);
  // The newest template snapshot made for `key` (templateSnapshotKey), if any.
  Result<std::optional<box::Snapshot>> findTemplateSnapshot(const std::string& key);

  // Published ports (box_store_ports.cc). insertPort: kAlreadyExists if another forward
  // already holds that host endpoint (sameHostPort), naming the box.
  Result<> insertPort(const box::PortForward& forward);
  // Removes the box's forwards of host_port (on `address`, or on every address if empty);
  // kNotFound if there were none.
  Result<> removePort(const std::string& box_id, uint16_t host_port, const std::string& address);
  Result<> removePorts(const std::string& box_id);
  Result<std::vector<box::PortForward>> ports(const std::string& box_id);  // by host port
  Result<std::vector<box::PortForward>> allPorts();

  // The database, for stores that keep their tables in it (KeyStore).
  Database& database() { return db_; }

  // Small daemon facts that must survive restarts (the host's boot id).
  Result<std::string> getMeta(const std::string& key);  // "" if unset
  Result<> setMeta(const std::string& key, const std::string& value);

 private:
  explicit BoxStore(Database db) : db_(std::move(db)) {}
  Result<> migrate();
  Database db_;
};

}  // namespace hutch::storage

// EventStore: what happened to boxes, keys and the daemon (docs/observability.md), in the same
// SQLite database as the boxes (the schema is BoxStore's, one migration list). Ids increase;
// only the newest `retain` events are kept. Event loop only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "storage/sqlite.h"

namespace hutch::storage {

struct StoredEvent {
  int64_t id = 0;        // increasing, from 1; assigned by insert
  int64_t time = 0;      // unix milliseconds
  std::string type;      // "box.created", "exec.ended", ... (docs/observability.md)
  std::string box_id;    // the box it is about; "" for others
  std::string box_name;  // its name then
  std::string owner_id;  // whose box or key it is about (Owner::id); "" the host's
  std::string data;      // a JSON object: the type's own fields
  bool operator==(const StoredEvent&) const = default;
};

// Which events a reader wants. Empty fields match everything.
struct EventQuery {
  int64_t after_id = 0;                 // events with a greater id
  int64_t since_time = 0;               // unix ms: events at or after it
  std::string box_id;                   // one box's
  std::vector<std::string> types;       // "box.created", or a prefix ending in '.' ("box.")
  std::optional<std::string> owner_id;  // nullopt: every owner's
  size_t limit = 1000;
  bool matches(const StoredEvent& e) const;
};

class EventStore {
 public:
  // `db` must outlive the store (BoxStore::database()).
  EventStore(Database& db, size_t retain) : db_(db), retain_(retain) {}

  // Stores `e` (its id is assigned and returned) and, every so often, forgets the oldest beyond
  // `retain`.
  Result<int64_t> insert(const StoredEvent& e);
  // Oldest first.
  Result<std::vector<StoredEvent>> query(const EventQuery& q);
  // The newest id, 0 when there is none; the oldest still kept.
  Result<int64_t> lastId();
  Result<int64_t> firstId();

 private:
  Database& db_;
  size_t retain_;
  size_t since_prune_ = 0;
};

}  // namespace hutch::storage

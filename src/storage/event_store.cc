#include "storage/event_store.h"

#include <fmt/format.h>

#include <algorithm>

namespace hutch::storage {

namespace {

constexpr const char* kEventColumns = "id, time, type, box_id, box_name, owner_id, data";
constexpr size_t kPruneEvery = 256;

StoredEvent readEvent(const Statement& st) {
  StoredEvent e;
  e.id = st.columnInt(0);
  e.time = st.columnInt(1);
  e.type = st.columnText(2);
  e.box_id = st.columnText(3);
  e.box_name = st.columnText(4);
  e.owner_id = st.columnText(5);
  e.data = st.columnText(6);
  return e;
}

bool typeMatches(const std::vector<std::string>& types, const std::string& type) {
  if (types.empty()) return true;
  return std::any_of(types.begin(), types.end(), [&](const std::string& t) {
    return t.ends_with('.') ? type.starts_with(t) : type == t;
  });
}

}  // namespace

bool EventQuery::matches(const StoredEvent& e) const {
  return e.id > after_id && e.time >= since_time && (box_id.empty() || e.box_id == box_id) &&
         (!owner_id || e.owner_id == *owner_id) && typeMatches(types, e.type);
}

Result<int64_t> EventStore::insert(const StoredEvent& e) {
  HUTCH_TRY(Statement st,
            db_.prepare("INSERT INTO events (time, type, box_id, box_name, owner_id, data) "
                        "VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING id"));
  st.bind(1, e.time).bind(2, e.type).bind(3, e.box_id).bind(4, e.box_name).bind(5, e.owner_id);
  st.bind(6, e.data);
  HUTCH_TRY(bool row, st.step());
  if (!row) return fail(Errc::kInternal, "INSERT INTO events returned no id");
  const int64_t id = st.columnInt(0);
  if (++since_prune_ >= kPruneEvery) {
    since_prune_ = 0;
    HUTCH_TRY(Statement prune, db_.prepare("DELETE FROM events WHERE id <= ?1"));
    prune.bind(1, id - static_cast<int64_t>(retain_));
    HUTCH_TRY_VOID(prune.run());
  }
  return id;
}

Result<std::vector<StoredEvent>> EventStore::query(const EventQuery& q) {
  // Box, owner and time narrow in SQL; types (exact or by prefix) are checked here.
  HUTCH_TRY(Statement st,
            db_.prepare(fmt::format("SELECT {} FROM events WHERE id > ?1 AND time >= ?2 AND "
                                    "(?3 = '' OR box_id = ?3) AND (?4 = 0 OR owner_id = ?5) "
                                    "ORDER BY id",
                                    kEventColumns)));
  st.bind(1, q.after_id).bind(2, q.since_time).bind(3, q.box_id);
  st.bind(4, int64_t{q.owner_id ? 1 : 0}).bind(5, q.owner_id.value_or(""));
  std::vector<StoredEvent> out;
  while (out.size() < q.limit) {
    HUTCH_TRY(bool row, st.step());
    if (!row) break;
    StoredEvent e = readEvent(st);
    if (typeMatches(q.types, e.type)) out.push_back(std::move(e));
  }
  return out;
}

Result<int64_t> EventStore::lastId() {
  HUTCH_TRY(Statement st, db_.prepare("SELECT COALESCE(MAX(id), 0) FROM events"));
  HUTCH_TRY(bool row, st.step());
  return row ? st.columnInt(0) : 0;
}

Result<int64_t> EventStore::firstId() {
  HUTCH_TRY(Statement st, db_.prepare("SELECT COALESCE(MIN(id), 0) FROM events"));
  HUTCH_TRY(bool row, st.step());
  return row ? st.columnInt(0) : 0;
}

}  // namespace hutch::storage

// AuditLog: an append-only record of what was done in boxes and to keys (docs/observability.md
// "Audit log"): every exec, file operation through the API, use of a host secret by the egress
// proxy, change of a host secret, policy change and key change. One JSON object a line in a file
// of its own, outside every box's directory (a box's trail stays after the box is removed). Each
// record carries the hash of the one before it and its own:
//
//   hash = hex(SHA-256(prev + "\n" + the record without "hash", as canonical JSON))
//
// and the newest (seq, hash) is also kept in SQLite, so deleting, editing or reordering a record,
// or cutting the end off the file, is found by verify(). (Whoever can rewrite both the file and
// the database can rewrite history: the head is also logged at every start, for an outside
// copy.) Event loop only; appends are single write(2)s with O_APPEND.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "storage/sqlite.h"

namespace hutch::observe {

// Who asked for what is recorded: an API key, or the host administrator (empty id).
struct Actor {
  std::string key_id;
  std::string key_name;
  bool operator==(const Actor&) const = default;
};
// Who acted, as events name them (exec.started's and secret.*'s "actor"): "host", or
// {"key_id", "key_name"}.
nlohmann::json actorJson(const Actor& actor);

struct AuditEntry {
  std::string type;  // "exec.start", "exec.end", "file.write", "secret.use", "policy.set", ...
  Actor actor;
  std::string box_id;  // the box acted on ("" for keys)
  std::string box_name;
  std::string owner_id;  // the box's owner, or the key's id for key changes
  nlohmann::json data = nlohmann::json::object();
};

struct AuditRecord {
  int64_t seq = 0;      // 1, 2, ... with no gaps
  int64_t time_ms = 0;  // unix milliseconds
  AuditEntry entry;
  std::string prev;  // the previous record's hash ("" for the first)
  std::string hash;
};
nlohmann::json toJson(const AuditRecord& record);

struct AuditQuery {
  std::string box_id;                     // one box's (by id)
  int64_t since_ms = 0;                   // at or after
  int64_t after_seq = 0;                  // records with a greater seq
  std::optional<std::string> visible_to;  // a key id: records it made or about its boxes
  size_t limit = 1000;
};

struct AuditVerdict {
  bool intact = true;
  int64_t records = 0;   // read and checked
  int64_t head_seq = 0;  // what SQLite says the newest record is
  std::string head_hash;
  int64_t broken_at_line = 0;  // the first line that does not check out (1-based), 0 if intact
  int64_t broken_at_seq = 0;   // the seq expected there
  std::string reason;          // what is wrong there, in words
};
nlohmann::json toJson(const AuditVerdict& verdict);

class AuditLog {
 public:
  // Opens (creating) `file` (mode 0600) and the head kept in `db` (the schema is BoxStore's).
  // Refuses to start when the file's last record is neither the head nor the head's successor
  // (an append whose head update was lost): that log has been tampered with or damaged; the
  // error says to run verify and how to start a new log.
  static Result<std::unique_ptr<AuditLog>> open(const std::filesystem::path& file,
                                                storage::Database& db);

  // Appends a record; its seq. Failures are returned (the caller logs them: an audit failure
  // must not fail the operation, but must be seen).
  Result<int64_t> append(AuditEntry entry);
  // Records matching `query`, oldest first.
  Result<std::vector<AuditRecord>> read(const AuditQuery& query) const;
  // Reads the whole file and checks every link and the head.
  Result<AuditVerdict> verify() const;
  int64_t headSeq() const { return seq_; }
  const std::string& headHash() const { return hash_; }
  const std::filesystem::path& path() const { return file_; }

 private:
  AuditLog(std::filesystem::path file, storage::Database& db, UniqueFd fd)
      : file_(std::move(file)), db_(db), fd_(std::move(fd)) {}
  Result<std::pair<int64_t, std::string>> readHead() const;

  std::filesystem::path file_;
  storage::Database& db_;
  UniqueFd fd_;
  int64_t seq_ = 0;
  std::string hash_;
};

// The hash of a record as defined above (exposed for tests and tools).
std::string auditHash(const std::string& prev, const nlohmann::json& record_without_hash);

}  // namespace hutch::observe

#include "observe/audit_log.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/evp.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>

namespace hutch::observe {

using json = nlohmann::json;

json actorJson(const Actor& actor) {
  return actor.key_id.empty() ? json("host")
                              : json{{"key_id", actor.key_id}, {"key_name", actor.key_name}};
}

namespace fs = std::filesystem;

namespace {

constexpr const char* kDiscontinuity = "audit.discontinuity";

int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Canonical: keys sorted (nlohmann's objects are ordered maps), no spaces, bad UTF-8 replaced
// (argv and paths come from boxes and clients), so the writer and verify() agree byte for byte.
std::string canonical(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

json recordBody(const AuditRecord& r) {
  json actor = json{{"key_id", r.entry.actor.key_id}, {"key_name", r.entry.actor.key_name}};
  return json{{"seq", r.seq},
              {"time_ms", r.time_ms},
              {"type", r.entry.type},
              {"actor", std::move(actor)},
              {"box_id", r.entry.box_id},
              {"box_name", r.entry.box_name},
              {"owner_id", r.entry.owner_id},
              {"data", r.entry.data},
              {"prev", r.prev}};
}

// A line of the file as a record; kInvalidArgument saying what is wrong with it.
Result<AuditRecord> parseRecord(const std::string& line) {
  json j = json::parse(line, nullptr, false);
  if (!j.is_object()) return fail(Errc::kInvalidArgument, "not a JSON object");
  try {
    AuditRecord r;
    r.seq = j.at("seq").get<int64_t>();
    r.time_ms = j.at("time_ms").get<int64_t>();
    r.entry.type = j.at("type").get<std::string>();
    r.entry.actor.key_id = j.at("actor").at("key_id").get<std::string>();
    r.entry.actor.key_name = j.at("actor").at("key_name").get<std::string>();
    r.entry.box_id = j.at("box_id").get<std::string>();
    r.entry.box_name = j.at("box_name").get<std::string>();
    r.entry.owner_id = j.at("owner_id").get<std::string>();
    r.entry.data = j.at("data");
    r.prev = j.at("prev").get<std::string>();
    r.hash = j.at("hash").get<std::string>();
    if (j.size() != 10) return fail(Errc::kInvalidArgument, "has fields a record does not have");
    return r;
  } catch (const json::exception& e) {
    return fail(Errc::kInvalidArgument, fmt::format("not a record ({})", e.what()));
  }
}

// The last line of the file (without its newline), "" when the file is empty.
Result<std::string> lastLine(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return fail(Errc::kInternal, "Cannot stat the audit log", errno);
  off_t end = st.st_size;
  std::string tail;
  // Skip the final newline, then read backwards until the one before the last line.
  while (end > 0) {
    off_t start = std::max<off_t>(0, end - 4096);
    std::string chunk(static_cast<size_t>(end - start), '\0');
    if (::pread(fd, chunk.data(), chunk.size(), start) != static_cast<ssize_t>(chunk.size())) {
      return fail(Errc::kInternal, "Cannot read the audit log", errno);
    }
    tail.insert(0, chunk);
    end = start;
    size_t body_end = tail.size();
    if (!tail.empty() && tail.back() == '\n') --body_end;
    size_t nl = tail.rfind('\n', body_end == 0 ? 0 : body_end - 1);
    if (nl != std::string::npos && nl < body_end) return tail.substr(nl + 1, body_end - nl - 1);
  }
  if (!tail.empty() && tail.back() == '\n') tail.pop_back();
  return tail;
}

// Whether the file holds the record (head_seq, head_hash) (or head_seq is 0) and an unbroken
// chain from it to its end: records appended after the database last took the head.
bool continuesFrom(const fs::path& file, int64_t head_seq, const std::string& head_hash) {
  std::ifstream in(file);
  bool found = head_seq == 0;
  int64_t seq = 0;
  std::string hash;
  for (std::string line; std::getline(in, line);) {
    auto r = parseRecord(line);
    if (!found) {
      found = r && r->seq == head_seq && r->hash == head_hash;
      seq = head_seq;
      hash = head_hash;
      continue;
    }
    if (!r || r->seq != seq + 1 || r->prev != hash || auditHash(r->prev, recordBody(*r)) != r->hash)
      return false;
    seq = r->seq;
    hash = r->hash;
  }
  return found && !in.bad();
}

bool visible(const AuditRecord& r, const std::optional<std::string>& key) {
  return !key || r.entry.actor.key_id == *key || r.entry.owner_id == *key;
}

}  // namespace

std::string auditHash(const std::string& prev, const json& record_without_hash) {
  std::string input = prev + "\n" + canonical(record_without_hash);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(input.data(), input.size(), md, &n, EVP_sha256(), nullptr);
  std::string hex;
  hex.reserve(n * 2);
  for (unsigned i = 0; i < n; ++i) hex += fmt::format("{:02x}", md[i]);
  return hex;
}

json toJson(const AuditRecord& record) {
  json j = recordBody(record);
  j["hash"] = record.hash;
  return j;
}

json toJson(const AuditVerdict& v) {
  json j{{"intact", v.intact},
         {"records", v.records},
         {"head", {{"seq", v.head_seq}, {"hash", v.head_hash}}}};
  if (!v.intact) {
    j["broken"] = {{"line", v.broken_at_line}, {"seq", v.broken_at_seq}, {"reason", v.reason}};
  }
  return j;
}

Result<std::pair<int64_t, std::string>> AuditLog::readHead() const {
  HUTCH_TRY(storage::Statement st, db_.prepare("SELECT seq, hash FROM audit_head WHERE id = 1"));
  HUTCH_TRY(bool row, st.step());
  if (!row) return std::pair<int64_t, std::string>{0, ""};
  return std::pair<int64_t, std::string>{st.columnInt(0), st.columnText(1)};
}

Result<std::unique_ptr<AuditLog>> AuditLog::open(const fs::path& file, storage::Database& db) {
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  if (ec) {
    return fail(Errc::kInternal,
                fmt::format("Cannot create {}: {}", file.parent_path().string(), ec.message()));
  }
  int raw = ::open(file.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (raw < 0) {
    return fail(Errc::kInternal, fmt::format("Cannot open the audit log {}", file.string()), errno);
  }
  std::unique_ptr<AuditLog> log(new AuditLog(file, db, UniqueFd(raw)));
  HUTCH_TRY(auto head, log->readHead());
  HUTCH_TRY(std::string last, lastLine(log->fd_.get()));
  log->seq_ = head.first;
  log->hash_ = head.second;
  if (last.empty() && head.first == 0) return log;
  auto record = last.empty() ? Result<AuditRecord>(AuditRecord{}) : parseRecord(last);
  if (record && record->seq == head.first && record->hash == head.second) return log;
  if (record && record->seq > head.first && continuesFrom(file, head.first, head.second)) {
    // The last appends reached the file but not the database: hutchd stopped in between, or
    // the database could not be written (a full disk) while the file's last block had room.
    log->seq_ = record->seq;
    log->hash_ = record->hash;
    HUTCH_TRY(storage::Statement st,
              db.prepare("INSERT OR REPLACE INTO audit_head (id, seq, hash) VALUES (1, ?1, ?2)"));
    st.bind(1, log->seq_).bind(2, log->hash_);
    HUTCH_TRY_VOID(st.run());
    return log;
  }
  // The file does not end where the database says it does: records were removed or the file
  // was replaced. Go on from what the file holds, and say so in the chain itself, so that the
  // break stays visible to verify() however many records follow.
  json found = record ? json{{"seq", record->seq}, {"hash", record->hash}}
                      : json{{"line", last.substr(0, 200)}, {"error", record.error().message()}};
  spdlog::error(
      "audit: {} does not end with the record its head names (seq {}); recording "
      "the discontinuity. Run 'hutch audit verify'",
      file.string(), head.first);
  log->seq_ = record ? record->seq : 0;
  log->hash_ = record ? record->hash : "";
  AuditEntry note;
  note.type = kDiscontinuity;
  note.data = {{"expected", {{"seq", head.first}, {"hash", head.second}}},
               {"found", std::move(found)}};
  HUTCH_TRY_VOID(log->append(std::move(note)));
  return log;
}

Result<int64_t> AuditLog::append(AuditEntry entry) {
  AuditRecord r;
  r.seq = seq_ + 1;
  r.time_ms = nowMs();
  r.entry = std::move(entry);
  r.prev = hash_;
  json body = recordBody(r);
  r.hash = auditHash(r.prev, body);
  body["hash"] = r.hash;
  std::string line = canonical(body) + "\n";
  ssize_t n = ::write(fd_.get(), line.data(), line.size());
  if (n != static_cast<ssize_t>(line.size())) {
    int err = errno;
    if (n > 0) {
      // A partial line would break the chain for every later record: cut it off again.
      struct stat st {};
      if (::fstat(fd_.get(), &st) == 0) (void)::ftruncate(fd_.get(), st.st_size - n);
    }
    return fail(n < 0 && err == ENOSPC ? Errc::kResourceExhausted : Errc::kInternal,
                fmt::format("Cannot append to the audit log {}", file_.string()),
                n < 0 ? err : ENOSPC);
  }
  seq_ = r.seq;
  hash_ = r.hash;
  HUTCH_TRY(storage::Statement st,
            db_.prepare("INSERT OR REPLACE INTO audit_head (id, seq, hash) VALUES (1, ?1, ?2)"));
  st.bind(1, seq_).bind(2, hash_);
  HUTCH_TRY_VOID(st.run());
  return seq_;
}

Result<std::vector<AuditRecord>> AuditLog::read(const AuditQuery& q) const {
  std::ifstream in(file_);
  if (!in) {
    return fail(Errc::kInternal, fmt::format("Cannot read the audit log {}", file_.string()));
  }
  std::vector<AuditRecord> out;
  std::string line;
  while (out.size() < q.limit && std::getline(in, line)) {
    auto r = parseRecord(line);
    if (!r) continue;  // verify() reports it; a reader skips it
    if (r->seq <= q.after_seq || r->time_ms < q.since_ms) continue;
    if (!q.box_id.empty() && r->entry.box_id != q.box_id) continue;
    if (!visible(*r, q.visible_to)) continue;
    out.push_back(std::move(*r));
  }
  return out;
}

Result<AuditVerdict> AuditLog::verify() const {
  AuditVerdict v;
  HUTCH_TRY(auto head, readHead());
  v.head_seq = head.first;
  v.head_hash = head.second;
  std::ifstream in(file_);
  if (!in) {
    return fail(Errc::kInternal, fmt::format("Cannot read the audit log {}", file_.string()));
  }
  auto broken = [&v](int64_t line, int64_t seq, std::string reason) {
    v.intact = false;
    v.broken_at_line = line;
    v.broken_at_seq = seq;
    v.reason = std::move(reason);
    return v;
  };
  std::string line;
  std::string prev;
  int64_t seq = 0;
  int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    auto r = parseRecord(line);
    if (!r) {
      return broken(number, seq + 1,
                    fmt::format("line {} is not an audit record: {}", number, r.error().message()));
    }
    if (r->seq != seq + 1) {
      return broken(number, seq + 1,
                    fmt::format("record {} follows record {}: {}", r->seq, seq,
                                r->seq > seq + 1 ? "records between them were removed"
                                                 : "records were reordered or duplicated"));
    }
    if (r->prev != prev) {
      return broken(number, r->seq,
                    fmt::format("record {} does not follow the record before it (its prev hash "
                                "differs): a record before it was changed or removed",
                                r->seq));
    }
    if (auditHash(r->prev, recordBody(*r)) != r->hash) {
      return broken(number, r->seq,
                    fmt::format("record {} was changed after it was written (its hash does not "
                                "match its content)",
                                r->seq));
    }
    if (r->entry.type == kDiscontinuity) {
      return broken(number, r->seq,
                    fmt::format("at record {} hutchd found the log cut short or replaced: it "
                                "expected to continue from record {} ({})",
                                r->seq, r->entry.data["expected"].value("seq", int64_t{0}),
                                canonical(r->entry.data)));
    }
    prev = r->hash;
    seq = r->seq;
    ++v.records;
  }
  if (seq != head.first || prev != head.second) {
    return broken(number + 1, seq + 1,
                  fmt::format("the log ends at record {} but the database says record {} was "
                              "written last: records at the end were removed",
                              seq, head.first));
  }
  return v;
}

}  // namespace hutch::observe

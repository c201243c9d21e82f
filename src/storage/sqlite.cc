#include "storage/sqlite.h"

#include <fmt/format.h>

namespace hutch::storage {

namespace {
tl::unexpected<Error> sqliteError(sqlite3* db, std::string_view what) {
  int code = sqlite3_extended_errcode(db) & 0xff;
  if (code == SQLITE_FULL) {
    // Nothing was written: the change is refused whole, and works again once there is space.
    return fail(Errc::kResourceExhausted,
                fmt::format("{}: {}: free space on the filesystem of hutchd's state directory "
                            "and try again",
                            what, sqlite3_errmsg(db)));
  }
  Errc errc = code == SQLITE_CONSTRAINT ? Errc::kAlreadyExists : Errc::kInternal;
  return fail(errc, fmt::format("{}: {}", what, sqlite3_errmsg(db)));
}
}  // namespace

Statement& Statement::bind(int index, std::string_view value) {
  sqlite3_bind_text(stmt_.get(), index, value.data(), static_cast<int>(value.size()),
                    SQLITE_TRANSIENT);
  return *this;
}

Statement& Statement::bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_.get(), index, value);
  return *this;
}

Result<bool> Statement::step() {
  int rc = sqlite3_step(stmt_.get());
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return sqliteError(db_, "Database statement failed");
}

Result<> Statement::run() {
  while (true) {
    HUTCH_TRY(bool row, step());
    if (!row) return ok();
  }
}

std::string Statement::columnText(int index) const {
  const unsigned char* text = sqlite3_column_text(stmt_.get(), index);
  if (text == nullptr) return {};
  return {reinterpret_cast<const char*>(text),
          static_cast<size_t>(sqlite3_column_bytes(stmt_.get(), index))};
}

int64_t Statement::columnInt(int index) const {
  return sqlite3_column_int64(stmt_.get(), index);
}

Result<Database> Database::open(const std::string& path) {
  sqlite3* raw = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &raw,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  Database db(raw);
  if (rc != SQLITE_OK) {
    return fail(Errc::kInternal, fmt::format("Cannot open database {}: {}", path,
                                             raw ? sqlite3_errmsg(raw) : "out of memory"));
  }
  sqlite3_busy_timeout(raw, 5000);
  HUTCH_TRY_VOID(
      db.exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
              "PRAGMA foreign_keys=ON;"));
  return db;
}

Result<Statement> Database::prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_.get(), sql.data(), static_cast<int>(sql.size()), &stmt, nullptr) !=
      SQLITE_OK) {
    return sqliteError(db_.get(), "Cannot prepare statement");
  }
  return Statement(db_.get(), stmt);
}

Result<> Database::exec(std::string_view sql) {
  char* err = nullptr;
  std::string text(sql);
  if (sqlite3_exec(db_.get(), text.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    sqlite3_free(err);
    return sqliteError(db_.get(), "Database error");
  }
  return ok();
}

int64_t Database::changes() const {
  return sqlite3_changes(db_.get());
}

}  // namespace hutch::storage

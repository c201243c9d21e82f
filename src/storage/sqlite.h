// A thin RAII layer over the SQLite C API: a connection, prepared statements, and errors as
// Result values.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"

namespace hutch::storage {

class Statement {
 public:
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt, &sqlite3_finalize) {}

  Statement& bind(int index, std::string_view value);
  Statement& bind(int index, int64_t value);
  // Steps once: true if a row is available, false when done.
  Result<bool> step();
  Result<> run();  // steps to completion, for statements without rows

  std::string columnText(int index) const;
  int64_t columnInt(int index) const;

 private:
  sqlite3* db_;
  std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> stmt_;
};

class Database {
 public:
  // Opens (creating if needed) the database at `path` in WAL mode. ":memory:" for tests.
  static Result<Database> open(const std::string& path);

  Result<Statement> prepare(std::string_view sql);
  Result<> exec(std::string_view sql);
  int64_t changes() const;

 private:
  explicit Database(sqlite3* db) : db_(db, &sqlite3_close) {}
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> db_;
};

}  // namespace hutch::storage

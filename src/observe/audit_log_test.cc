#include "observe/audit_log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "storage/box_store.h"

namespace hutch::observe {
namespace {

namespace fs = std::filesystem;

class AuditLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hutch-audit-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto opened = storage::BoxStore::open((dir_ / "hutch.db").string());
    ASSERT_TRUE(opened) << opened.error().describe();
    store_ = std::make_unique<storage::BoxStore>(std::move(*opened));
  }
  void TearDown() override {
    store_.reset();
    fs::remove_all(dir_);
  }

  std::unique_ptr<AuditLog> open() {
    auto log = AuditLog::open(file(), store_->database());
    EXPECT_TRUE(log) << log.error().describe();
    return log ? std::move(*log) : nullptr;
  }
  fs::path file() const { return dir_ / "audit" / "audit.log"; }

  static AuditEntry exec(const std::string& box, const std::string& owner, int n) {
    AuditEntry e;
    e.type = "exec.end";
    e.actor = {.key_id = owner, .key_name = "agent-" + owner};
    e.box_id = box;
    e.box_name = "name-" + box;
    e.owner_id = owner;
    e.data = {{"argv", {"echo", std::to_string(n)}}, {"exit_code", 0}};
    return e;
  }

  std::vector<std::string> lines() const {
    std::ifstream in(file());
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }
  void writeLines(const std::vector<std::string>& all) const {
    std::ofstream out(file(), std::ios::trunc);
    for (const auto& line : all) out << line << "\n";
  }

  fs::path dir_;
  std::unique_ptr<storage::BoxStore> store_;
};

TEST_F(AuditLogTest, RecordsAreChainedAndAnIntactLogVerifies) {
  auto log = open();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(*log->append(exec("b1", "k1", i)), i + 1);
  auto verdict = log->verify();
  ASSERT_TRUE(verdict) << verdict.error().describe();
  EXPECT_TRUE(verdict->intact) << verdict->reason;
  EXPECT_EQ(verdict->records, 5);
  EXPECT_EQ(verdict->head_seq, 5);
  auto all = log->read({});
  ASSERT_EQ(all->size(), 5u);
  EXPECT_EQ((*all)[0].prev, "");
  for (size_t i = 1; i < all->size(); ++i) EXPECT_EQ((*all)[i].prev, (*all)[i - 1].hash);
  EXPECT_EQ((*all)[4].hash, log->headHash());
  EXPECT_EQ(fs::status(file()).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
}

TEST_F(AuditLogTest, AReopenedLogContinuesTheChain) {
  open()->append(exec("b1", "k1", 1));
  auto log = open();
  EXPECT_EQ(*log->append(exec("b1", "k1", 2)), 2);
  EXPECT_TRUE(log->verify()->intact);
}

TEST_F(AuditLogTest, AnEditedRecordIsFoundAtItsLine) {
  auto log = open();
  for (int i = 0; i < 4; ++i) log->append(exec("b1", "k1", i));
  auto all = lines();
  size_t at = all[2].find("\"exit_code\":0");
  ASSERT_NE(at, std::string::npos);
  all[2].replace(at, 13, "\"exit_code\":1");
  writeLines(all);
  auto verdict = log->verify();
  EXPECT_FALSE(verdict->intact);
  EXPECT_EQ(verdict->broken_at_line, 3);
  EXPECT_EQ(verdict->broken_at_seq, 3);
  EXPECT_NE(verdict->reason.find("changed"), std::string::npos) << verdict->reason;
}

TEST_F(AuditLogTest, ARemovedRecordIsFound) {
  auto log = open();
  for (int i = 0; i < 4; ++i) log->append(exec("b1", "k1", i));
  auto all = lines();
  all.erase(all.begin() + 1);
  writeLines(all);
  auto verdict = log->verify();
  EXPECT_FALSE(verdict->intact);
  EXPECT_EQ(verdict->broken_at_line, 2);
  EXPECT_NE(verdict->reason.find("removed"), std::string::npos) << verdict->reason;
}

TEST_F(AuditLogTest, ARemovedRecordWithTheChainRewrittenIsStillFound) {
  // Someone drops record 2 and re-links record 3 to record 1 with a fresh hash: each line is
  // consistent with the one before it, but the seq numbers give it away.
  auto log = open();
  for (int i = 0; i < 3; ++i) log->append(exec("b1", "k1", i));
  auto all = lines();
  auto first = nlohmann::json::parse(all[0]);
  auto third = nlohmann::json::parse(all[2]);
  third["prev"] = first["hash"];
  third.erase("hash");
  third["hash"] = auditHash(first["hash"], third);
  writeLines({all[0], third.dump()});
  auto verdict = log->verify();
  EXPECT_FALSE(verdict->intact);
  EXPECT_EQ(verdict->broken_at_line, 2);
}

TEST_F(AuditLogTest, CuttingOffTheEndIsFoundAgainstTheHead) {
  auto log = open();
  for (int i = 0; i < 4; ++i) log->append(exec("b1", "k1", i));
  auto all = lines();
  all.pop_back();
  writeLines(all);
  auto verdict = log->verify();
  EXPECT_FALSE(verdict->intact);
  EXPECT_EQ(verdict->head_seq, 4);
  EXPECT_NE(verdict->reason.find("ends at record 3"), std::string::npos) << verdict->reason;
}

TEST_F(AuditLogTest, AfterARestartOnATruncatedLogTheBreakStaysVisible) {
  {
    auto log = open();
    for (int i = 0; i < 4; ++i) log->append(exec("b1", "k1", i));
  }
  auto all = lines();
  all.resize(2);
  writeLines(all);
  auto log = open();  // hutchd starts again: it must not hide the cut by moving the head
  ASSERT_TRUE(log);
  log->append(exec("b1", "k1", 9));
  auto verdict = log->verify();
  EXPECT_FALSE(verdict->intact);
  EXPECT_EQ(verdict->broken_at_line, 3);
  EXPECT_NE(verdict->reason.find("expected to continue from record 4"), std::string::npos)
      << verdict->reason;
}

TEST_F(AuditLogTest, AnAppendTheDatabaseMissedIsTakenUpAtOpen) {
  {
    auto log = open();
    log->append(exec("b1", "k1", 1));
    log->append(exec("b1", "k1", 2));
  }
  // The head as it was before the second append reached SQLite.
  auto first = nlohmann::json::parse(lines()[0]);
  ASSERT_TRUE(
      store_->database()
          .exec("UPDATE audit_head SET seq = 1, hash = '" + first["hash"].get<std::string>() + "'")
          .has_value());
  auto log = open();
  EXPECT_EQ(log->headSeq(), 2);
  EXPECT_TRUE(log->verify()->intact);
}

TEST_F(AuditLogTest, ManyAppendsTheDatabaseMissedAreTakenUpIfTheyChainFromTheHead) {
  // A full disk: SQLite could not take the head while the file's last block still had room.
  {
    auto log = open();
    for (int i = 0; i < 5; ++i) log->append(exec("b1", "k1", i));
  }
  auto second = nlohmann::json::parse(lines()[1]);
  const std::string behind =
      "UPDATE audit_head SET seq = 2, hash = '" + second["hash"].get<std::string>() + "'";
  ASSERT_TRUE(store_->database().exec(behind).has_value());
  {
    auto log = open();
    EXPECT_EQ(log->headSeq(), 5);
    EXPECT_TRUE(log->verify()->intact);
  }
  // Nothing at all reached the database: the chain from the start is taken up too.
  ASSERT_TRUE(store_->database().exec("DELETE FROM audit_head").has_value());
  {
    auto log = open();
    EXPECT_EQ(log->headSeq(), 5);
    EXPECT_TRUE(log->verify()->intact);
  }
  // But not records that do not chain from the head: one edited after it is a break, and stays
  // one.
  ASSERT_TRUE(store_->database().exec(behind).has_value());
  auto all = lines();
  auto edited = nlohmann::json::parse(all[3]);
  edited["data"]["exit_code"] = 1;
  all[3] = edited.dump();
  writeLines(all);
  auto log = open();
  ASSERT_TRUE(log);
  EXPECT_EQ(log->headSeq(), 6) << "the discontinuity is recorded after the file's last record";
  EXPECT_FALSE(log->verify()->intact);
}

TEST_F(AuditLogTest, ReadFiltersByBoxTimeAndWhatAKeyMaySee) {
  auto log = open();
  log->append(exec("b1", "k1", 1));
  log->append(exec("b2", "k2", 2));
  AuditEntry admin_in_k1s_box = exec("b1", "k1", 3);
  admin_in_k1s_box.actor = {};
  log->append(admin_in_k1s_box);
  EXPECT_EQ(log->read({.box_id = "b2"})->size(), 1u);
  EXPECT_EQ(log->read({.visible_to = std::string("k1")})->size(), 2u);
  EXPECT_EQ(log->read({.visible_to = std::string("k2")})->size(), 1u);
  EXPECT_EQ(log->read({.after_seq = 2})->size(), 1u);
  EXPECT_EQ(log->read({.limit = 1})->size(), 1u);
}

TEST_F(AuditLogTest, BytesThatAreNotUtf8AreRecordedAndStillVerify) {
  auto log = open();
  AuditEntry e = exec("b1", "k1", 1);
  e.data["argv"] = {"cat", std::string("bad\xff\xfe name")};
  ASSERT_TRUE(log->append(e));
  EXPECT_TRUE(log->verify()->intact);
}

TEST_F(AuditLogTest, GarbageInTheFileIsReportedNotTrusted) {
  auto log = open();
  log->append(exec("b1", "k1", 1));
  {
    std::ofstream out(file(), std::ios::app);
    out << "not json at all\n";
  }
  auto verdict = log->verify();
  EXPECT_FALSE(verdict->intact);
  EXPECT_EQ(verdict->broken_at_line, 2);
  EXPECT_EQ(log->read({})->size(), 1u);
}

}  // namespace
}  // namespace hutch::observe

// SecretService with its real neighbours: a secret store in a temporary directory, the event bus
// on an in-memory database and an audit log file.
#include "api/secret_service.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "storage/box_store.h"
#include "storage/event_store.h"

namespace hutch::api {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kValue = "sk-live-do-not-log-1234";

Principal key(const std::string& id, const std::string& name, bool admin) {
  Principal p;
  p.kind = Principal::Kind::kKey;
  p.key_id = id;
  p.key_name = name;
  p.admin = admin;
  return p;
}

net::Secret secret(const std::string& name, const std::string& domain,
                   const std::string& value = kValue) {
  return net::Secret{.name = name, .value = value, .domains = {domain}};
}

std::vector<std::string> names(const Result<std::vector<net::Secret>>& list) {
  std::vector<std::string> out;
  if (!list) return {"error: " + list.error().describe()};
  for (const auto& s : *list) out.push_back(s.name);
  return out;
}

class SecretServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hutch-secret-service-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto opened = storage::BoxStore::open(":memory:");
    ASSERT_TRUE(opened) << opened.error().describe();
    boxes_ = std::make_unique<storage::BoxStore>(std::move(*opened));
    event_store_ = std::make_unique<storage::EventStore>(boxes_->database(), 1000);
    bus_ = std::make_unique<observe::EventBus>(io_.get_executor(), *event_store_);
    auto audit = observe::AuditLog::open(dir_ / "audit" / "audit.log", boxes_->database());
    ASSERT_TRUE(audit) << audit.error().describe();
    audit_ = std::move(*audit);
    auto store = net::SecretStore::open(dir_ / "secrets");
    ASSERT_TRUE(store) << store.error().describe();
    store_ = std::make_unique<net::SecretStore>(std::move(*store));
    service_ = std::make_unique<SecretService>(*store_, bus_.get(), audit_.get());
  }
  void TearDown() override {
    service_.reset();
    audit_.reset();
    fs::remove_all(dir_);
  }

  std::vector<observe::Event> events() {
    auto all = bus_->read({.types = {"secret."}});
    EXPECT_TRUE(all) << all.error().describe();
    return all ? *all : std::vector<observe::Event>{};
  }
  std::vector<observe::AuditRecord> records() {
    auto all = audit_->read({});
    EXPECT_TRUE(all) << all.error().describe();
    return all ? *all : std::vector<observe::AuditRecord>{};
  }
  std::string auditText() const {
    std::ifstream in(dir_ / "audit" / "audit.log");
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  const Principal host_ = Principal::host();
  const Principal alice_ = key("a11ce0", "alice", false);
  const Principal bob_ = key("b0b000", "bob", false);
  const Principal admin_ = key("ad0000", "root-key", true);

  fs::path dir_;
  boost::asio::io_context io_;
  std::unique_ptr<storage::BoxStore> boxes_;
  std::unique_ptr<storage::EventStore> event_store_;
  std::unique_ptr<observe::EventBus> bus_;
  std::unique_ptr<observe::AuditLog> audit_;
  std::unique_ptr<net::SecretStore> store_;
  std::unique_ptr<SecretService> service_;
};

// docs/api.md "Owners": secrets belong to the principal that set them, and every principal
// (admin keys and the host administrator too) lists and changes only its own, because a box can
// use only its owner's secrets.
TEST_F(SecretServiceTest, EachOwnerSeesAndChangesOnlyItsOwnAdminsIncluded) {
  ASSERT_TRUE(service_->put(host_, secret("TOKEN", "host.test")));
  ASSERT_TRUE(service_->put(alice_, secret("TOKEN", "alice.test")));
  ASSERT_TRUE(service_->put(alice_, secret("ALICE_ONLY", "alice.test")));
  ASSERT_TRUE(service_->put(admin_, secret("ADMIN_ONLY", "admin.test")));

  EXPECT_EQ(names(service_->list(host_)), (std::vector<std::string>{"TOKEN"}));
  EXPECT_EQ(names(service_->list(alice_)), (std::vector<std::string>{"ALICE_ONLY", "TOKEN"}));
  EXPECT_EQ(names(service_->list(bob_)), std::vector<std::string>{});
  EXPECT_EQ(names(service_->list(admin_)), (std::vector<std::string>{"ADMIN_ONLY"}));
  EXPECT_EQ(service_->list(alice_)->back().domains, std::vector<std::string>{"alice.test"});
  EXPECT_EQ(service_->list(host_)->back().domains, std::vector<std::string>{"host.test"});

  // Another owner's secret is not found, and not touched.
  EXPECT_EQ(service_->remove(bob_, "ALICE_ONLY").error().code(), Errc::kNotFound);
  EXPECT_EQ(service_->remove(admin_, "ALICE_ONLY").error().code(), Errc::kNotFound);
  EXPECT_EQ(service_->remove(host_, "ALICE_ONLY").error().code(), Errc::kNotFound);
  EXPECT_EQ(names(service_->list(alice_)), (std::vector<std::string>{"ALICE_ONLY", "TOKEN"}));
  // A name the caller shares with another owner is the caller's own.
  auto bobs = service_->put(bob_, secret("TOKEN", "bob.test"));
  ASSERT_TRUE(bobs) << bobs.error().describe();
  EXPECT_FALSE(bobs->replaced);
  EXPECT_EQ(service_->list(alice_)->back().domains, std::vector<std::string>{"alice.test"});
  ASSERT_TRUE(service_->remove(alice_, "TOKEN"));
  EXPECT_EQ(names(service_->list(host_)), (std::vector<std::string>{"TOKEN"}));
  EXPECT_EQ(names(service_->list(bob_)), (std::vector<std::string>{"TOKEN"}));
  EXPECT_EQ(names(service_->list(alice_)), (std::vector<std::string>{"ALICE_ONLY"}));

  // Where each one lives: the box side (net::SecretStore::forOwner) finds them there.
  EXPECT_EQ(store_->get("TOKEN")->domains, std::vector<std::string>{"host.test"});
  EXPECT_EQ(store_->forOwner(alice_.key_id).get("ALICE_ONLY")->value, kValue);
  EXPECT_EQ(store_->forOwner(admin_.key_id).get("ADMIN_ONLY")->domains,
            std::vector<std::string>{"admin.test"});
}

TEST_F(SecretServiceTest, ValuesGoInAndNeverComeOut) {
  auto stored = service_->put(alice_, secret("API_KEY", "api.example.test"));
  ASSERT_TRUE(stored) << stored.error().describe();
  EXPECT_EQ(stored->secret.name, "API_KEY");
  EXPECT_EQ(stored->secret.value, "");
  EXPECT_GT(stored->secret.updated_at, 0);
  auto listed = service_->list(alice_);
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(listed->front().value, "");
  // ... while the store keeps it for the egress proxy.
  EXPECT_EQ(store_->forOwner(alice_.key_id).get("API_KEY")->value, kValue);
}

TEST_F(SecretServiceTest, EachChangeIsAnEventAndAnAuditRecordWithoutTheValue) {
  auto made = service_->put(alice_, secret("API_KEY", "api.example.test"));
  ASSERT_TRUE(made);
  EXPECT_FALSE(made->replaced);
  auto replaced = service_->put(alice_, secret("API_KEY", "api.example.test", "another-value"));
  ASSERT_TRUE(replaced);
  EXPECT_TRUE(replaced->replaced);
  ASSERT_TRUE(service_->remove(alice_, "API_KEY"));
  ASSERT_TRUE(service_->put(host_, secret("HOST_KEY", "host.test")));

  auto seen = events();
  ASSERT_EQ(seen.size(), 4u);
  std::vector<std::string> types;
  types.reserve(seen.size());
  for (const auto& e : seen) types.push_back(e.type);
  EXPECT_EQ(types, (std::vector<std::string>{"secret.created", "secret.replaced", "secret.removed",
                                             "secret.created"}));
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(seen[i].owner_id, alice_.key_id);
    EXPECT_EQ(seen[i].box_id, "");
    EXPECT_EQ(
        json::parse(seen[i].data),
        (json{{"name", "API_KEY"}, {"actor", {{"key_id", alice_.key_id}, {"key_name", "alice"}}}}))
        << seen[i].data;
  }
  EXPECT_EQ(seen[3].owner_id, "");
  EXPECT_EQ(json::parse(seen[3].data), (json{{"name", "HOST_KEY"}, {"actor", "host"}}));

  auto trail = records();
  ASSERT_EQ(trail.size(), 4u);
  std::vector<std::string> audit_types;
  audit_types.reserve(trail.size());
  for (const auto& r : trail) audit_types.push_back(r.entry.type);
  EXPECT_EQ(audit_types, (std::vector<std::string>{"secret.create", "secret.replace",
                                                   "secret.remove", "secret.create"}));
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(trail[i].entry.actor, alice_.actor());
    EXPECT_EQ(trail[i].entry.owner_id, alice_.key_id);
    EXPECT_EQ(trail[i].entry.box_id, "");
    EXPECT_EQ(trail[i].entry.data, (json{{"name", "API_KEY"}}));
  }
  EXPECT_EQ(trail[3].entry.actor, observe::Actor{});
  EXPECT_EQ(trail[3].entry.owner_id, "");
  // alice reads her own trail (GET /v1/audit as a key).
  EXPECT_EQ(audit_->read({.visible_to = alice_.key_id})->size(), 3u);
  EXPECT_TRUE(audit_->verify()->intact);

  // Neither the values nor anything derived from them is anywhere in either.
  for (const auto& e : seen) {
    EXPECT_EQ(e.data.find(kValue), std::string::npos) << e.data;
    EXPECT_EQ(e.data.find("another-value"), std::string::npos) << e.data;
  }
  const std::string text = auditText();
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.find(kValue), std::string::npos) << text;
  EXPECT_EQ(text.find("another-value"), std::string::npos) << text;
}

// Today's rules and words (net::validateSecret), and a refused change is reported nowhere.
TEST_F(SecretServiceTest, BadSecretsAreRefusedWithWhatToDoAndReportNothing) {
  struct Case {
    net::Secret secret;
    std::string says;
  };
  net::Secret no_header_name = secret("K", "api.test");
  no_header_name.header = "Bad Header";
  net::Secret two_values = secret("K", "api.test");
  two_values.format = "{value}{value}";
  const std::vector<Case> cases = {
      {secret("lower", "api.test"), "is not a secret name"},
      {secret("9LIVES", "api.test"), "is not a secret name"},
      {secret("K", "api.test", ""), "value is empty"},
      {secret("K", "api.test", "two\nlines"), "one line"},
      {secret("K", "api.test", std::string(16385, 'x')), "at most 16384 bytes"},
      {net::Secret{.name = "K", .value = "v"}, "at least one domain"},
      {secret("K", "*"), "Bad secret domain"},
      {secret("K", "*.com"), "Bad secret domain"},
      {no_header_name, "is not an HTTP header name"},
      {two_values, "{value} exactly once"},
  };
  for (const Case& c : cases) {
    auto put = service_->put(alice_, c.secret);
    ASSERT_FALSE(put) << c.says;
    EXPECT_EQ(put.error().code(), Errc::kInvalidArgument) << put.error().describe();
    EXPECT_NE(put.error().describe().find(c.says), std::string::npos) << put.error().describe();
    EXPECT_EQ(put.error().describe().find("x" + std::string(100, 'x')), std::string::npos);
  }
  EXPECT_EQ(names(service_->list(alice_)), std::vector<std::string>{});
  // Removing what is not there, or by a name no secret can have, is not found.
  EXPECT_EQ(service_->remove(alice_, "NOPE").error().code(), Errc::kNotFound);
  EXPECT_EQ(service_->remove(alice_, "../x").error().code(), Errc::kNotFound);
  EXPECT_TRUE(events().empty());
  EXPECT_TRUE(records().empty());
}

TEST_F(SecretServiceTest, WorksWithoutEventsOrAuditLog) {
  SecretService quiet(*store_, nullptr, nullptr);
  ASSERT_TRUE(quiet.put(alice_, secret("K", "api.test")));
  ASSERT_TRUE(quiet.put(alice_, secret("K", "api.test")));
  ASSERT_TRUE(quiet.remove(alice_, "K"));
  EXPECT_TRUE(events().empty());
  EXPECT_TRUE(records().empty());
}

}  // namespace
}  // namespace hutch::api

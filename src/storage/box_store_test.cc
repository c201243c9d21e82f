#include "storage/box_store.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace hutch::storage {
namespace {

box::Box makeBox(std::string id, std::string name) {
  box::Box b;
  b.id = std::move(id);
  b.name = std::move(name);
  b.state = box::BoxState::kRunning;
  b.accel = "tcg";
  b.created_at = 100;
  b.updated_at = 100;
  return b;
}

TEST(BoxStoreTest, InsertFindUpdateRemove) {
  auto store = BoxStore::open(":memory:");
  ASSERT_TRUE(store) << store.error().message();
  box::Box b = makeBox("a1b2c3d4e5f6", "alpha");
  ASSERT_TRUE(store->insert(b));
  EXPECT_EQ(*store->find("alpha"), b);
  EXPECT_EQ(*store->find("a1b2c3d4e5f6"), b);
  EXPECT_EQ(*store->find("a1b2"), b);  // unique prefix

  b.state = box::BoxState::kFailed;
  b.reason = "QEMU exited";
  ASSERT_TRUE(store->update(b));
  EXPECT_EQ(store->find("alpha")->reason, "QEMU exited");

  ASSERT_TRUE(store->remove(b.id));
  auto gone = store->find("alpha");
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().code(), Errc::kNotFound);
}

// A secret's owner is kept only when it is not the box's (a build box's are its caller's).
TEST(BoxStoreTest, SecretsKeepTheirOwnerWhenTheyHaveOne) {
  auto store = BoxStore::open(":memory:");
  ASSERT_TRUE(store) << store.error().message();
  box::Box b = makeBox("a1b2c3d4e5f6", "build-1");
  b.owner.id = "hutch-build";
  b.secrets = {{"API_KEY", "hutch-secret-API_KEY-1", std::string()},
               {"NPM_TOKEN", "hutch-secret-NPM_TOKEN-2", std::nullopt}};
  ASSERT_TRUE(store->insert(b));
  auto found = store->find("build-1");
  ASSERT_TRUE(found) << found.error().message();
  EXPECT_EQ(found->secrets, b.secrets);
  EXPECT_EQ(found->secrets[0].owner, std::optional<std::string>(""));
  EXPECT_FALSE(found->secrets[1].owner);
}

TEST(BoxStoreTest, DuplicateNameIsRefusedAndNothingChanges) {
  auto store = BoxStore::open(":memory:");
  ASSERT_TRUE(store->insert(makeBox("aaaaaaaaaaaa", "same")));
  auto dup = store->insert(makeBox("bbbbbbbbbbbb", "same"));
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().code(), Errc::kAlreadyExists);
  EXPECT_EQ(store->list()->size(), 1u);
}

TEST(BoxStoreTest, AmbiguousPrefixAndUpdateOfMissingBox) {
  auto store = BoxStore::open(":memory:");
  ASSERT_TRUE(store->insert(makeBox("abc000000001", "one")));
  ASSERT_TRUE(store->insert(makeBox("abc000000002", "two")));
  EXPECT_EQ(store->find("abc").error().code(), Errc::kInvalidArgument);
  EXPECT_EQ(store->update(makeBox("ffffffffffff", "x")).error().code(), Errc::kNotFound);
}

TEST(BoxStoreTest, ANameThatIsAnIdPrefixIsStillFree) {
  // "b" finds box bf01... by prefix, but no box is named "b": a fork may take that name.
  auto store = BoxStore::open(":memory:");
  ASSERT_TRUE(store->insert(makeBox("bf0100000001", "a")));
  ASSERT_TRUE(store->find("b"));
  EXPECT_FALSE(*store->nameTaken("b"));
  EXPECT_TRUE(*store->nameTaken("a"));
  EXPECT_FALSE(*store->nameTaken("bf0100000001")) << "an id is not a name";
}

TEST(BoxStoreTest, SurvivesReopen) {
  auto path = std::filesystem::temp_directory_path() /
              ("hutch-store-test-" + std::to_string(::getpid()) + ".db");
  {
    auto store = BoxStore::open(path.string());
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->insert(makeBox("0123456789ab", "kept")));
  }
  auto store = BoxStore::open(path.string());
  ASSERT_TRUE(store);
  EXPECT_EQ(store->find("kept")->id, "0123456789ab");
  std::filesystem::remove(path);
  std::filesystem::remove(path.string() + "-wal");
  std::filesystem::remove(path.string() + "-shm");
}

TEST(BoxStoreTest, UidIndicesAreStoredAndUnique) {
  auto store = BoxStore::open(":memory:");
  box::Box a = makeBox("aaaaaaaaaaaa", "a");
  a.uid_index = 0;
  box::Box b = makeBox("bbbbbbbbbbbb", "b");
  b.uid_index = 7;
  ASSERT_TRUE(store->insert(a));
  ASSERT_TRUE(store->insert(b));
  EXPECT_EQ(store->find("b")->uid_index, 7);
  EXPECT_EQ(*store->uidIndices(), (std::vector<uint32_t>{0, 7}));
  box::Box c = makeBox("cccccccccccc", "c");
  c.uid_index = 7;  // taken
  EXPECT_FALSE(store->insert(c));
  box::Box d = makeBox("dddddddddddd", "d");  // none yet: any number of those
  box::Box e = makeBox("eeeeeeeeeeee", "e");
  ASSERT_TRUE(store->insert(d));
  ASSERT_TRUE(store->insert(e));
  EXPECT_EQ(store->find("e")->uid_index, -1);
  ASSERT_TRUE(store->remove(b.id));
  EXPECT_EQ(*store->uidIndices(), (std::vector<uint32_t>{0}));
}

TEST(BoxStoreTest, OwnersSeeOnlyTheirBoxesAndPrefixesDoNotLeak) {
  auto store = BoxStore::open(":memory:");
  ASSERT_TRUE(store);
  box::Box a = makeBox("abcdef000001", "alices");
  a.owner = {"key-a", "alice"};
  a.env = {{"K", "v"}, {"OTHER", "x y"}};
  a.metadata = {{"agent", "claude"}, {"run", "7"}};
  a.shares = {{"/srv/project", "/work", false}, {"/srv/data", "/data", true}};
  a.expires_at = 1764650000;
  a.on_expiry = box::Expiry::kStop;
  box::Box b = makeBox("abcdef000002", "bobs");
  b.owner = {"key-b", "bob"};
  box::Box h = makeBox("123456789abc", "hosts");
  ASSERT_TRUE(store->insert(a));
  ASSERT_TRUE(store->insert(b));
  ASSERT_TRUE(store->insert(h));
  EXPECT_EQ(*store->find("alices"), a) << "owner, env, metadata, lifetime and shares round-trip";
  EXPECT_EQ(store->find("alices", std::string("key-a"))->id, a.id);
  EXPECT_EQ(store->find("alices", std::string("key-b")).error().code(), Errc::kNotFound);
  EXPECT_EQ(store->find(a.id, std::string("key-b")).error().code(), Errc::kNotFound);
  // "abcdef" is ambiguous for the host, unique for each owner.
  EXPECT_EQ(store->find("abcdef").error().code(), Errc::kInvalidArgument);
  EXPECT_EQ(store->find("abcdef", std::string("key-b"))->id, b.id);
  EXPECT_EQ(store->list()->size(), 3u);
  auto alices = store->list(std::string("key-a"));
  ASSERT_TRUE(alices);
  ASSERT_EQ(alices->size(), 1u);
  EXPECT_EQ(alices->front().name, "alices");
  EXPECT_EQ(store->list(std::string(""))->size(), 1u) << "the host's own boxes";
}

TEST(BoxStoreTest, MigrationGivesOlderBoxesTheirOwnUidIndex) {
  auto path = std::filesystem::temp_directory_path() /
              ("hutch-store-v3-" + std::to_string(::getpid()) + ".db");
  {
    auto store = BoxStore::open(path.string());
    ASSERT_TRUE(store->insert(makeBox("0123456789ab", "first")));
    ASSERT_TRUE(store->insert(makeBox("ba9876543210", "second")));
  }
  {
    // Back to schema v3, as an older hutchd left it.
    auto db = Database::open(path.string());
    ASSERT_TRUE(db);
    ASSERT_TRUE(db->exec(
        "DROP TABLE ssh_keys; ALTER TABLE boxes DROP COLUMN shares; "
        "DROP TABLE audit_head; DROP INDEX events_by_box; DROP TABLE events; "
        "DROP INDEX saved_names; ALTER TABLE snapshots DROP COLUMN owner_id; "
        "ALTER TABLE snapshots DROP COLUMN source; ALTER TABLE boxes DROP COLUMN max_exec_ms; "
        "ALTER TABLE boxes DROP COLUMN idle_pause_ms; "
        "ALTER TABLE boxes DROP COLUMN metadata; ALTER TABLE boxes DROP COLUMN expires_at; "
        "ALTER TABLE boxes DROP COLUMN on_expiry; "
        "DROP TABLE api_keys; DROP INDEX boxes_by_owner; "
        "ALTER TABLE boxes DROP COLUMN owner_id; ALTER TABLE boxes DROP COLUMN owner_name; "
        "ALTER TABLE boxes DROP COLUMN env; "
        "DROP TABLE ports; DROP INDEX box_uid_index; "
        "ALTER TABLE boxes DROP COLUMN uid_index; "
        "ALTER TABLE boxes DROP COLUMN network_policy; "
        "ALTER TABLE boxes DROP COLUMN secrets; PRAGMA user_version = 3;"));
  }
  auto store = BoxStore::open(path.string());
  ASSERT_TRUE(store) << store.error().describe();
  EXPECT_EQ(store->find("first")->uid_index, 0);
  EXPECT_EQ(store->find("second")->uid_index, 1);
  // Boxes from before networking have no policy (they get none) and no secrets.
  EXPECT_EQ(store->find("first")->network_policy, "");
  EXPECT_TRUE(store->find("first")->secrets.empty());
  // ... and no metadata or lifetime.
  EXPECT_TRUE(store->find("first")->metadata.empty());
  EXPECT_EQ(store->find("first")->expires_at, 0);
  EXPECT_EQ(store->find("first")->on_expiry, box::Expiry::kNone);
  EXPECT_TRUE(store->find("first")->shares.empty());
  std::filesystem::remove(path);
  std::filesystem::remove(path.string() + "-wal");
  std::filesystem::remove(path.string() + "-shm");
}

}  // namespace
}  // namespace hutch::storage

namespace hutch::storage {
namespace {

TEST(BoxStoreTest, CheckpointsMadeInTheSameSecondListInTheOrderTheyWereMade) {
  auto store = BoxStore::open(":memory:");
  ASSERT_TRUE(store) << store.error().message();
  ASSERT_TRUE(store->insert(makeBox("a1b2c3d4e5f6", "alpha")));
  // Ids are random: the second one sorts first, and the clock has not moved.
  for (auto [id, name] : {std::pair{"ffff00000000", "first"}, std::pair{"000000000000", "second"},
                          std::pair{"888800000000", "third"}}) {
    box::Snapshot snap;
    snap.id = id;
    snap.box_id = "a1b2c3d4e5f6";
    snap.name = name;
    snap.created_at = 100;
    ASSERT_TRUE(store->insertSnapshot(snap));
  }
  auto listed = store->checkpoints("a1b2c3d4e5f6");
  ASSERT_TRUE(listed) << listed.error().message();
  std::vector<std::string> names;
  for (const box::Snapshot& snap : *listed) names.push_back(snap.name);
  EXPECT_EQ(names, (std::vector<std::string>{"first", "second", "third"}));
}

TEST(BoxStoreTest, SavedSnapshotsAreOwnedNamedPerOwnerAndOutliveTheirBox) {
  auto store = BoxStore::open(":memory:");
  ASSERT_TRUE(store) << store.error().message();
  ASSERT_TRUE(store->insert(makeBox("a1b2c3d4e5f6", "alpha")));
  auto saved = [](const char* id, const char* owner, const char* name) {
    box::Snapshot snap;
    snap.id = id;
    snap.kind = box::SnapshotKind::kSaved;
    snap.box_id = "a1b2c3d4e5f6";
    snap.owner_id = owner;
    snap.name = name;
    snap.source = R"({"name":"alpha"})";
    snap.created_at = 100;
    return snap;
  };
  ASSERT_TRUE(store->insertSnapshot(saved("aaaa00000000", "key-a", "mine")));
  ASSERT_TRUE(store->insertSnapshot(saved("bbbb00000000", "key-b", "mine")));  // another owner's
  auto taken = store->insertSnapshot(saved("cccc00000000", "key-a", "mine"));
  ASSERT_FALSE(taken);
  EXPECT_EQ(taken.error().code(), Errc::kAlreadyExists);
  EXPECT_NE(taken.error().message().find("snapshot named 'mine'"), std::string::npos);
  // A checkpoint of the same name is another namespace.
  box::Snapshot checkpoint = saved("dddd00000000", "", "mine");
  checkpoint.kind = box::SnapshotKind::kCheckpoint;
  ASSERT_TRUE(store->insertSnapshot(checkpoint));

  auto a = store->savedSnapshots(std::string("key-a"));
  ASSERT_TRUE(a);
  ASSERT_EQ(a->size(), 1u);
  EXPECT_EQ(a->front(), saved("aaaa00000000", "key-a", "mine"));
  auto everyone = store->savedSnapshots(std::nullopt);
  ASSERT_TRUE(everyone);
  EXPECT_EQ(everyone->size(), 2u);
  // By id or by name, within the owner.
  EXPECT_EQ(store->findSaved(std::string("key-b"), "mine")->id, "bbbb00000000");
  EXPECT_EQ(store->findSaved(std::string("key-b"), "bbbb00000000")->id, "bbbb00000000");
  auto other = store->findSaved(std::string("key-b"), "aaaa00000000");
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().code(), Errc::kNotFound);
  EXPECT_FALSE(store->findSaved(std::string("key-a"), "dddd00000000"));  // a checkpoint
  // Removing the box takes its checkpoints' records (BoxService does that) but not these.
  ASSERT_TRUE(store->remove("a1b2c3d4e5f6"));
  EXPECT_EQ(store->savedSnapshots(std::nullopt)->size(), 2u);
}

TEST(BoxStorePortsTest, InsertListRemoveAndConflicts) {
  auto store = BoxStore::open(":memory:");
  ASSERT_TRUE(store);
  box::Box a = makeBox("aaaaaaaaaaaa", "a");
  box::Box b = makeBox("bbbbbbbbbbbb", "b");
  ASSERT_TRUE(store->insert(a));
  ASSERT_TRUE(store->insert(b));
  box::PortForward p{.box_id = a.id, .host_port = 8080, .box_port = 80, .created_at = 1};
  ASSERT_TRUE(store->insertPort(p));
  box::PortForward q{.box_id = a.id, .host_port = 8081, .box_port = 81, .created_at = 2};
  ASSERT_TRUE(store->insertPort(q));
  EXPECT_EQ(*store->ports(a.id), (std::vector<box::PortForward>{p, q}));
  EXPECT_TRUE(store->ports(b.id)->empty());

  // The same host port, or a wildcard over it, is refused naming the box that holds it.
  box::PortForward clash{
      .box_id = b.id, .host_address = "0.0.0.0", .host_port = 8080, .box_port = 80};
  auto refused = store->insertPort(clash);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), Errc::kAlreadyExists);
  EXPECT_NE(refused.error().message().find("box a"), std::string::npos)
      << refused.error().message();

  EXPECT_EQ(store->removePort(a.id, 9999, "").error().code(), Errc::kNotFound);
  ASSERT_TRUE(store->removePort(a.id, 8080, "127.0.0.1"));
  EXPECT_EQ(store->ports(a.id)->size(), 1u);
  ASSERT_TRUE(store->removePorts(a.id));
  EXPECT_TRUE(store->allPorts()->empty());
}

}  // namespace
}  // namespace hutch::storage

namespace hutch::storage {
namespace {

TEST(BoxStoreNetworkTest, PolicyAndSecretsRoundTrip) {
  auto path = std::filesystem::temp_directory_path() /
              ("hutch-store-net-" + std::to_string(::getpid()) + ".db");
  std::filesystem::remove(path);
  auto store = BoxStore::open(path.string());
  ASSERT_TRUE(store) << store.error().describe();
  box::Box b;
  b.id = "0123456789ab";
  b.name = "n";
  b.network_policy = R"({"allow":[{"domain":"a.test"}],"deny":[]})";
  b.secrets = {{"API_KEY", "hutch-secret-API_KEY-00"}, {"B", "hutch-secret-B-11"}};
  ASSERT_TRUE(store->insert(b));
  auto got = store->find("n");
  ASSERT_TRUE(got);
  EXPECT_EQ(got->network_policy, b.network_policy);
  EXPECT_EQ(got->secrets, b.secrets);
  b.network_policy = R"({"allow":[],"deny":[]})";
  ASSERT_TRUE(store->update(b));
  EXPECT_EQ(store->find("n")->network_policy, b.network_policy);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace hutch::storage

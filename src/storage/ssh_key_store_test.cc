#include "storage/ssh_key_store.h"

#include <gtest/gtest.h>

#include "storage/box_store.h"

namespace hutch::storage {
namespace {

SshKey key(std::string owner, std::string name, std::string fingerprint) {
  return SshKey{.owner_id = std::move(owner),
                .owner_name = "n",
                .name = std::move(name),
                .public_key = "ssh-ed25519 AAAA",
                .fingerprint = std::move(fingerprint),
                .created_at = 1};
}

TEST(SshKeyStoreTest, KeysArePerOwnerAndEachKeyHasOneOwner) {
  auto store = BoxStore::open(":memory:");
  ASSERT_TRUE(store) << store.error().describe();
  SshKeyStore keys(store->database());
  ASSERT_TRUE(keys.insert(key("alice", "laptop", "SHA256:a")));
  ASSERT_TRUE(keys.insert(key("bob", "laptop", "SHA256:b")));
  // The same name for the same owner, or the same key for anyone: refused.
  EXPECT_EQ(keys.insert(key("alice", "laptop", "SHA256:c")).error().code(), Errc::kAlreadyExists);
  EXPECT_EQ(keys.insert(key("bob", "other", "SHA256:a")).error().code(), Errc::kAlreadyExists);
  EXPECT_EQ(keys.findByFingerprint("SHA256:b").value().owner_id, "bob");
  EXPECT_EQ(keys.findByFingerprint("SHA256:x").error().code(), Errc::kNotFound);
  auto alices = keys.listOf("alice");
  ASSERT_TRUE(alices);
  ASSERT_EQ(alices->size(), 1u);
  EXPECT_EQ((*alices)[0], key("alice", "laptop", "SHA256:a"));
  EXPECT_EQ(keys.remove("alice", "nope").error().code(), Errc::kNotFound);
  EXPECT_EQ(keys.remove("bob", "nope").error().code(), Errc::kNotFound);
  ASSERT_TRUE(keys.remove("alice", "laptop"));
  EXPECT_FALSE(keys.findByFingerprint("SHA256:a"));
  ASSERT_TRUE(keys.removeAllOf("bob"));
  EXPECT_TRUE(keys.listOf("bob").value().empty());
}

}  // namespace
}  // namespace hutch::storage

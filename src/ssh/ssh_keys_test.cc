#include "ssh/ssh_keys.h"

#include <gtest/gtest.h>

namespace hutch::ssh {
namespace {

// ssh-keygen -t ed25519 (a throw-away key) and the fingerprint ssh-keygen -l printed for it.
constexpr std::string_view kKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDOnepOutJvVz3r3Fvvr52cHTGDhhxN5KvPeTtF6CTru";

TEST(SshKeysTest, PublicKeyLinesAreReadWithOrWithoutAComment) {
  auto bare = parsePublicKey(kKey);
  ASSERT_TRUE(bare) << bare.error().describe();
  EXPECT_EQ(bare->public_key, kKey);
  EXPECT_TRUE(bare->fingerprint.starts_with("SHA256:")) << bare->fingerprint;
  auto commented = parsePublicKey(std::string(kKey) + " alice@laptop\n");
  ASSERT_TRUE(commented);
  EXPECT_EQ(commented->public_key, kKey);
  EXPECT_EQ(commented->fingerprint, bare->fingerprint);
}

TEST(SshKeysTest, AnythingElseIsRefused) {
  for (const std::string& bad :
       {std::string(""), std::string("ssh-ed25519"), std::string("ssh-ed25519 !!!notbase64"),
        std::string(
            "ssh-unknown AAAAC3NzaC1lZDI1NTE5AAAAIDOnepOutJvVz3r3Fvvr52cHTGDhhxN5KvPeTtF6CTru"),
        std::string("-----BEGIN OPENSSH PRIVATE KEY-----"),
        std::string(kKey) + "\n" + std::string(kKey)}) {
    auto parsed = parsePublicKey(bad);
    ASSERT_FALSE(parsed) << bad;
    EXPECT_EQ(parsed.error().code(), Errc::kInvalidArgument);
  }
}

}  // namespace
}  // namespace hutch::ssh

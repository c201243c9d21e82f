#include "ssh/host_key.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

namespace hutch::ssh {
namespace {

class HostKeyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hutch-hostkey-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(HostKeyTest, MadeOnceWithMode0600ThenKept) {
  const auto path = dir_ / "ssh_host_ed25519_key";
  auto first = HostKey::loadOrCreate(path);
  ASSERT_TRUE(first) << first.error().describe();
  EXPECT_TRUE(first->publicKey().starts_with("ssh-ed25519 AAAA")) << first->publicKey();
  EXPECT_TRUE(first->fingerprint().starts_with("SHA256:")) << first->fingerprint();
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto second = HostKey::loadOrCreate(path);
  ASSERT_TRUE(second) << second.error().describe();
  EXPECT_EQ(second->publicKey(), first->publicKey());
  EXPECT_EQ(second->fingerprint(), first->fingerprint());
}

TEST_F(HostKeyTest, AFileThatIsNoKeyIsNeverReplaced) {
  const auto path = dir_ / "ssh_host_ed25519_key";
  std::ofstream(path) << "not a key\n";
  auto key = HostKey::loadOrCreate(path);
  ASSERT_FALSE(key);
  EXPECT_EQ(key.error().code(), Errc::kInternal);
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "not a key\n");
}

}  // namespace
}  // namespace hutch::ssh

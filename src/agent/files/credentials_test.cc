#include "agent/files/credentials.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "base/unique_fd.h"

namespace hutch::agent {
namespace {

constexpr uid_t kUser = 1000;  // needs no passwd entry: the ids are used as they are
constexpr uint64_t kDacOverride = uint64_t{1} << 1;  // CAP_DAC_OVERRIDE
constexpr uint64_t kDacReadSearch = uint64_t{1} << 2;

// The calling thread's effective capabilities.
uint64_t threadCapEff() {
  std::ifstream status("/proc/thread-self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("CapEff:", 0) == 0) return std::stoull(line.substr(7), nullptr, 16);
  }
  return 0;
}

class CredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "Needs root to take another user's credentials";
    char dir[] = "/tmp/hutch-creds-XXXXXX";
    ASSERT_TRUE(::mkdtemp(dir));
    dir_ = dir;
    ::chmod(dir_.c_str(), 0755);
    secret_ = dir_ + "/secret";
    std::ofstream(secret_) << "root only";
    ::chmod(secret_.c_str(), 0600);
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  std::string dir_;
  std::string secret_;
};

TEST_F(CredentialsTest, ANonZeroFsuidDropsDacOverrideForThatThreadOnly) {
  ASSERT_NE(threadCapEff() & kDacOverride, 0u);
  bool refused = false;
  int err = 0;
  bool capability_dropped = false;
  bool created_as_user = false;
  bool restored = false;
  std::thread worker([&] {
    {
      ScopedFsCredentials as(FsCredentials{kUser, kUser, {kUser}, "1000"});
      ASSERT_TRUE(as.entered());
      EXPECT_EQ(currentFsUid(), kUser);
      capability_dropped = (threadCapEff() & (kDacOverride | kDacReadSearch)) == 0;
      UniqueFd fd(::open(secret_.c_str(), O_RDONLY | O_CLOEXEC));
      refused = !fd.valid();
      err = errno;
      // dir_ is root's 0755: the user cannot create in it either.
      UniqueFd made(::open((dir_ + "/made").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
      created_as_user = made.valid();
    }
    restored = currentFsUid() == 0 && (threadCapEff() & kDacOverride) != 0;
  });
  worker.join();
  EXPECT_TRUE(capability_dropped);
  EXPECT_TRUE(refused);
  EXPECT_EQ(err, EACCES);
  EXPECT_FALSE(created_as_user);
  EXPECT_TRUE(restored);
  // The other threads never changed: this one can still read it.
  UniqueFd fd(::open(secret_.c_str(), O_RDONLY | O_CLOEXEC));
  EXPECT_TRUE(fd.valid());
  EXPECT_EQ(currentFsUid(), 0u);
}

TEST_F(CredentialsTest, FilesMadeBelongToTheUserAndItsGroups) {
  const std::string shared = dir_ + "/shared";
  ::mkdir(shared.c_str(), 0700);
  ::chmod(shared.c_str(), 0770);
  ::chown(shared.c_str(), 0, 4242);  // only group 4242 may write
  struct stat st {};
  bool member_made = false;
  bool outsider_made = false;
  std::thread worker([&] {
    {
      ScopedFsCredentials as(FsCredentials{kUser, kUser, {kUser, 4242}, "1000"});
      ASSERT_TRUE(as.entered());
      UniqueFd made(::open((shared + "/f").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
      member_made = made.valid();
    }
    {
      ScopedFsCredentials as(FsCredentials{kUser, kUser, {kUser}, "1000"});
      UniqueFd made(::open((shared + "/g").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
      outsider_made = made.valid();
    }
  });
  worker.join();
  EXPECT_TRUE(member_made);
  EXPECT_FALSE(outsider_made);
  ASSERT_EQ(::stat((shared + "/f").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kUser);
  EXPECT_EQ(st.st_gid, kUser);
}

TEST(CredentialsSelfTest, ActingAsItselfNeedsNoPrivilege) {
  ScopedFsCredentials as(FsCredentials{::geteuid(), ::getegid(), {}, "me"});
  EXPECT_TRUE(as.entered());
  EXPECT_EQ(currentFsUid(), ::geteuid());
}

}  // namespace
}  // namespace hutch::agent

#include "sys/unix_socket.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace hutch::sys {
namespace {

class UnixSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hutch-unix-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(UnixSocketTest, AClientConnectsBeforeAnyoneAcceptsAndBytesWaitForTheAccept) {
  auto listener = listenUnix(dir_ / "s.sock", 4, 0600);
  ASSERT_TRUE(listener) << listener.error().describe();
  struct stat st {};
  ASSERT_EQ(::stat((dir_ / "s.sock").c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  auto client = connectUnix(dir_ / "s.sock");
  ASSERT_TRUE(client) << client.error().describe();
  ASSERT_EQ(::write(client->get(), "hi", 2), 2);
  UniqueFd accepted(::accept4(listener->get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(accepted);
  char buf[8] = {};
  ASSERT_EQ(::read(accepted.get(), buf, sizeof buf), 2);
  EXPECT_EQ(std::string(buf, 2), "hi");
}

TEST_F(UnixSocketTest, ClosingTheListenerBeforeTheAcceptEndsThePendingConnection) {
  // What hutchd sees when QEMU dies before it accepted: EOF or a reset, never a hang.
  auto listener = listenUnix(dir_ / "s.sock");
  ASSERT_TRUE(listener);
  auto client = connectUnix(dir_ / "s.sock");
  ASSERT_TRUE(client);
  listener->reset();
  char buf[8];
  ssize_t n = ::recv(client->get(), buf, sizeof buf, 0);
  EXPECT_LE(n, 0);
  if (n < 0) {
    EXPECT_EQ(errno, ECONNRESET);
  }
}

TEST_F(UnixSocketTest, ClearErrors) {
  auto missing = connectUnix(dir_ / "nobody.sock");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code(), Errc::kNotFound);
  ASSERT_TRUE(listenUnix(dir_ / "s.sock"));
  auto taken = listenUnix(dir_ / "s.sock");
  ASSERT_FALSE(taken);
  EXPECT_NE(taken.error().describe().find("Cannot bind"), std::string::npos);
  auto too_long = listenUnix(dir_ / std::string(200, 'x'));
  ASSERT_FALSE(too_long);
  EXPECT_EQ(too_long.error().code(), Errc::kInvalidArgument);
}

}  // namespace
}  // namespace hutch::sys

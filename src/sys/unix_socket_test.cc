#include "sys/unix_socket.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace hutch::sys {
namespace {

// A connection waiting on `listener`, or none: never blocks.
int acceptNow(int listener) {
  ::fcntl(listener, F_SETFL, ::fcntl(listener, F_GETFL) | O_NONBLOCK);
  return ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
}

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

// What hutchd does when it reconnects to a QEMU's socket in a box-owned directory.
TEST_F(UnixSocketTest, ATrustedSocketConnectsOnlyToTheOwnersSocketThroughItsDescriptor) {
  auto listener = listenUnix(dir_ / "qmp.sock");
  ASSERT_TRUE(listener) << listener.error().describe();
  auto trusted = openTrustedSocket(dir_ / "qmp.sock", ::getuid());
  ASSERT_TRUE(trusted) << trusted.error().describe();
  // Renamed away and replaced after the check: the connection still reaches the checked one.
  auto decoy = listenUnix(dir_ / "decoy.sock");
  ASSERT_TRUE(decoy);
  std::filesystem::rename(dir_ / "qmp.sock", dir_ / "moved.sock");
  std::filesystem::rename(dir_ / "decoy.sock", dir_ / "qmp.sock");
  auto client = connectUnix(trusted->procPath());
  ASSERT_TRUE(client) << client.error().describe();
  UniqueFd accepted(acceptNow(listener->get()));
  EXPECT_TRUE(accepted) << "the checked listener got no connection";
  UniqueFd none(acceptNow(decoy->get()));
  EXPECT_FALSE(none) << "the decoy got the connection";
}

TEST_F(UnixSocketTest, ATrustedSocketRefusesSymlinksOtherFilesAndOtherOwners) {
  auto listener = listenUnix(dir_ / "real.sock");
  ASSERT_TRUE(listener);
  std::filesystem::create_symlink(dir_ / "real.sock", dir_ / "link.sock");
  auto link = openTrustedSocket(dir_ / "link.sock", ::getuid());
  ASSERT_FALSE(link);
  EXPECT_NE(link.error().message().find("is a symlink"), std::string::npos)
      << link.error().message();
  { std::ofstream(dir_ / "file.sock") << "x"; }
  auto file = openTrustedSocket(dir_ / "file.sock", ::getuid());
  ASSERT_FALSE(file);
  EXPECT_NE(file.error().message().find("not a socket"), std::string::npos);
  auto other = openTrustedSocket(dir_ / "real.sock", ::getuid() + 4242);
  ASSERT_FALSE(other);
  EXPECT_NE(other.error().message().find("a socket of uid"), std::string::npos)
      << other.error().message();
  EXPECT_FALSE(openTrustedSocket(dir_ / "missing.sock", ::getuid()));
}

}  // namespace
}  // namespace hutch::sys

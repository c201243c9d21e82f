// Needs root (namespaces, tap devices, nftables): skipped otherwise.
#include "net/box_net.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>

#include "net/netns.h"
#include "sys/run.h"

namespace hutch::net {
namespace {

namespace fs = std::filesystem;

class BoxNetworksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root";
    dir_ = fs::temp_directory_path() / ("hutch-net-test-" + std::to_string(::getpid()));
    auto made = BoxNetworks::create("hutch-nt" + std::to_string(::getpid()) + "-", dir_);
    ASSERT_TRUE(made) << made.error().describe();
    nets_.emplace(std::move(*made));
  }
  void TearDown() override {
    if (nets_) nets_->removeOrphans({});
    fs::remove_all(dir_);
  }
  fs::path dir_;
  std::optional<BoxNetworks> nets_;
};

TEST_F(BoxNetworksTest, NamespaceHoldsOnlyTheTapWithTheGatewayAndTheRules) {
  auto path = nets_->prepare(7);
  ASSERT_TRUE(path) << path.error().describe();
  EXPECT_EQ(*path, netnsPath(nets_->nameFor(7)));
  auto links = sys::runCapture({"ip", "-n", nets_->nameFor(7), "-o", "addr", "show"});
  ASSERT_TRUE(links) << links.error().describe();
  EXPECT_NE(links->find("tap0"), std::string::npos) << *links;
  EXPECT_NE(links->find("10.0.2.2/24"), std::string::npos) << *links;
  auto routes = sys::runCapture({"ip", "-n", nets_->nameFor(7), "route", "show", "default"});
  ASSERT_TRUE(routes);
  EXPECT_EQ(*routes, "") << "a box namespace must have no default route";
  std::string ruleset;
  ASSERT_TRUE(inNetns(*path, [&]() -> Result<> {
    HUTCH_TRY(ruleset, sys::runCapture({"nft", "list", "ruleset"}));
    return ok();
  }));
  EXPECT_NE(ruleset.find("redirect to :15001"), std::string::npos) << ruleset;
  EXPECT_NE(ruleset.find("policy drop"), std::string::npos) << ruleset;

  auto tap = openTap(*path, kTapName);
  ASSERT_TRUE(tap) << tap.error().describe();
  auto listeners = nets_->listeners(7);
  ASSERT_TRUE(listeners) << listeners.error().describe();
  sockaddr_in sin{};
  socklen_t len = sizeof sin;
  ASSERT_EQ(::getsockname(listeners->transparent.get(), reinterpret_cast<sockaddr*>(&sin), &len),
            0);
  EXPECT_EQ(ntohs(sin.sin_port), kTransparentPort);

  // Made again from scratch: the old one (and its listeners' ports) do not get in the way.
  listeners->dns.reset();
  ASSERT_TRUE(nets_->prepare(7));
  ASSERT_TRUE(nets_->release(7));
  EXPECT_FALSE(fs::exists(*path));
  EXPECT_TRUE(nets_->release(7)) << "releasing twice is not an error";
}

TEST_F(BoxNetworksTest, OrphansAreRemovedAndKeptOnesStay) {
  ASSERT_TRUE(nets_->prepare(1));
  ASSERT_TRUE(nets_->prepare(2));
  nets_->removeOrphans({2});
  EXPECT_FALSE(fs::exists(nets_->pathFor(1)));
  EXPECT_TRUE(fs::exists(nets_->pathFor(2)));
}

TEST_F(BoxNetworksTest, MissingNamespaceIsAClearError) {
  auto tap = openTap(nets_->pathFor(99), kTapName);
  ASSERT_FALSE(tap);
  EXPECT_NE(tap.error().message().find("network namespace"), std::string::npos);
  EXPECT_FALSE(openTap(nets_->pathFor(99), std::string(40, 'x')));
}

}  // namespace
}  // namespace hutch::net

#include "box/port_forward.h"

#include <gtest/gtest.h>

namespace hutch::box {
namespace {

TEST(PortForwardTest, ParsesDockerSyntax) {
  auto a = parsePortSpec("8080:80");
  ASSERT_TRUE(a) << a.error().message();
  EXPECT_EQ(a->host_address, "127.0.0.1");
  EXPECT_EQ(a->host_port, 8080);
  EXPECT_EQ(a->box_port, 80);
  auto b = parsePortSpec("0.0.0.0:9000:9001/tcp");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->host_address, "0.0.0.0");
  EXPECT_EQ(b->host_port, 9000);
  EXPECT_EQ(b->box_port, 9001);
  auto c = parsePortSpec("[::1]:8080:80");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->host_address, "::1");
  EXPECT_EQ(hostEndpoint(*c), "[::1]:8080");
  EXPECT_EQ(parsePortSpec("localhost:1:2")->host_address, "127.0.0.1");
}

TEST(PortForwardTest, RefusesBadSpecs) {
  for (const char* bad : {"", "80", "a:b", "0:80", "80:0", "70000:80", "1:2:3:4", "x.y:1:2",
                          "[::1]8080:80", "8080:80x", "-1:80"}) {
    auto r = parsePortSpec(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code(), Errc::kInvalidArgument) << bad;
  }
  EXPECT_EQ(parsePortSpec("53:53/udp").error().code(), Errc::kUnsupported);
}

TEST(PortForwardTest, WildcardsCollideWithEveryAddress) {
  PortForward a{.host_address = "127.0.0.1", .host_port = 8080, .box_port = 80};
  PortForward b{.host_address = "0.0.0.0", .host_port = 8080, .box_port = 81};
  PortForward c{.host_address = "127.0.0.2", .host_port = 8080, .box_port = 80};
  PortForward d{.host_address = "127.0.0.1", .host_port = 8081, .box_port = 80};
  EXPECT_TRUE(sameHostPort(a, b));
  EXPECT_TRUE(sameHostPort(c, b));
  EXPECT_FALSE(sameHostPort(a, c));
  EXPECT_FALSE(sameHostPort(a, d));
}

}  // namespace
}  // namespace hutch::box

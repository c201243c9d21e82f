#include "agent/init/network.h"

#include <gtest/gtest.h>

namespace hutch::agent {
namespace {

TEST(NetConfigTest, ParsesTheHostsParameters) {
  auto config = parseNetConfig("console=ttyS0 hutch.ip=10.0.2.15/24 hutch.gw=10.0.2.2 quiet");
  ASSERT_TRUE(config) << config.error().describe();
  ASSERT_TRUE(*config);
  EXPECT_EQ((*config)->address, 0x0A00020Fu);
  EXPECT_EQ((*config)->prefix, 24u);
  EXPECT_EQ((*config)->gateway, 0x0A000202u);
  EXPECT_EQ((*config)->dns, 0x0A000202u) << "the resolver defaults to the gateway";
  EXPECT_EQ(resolvConf(**config).find("nameserver 10.0.2.2\n") != std::string::npos, true)
      << resolvConf(**config);
  auto dns = parseNetConfig("hutch.ip=10.0.2.15 hutch.gw=10.0.2.2 hutch.dns=10.0.2.3");
  ASSERT_TRUE(dns && *dns);
  EXPECT_EQ((*dns)->dns, 0x0A000203u);
  EXPECT_EQ((*dns)->prefix, 24u);
}

TEST(NetConfigTest, NoAddressMeansNoNetwork) {
  auto none = parseNetConfig("console=ttyS0 hutch.gw=10.0.2.2");
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);
}

TEST(NetConfigTest, MalformedValuesAreErrorsThatNameTheParameter) {
  auto bad = parseNetConfig("hutch.ip=10.0.2 hutch.gw=10.0.2.2");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("hutch.ip=10.0.2 is not an IPv4 address"),
            std::string::npos);
  auto prefix = parseNetConfig("hutch.ip=10.0.2.15/33 hutch.gw=10.0.2.2");
  ASSERT_FALSE(prefix);
  EXPECT_NE(prefix.error().message().find("prefix length"), std::string::npos);
  auto gw = parseNetConfig("hutch.ip=10.0.2.15/24");
  ASSERT_FALSE(gw);
  EXPECT_NE(gw.error().message().find("hutch.gw"), std::string::npos);
  EXPECT_FALSE(parseNetConfig("hutch.ip=10.0.2.15/24 hutch.gw=x"));
}

}  // namespace
}  // namespace hutch::agent

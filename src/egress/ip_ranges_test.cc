#include "egress/ip_ranges.h"

#include <gtest/gtest.h>

namespace hutch::egress {
namespace {

// The name of the special range `text` is in ("" for an ordinary address).
std::string rangeOf(const char* text) {
  auto address = IpAddress::parse(text);
  EXPECT_TRUE(address) << text;
  if (!address) return "?";
  auto range = specialRange(*address);
  return range ? range->name : "";
}

RangeKind kindOf(const char* text) {
  auto range = specialRange(*IpAddress::parse(text));
  EXPECT_TRUE(range) << text;
  return range ? range->kind : RangeKind::kLocal;
}

TEST(IpRangesTest, LocalOnlyIpv4RangesAreSpecial) {
  EXPECT_EQ(rangeOf("127.0.0.1"), "loopback");
  EXPECT_EQ(rangeOf("127.255.0.9"), "loopback");
  EXPECT_EQ(rangeOf("0.0.0.0"), "unspecified");
  EXPECT_EQ(rangeOf("0.1.2.3"), "unspecified");
  EXPECT_EQ(rangeOf("169.254.1.1"), "link-local");
  EXPECT_EQ(rangeOf("192.0.0.8"), "IETF protocol assignments (192.0.0.0/24)");
  EXPECT_EQ(rangeOf("192.88.99.1"), "6to4 relay anycast");
  EXPECT_EQ(rangeOf("198.18.0.1"), "benchmarking (198.18.0.0/15)");
  EXPECT_EQ(rangeOf("198.19.255.255"), "benchmarking (198.18.0.0/15)");
  EXPECT_EQ(rangeOf("224.0.0.1"), "multicast");
  EXPECT_EQ(rangeOf("239.255.255.250"), "multicast");
  EXPECT_EQ(rangeOf("255.255.255.255"), "broadcast");
  EXPECT_EQ(rangeOf("240.0.0.1"), "reserved (240.0.0.0/4)");
}

TEST(IpRangesTest, PrivateIpv4RangesAreSpecialAndOpenable) {
  for (const char* a : {"10.0.0.1", "10.255.255.255", "172.16.0.1", "172.31.255.254", "192.168.0.1",
                        "192.168.255.255"}) {
    EXPECT_EQ(rangeOf(a), "private (RFC 1918)") << a;
    EXPECT_EQ(kindOf(a), RangeKind::kPrivate) << a;
  }
  EXPECT_EQ(rangeOf("100.64.0.1"), "shared address space (CGNAT, RFC 6598)");
  EXPECT_EQ(rangeOf("100.127.255.254"), "shared address space (CGNAT, RFC 6598)");
  EXPECT_EQ(kindOf("100.64.0.1"), RangeKind::kPrivate);
  // Just outside.
  EXPECT_EQ(rangeOf("172.15.255.255"), "");
  EXPECT_EQ(rangeOf("172.32.0.0"), "");
  EXPECT_EQ(rangeOf("100.63.255.255"), "");
  EXPECT_EQ(rangeOf("100.128.0.0"), "");
  EXPECT_EQ(rangeOf("11.0.0.0"), "");
}

TEST(IpRangesTest, MetadataAddressesAreNeverOpenable) {
  for (const char* a :
       {"169.254.169.254", "169.254.170.2", "100.100.100.200", "168.63.129.16", "fd00:ec2::254"}) {
    EXPECT_EQ(kindOf(a), RangeKind::kMetadata) << a;
  }
  EXPECT_EQ(rangeOf("169.254.169.254"), "cloud metadata");
  EXPECT_EQ(rangeOf("168.63.129.17"), "") << "only the host agent's one address";
}

TEST(IpRangesTest, SpecialIpv6Ranges) {
  EXPECT_EQ(rangeOf("::"), "unspecified");
  EXPECT_EQ(rangeOf("::1"), "loopback");
  EXPECT_EQ(rangeOf("fe80::1"), "link-local");
  EXPECT_EQ(rangeOf("febf::1"), "link-local");
  EXPECT_EQ(rangeOf("fec0::1"), "site-local (deprecated)");
  EXPECT_EQ(rangeOf("fc00::1"), "unique local (fc00::/7)");
  EXPECT_EQ(rangeOf("fd12:3456::1"), "unique local (fc00::/7)");
  EXPECT_EQ(kindOf("fd12:3456::1"), RangeKind::kPrivate);
  EXPECT_EQ(rangeOf("ff02::1"), "multicast");
  EXPECT_EQ(rangeOf("2001:0:4136:e378::1"), "Teredo (2001::/32)");
  EXPECT_EQ(rangeOf("100::1"), "discard-only (100::/64)");
  EXPECT_EQ(rangeOf("::127.0.0.1"), "IPv4-compatible (deprecated)");
  EXPECT_EQ(rangeOf("::ffff:0:10.0.0.1"), "IPv4-translated (SIIT)");
  EXPECT_EQ(rangeOf("64:ff9b:1::1"), "local-use NAT64 (64:ff9b:1::/48)");
}

TEST(IpRangesTest, EmbeddedIpv4IsJudgedAsIpv4) {
  // IPv4-mapped addresses are IPv4 addresses.
  EXPECT_TRUE(IpAddress::parse("::ffff:127.0.0.1")->isV4());
  EXPECT_EQ(rangeOf("::ffff:127.0.0.1"), "loopback");
  EXPECT_EQ(rangeOf("::ffff:169.254.169.254"), "cloud metadata");
  EXPECT_EQ(rangeOf("::ffff:10.1.2.3"), "private (RFC 1918)");
  // NAT64 and 6to4 carry an IPv4 address too: a special one makes them special, and they are
  // never opened by allow_private (kind local).
  EXPECT_EQ(rangeOf("64:ff9b::169.254.169.254"), "NAT64 of 169.254.169.254, cloud metadata");
  EXPECT_EQ(kindOf("64:ff9b::169.254.169.254"), RangeKind::kMetadata);
  EXPECT_EQ(rangeOf("64:ff9b::7f00:1"), "NAT64 of 127.0.0.1, loopback");
  EXPECT_EQ(rangeOf("64:ff9b::192.168.1.1"), "NAT64 of 192.168.1.1, private (RFC 1918)");
  EXPECT_EQ(kindOf("64:ff9b::192.168.1.1"), RangeKind::kLocal);
  EXPECT_EQ(rangeOf("2002:a00:1::1"), "6to4 of 10.0.0.1, private (RFC 1918)");
  EXPECT_EQ(rangeOf("2002:7f00:1::"), "6to4 of 127.0.0.1, loopback");
  // ...and an ordinary embedded address is ordinary.
  EXPECT_EQ(rangeOf("64:ff9b::203.0.113.5"), "");
  EXPECT_EQ(rangeOf("2002:cb00:7105::1"), "");
}

TEST(IpRangesTest, DocumentationAndPublicAddressesAreOrdinary) {
  for (const char* a : {"192.0.2.1", "198.51.100.7", "203.0.113.200", "2001:db8::1",
                        "2001:db8:ffff::9", "93.184.216.34", "2606:4700::1111", "1.1.1.1"}) {
    EXPECT_EQ(rangeOf(a), "") << a;
  }
}

TEST(IpRangesTest, NetworksParseAndContain) {
  auto lan = parseIpNetwork("192.168.1.0/24");
  ASSERT_TRUE(lan) << lan.error().message();
  EXPECT_EQ(lan->text(), "192.168.1.0/24");
  EXPECT_TRUE(lan->contains(*IpAddress::parse("192.168.1.77")));
  EXPECT_TRUE(lan->contains(*IpAddress::parse("::ffff:192.168.1.77")));
  EXPECT_FALSE(lan->contains(*IpAddress::parse("192.168.2.1")));
  EXPECT_FALSE(lan->contains(*IpAddress::parse("fd00::1")));
  auto one = parseIpNetwork("10.1.2.3");
  ASSERT_TRUE(one);
  EXPECT_EQ(one->text(), "10.1.2.3/32");
  auto ula = parseIpNetwork("fd12:3456::/48");
  ASSERT_TRUE(ula);
  EXPECT_TRUE(ula->contains(*IpAddress::parse("fd12:3456:0:1::5")));
  EXPECT_FALSE(ula->contains(*IpAddress::parse("fd12:3457::5")));
  EXPECT_TRUE(parseIpNetwork("10.0.0.0/8")->contains(*lan) == false);
  EXPECT_TRUE(parseIpNetwork("192.168.0.0/16")->contains(*lan));
  EXPECT_FALSE(lan->contains(*parseIpNetwork("192.168.0.0/16")));
  auto all = parseIpNetwork("0.0.0.0/0");
  ASSERT_TRUE(all);
  EXPECT_TRUE(all->contains(*IpAddress::parse("8.8.8.8")));
}

TEST(IpRangesTest, BadNetworksAreClearErrors) {
  auto host_bits = parseIpNetwork("192.168.1.7/24");
  ASSERT_FALSE(host_bits);
  EXPECT_NE(host_bits.error().message().find("write 192.168.1.0/24"), std::string::npos)
      << host_bits.error().message();
  auto v6_bits = parseIpNetwork("fd12::1/16");
  ASSERT_FALSE(v6_bits);
  EXPECT_NE(v6_bits.error().message().find("write fd12::/16"), std::string::npos)
      << v6_bits.error().message();
  EXPECT_FALSE(parseIpNetwork("192.168.1.0/33"));
  EXPECT_FALSE(parseIpNetwork("fd00::/129"));
  EXPECT_FALSE(parseIpNetwork("192.168.1.0/"));
  EXPECT_FALSE(parseIpNetwork("192.168.1.0/x"));
  EXPECT_FALSE(parseIpNetwork("lan.example.com/24"));
  EXPECT_FALSE(parseIpNetwork(""));
}

}  // namespace
}  // namespace hutch::egress

#include "egress/proxy/address_filter.h"

#include <gtest/gtest.h>

namespace hutch::egress::proxy {
namespace {

using asio::ip::make_address;

AddressFilter withOwn(std::vector<std::string> own) {
  return AddressFilter([own] {
    std::vector<asio::ip::address> out;
    for (const auto& a : own) out.push_back(make_address(a));
    return out;
  });
}

TEST(AddressFilterTest, RefusesLocalOnlyAddresses) {
  AddressFilter filter = withOwn({});
  EXPECT_EQ(filter.refusal(make_address("127.0.0.1")), "loopback");
  EXPECT_EQ(filter.refusal(make_address("127.8.9.10")), "loopback");
  EXPECT_EQ(filter.refusal(make_address("::1")), "loopback");
  EXPECT_EQ(filter.refusal(make_address("169.254.169.254")), "cloud metadata");
  EXPECT_EQ(filter.refusal(make_address("169.254.1.1")), "link-local");
  EXPECT_EQ(filter.refusal(make_address("fe80::1")), "link-local");
  EXPECT_EQ(filter.refusal(make_address("0.0.0.0")), "unspecified");
  EXPECT_EQ(filter.refusal(make_address("0.1.2.3")), "unspecified");
  EXPECT_EQ(filter.refusal(make_address("::")), "unspecified");
  EXPECT_EQ(filter.refusal(make_address("224.0.0.1")), "multicast");
  EXPECT_EQ(filter.refusal(make_address("ff02::1")), "multicast");
  EXPECT_EQ(filter.refusal(make_address("255.255.255.255")), "broadcast");
}

TEST(AddressFilterTest, RefusesPrivateAndSpecialRanges) {
  AddressFilter filter = withOwn({});
  for (const char* a : {"10.0.0.1", "172.16.5.4", "192.168.1.1"}) {
    EXPECT_EQ(filter.refusal(make_address(a)), "private (RFC 1918)") << a;
  }
  EXPECT_EQ(filter.refusal(make_address("100.64.0.1")), "shared address space (CGNAT, RFC 6598)");
  EXPECT_EQ(filter.refusal(make_address("100.100.100.200")), "cloud metadata");
  EXPECT_EQ(filter.refusal(make_address("168.63.129.16")), "cloud host agent (168.63.129.16)");
  EXPECT_EQ(filter.refusal(make_address("fd00:ec2::254")), "cloud metadata");
  EXPECT_EQ(filter.refusal(make_address("192.0.0.170")),
            "IETF protocol assignments (192.0.0.0/24)");
  EXPECT_EQ(filter.refusal(make_address("198.18.0.1")), "benchmarking (198.18.0.0/15)");
  EXPECT_EQ(filter.refusal(make_address("fd12::1")), "unique local (fc00::/7)");
  EXPECT_EQ(filter.refusal(make_address("64:ff9b::a9fe:a9fe")),
            "NAT64 of 169.254.169.254, cloud metadata");
  EXPECT_EQ(filter.refusal(make_address("2002:c0a8:101::1")),
            "6to4 of 192.168.1.1, private (RFC 1918)");
  EXPECT_EQ(filter.refusal(make_address("2001:0:53aa:64c::1")), "Teredo (2001::/32)");
  // Documentation ranges are ordinary addresses (the e2e and bench stand-in servers use them).
  for (const char* a :
       {"192.0.2.10", "198.51.100.2", "203.0.113.9", "2001:db8::2", "64:ff9b::203.0.113.9"}) {
    EXPECT_EQ(filter.refusal(make_address(a)), std::nullopt) << a;
  }
}

TEST(AddressFilterTest, AllowPrivateOpensOnlyPrivateNetworksItNames) {
  AddressFilter filter = withOwn({"192.168.1.1"});
  std::vector<IpNetwork> lan = {*parseIpNetwork("192.168.1.0/24"), *parseIpNetwork("fd12::/16"),
                                *parseIpNetwork("100.64.0.0/10")};
  EXPECT_EQ(filter.refusal(make_address("192.168.1.20"), lan), std::nullopt);
  EXPECT_EQ(filter.refusal(make_address("::ffff:192.168.1.20"), lan), std::nullopt);
  EXPECT_EQ(filter.refusal(make_address("fd12:1::5"), lan), std::nullopt);
  EXPECT_EQ(filter.refusal(make_address("192.168.2.20"), lan), "private (RFC 1918)");
  EXPECT_EQ(filter.refusal(make_address("10.0.0.1"), lan), "private (RFC 1918)");
  // Never: this host's own address inside the network, metadata inside it, or a private address
  // reached through NAT64.
  EXPECT_EQ(filter.refusal(make_address("192.168.1.1"), lan), "an address of this host");
  EXPECT_EQ(filter.refusal(make_address("100.100.100.200"), lan), "cloud metadata");
  EXPECT_EQ(filter.refusal(make_address("64:ff9b::c0a8:114"), lan),
            "NAT64 of 192.168.1.20, private (RFC 1918)");
  // A hand-built network over loopback opens nothing either (the parser refuses it anyway).
  EXPECT_EQ(filter.refusal(make_address("127.0.0.1"), {*parseIpNetwork("127.0.0.0/8")}),
            "loopback");
}

TEST(AddressFilterTest, JudgesIpv4MappedAsIpv4) {
  AddressFilter filter = withOwn({"192.0.2.7"});
  EXPECT_EQ(filter.refusal(make_address("::ffff:127.0.0.1")), "loopback");
  EXPECT_EQ(filter.refusal(make_address("::ffff:169.254.1.1")), "link-local");
  EXPECT_EQ(filter.refusal(make_address("::ffff:10.1.1.1")), "private (RFC 1918)");
  EXPECT_EQ(filter.refusal(make_address("::ffff:192.0.2.7")), "an address of this host");
}

TEST(AddressFilterTest, RefusesThisHostsOwnAddresses) {
  AddressFilter filter = withOwn({"198.51.100.4", "2001:db8::4"});
  EXPECT_EQ(filter.refusal(make_address("198.51.100.4")), "an address of this host");
  EXPECT_EQ(filter.refusal(make_address("2001:db8::4")), "an address of this host");
  EXPECT_EQ(filter.refusal(make_address("198.51.100.5")), std::nullopt);
  EXPECT_EQ(filter.refusal(make_address("93.184.216.34")), std::nullopt);
  EXPECT_EQ(filter.refusal(make_address("2606:4700::1111")), std::nullopt);
}

TEST(AddressFilterTest, TheDefaultReadsThisHostsInterfaces) {
  AddressFilter filter;
  for (const auto& own : hostInterfaceAddresses()) {
    EXPECT_NE(filter.refusal(own), std::nullopt) << own.to_string();
  }
}

TEST(AddressFilterTest, TheTestVariantLetsOnlyLoopbackThrough) {
  AddressFilter filter = AddressFilter::allowingLoopbackForTests();
  EXPECT_EQ(filter.refusal(make_address("127.0.0.1")), std::nullopt);
  EXPECT_EQ(filter.refusal(make_address("169.254.169.254")), "cloud metadata");
  EXPECT_EQ(filter.refusal(make_address("10.0.0.1")), "private (RFC 1918)");
}

}  // namespace
}  // namespace hutch::egress::proxy

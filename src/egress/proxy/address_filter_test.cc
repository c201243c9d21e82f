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
  EXPECT_EQ(filter.refusal(make_address("169.254.169.254")), "link-local");
  EXPECT_EQ(filter.refusal(make_address("fe80::1")), "link-local");
  EXPECT_EQ(filter.refusal(make_address("0.0.0.0")), "unspecified");
  EXPECT_EQ(filter.refusal(make_address("0.1.2.3")), "unspecified");
  EXPECT_EQ(filter.refusal(make_address("::")), "unspecified");
  EXPECT_EQ(filter.refusal(make_address("224.0.0.1")), "multicast");
  EXPECT_EQ(filter.refusal(make_address("ff02::1")), "multicast");
  EXPECT_EQ(filter.refusal(make_address("255.255.255.255")), "broadcast");
}

TEST(AddressFilterTest, JudgesIpv4MappedAsIpv4) {
  AddressFilter filter = withOwn({"192.0.2.7"});
  EXPECT_EQ(filter.refusal(make_address("::ffff:127.0.0.1")), "loopback");
  EXPECT_EQ(filter.refusal(make_address("::ffff:169.254.1.1")), "link-local");
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
  EXPECT_EQ(filter.refusal(make_address("169.254.169.254")), "link-local");
}

}  // namespace
}  // namespace hutch::egress::proxy

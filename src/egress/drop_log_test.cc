#include "egress/drop_log.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hutch::egress {
namespace {

std::vector<uint8_t> fromHex(std::string_view hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

// One datagram read from an NFLOG socket bound to group 1 in a namespace whose tap0 carries the
// box ruleset's netdev chain (Linux 6.18): a UDP datagram 10.0.2.15 -> 198.51.100.2:9999, an
// ICMP echo request to 10.0.2.2, a UDP datagram fe80::5054:ff:fe12:3456 -> [2001:db8::7]:123,
// then NLMSG_DONE.
constexpr std::string_view kKernelDatagram =
    "bc00000000040000000000000000000005000001080001000800000005000a00000000000800040000000002"
    "1000080000060000525400123456000006000f000001000006001100000e0000120010007ed216ed34c95254"
    "001234560800000014000300000000006b0e8299000000000007936d08000b000000000008000e0000000000"
    "120015007ed216ed34c952540012345608000000230009004500001f00010000401144890a00020fc6336402"
    "9c40270f000b000061626300bc00000000040000000000000000000005000001080001000800000005000a00"
    "0000000008000400000000021000080000060000525400123456000006000f000001000006001100000e0000"
    "120010007ed216ed34c95254001234560800000014000300000000006b0e8299000000000007937608000b00"
    "0000000008000e0000000000120015007ed216ed34c952540012345608000000240009004500002000010000"
    "400162cc0a00020f0a0002020800192d0001000170696e67d000000000040000000000000000000005000001"
    "0800010086dd000005000a000000000008000400000000021000080000060000525400123456000006000f00"
    "0001000006001100000e0000120010007ed216ed34c952540012345686dd000014000300000000006b0e8299"
    "00000000000793c408000b000000000008000e0000000000120015007ed216ed34c952540012345686dd0000"
    "3600090060000000000a1140fe80000000000000505400fffe12345620010db8000000000000000000000007"
    "9c41007b000a0000686900001400000003000000000000000000000000000001";

TEST(DropLogTest, ParsesWhatTheKernelSends) {
  auto bytes = fromHex(kKernelDatagram);
  auto packets = parseNflogDatagram(bytes);
  ASSERT_EQ(packets.size(), 3u);
  EXPECT_EQ(packets[0], (DroppedPacket{"udp", "198.51.100.2", 9999, ""}));
  EXPECT_EQ(packets[1], (DroppedPacket{"icmp", "10.0.2.2", 0, "echo-request"}));
  EXPECT_EQ(packets[2], (DroppedPacket{"udp", "2001:db8::7", 123, ""}));
}

TEST(DropLogTest, TruncatedOrForeignMessagesAreSkippedSafely) {
  auto bytes = fromHex(kKernelDatagram);
  // Cut anywhere: never a crash, never more than the whole messages before the cut.
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    auto packets = parseNflogDatagram(std::span<const uint8_t>(bytes.data(), cut));
    EXPECT_LE(packets.size(), 3u);
    if (cut < 0xbc) {
      EXPECT_TRUE(packets.empty()) << cut;
    }
  }
  // A message of another type (an error/ack) is skipped.
  std::vector<uint8_t> ack = {20, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_TRUE(parseNflogDatagram(ack).empty());
  // A length that runs past the end stops the parse.
  std::vector<uint8_t> liar = bytes;
  liar[0] = 0xff;
  liar[1] = 0xff;
  EXPECT_TRUE(parseNflogDatagram(liar).empty());
}

TEST(DropLogTest, DescribesDropsForThePolicyLog) {
  LogEntry udp;
  describeDrop(DroppedPacket{"udp", "198.51.100.2", 9999, ""}, udp);
  EXPECT_EQ(udp.proto, "udp");
  EXPECT_EQ(udp.address, "198.51.100.2");
  EXPECT_EQ(udp.port, 9999);
  EXPECT_FALSE(udp.allowed);
  EXPECT_EQ(udp.reason,
            "dropped by the box's network (UDP to port 9999): only TCP through the proxy and DNS "
            "on UDP port 53 leave a box");
  LogEntry ping;
  describeDrop(DroppedPacket{"icmp", "10.0.2.2", 0, "echo-request"}, ping);
  EXPECT_EQ(ping.proto, "icmp");
  EXPECT_NE(ping.reason.find("(ICMP echo-request)"), std::string::npos) << ping.reason;
  EXPECT_EQ(toJson(ping)["decision"], "deny");
}

TEST(DropLogTest, TheLimiterLetsABurstThroughThenOneAnInterval) {
  DropLimiter limiter(3, 1000);
  int64_t t = 1'000'000;
  EXPECT_TRUE(limiter.admit(t));
  EXPECT_TRUE(limiter.admit(t));
  EXPECT_TRUE(limiter.admit(t));
  EXPECT_FALSE(limiter.admit(t));
  EXPECT_FALSE(limiter.admit(t + 999));
  EXPECT_EQ(limiter.suppressed(), 2u);
  EXPECT_TRUE(limiter.admit(t + 1000));
  EXPECT_FALSE(limiter.admit(t + 1500));
  EXPECT_EQ(limiter.takeSuppressed(), 3u);
  EXPECT_EQ(limiter.takeSuppressed(), 0u);
  // A long quiet spell refills the burst, no more.
  t += 100'000;
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.admit(t)) << i;
  EXPECT_FALSE(limiter.admit(t));
  // A clock that goes back gives nothing away.
  EXPECT_FALSE(limiter.admit(t - 50'000));
  EXPECT_NE(limiter.summaryReason(2).find("at least 2 more packets were not logged"),
            std::string::npos)
      << limiter.summaryReason(2);
}

}  // namespace
}  // namespace hutch::egress

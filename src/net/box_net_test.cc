// Needs root (namespaces, tap devices, nftables): skipped otherwise.
#include "net/box_net.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "egress/drop_log.h"
#include "egress/proxy/egress_proxy.h"
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
  EXPECT_NE(ruleset.find("log prefix \"hutch-drop\" group 1"), std::string::npos) << ruleset;

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

// The box's side of the tap: an Ethernet frame from the guest, behind the virtio-net header
// QEMU would write (IFF_VNET_HDR, 10 bytes, all zero: no offloads).
std::vector<uint8_t> guestFrame(uint8_t proto, const char* dst, std::vector<uint8_t> l4) {
  auto checksum = [](const uint8_t* p, size_t n) {
    uint32_t sum = 0;
    for (size_t i = 0; i + 1 < n; i += 2) sum += (p[i] << 8) | p[i + 1];
    if (n % 2 != 0) sum += p[n - 1] << 8;
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    return static_cast<uint16_t>(~sum);
  };
  const uint8_t ether[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x52,
                           0x54, 0x00, 0x12, 0x34, 0x56, 0x08, 0x00};
  uint8_t ip[20] = {0x45, 0, 0, 0, 0, 1, 0, 0, 64, proto};
  size_t total = sizeof ip + l4.size();
  ip[2] = static_cast<uint8_t>(total >> 8);
  ip[3] = static_cast<uint8_t>(total);
  in_addr src{};
  in_addr dest{};
  ::inet_pton(AF_INET, "10.0.2.15", &src);
  ::inet_pton(AF_INET, dst, &dest);
  std::memcpy(ip + 12, &src, 4);
  std::memcpy(ip + 16, &dest, 4);
  uint16_t sum = checksum(ip, sizeof ip);
  ip[10] = static_cast<uint8_t>(sum >> 8);
  ip[11] = static_cast<uint8_t>(sum);
  constexpr size_t kVnetHeader = 10;
  std::vector<uint8_t> frame(kVnetHeader + sizeof ether + sizeof ip + l4.size(), 0);
  std::memcpy(frame.data() + kVnetHeader, ether, sizeof ether);
  std::memcpy(frame.data() + kVnetHeader + sizeof ether, ip, sizeof ip);
  std::memcpy(frame.data() + kVnetHeader + sizeof ether + sizeof ip, l4.data(), l4.size());
  return frame;
}

std::vector<uint8_t> udpTo(uint16_t port) {
  return {0x9c, 0x40, static_cast<uint8_t>(port >> 8), static_cast<uint8_t>(port), 0, 11, 0, 0, 'a',
          'b',  'c'};
}

TEST_F(BoxNetworksTest, WhatTheTapDropsIsLoggedToTheDropSocketAndWhatPassesIsNot) {
  auto path = nets_->prepare(8);
  ASSERT_TRUE(path) << path.error().describe();
  auto tap = openTap(*path, kTapName);
  ASSERT_TRUE(tap) << tap.error().describe();
  auto listeners = nets_->listeners(8);
  ASSERT_TRUE(listeners) << listeners.error().describe();
  ASSERT_TRUE(listeners->drops);
  // What passes first (DNS to the resolver, TCP for the proxy), then what does not (UDP to
  // another port, a ping, even of the gateway): the log is in order, so once the last drop is
  // read every frame before it has been judged.
  std::vector<uint8_t> syn = {0x9c, 0x41, 0,    80,   0,    0,    0, 1, 0, 0,
                              0,    0,    0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0};
  std::vector<uint8_t> ping = {8, 0, 0xf7, 0xfe, 0, 1, 0, 0};
  for (const auto& frame :
       {guestFrame(17, "10.0.2.2", udpTo(53)), guestFrame(6, "203.0.113.1", syn),
        guestFrame(17, "198.51.100.2", udpTo(9999)), guestFrame(1, "10.0.2.2", ping)}) {
    ASSERT_EQ(::write(tap->get(), frame.data(), frame.size()), static_cast<ssize_t>(frame.size()));
  }
  std::vector<egress::DroppedPacket> seen;
  std::vector<uint8_t> buffer(65536);
  while (seen.size() < 2) {
    pollfd p{listeners->drops.get(), POLLIN, 0};
    ASSERT_GT(::poll(&p, 1, 10000), 0) << "no drop logged; seen " << seen.size();
    ssize_t n = ::recv(listeners->drops.get(), buffer.data(), buffer.size(), 0);
    ASSERT_GT(n, 0);
    for (auto& packet :
         egress::parseNflogDatagram(std::span<const uint8_t>(buffer.data(), size_t(n)))) {
      seen.push_back(packet);
    }
  }
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], (egress::DroppedPacket{"udp", "198.51.100.2", 9999, ""}));
  EXPECT_EQ(seen[1], (egress::DroppedPacket{"icmp", "10.0.2.2", 0, "echo-request"}));
}

// hutch-egress's side: the drop socket handed over with the others, a flood cut down to the
// DropLimiter's burst and a summary of the rest.
TEST_F(BoxNetworksTest, TheProxyLogsTheDropsAndSummarisesAFlood) {
  namespace proxy = egress::proxy;
  auto path = nets_->prepare(9);
  ASSERT_TRUE(path) << path.error().describe();
  auto tap = openTap(*path, kTapName);
  ASSERT_TRUE(tap) << tap.error().describe();
  auto listeners = nets_->listeners(9);
  ASSERT_TRUE(listeners) << listeners.error().describe();
  ASSERT_TRUE(listeners->drops);
  boost::asio::io_context io;
  std::vector<egress::LogEntry> entries;
  proxy::ProxyOptions options;
  options.log = [&](const egress::LogEntry& e) { entries.push_back(e); };
  options.now_ms = [] { return int64_t{1'000'000}; };  // a clock that stands still: no refill
  options.drop_summary_delay = std::chrono::milliseconds(50);
  options.dns_upstreams = {
      boost::asio::ip::udp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 9)};
  auto made = proxy::EgressProxy::create(io, std::move(options));
  ASSERT_TRUE(made) << made.error().describe();
  auto ca = proxy::makeBoxCa("b9");
  ASSERT_TRUE(ca);
  auto configured = (*made)->configureBox(
      "b9", proxy::BoxConfig{egress::Policy{}, {}, *ca},
      proxy::BoxSockets{std::move(listeners->explicit_proxy), std::move(listeners->transparent),
                        std::move(listeners->dns), std::move(listeners->drops)});
  ASSERT_TRUE(configured) << configured.error().describe();
  constexpr int kFlood = 25;
  for (int i = 0; i < kFlood; ++i) {
    auto frame = guestFrame(17, "198.51.100.2", udpTo(static_cast<uint16_t>(9000 + i)));
    ASSERT_EQ(::write(tap->get(), frame.data(), frame.size()), static_cast<ssize_t>(frame.size()));
  }
  auto summary = [&] {
    for (const auto& e : entries) {
      if (e.proto == "ip") return true;
    }
    return false;
  };
  for (int i = 0; i < 100 && !summary(); ++i) io.run_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(summary()) << entries.size() << " entries";
  ASSERT_EQ(entries.size(), 21u);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(entries[i].box, "b9");
    EXPECT_EQ(entries[i].proto, "udp");
    EXPECT_EQ(entries[i].port, 9000 + i);
    EXPECT_EQ(entries[i].address, "198.51.100.2");
    EXPECT_FALSE(entries[i].allowed);
  }
  EXPECT_FALSE(entries[20].allowed);
  EXPECT_NE(entries[20].reason.find("at least 5 more packets were not logged"), std::string::npos)
      << entries[20].reason;
  ASSERT_TRUE((*made)->removeBox("b9"));
  made->reset();
  io.run_for(std::chrono::milliseconds(10));
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

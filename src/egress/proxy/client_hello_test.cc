#include "egress/proxy/client_hello.h"

#include <gtest/gtest.h>
#include <openssl/tls1.h>

#include <random>

#include "egress/proxy/testing/tls_fixtures.h"

namespace hutch::egress::proxy {
namespace {

using testing::clientHello;

HelloResult inspect(const std::vector<uint8_t>& bytes) {
  return inspectClientHello(std::span<const uint8_t>(bytes));
}

TEST(ClientHelloTest, FindsTheNameInARealTls13Hello) {
  auto hello = clientHello("api.example.test");
  HelloResult r = inspect(hello);
  ASSERT_EQ(r.status, HelloStatus::kFound);
  EXPECT_EQ(r.sni, "api.example.test");
}

TEST(ClientHelloTest, FindsTheNameInARealTls12Hello) {
  HelloResult r = inspect(clientHello("Mixed.Case.Example.test", TLS1_2_VERSION));
  ASSERT_EQ(r.status, HelloStatus::kFound);
  EXPECT_EQ(r.sni, "mixed.case.example.test");
}

TEST(ClientHelloTest, AHelloWithoutServerNameIsNoSni) {
  EXPECT_EQ(inspect(clientHello("")).status, HelloStatus::kNoSni);
}

TEST(ClientHelloTest, EveryTruncationAsksForMoreAndNeverFindsAName) {
  auto hello = clientHello("api.example.test");
  for (size_t n = 0; n < hello.size(); ++n) {
    HelloResult r = inspectClientHello(std::span<const uint8_t>(hello.data(), n));
    ASSERT_EQ(r.status, HelloStatus::kNeedMore) << "prefix " << n;
    ASSERT_GT(r.need, n) << "prefix " << n;
    ASSERT_LE(r.need, hello.size()) << "prefix " << n;
  }
}

TEST(ClientHelloTest, AHelloSplitAcrossTwoRecordsIsReassembled) {
  auto hello = clientHello("split.example.test");
  // Re-frame the one handshake record as two records.
  std::vector<uint8_t> payload(hello.begin() + 5, hello.end());
  size_t half = payload.size() / 2;
  std::vector<uint8_t> framed;
  auto record = [&](size_t from, size_t to) {
    size_t len = to - from;
    framed.insert(framed.end(), {0x16, 0x03, 0x01, static_cast<uint8_t>(len >> 8),
                                 static_cast<uint8_t>(len & 0xff)});
    framed.insert(framed.end(), payload.begin() + static_cast<long>(from),
                  payload.begin() + static_cast<long>(to));
  };
  record(0, half);
  record(half, payload.size());
  EXPECT_EQ(inspectClientHello(std::span<const uint8_t>(framed.data(), half + 5)).status,
            HelloStatus::kNeedMore);
  HelloResult r = inspect(framed);
  ASSERT_EQ(r.status, HelloStatus::kFound);
  EXPECT_EQ(r.sni, "split.example.test");
}

TEST(ClientHelloTest, HttpAndOtherBytesAreNotTls) {
  std::string get = "GET / HTTP/1.1\r\n";
  EXPECT_EQ(inspect(std::vector<uint8_t>(get.begin(), get.end())).status, HelloStatus::kNotTls);
  EXPECT_EQ(inspect({0x16, 0x02}).status, HelloStatus::kNotTls);
}

TEST(ClientHelloTest, CorruptedLengthsAreMalformedNotCrashes) {
  auto hello = clientHello("api.example.test");
  // Record length zero.
  auto bad = hello;
  bad[3] = 0;
  bad[4] = 0;
  EXPECT_EQ(inspect(bad).status, HelloStatus::kMalformed);
  // Not a ClientHello handshake type.
  bad = hello;
  bad[5] = 2;
  EXPECT_EQ(inspect(bad).status, HelloStatus::kMalformed);
  // A handshake length beyond the limit.
  bad = hello;
  bad[6] = 0xff;
  EXPECT_EQ(inspect(bad).status, HelloStatus::kMalformed);
}

TEST(ClientHelloTest, RandomMutationsNeverCrashOrOverread) {
  auto hello = clientHello("fuzz.example.test");
  std::mt19937 rng(42);
  for (int i = 0; i < 20000; ++i) {
    auto bytes = hello;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      bytes[5 + rng() % (bytes.size() - 5)] = static_cast<uint8_t>(rng());
    }
    bytes.resize(rng() % (bytes.size() + 1));
    // Copy to an exact-size heap buffer so ASan/valgrind would see any over-read.
    auto exact = std::make_unique<uint8_t[]>(bytes.size() + 1);
    std::copy(bytes.begin(), bytes.end(), exact.get());
    HelloResult r = inspectClientHello(std::span<const uint8_t>(exact.get(), bytes.size()));
    if (r.status == HelloStatus::kFound) {
      EXPECT_TRUE(isValidHostName(r.sni));
    }
  }
  for (int i = 0; i < 5000; ++i) {
    std::vector<uint8_t> garbage(rng() % 600);
    for (auto& b : garbage) b = static_cast<uint8_t>(rng());
    if (!garbage.empty() && i % 2 == 0) garbage[0] = 0x16;
    if (garbage.size() > 1 && i % 2 == 0) garbage[1] = 0x03;
    (void)inspect(garbage);
  }
}

TEST(ClientHelloTest, RecognisesHttpRequestLines) {
  auto look = [](std::string s) {
    return looksLikeHttpRequest(
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
  };
  EXPECT_EQ(look("GET / HTTP/1.1\r\n"), HttpStart::kYes);
  EXPECT_EQ(look("POST"), HttpStart::kNeedMore);
  EXPECT_EQ(look("SSH-2.0-OpenSSH"), HttpStart::kNo);
  EXPECT_EQ(look(" GET"), HttpStart::kNo);
  EXPECT_EQ(look("ABCDEFGHIJKLMNOPQRSTUVWXYZ "), HttpStart::kNo);
}

TEST(ClientHelloTest, HostNameSyntax) {
  EXPECT_TRUE(isValidHostName("api.example.com"));
  EXPECT_TRUE(isValidHostName("a_b-c.d"));
  EXPECT_FALSE(isValidHostName(""));
  EXPECT_FALSE(isValidHostName("a..b"));
  EXPECT_FALSE(isValidHostName(".a"));
  EXPECT_FALSE(isValidHostName("a b"));
  EXPECT_FALSE(isValidHostName(std::string(64, 'a') + ".com"));
}

}  // namespace
}  // namespace hutch::egress::proxy

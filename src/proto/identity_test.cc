#include "proto/identity.h"

#include <gtest/gtest.h>

#include <string>

namespace hutch::proto {
namespace {

const std::string kMachineId = "0123456789abcdef0123456789abcdef";
const std::string kSeed(64, 'a');  // 32 bytes

TEST(IdentityMessageTest, RoundTripsAndWireNames) {
  Identity identity{"web-1", kMachineId, 1700000000123456789, kSeed, true};
  auto decoded = decodeMessage<Identity>(encodeMessage(identity));
  ASSERT_TRUE(decoded) << decoded.error().message();
  EXPECT_EQ(*decoded, identity);
  EXPECT_EQ(encodeMessage(Identity{"web", "", 5, "", false}), R"({"hostname":"web","time_ns":5})");
  EXPECT_EQ(encodeMessage(Identity{}), "{}");
  EXPECT_EQ(encodeMessage(IdentityResult{4096, true}), R"({"root_bytes":4096,"root_grown":true})");
  EXPECT_EQ(*decodeMessage<IdentityResult>(R"({"root_bytes":4096,"root_grown":true})"),
            (IdentityResult{4096, true}));
  EXPECT_EQ(*decodeMessage<IdentityResult>("{}"), IdentityResult{});
}

TEST(IdentityMessageTest, EverythingIsOptionalAndUnknownFieldsAreIgnored) {
  auto decoded = decodeMessage<Identity>(R"({"network":{"address":"10.0.0.2/24"}})");
  ASSERT_TRUE(decoded) << decoded.error().message();
  EXPECT_EQ(*decoded, Identity{});
}

TEST(IdentityMessageTest, MistypedFieldsAreProtocolErrors) {
  for (const char* bad : {R"({"hostname":1})", R"({"time_ns":"now"})", R"({"time_ns":1.5})",
                          R"({"grow_root":"yes"})", R"({"seed":[1,2]})", "[]", "{"}) {
    auto r = decodeMessage<Identity>(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code(), Errc::kProtocol) << bad;
  }
}

TEST(IdentityMessageTest, BadValuesAreInvalidArguments) {
  const std::vector<std::string> bad = {
      R"({"hostname":"under_score"})",
      R"({"hostname":"-lead"})",
      R"({"hostname":")" + std::string(65, 'a') + R"("})",
      R"({"machine_id":"0123456789ABCDEF0123456789ABCDEF"})",  // uppercase
      R"({"machine_id":"0123"})",
      R"({"machine_id":"00000000000000000000000000000000"})",
      R"({"machine_id":"0123456789abcdef0123456789abcdeg"})",
      R"({"time_ns":0})",
      R"({"time_ns":-5})",
      R"({"seed":")" + std::string(62, 'a') + R"("})",   // 31 bytes
      R"({"seed":")" + std::string(130, 'a') + R"("})",  // 65 bytes
      R"({"seed":")" + std::string(63, 'a') + R"("})",   // odd
      R"({"seed":")" + std::string(64, 'x') + R"("})",   // not hex
  };
  for (const auto& text : bad) {
    auto r = decodeMessage<Identity>(text);
    ASSERT_FALSE(r) << text;
    EXPECT_EQ(r.error().code(), Errc::kInvalidArgument) << text;
  }
  EXPECT_TRUE(decodeMessage<Identity>(R"({"seed":")" + std::string(128, 'F') + R"("})"));
}

TEST(IdentityMessageTest, Hex) {
  EXPECT_EQ(encodeHex(std::string("\x00\x7f\xff\x10", 4)), "007fff10");
  EXPECT_EQ(*decodeHex("007FfF10"), std::string("\x00\x7f\xff\x10", 4));
  EXPECT_FALSE(decodeHex("abc"));
  EXPECT_FALSE(decodeHex("zz"));
  EXPECT_EQ(*decodeHex(""), "");
}

TEST(IdentityMessageTest, HostnameAndMachineIdRules) {
  EXPECT_TRUE(isValidHostname("box-1.dev"));
  EXPECT_TRUE(isValidHostname(std::string(64, 'a')));
  EXPECT_FALSE(isValidHostname(std::string(65, 'a')));
  EXPECT_FALSE(isValidHostname(".dot"));
  EXPECT_FALSE(isValidHostname(""));
  EXPECT_TRUE(isValidMachineId(kMachineId));
  EXPECT_FALSE(isValidMachineId(kMachineId + "0"));
}

}  // namespace
}  // namespace hutch::proto

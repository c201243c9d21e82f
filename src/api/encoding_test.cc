#include "api/encoding.h"

#include <gtest/gtest.h>

namespace hutch::api {
namespace {

TEST(EncodingTest, Utf8AcceptsTextAndRefusesBrokenSequences) {
  EXPECT_TRUE(isValidUtf8(""));
  EXPECT_TRUE(isValidUtf8("plain ascii\n"));
  EXPECT_TRUE(isValidUtf8("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80"));  // é € 😀
  EXPECT_FALSE(isValidUtf8("\xff"));
  EXPECT_FALSE(isValidUtf8("\xc3"));              // truncated
  EXPECT_FALSE(isValidUtf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(isValidUtf8("\xed\xa0\x80"));      // a surrogate
  EXPECT_FALSE(isValidUtf8("\xf4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(isValidUtf8(std::string("a\x80", 2)));
}

TEST(EncodingTest, Base64RoundTripsEveryLength) {
  std::string bytes;
  for (int i = 0; i < 300; ++i) {
    bytes.push_back(static_cast<char>(i * 7));
    auto decoded = base64Decode(base64Encode(bytes), "x");
    ASSERT_TRUE(decoded) << i;
    EXPECT_EQ(*decoded, bytes) << i;
  }
  EXPECT_EQ(base64Encode("hi"), "aGk=");
  EXPECT_EQ(base64Encode("hello"), "aGVsbG8=");
  EXPECT_EQ(*base64Decode("aGk=", "x"), "hi");
}

TEST(EncodingTest, Base64RefusesWhatIsNotBase64) {
  for (const char* bad : {"a", "aGk", "a=Gk", "aG k", "aG!k", "====", "aGk=="}) {
    auto decoded = base64Decode(bad, "Field 'stdin_base64'");
    ASSERT_FALSE(decoded) << bad;
    EXPECT_EQ(decoded.error().code(), Errc::kInvalidArgument);
    EXPECT_NE(decoded.error().message().find("stdin_base64"), std::string::npos);
  }
}

}  // namespace
}  // namespace hutch::api

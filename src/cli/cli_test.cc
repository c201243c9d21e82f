#include <gtest/gtest.h>

#include "cli/commands/commands.h"

namespace hutch::cli {
namespace {

TEST(ParseMemoryTest, AcceptsMiBAndGiB) {
  EXPECT_EQ(*parseMemoryMib("512"), 512u);
  EXPECT_EQ(*parseMemoryMib("512M"), 512u);
  EXPECT_EQ(*parseMemoryMib("768MiB"), 768u);
  EXPECT_EQ(*parseMemoryMib("2G"), 2048u);
  EXPECT_EQ(*parseMemoryMib("1gib"), 1024u);
}

TEST(ParseMemoryTest, RejectsGarbageWithAHint) {
  for (const char* bad : {"", "M", "12T", "-5", "1.5G", "99999999999"}) {
    auto r = parseMemoryMib(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code(), Errc::kInvalidArgument);
    EXPECT_NE(r.error().message().find("512M"), std::string::npos);
  }
}

TEST(ApiClientTest, AbsentDaemonGivesAClearUnavailableError) {
  ApiClient client("/nonexistent/hutch-test.sock");
  auto r = client.call(boost::beast::http::verb::get, "/v1/boxes");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), Errc::kUnavailable);
  EXPECT_NE(r.error().message().find("hutchd is not running"), std::string::npos);
}

}  // namespace
}  // namespace hutch::cli

#include "proto/tcp.h"

#include <gtest/gtest.h>

namespace hutch::proto {
namespace {

TEST(TcpMessageTest, ConnectRequests) {
  ConnectRequest request{8080, "127.0.0.1"};
  EXPECT_EQ(encodeMessage(request), R"({"address":"127.0.0.1","port":8080})");
  EXPECT_EQ(*decodeMessage<ConnectRequest>(encodeMessage(request)), request);
  EXPECT_EQ(*decodeMessage<ConnectRequest>(R"({"port":22})"), (ConnectRequest{22, "127.0.0.1"}));
  EXPECT_TRUE(decodeMessage<ConnectRequest>(R"({"port":1,"address":"::1"})"));
  EXPECT_TRUE(decodeMessage<ConnectRequest>(R"({"port":1,"address":"localhost"})"));
  for (const char* bad : {R"({})", R"({"port":"80"})", R"({"port":65536})", R"({"port":-1})",
                          R"({"port":80,"address":7})"}) {
    auto r = decodeMessage<ConnectRequest>(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code(), Errc::kProtocol) << bad;
  }
  for (const char* bad : {R"({"port":0})", R"({"port":80,"address":"example.com"})",
                          R"({"port":80,"address":"1.2.3"})", R"({"port":80,"address":""})"}) {
    auto r = decodeMessage<ConnectRequest>(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code(), Errc::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace hutch::proto

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

TEST(TcpMessageTest, ParkAndResume) {
  ParkResult parked{{3, 7}};
  EXPECT_EQ(encodeMessage(parked), R"({"streams":[3,7]})");
  EXPECT_EQ(*decodeMessage<ParkResult>(encodeMessage(parked)), parked);
  EXPECT_EQ(*decodeMessage<ParkResult>(R"({"streams":[]})"), ParkResult{});
  ResumeRequest resume{4294967295u};
  EXPECT_EQ(encodeMessage(resume), R"({"stream":4294967295})");
  EXPECT_EQ(*decodeMessage<ResumeRequest>(encodeMessage(resume)), resume);
  for (const char* bad : {R"({})", R"({"streams":3})", R"({"streams":[0]})", R"({"streams":[-1]})",
                          R"({"streams":[4294967296]})", R"({"streams":["1"]})"}) {
    auto r = decodeMessage<ParkResult>(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code(), Errc::kProtocol) << bad;
  }
  for (const char* bad :
       {R"({})", R"({"stream":0})", R"({"stream":4294967296})", R"({"stream":"1"})", R"([])"}) {
    auto r = decodeMessage<ResumeRequest>(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code(), Errc::kProtocol) << bad;
  }
}

}  // namespace
}  // namespace hutch::proto

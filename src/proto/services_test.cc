#include "proto/services.h"

#include <gtest/gtest.h>

namespace hutch::proto {
namespace {

TEST(ServicesMessageTest, ServiceFiles) {
  auto spec = parseServiceSpec(R"({"argv":["/usr/sbin/dockerd","--debug"]})");
  ASSERT_TRUE(spec) << spec.error().message();
  EXPECT_EQ(spec->argv, (std::vector<std::string>{"/usr/sbin/dockerd", "--debug"}));
  EXPECT_EQ(spec->restart, RestartPolicy::kAlways);
  EXPECT_TRUE(spec->user.empty());
  ServiceSpec full{{"web"}, {"A=1"}, "hutch", "/srv", RestartPolicy::kOnFailure};
  EXPECT_EQ(*parseServiceSpec(encodeServiceSpec(full)), full);
  EXPECT_EQ(parseServiceSpec(R"({"argv":["x"],"restart":"never"})")->restart,
            RestartPolicy::kNever);
  for (const char* bad : {"", "[]", R"({})", R"({"argv":"x"})", R"({"argv":["x"],"env":"A=1"})"}) {
    auto r = parseServiceSpec(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code(), Errc::kProtocol) << bad;
  }
  for (const char* bad : {R"({"argv":[]})", R"({"argv":["x"],"restart":"sometimes"})",
                          R"({"argv":["x"],"cwd":"rel"})", R"({"argv":["x"],"env":["NOEQ"]})"}) {
    auto r = parseServiceSpec(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code(), Errc::kInvalidArgument) << bad;
  }
}

TEST(ServicesMessageTest, Names) {
  EXPECT_TRUE(isValidServiceName("dockerd"));
  EXPECT_TRUE(isValidServiceName("my_service-2.0"));
  EXPECT_FALSE(isValidServiceName(".hidden"));
  EXPECT_FALSE(isValidServiceName("a/b"));
  EXPECT_FALSE(isValidServiceName(""));
}

TEST(ServicesMessageTest, StatusRoundTrips) {
  ServiceStatus running{"dockerd", "running", 42, 1, 1700, ExitStatus::signaled(9), "", "/l"};
  ServiceStatus failed{"bad", "failed", 0, 0, 0, std::nullopt, "Malformed JSON", "/l2"};
  ServiceStatus stopped{"once", "stopped", 0, 0, 5, ExitStatus::exited(0), "", "/l3"};
  ServiceList list{{running, failed, stopped}};
  auto decoded = decodeMessage<ServiceList>(encodeMessage(list));
  ASSERT_TRUE(decoded) << decoded.error().message();
  EXPECT_EQ(*decoded, list);
  EXPECT_FALSE(decodeMessage<ServiceList>(R"({"services":[{"state":"running"}]})"));
}

}  // namespace
}  // namespace hutch::proto

#include "api/json_model.h"

#include <gtest/gtest.h>

namespace hutch::api {
namespace {

TEST(JsonModelTest, BoxRoundTrip) {
  box::Box b;
  b.id = "0123456789ab";
  b.name = "web";
  b.config.cpus = 2;
  b.config.memory_mib = 1024;
  b.state = box::BoxState::kFailed;
  b.reason = "QEMU exited with status 1";
  b.accel = "tcg";
  b.pid = 42;
  b.created_at = 1;
  b.updated_at = 2;
  b.shares = {{"/srv/project", "/work", true}};
  auto back = boxFromJson(toJson(b));
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(*back, b);
}

TEST(JsonModelTest, CreateRequestDefaultsAndValues) {
  auto r = parseCreateBox(R"({})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->config.cpus, 1u);
  EXPECT_EQ(r->config.template_name, "base");
  r = parseCreateBox(R"({"name":"a1","cpus":2,"memory_mib":768,"template":"base"})");
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->name, "a1");
  EXPECT_EQ(r->config.memory_mib, 768u);
  EXPECT_EQ(*parseCreateBox(toJson(*r).dump()), *r);
  r = parseCreateBox(R"({"shares":[{"host_dir":"/srv/p","box_dir":"/work"},)"
                     R"({"host_dir":"/srv/d","box_dir":"/data","read_only":true}]})");
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->shares,
            (std::vector<box::BoxShare>{{"/srv/p", "/work", false}, {"/srv/d", "/data", true}}));
  EXPECT_EQ(*parseCreateBox(toJson(*r).dump()), *r);
}

struct BadBody {
  const char* body;
  const char* expected_fragment;
};

class BadCreateBodyTest : public ::testing::TestWithParam<BadBody> {};

TEST_P(BadCreateBodyTest, IsRejectedWithAClearMessage) {
  auto r = parseCreateBox(GetParam().body);
  ASSERT_FALSE(r) << GetParam().body;
  EXPECT_EQ(r.error().code(), Errc::kInvalidArgument);
  EXPECT_NE(r.error().message().find(GetParam().expected_fragment), std::string::npos)
      << r.error().message();
}

INSTANTIATE_TEST_SUITE_P(
    Bodies, BadCreateBodyTest,
    ::testing::Values(
        BadBody{"", "not valid JSON"}, BadBody{"{", "not valid JSON"},
        BadBody{"[1,2]", "must be a JSON object"}, BadBody{"\"x\"", "must be a JSON object"},
        BadBody{R"({"cpus":"two"})", "wrong type"}, BadBody{R"({"cpus":0})", "cpus must be"},
        BadBody{R"({"cpus":-1})", "cpus must be"}, BadBody{R"({"memory_mib":1e30})", "wrong type"},
        BadBody{R"({"memory_mib":16})", "memory_mib must be"},
        BadBody{R"({"name":"bad name"})", "Invalid name"}, BadBody{R"({"name":5})", "wrong type"},
        BadBody{R"({"nmae":"typo"})", "Unknown field 'nmae'"},
        BadBody{R"({"shares":{}})", "shares is a list"},
        BadBody{R"({"shares":["/a:/b"]})", "shares is a list"},
        BadBody{R"({"shares":[{"host_dir":"a","box_dir":"/b"}]})", "absolute"},
        BadBody{R"({"shares":[{"host_dir":"/a","box":"/b"}]})", "Unknown field 'box'"},
        BadBody{"{\"name\":\"\xff\"}", "not valid JSON"}));

TEST(JsonModelTest, PoolStatusNamesEveryField) {
  box::PoolStatus pool{.template_name = "docker",
                       .cpus = 2,
                       .memory_mib = 1024,
                       .ready = 1,
                       .size = 3,
                       .filling = true};
  EXPECT_EQ(toJson(pool), (json{{"template", "docker"},
                                {"cpus", 2},
                                {"memory_mib", 1024},
                                {"ready", 1},
                                {"size", 3},
                                {"filling", true}}));
}

TEST(JsonModelTest, ErrorBodiesRoundTrip) {
  Error e(Errc::kFailedPrecondition, "Box web is stopped; start it first");
  Error back = errorFromResponse(409, errorJson(e).dump());
  EXPECT_EQ(back.code(), Errc::kFailedPrecondition);
  EXPECT_EQ(back.message(), e.message());
  Error foreign = errorFromResponse(502, "<html>bad gateway</html>");
  EXPECT_EQ(foreign.code(), Errc::kProtocol);
  EXPECT_NE(foreign.message().find("502"), std::string::npos);
}

TEST(JsonModelTest, PortRequestsAndAnswers) {
  auto forward = parsePortForward(R"({"host_port": 8080, "box_port": 80})");
  ASSERT_TRUE(forward) << forward.error().message();
  EXPECT_EQ(forward->host_address, "127.0.0.1");
  EXPECT_EQ(toJson(*forward), json::parse(R"({"address":"127.0.0.1","host_port":8080,
                                               "box_port":80})"));
  EXPECT_FALSE(parsePortForward(R"({"host_port": 8080})"));
  EXPECT_FALSE(parsePortForward(R"({"host_port": 8080, "box_port": 80, "proto": "udp"})"));
  EXPECT_FALSE(parsePortForward(R"({"host_port": 8080, "box_port": 80, "address": "web"})"));

  box::PortStatus status;
  status.forward = {.box_id = "abc", .host_address = "0.0.0.0", .host_port = 1, .box_port = 2};
  status.listening = true;
  status.connections = 3;
  status.accepted = 4;
  auto back = portStatusFromJson(toJson(status));
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(back->forward, status.forward);
  EXPECT_TRUE(back->listening);
  EXPECT_EQ(back->connections, 3u);
  EXPECT_EQ(back->accepted, 4u);
}

}  // namespace
}  // namespace hutch::api

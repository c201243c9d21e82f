#include "api/router.h"

#include <gtest/gtest.h>

namespace hutch::api {
namespace {

using boost::beast::http::verb;

TEST(RouterTest, MatchesPatternsAndCapturesParams) {
  Router<int> router;
  router.add(verb::get, "/v1/boxes", 1);
  router.add(verb::get, "/v1/boxes/{box}", 2);
  router.add(verb::delete_, "/v1/boxes/{box}", 3);
  router.add(verb::post, "/v1/boxes/{box}/exec", 4);

  auto m = router.match(verb::get, "/v1/boxes/web");
  ASSERT_TRUE(m);
  EXPECT_EQ(*m->handler, 2);
  EXPECT_EQ(m->params.at("box"), "web");
  EXPECT_EQ(*router.match(verb::delete_, "/v1/boxes/web")->handler, 3);
  EXPECT_EQ(*router.match(verb::post, "/v1/boxes/x/exec")->handler, 4);
  EXPECT_EQ(*router.match(verb::get, "/v1/boxes/")->handler, 1);
}

TEST(RouterTest, UnknownPathIs404AndWrongMethodIs405) {
  Router<int> router;
  router.add(verb::get, "/v1/boxes", 1);
  EXPECT_EQ(router.match(verb::get, "/v1/nothing").error().code(), Errc::kNotFound);
  EXPECT_EQ(router.match(verb::get, "/v1/boxes/a/b/c").error().code(), Errc::kNotFound);
  EXPECT_EQ(router.match(verb::put, "/v1/boxes").error().code(), Errc::kUnsupported);
}

TEST(QueryTest, ParsesFlagsAndValues) {
  auto q = parseQuery("force=true&name=a%20b&bare&x=0");
  EXPECT_TRUE(queryFlag(q, "force"));
  EXPECT_TRUE(queryFlag(q, "bare"));
  EXPECT_FALSE(queryFlag(q, "x"));
  EXPECT_FALSE(queryFlag(q, "missing"));
  EXPECT_EQ(q.at("name"), "a b");
  EXPECT_TRUE(parseQuery("").empty());
}

}  // namespace
}  // namespace hutch::api

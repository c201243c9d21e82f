#include "api/auth.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "storage/box_store.h"

namespace hutch::api {
namespace {

namespace http = boost::beast::http;

TEST(AuthTest, KeysAreE2bFormWith160RandomBits) {
  std::set<std::string> seen;
  for (int i = 0; i < 200; ++i) {
    std::string key = generateKeySecret();
    EXPECT_TRUE(std::regex_match(key, std::regex("e2b_[0-9a-f]{40}"))) << key;
    EXPECT_TRUE(seen.insert(key).second) << "a key came twice";
  }
}

TEST(AuthTest, HashIsSha256Hex) {
  EXPECT_EQ(hashKeySecret("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(AuthTest, OfferedKeyFromEachPlace) {
  http::fields bearer;
  bearer.set(http::field::authorization, "Bearer  e2b_1 ");
  EXPECT_EQ(offeredKey(bearer), "e2b_1");
  http::fields lower;
  lower.set(http::field::authorization, "bearer e2b_2");
  EXPECT_EQ(offeredKey(lower), "e2b_2");
  http::fields x_api;
  x_api.set("X-API-KEY", "e2b_3");
  EXPECT_EQ(offeredKey(x_api), "e2b_3");
  http::fields ws;
  ws.set(http::field::sec_websocket_protocol, "hutch.exec.v1, hutch.key.e2b_4");
  EXPECT_EQ(offeredKey(ws), "e2b_4");
  http::fields basic;
  basic.set(http::field::authorization, "Basic dXNlcjo=");
  EXPECT_EQ(offeredKey(basic), "");
  EXPECT_EQ(offeredKey(http::fields{}), "");
}

class KeyServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = storage::BoxStore::open(":memory:");
    ASSERT_TRUE(opened) << opened.error().describe();
    store_.emplace(std::move(*opened));
    keys_store_.emplace(store_->database());
    keys_.emplace(*keys_store_);
  }
  std::optional<storage::BoxStore> store_;
  std::optional<storage::KeyStore> keys_store_;
  std::optional<KeyService> keys_;
};

TEST_F(KeyServiceTest, CreateAuthenticateRemove) {
  auto made = keys_->create({.name = "alice", .admin = false, .quota = {.max_boxes = 2}});
  ASSERT_TRUE(made) << made.error().describe();
  EXPECT_NE(made->key.hash, made->secret) << "only the hash is kept";
  EXPECT_EQ(made->key.hash, hashKeySecret(made->secret));
  auto who = keys_->authenticate(made->secret);
  ASSERT_TRUE(who) << who.error().describe();
  EXPECT_EQ(who->key_name, "alice");
  EXPECT_FALSE(who->admin);
  EXPECT_FALSE(who->seesEverything());
  EXPECT_EQ(who->owner().id, made->key.id);
  EXPECT_EQ(who->quota.max_boxes, 2u);
  EXPECT_EQ(keys_->quotaOf(made->key.id).max_boxes, 2u);

  auto wrong = keys_->authenticate(made->secret + "0");
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().code(), Errc::kUnauthenticated);
  EXPECT_EQ(keys_->authenticate("").error().code(), Errc::kUnauthenticated);

  auto twice = keys_->create({.name = "alice"});
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error().code(), Errc::kAlreadyExists);
  EXPECT_FALSE(keys_->create({.name = "bad name"}));

  auto removed = keys_->remove("alice");
  ASSERT_TRUE(removed);
  EXPECT_EQ(removed->id, made->key.id);
  EXPECT_EQ(keys_->authenticate(made->secret).error().code(), Errc::kUnauthenticated);
  EXPECT_EQ(keys_->remove("alice").error().code(), Errc::kNotFound);
  EXPECT_TRUE(keys_->quotaOf(made->key.id).unlimited());
}

TEST_F(KeyServiceTest, AdminKeysSeeEverything) {
  auto made = keys_->create({.name = "root-ish", .admin = true});
  ASSERT_TRUE(made);
  auto who = keys_->authenticate(made->secret);
  ASSERT_TRUE(who);
  EXPECT_TRUE(who->admin);
  EXPECT_TRUE(who->seesEverything());
  EXPECT_EQ(Principal::host().describe(), "the host administrator");
  EXPECT_EQ(who->describe(), "key root-ish");
}

TEST(FailureLimiterTest, RefusesAfterTheLimitUntilTheWindowPasses) {
  FailureLimiter limiter(3, std::chrono::seconds(60));
  auto t0 = FailureLimiter::Clock::now();
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(limiter.refused("10.0.0.1", t0));
    limiter.recordFailure("10.0.0.1", t0);
  }
  auto wait = limiter.refused("10.0.0.1", t0 + std::chrono::seconds(1));
  ASSERT_TRUE(wait);
  EXPECT_EQ(*wait, 59);
  EXPECT_FALSE(limiter.refused("10.0.0.2", t0)) << "other addresses are not affected";
  EXPECT_FALSE(limiter.refused("10.0.0.1", t0 + std::chrono::seconds(61)));
}

TEST(FailureLimiterTest, StaysBoundedWithManyAddresses) {
  FailureLimiter limiter(1, std::chrono::seconds(60));
  auto t0 = FailureLimiter::Clock::now();
  for (int i = 0; i < 10000; ++i) limiter.recordFailure("addr" + std::to_string(i), t0);
  // The newest are remembered; the map did not grow past its bound (no crash, no blowup).
  EXPECT_TRUE(limiter.refused("addr9999", t0));
}

}  // namespace
}  // namespace hutch::api

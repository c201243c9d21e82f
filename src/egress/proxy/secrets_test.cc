#include "egress/proxy/secrets.h"

#include <gtest/gtest.h>

namespace hutch::egress::proxy {
namespace {

using Json = nlohmann::json;

Json openai() {
  return {{"name", "openai"},
          {"value", "sk-real-123"},
          {"domains", {"api.openai.com", "*.openai.test"}},
          {"header", "Authorization"},
          {"format", "Bearer {value}"},
          {"placeholder", "HUTCH_PLACEHOLDER_OPENAI"}};
}

TEST(SecretsTest, ParsesTheReadmeForm) {
  auto s = parseSecret(openai());
  ASSERT_TRUE(s) << s.error().describe();
  EXPECT_EQ(s->name, "openai");
  EXPECT_EQ(s->header, "Authorization");
  EXPECT_EQ(s->domains.size(), 2u);
}

TEST(SecretsTest, RefusesBadSecretsNamingTheField) {
  auto check = [](Json doc, const std::string& word) {
    auto s = parseSecret(doc);
    ASSERT_FALSE(s) << doc.dump();
    EXPECT_NE(s.error().message().find(word), std::string::npos) << s.error().message();
  };
  Json j = openai();
  j.erase("value");
  check(j, "value");
  j = openai();
  j["domains"] = Json::array();
  check(j, "domains");
  j = openai();
  j["domains"] = {"*x.com"};
  check(j, "domains");
  for (const char* broad : {"*", "*.test", "*.Com."}) {
    j = openai();
    j["domains"] = {"api.openai.com", broad};
    check(j, "would send the secret to every");
  }
  j = openai();
  j["header"] = "Bad Header";
  check(j, "header");
  j = openai();
  j["format"] = "Bearer";
  check(j, "{value}");
  j = openai();
  j["value"] = "a\r\nInjected: yes";
  check(j, "CR");
  j = openai();
  j["header"] = "";
  j["placeholder"] = "";
  check(j, "placeholder");
  j = openai();
  j["extra"] = 1;
  check(j, "extra");
  EXPECT_FALSE(parseSecrets(Json::array({openai(), openai()})));
}

TEST(SecretsTest, BindsHostsLikePolicyRules) {
  auto s = parseSecret(openai());
  ASSERT_TRUE(s);
  EXPECT_TRUE(bindsHost(*s, "api.openai.com"));
  EXPECT_TRUE(bindsHost(*s, "API.OpenAI.com."));
  EXPECT_TRUE(bindsHost(*s, "x.openai.test"));
  EXPECT_FALSE(bindsHost(*s, "openai.test"));
  EXPECT_FALSE(bindsHost(*s, "api.openai.com.evil.test"));
}

TEST(SecretsTest, AHeaderTemplateSetsItsHeaderAndTouchesNothingElse) {
  auto s = parseSecret(openai());
  ASSERT_TRUE(s);
  http::request_header<> req;
  req.method(http::verb::get);
  req.target("/v1?key=HUTCH_PLACEHOLDER_OPENAI");
  req.set(http::field::authorization, "Bearer HUTCH_PLACEHOLDER_OPENAI");
  req.insert("X-Key", "one HUTCH_PLACEHOLDER_OPENAI");
  injectSecrets(req, {&*s});
  EXPECT_EQ(req[http::field::authorization], "Bearer sk-real-123");
  EXPECT_EQ(req.target(), "/v1?key=HUTCH_PLACEHOLDER_OPENAI") << "the target is never rewritten";
  EXPECT_EQ(req["X-Key"], "one HUTCH_PLACEHOLDER_OPENAI") << "nor another header";
  // Set even when the box sent no such header.
  http::request_header<> bare;
  bare.target("/");
  injectSecrets(bare, {&*s});
  EXPECT_EQ(bare[http::field::authorization], "Bearer sk-real-123");
}

TEST(SecretsTest, APlaceholderRuleReplacesInHeaderValuesOnly) {
  Json doc = openai();
  doc["header"] = "";
  auto s = parseSecret(doc);
  ASSERT_TRUE(s) << s.error().describe();
  http::request_header<> req;
  req.method(http::verb::get);
  req.target("/v1?key=HUTCH_PLACEHOLDER_OPENAI");
  req.set(http::field::authorization, "Bearer HUTCH_PLACEHOLDER_OPENAI");
  req.insert("X-Key", "one HUTCH_PLACEHOLDER_OPENAI");
  req.insert("X-Key", "two");
  injectSecrets(req, {&*s});
  EXPECT_EQ(req.target(), "/v1?key=HUTCH_PLACEHOLDER_OPENAI") << "the target is never rewritten";
  EXPECT_EQ(req[http::field::authorization], "Bearer sk-real-123");
  auto [first, last] = req.equal_range("X-Key");
  std::vector<std::string> values;
  for (auto it = first; it != last; ++it) values.emplace_back(it->value());
  EXPECT_EQ(values, (std::vector<std::string>{"one sk-real-123", "two"}));
}

TEST(SecretsTest, ScrubsRealValuesFromResponseHeaders) {
  auto s = parseSecret(openai());
  ASSERT_TRUE(s);
  Secret no_placeholder = *s;
  no_placeholder.name = "other";
  no_placeholder.value = "other-real";
  no_placeholder.placeholder = "";
  http::response_header<> res;
  res.set("X-Echo", "Bearer sk-real-123");
  res.set("X-Other", "other-real!");
  scrubSecrets(res, {&*s, &no_placeholder});
  EXPECT_EQ(res["X-Echo"], "Bearer HUTCH_PLACEHOLDER_OPENAI");
  EXPECT_EQ(res["X-Other"], "[secret other]!");
}

TEST(SecretsTest, ReplaceAll) {
  EXPECT_EQ(replaceAll("aXbXc", "X", "yy"), "ayybyyc");
  EXPECT_EQ(replaceAll("abc", "", "z"), "abc");
  EXPECT_EQ(replaceAll("XX", "X", "XX"), "XXXX");
}

}  // namespace
}  // namespace hutch::egress::proxy

#include "egress/proxy/request_target.h"

#include <gtest/gtest.h>

namespace hutch::egress::proxy {
namespace {

TEST(RequestTargetTest, NormalisesHostHeaders) {
  EXPECT_EQ(normaliseHost("Example.COM."), "example.com");
  EXPECT_EQ(normaliseHost("example.com:8080"), "example.com");
  EXPECT_EQ(normaliseHost("[::1]:443"), "[::1]");
  EXPECT_EQ(normaliseHost("::1"), "::1");  // more than one colon: no port to strip
  EXPECT_EQ(normaliseHost("["), "[");
  EXPECT_EQ(normaliseHost(""), "");
  EXPECT_TRUE(hostMatches("API.example.com:443", "api.example.com"));
  EXPECT_FALSE(hostMatches("", ""));
}

TEST(RequestTargetTest, ParsesConnectAuthorities) {
  EXPECT_EQ(parseAuthority("Example.com:443"), (HostPort{"example.com", 443}));
  EXPECT_EQ(parseAuthority("[::1]:22"), (HostPort{"[::1]", 22}));
  EXPECT_FALSE(parseAuthority("example.com"));
  EXPECT_FALSE(parseAuthority(":443"));
  EXPECT_FALSE(parseAuthority("example.com:"));
  EXPECT_FALSE(parseAuthority("example.com:0"));
  EXPECT_FALSE(parseAuthority("example.com:65536"));
  EXPECT_FALSE(parseAuthority("example.com:123456"));
  EXPECT_FALSE(parseAuthority("example.com:4x3"));
}

TEST(RequestTargetTest, ParsesAbsoluteUris) {
  auto uri = std::get<AbsoluteUri>(parseAbsoluteUri("HTTP://Example.com:8080/a?b=1#frag"));
  EXPECT_EQ(uri, (AbsoluteUri{"example.com", 8080, "Example.com:8080", "/a?b=1"}));
  uri = std::get<AbsoluteUri>(parseAbsoluteUri("http://example.com?q"));
  EXPECT_EQ(uri.path, "/?q");
  EXPECT_EQ(uri.port, 80);
  uri = std::get<AbsoluteUri>(parseAbsoluteUri("http://[::1]/"));
  EXPECT_EQ(uri.host, "[::1]");
  EXPECT_TRUE(std::holds_alternative<std::string>(parseAbsoluteUri("https://example.com/")));
  EXPECT_TRUE(std::holds_alternative<std::string>(parseAbsoluteUri("/relative")));
  EXPECT_TRUE(std::holds_alternative<std::string>(parseAbsoluteUri("http://")));
  EXPECT_TRUE(std::holds_alternative<std::string>(parseAbsoluteUri("http://u@example.com/")));
  EXPECT_TRUE(std::holds_alternative<std::string>(parseAbsoluteUri("http://example.com:/")));
  EXPECT_TRUE(std::holds_alternative<std::string>(parseAbsoluteUri("http://example.com:0/")));
  EXPECT_TRUE(std::holds_alternative<std::string>(parseAbsoluteUri("http://example.com:99999/")));
}

}  // namespace
}  // namespace hutch::egress::proxy

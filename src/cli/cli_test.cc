#include <gtest/gtest.h>
#include <stdlib.h>

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
  ApiClient client(
      Endpoint{.kind = Endpoint::Kind::kUnix, .socket_path = "/nonexistent/hutch-test.sock"});
  auto r = client.call(boost::beast::http::verb::get, "/v1/boxes");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), Errc::kUnavailable);
  EXPECT_NE(r.error().message().find("hutchd is not running"), std::string::npos);
}

// The environment a test sets, restored afterwards.
class EnvGuard {
 public:
  EnvGuard() {
    for (const char* name : kNames) {
      const char* v = ::getenv(name);
      saved_.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
      ::unsetenv(name);
    }
  }
  ~EnvGuard() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name, value->c_str(), 1);
      } else {
        ::unsetenv(name);
      }
    }
  }

 private:
  static constexpr const char* kNames[] = {"HUTCH_HOST", "HUTCH_API_KEY", "HUTCH_SOCKET",
                                           "HUTCH_CA_CERT", "HUTCH_FINGERPRINT"};
  std::vector<std::pair<const char*, std::optional<std::string>>> saved_;
};

TEST(EndpointTest, TheUnixSocketUnlessAHostIsNamed) {
  EnvGuard env;
  auto local = resolveEndpoint("", "", "", "");
  ASSERT_TRUE(local);
  EXPECT_EQ(local->kind, Endpoint::Kind::kUnix);
  EXPECT_EQ(local->socket_path, "/run/hutch/hutchd.sock");
  ::setenv("HUTCH_SOCKET", "/tmp/x.sock", 1);
  EXPECT_EQ(resolveEndpoint("", "", "", "")->socket_path, "/tmp/x.sock");
  EXPECT_EQ(resolveEndpoint("", "/y.sock", "", "")->socket_path, "/y.sock");
}

TEST(EndpointTest, RemoteHostsFromFlagsOrTheEnvironment) {
  EnvGuard env;
  ::setenv("HUTCH_API_KEY", "e2b_00", 1);
  auto https = resolveEndpoint("https://box.example:8443", "", "/ca.pem", "");
  ASSERT_TRUE(https) << https.error().message();
  EXPECT_EQ(https->kind, Endpoint::Kind::kHttps);
  EXPECT_EQ(https->host, "box.example");
  EXPECT_EQ(https->port, 8443);
  EXPECT_EQ(https->api_key, "e2b_00");
  EXPECT_EQ(https->ca_cert, "/ca.pem");
  EXPECT_EQ(https->describe(), "https://box.example:8443");
  ::setenv("HUTCH_HOST", "http://[::1]:9000/", 1);
  ::setenv("HUTCH_FINGERPRINT", std::string(64, 'a').c_str(), 1);
  auto plain = resolveEndpoint("", "", "", "");
  ASSERT_TRUE(plain) << plain.error().message();
  EXPECT_EQ(plain->kind, Endpoint::Kind::kHttp);
  EXPECT_EQ(plain->host, "::1");
  EXPECT_EQ(plain->port, 9000);
  EXPECT_EQ(plain->fingerprint.substr(0, 6), "AA:AA:");
}

TEST(EndpointTest, BadHostsAndMissingKeysAreRefusedWithWhatToDo) {
  EnvGuard env;
  for (const char* bad : {"box.example:8443", "ftp://h:1", "https://h", "https://h:0",
                          "https://h:70000", "https://:80", "https://h:80/path"}) {
    ::setenv("HUTCH_API_KEY", "k", 1);
    auto r = resolveEndpoint(bad, "", "", "");
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code(), Errc::kInvalidArgument) << bad;
    EXPECT_NE(r.error().message().find("https://HOST:PORT"), std::string::npos) << bad;
  }
  ::unsetenv("HUTCH_API_KEY");
  auto no_key = resolveEndpoint("https://h:8443", "", "", "");
  ASSERT_FALSE(no_key);
  EXPECT_NE(no_key.error().message().find("HUTCH_API_KEY"), std::string::npos);
  ::setenv("HUTCH_API_KEY", "k", 1);
  EXPECT_FALSE(resolveEndpoint("https://h:8443", "", "", "not-a-fingerprint"));
}

}  // namespace
}  // namespace hutch::cli

#include "image/skopeo_error.h"

#include <gtest/gtest.h>

namespace hutch::image {
namespace {

using Kind = SkopeoFailure::Kind;

// What skopeo 1.9.3 printed against tests/registry/hostile_registry.py, as runCapture quotes it.
std::string fatal(const std::string& msg) {
  return "skopeo exited with status 1: Getting image source signatures\n"
         "time=\"2026-12-07T01:48:01Z\" level=fatal msg=\"" +
         msg + "\"\n";
}

TEST(SkopeoErrorTest, TheRegistrysStatusesAreTold) {
  struct Case {
    std::string msg;
    Kind kind;
    int status;
    bool blob;
  };
  const Case cases[] = {
      {"Error parsing image name \\\"docker://127.0.0.1:34713/unauthorized/busybox:latest\\\": "
       "reading manifest latest in 127.0.0.1:34713/unauthorized/busybox: unauthorized",
       Kind::kUnauthorized, 401, false},
      {"reading manifest latest in 127.0.0.1:34713/missing/busybox: manifest unknown",
       Kind::kNotFound, 404, false},
      {"reading manifest latest in 127.0.0.1:34713/ratelimited/busybox: toomanyrequests",
       Kind::kRateLimited, 429, false},
      {"reading manifest latest in 127.0.0.1:34713/broken/busybox: received unexpected HTTP "
       "status: 500 Internal Server Error",
       Kind::kServerError, 500, false},
      {"reading blob sha256:0fea: unable to retrieve auth token: invalid username/password: "
       "unauthorized: refused",
       Kind::kUnauthorized, 401, true},
      {"reading blob sha256:0fea: Error fetching blob: invalid status code from registry 404 "
       "(Not Found)",
       Kind::kNotFound, 404, true},
      {"reading blob sha256:0fea: too many requests to registry", Kind::kRateLimited, 429, true},
      {"reading blob sha256:0fea: Error fetching blob: invalid status code from registry 500 "
       "(Internal Server Error)",
       Kind::kServerError, 500, true},
      {"writing blob: happened during read: Digest did not match, expected sha256:0fea, got "
       "sha256:9be7",
       Kind::kDigestMismatch, 0, true},
      {"writing blob: happened during read: context deadline exceeded", Kind::kTimedOut, 0, true},
      {"Error parsing image name \\\"docker://127.0.0.1:39845/x:1\\\": pinging container "
       "registry 127.0.0.1:39845: Get \\\"http://127.0.0.1:39845/v2/\\\": context deadline "
       "exceeded",
       Kind::kTimedOut, 0, false},
      {"pinging container registry 10.0.0.9: Get \\\"https://10.0.0.9/v2/\\\": dial tcp "
       "10.0.0.9:443: connect: connection refused",
       Kind::kOther, 0, false},
  };
  for (const Case& c : cases) {
    SkopeoFailure f = classifySkopeoFailure(fatal(c.msg));
    EXPECT_EQ(f.kind, c.kind) << c.msg;
    EXPECT_EQ(f.status, c.status) << c.msg;
    EXPECT_EQ(f.blob, c.blob) << c.msg;
    EXPECT_EQ(f.message.find("level=fatal"), std::string::npos) << f.message;
    EXPECT_EQ(f.message.find("\\\""), std::string::npos) << "unescaped: " << f.message;
    EXPECT_FALSE(f.message.starts_with("Error parsing image name")) << f.message;
  }
}

TEST(SkopeoErrorTest, OutputWithoutAFatalLineIsQuotedWhole) {
  SkopeoFailure f = classifySkopeoFailure("  something odd happened\n");
  EXPECT_EQ(f.kind, Kind::kOther);
  EXPECT_EQ(f.message, "something odd happened");
}

TEST(SkopeoErrorTest, TheErrorNamesTheRegistryTheImageAndTheStatus) {
  const auto timeout = std::chrono::seconds(30);
  auto error = [&](const std::string& msg) {
    return registryPullError(classifySkopeoFailure(fatal(msg)), "127.0.0.1:5000",
                             "127.0.0.1:5000/team/app:1", timeout);
  };
  Error e401 = error("reading manifest 1 in 127.0.0.1:5000/team/app: unauthorized");
  EXPECT_EQ(e401.code(), Errc::kPermissionDenied);
  EXPECT_NE(e401.message().find("401 Unauthorized"), std::string::npos) << e401.message();
  EXPECT_NE(e401.message().find("hutch registry login 127.0.0.1:5000"), std::string::npos);
  Error e404 = error("reading manifest 1 in 127.0.0.1:5000/team/app: manifest unknown");
  EXPECT_EQ(e404.code(), Errc::kNotFound);
  EXPECT_NE(e404.message().find("404 Not Found"), std::string::npos) << e404.message();
  Error e429 = error("reading blob sha256:ab: too many requests to registry");
  EXPECT_EQ(e429.code(), Errc::kResourceExhausted);
  EXPECT_NE(e429.message().find("429 Too Many Requests"), std::string::npos) << e429.message();
  EXPECT_NE(e429.message().find("a layer of"), std::string::npos) << e429.message();
  Error e500 = error("received unexpected HTTP status: 502 Bad Gateway");
  EXPECT_EQ(e500.code(), Errc::kUnavailable);
  EXPECT_NE(e500.message().find("502 Bad Gateway"), std::string::npos) << e500.message();
  Error hang = error("writing blob: happened during read: context deadline exceeded");
  EXPECT_EQ(hang.code(), Errc::kTimeout);
  EXPECT_NE(hang.message().find("timed out"), std::string::npos) << hang.message();
  EXPECT_NE(hang.message().find("30 s"), std::string::npos) << hang.message();
  Error digest = error("writing blob: happened during read: Digest did not match, expected a");
  EXPECT_EQ(digest.code(), Errc::kProtocol);
  EXPECT_NE(digest.message().find("do not match its digest"), std::string::npos);
  for (const Error& e : {e401, e404, e429, e500, hang, digest}) {
    EXPECT_NE(e.message().find("127.0.0.1:5000"), std::string::npos) << e.message();
  }
}

}  // namespace
}  // namespace hutch::image

#include "image/reference.h"

#include <gtest/gtest.h>

namespace hutch::image {
namespace {

const std::string kHex(64, 'a');
const std::string kDigest = "sha256:" + kHex;

std::string canonical(std::string_view text) {
  auto ref = parseReference(text);
  EXPECT_TRUE(ref) << text << ": " << (ref ? "" : ref.error().message());
  return ref ? ref->str() : "";
}

TEST(ReferenceTest, NormalizesLikeDocker) {
  EXPECT_EQ(canonical("python"), "docker.io/library/python:latest");
  EXPECT_EQ(canonical("python:3.12"), "docker.io/library/python:3.12");
  EXPECT_EQ(canonical("user/app:1"), "docker.io/user/app:1");
  EXPECT_EQ(canonical("docker.io/python"), "docker.io/library/python:latest");
  EXPECT_EQ(canonical("index.docker.io/library/python:3"), "docker.io/library/python:3");
  EXPECT_EQ(canonical("docker.io/library/python"), "docker.io/library/python:latest");
  EXPECT_EQ(canonical("ghcr.io/owner/repo/sub:v1.2_3-rc"), "ghcr.io/owner/repo/sub:v1.2_3-rc");
  EXPECT_EQ(canonical("localhost/app"), "localhost/app:latest");
  EXPECT_EQ(canonical("localhost:5000/a/b:t"), "localhost:5000/a/b:t");
  EXPECT_EQ(canonical("registry:5000/x"), "registry:5000/x:latest");
  EXPECT_EQ(canonical("Example.COM/x"), "Example.COM/x:latest");
  EXPECT_EQ(canonical("my-reg.example.com/a__b/c-d.e:TAG"), "my-reg.example.com/a__b/c-d.e:TAG");
  EXPECT_EQ(canonical("[::1]:5000/app@" + kDigest), "[::1]:5000/app@" + kDigest);
  EXPECT_EQ(canonical("ghcr.io/o/r:v@" + kDigest), "ghcr.io/o/r:v@" + kDigest);
  EXPECT_EQ(canonical("python@" + kDigest), "docker.io/library/python@" + kDigest);
}

TEST(ReferenceTest, Fields) {
  auto ref = parseReference("localhost:5000/team/app:1.0@" + kDigest);
  ASSERT_TRUE(ref);
  EXPECT_EQ(ref->registry, "localhost:5000");
  EXPECT_EQ(ref->repository, "team/app");
  EXPECT_EQ(ref->tag, "1.0");
  EXPECT_EQ(ref->digest, kDigest);
  EXPECT_EQ(ref->transport(), "docker://localhost:5000/team/app:1.0@" + kDigest);
  EXPECT_EQ(*ref, *parseReference(ref->str()));
  auto plain = parseReference("alpine");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->transport(), "docker://docker.io/library/alpine:latest");
}

TEST(ReferenceTest, RefusesMalformed) {
  for (std::string bad : {std::string(""),
                          std::string("Python"),
                          std::string("python:"),
                          std::string("python:.x"),
                          std::string("python:-x"),
                          std::string("python:a/b"),
                          std::string("python@sha256:abc"),
                          std::string("python@md5:") + kHex,
                          std::string("python@sha256:") + std::string(64, 'A'),
                          std::string("a//b"),
                          std::string("a/-b"),
                          std::string("a/b-"),
                          std::string("a/b..c"),
                          std::string("a/b___c"),
                          std::string(":tag"),
                          std::string("/a"),
                          std::string("a/"),
                          std::string("host:port/x"),
                          std::string("ex ample/x"),
                          std::string("[::1/x"),
                          std::string("[zz]:5000/x"),
                          std::string("-bad.com/x"),
                          std::string("bad-.com/x"),
                          std::string("a.com:123456/x"),
                          std::string("python:") + std::string(129, 'a'),
                          std::string("x/") + std::string(300, 'a'),
                          std::string("a@b@sha256:") + kHex}) {
    auto ref = parseReference(bad);
    ASSERT_FALSE(ref) << bad << " parsed as " << ref->str();
    EXPECT_EQ(ref.error().code(), Errc::kInvalidArgument) << bad;
    EXPECT_TRUE(ref.error().message().starts_with("'")) << ref.error().message();
  }
  auto upper = parseReference("docker.io/Library/python");
  ASSERT_FALSE(upper);
  EXPECT_NE(upper.error().message().find("must be lowercase"), std::string::npos);
  auto digest = parseReference("python@sha512:abc");
  ASSERT_FALSE(digest);
  EXPECT_NE(digest.error().message().find("sha256:<64 lowercase hex digits>"), std::string::npos);
}

TEST(ReferenceTest, Loopback) {
  for (const char* yes : {"localhost/a", "localhost:5000/a", "127.0.0.1:5000/a", "127.5.6.7/a",
                          "[::1]:5000/a", "[::1]/a"}) {
    auto ref = parseReference(yes);
    ASSERT_TRUE(ref) << yes;
    EXPECT_TRUE(isLoopbackRegistry(*ref)) << yes;
  }
  for (const char* no : {"python", "docker.io/a", "128.0.0.1/a", "10.0.0.1:5000/a",
                         "localhost.example.com/a", "[::2]:5000/a", "127.0.0.1.nip.io/a"}) {
    auto ref = parseReference(no);
    ASSERT_TRUE(ref) << no;
    EXPECT_FALSE(isLoopbackRegistry(*ref)) << no;
  }
}

}  // namespace
}  // namespace hutch::image

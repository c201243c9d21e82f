#include "e2b/model.h"

#include <gtest/gtest.h>

#include <csignal>

namespace hutch::e2b {
namespace {

TEST(ConnectTest, EnvelopesRoundTrip) {
  std::string e = envelope(R"({"a":1})");
  ASSERT_EQ(e.size(), 5u + 7u);
  EXPECT_EQ(e[0], 0);
  EXPECT_EQ(static_cast<uint8_t>(e[4]), 7);
  EXPECT_EQ(*singleEnvelope(e), R"({"a":1})");
  EXPECT_EQ(static_cast<uint8_t>(envelope("{}", kEndStreamFlag)[0]), kEndStreamFlag);
}

TEST(ConnectTest, BadEnvelopesAreRefusedWithTheReason) {
  EXPECT_EQ(singleEnvelope("abc").error().code(), Errc::kInvalidArgument);
  std::string compressed = envelope("{}", 1);
  EXPECT_NE(singleEnvelope(compressed).error().message().find("compressed"), std::string::npos);
  std::string two = envelope("{}") + envelope("{}");
  EXPECT_NE(singleEnvelope(two).error().message().find("exactly one"), std::string::npos);
  std::string short_body = envelope("{\"x\":1}").substr(0, 8);
  EXPECT_FALSE(singleEnvelope(short_body));
}

TEST(ConnectTest, CodesAndStatusesFollowTheConnectTable) {
  EXPECT_EQ(connectCode(Errc::kNotFound), "not_found");
  EXPECT_EQ(connectStatus("not_found"), 404);
  EXPECT_EQ(connectCode(Errc::kAlreadyExists), "already_exists");
  EXPECT_EQ(connectStatus("already_exists"), 409);
  EXPECT_EQ(connectStatus("unavailable"), 503);
  EXPECT_EQ(connectStatus("deadline_exceeded"), 504);
  EXPECT_EQ(connectStatus("nonsense"), 500);
  auto j = connectError(Error(Errc::kInvalidArgument, "bad"));
  EXPECT_EQ(j["code"], "invalid_argument");
  EXPECT_EQ(j["message"], "bad");
}

TEST(ControlPlaneTest, NewSandboxBodiesAsTheSdksSendThem) {
  auto v1 = parseNewSandbox(
      R"({"templateID":"base","metadata":{"agent":"test"},"timeout":120,"secure":true,"allow_internet_access":true})");
  ASSERT_TRUE(v1) << v1.error().describe();
  EXPECT_EQ(v1->template_id, "base");
  EXPECT_EQ(v1->timeout_s, 120);
  EXPECT_EQ(v1->metadata.at("agent"), "test");
  auto v2 = parseNewSandbox(
      R"({"templateID":"code","envVars":{"A":"1"},"autoPause":true,"network":{"allowOut":["x.example.com"],"denyOut":["0.0.0.0/0"]}})");
  ASSERT_TRUE(v2);
  EXPECT_EQ(v2->timeout_s, 15);  // E2B's default
  EXPECT_EQ(v2->env.at("A"), "1");
  EXPECT_TRUE(v2->auto_pause);
  EXPECT_EQ(v2->network.allow_out, std::vector<std::string>{"x.example.com"});
  EXPECT_EQ(v2->network.deny_out, std::vector<std::string>{"0.0.0.0/0"});
  EXPECT_FALSE(v2->network.allow_internet_access);  // not said: E2B's default
  EXPECT_EQ(v1->network.allow_internet_access, true);
  EXPECT_EQ(parseNewSandbox("").value().template_id, "base");
}

TEST(ControlPlaneTest, BadNewSandboxBodiesSayWhichField) {
  EXPECT_NE(parseNewSandbox("[]").error().message().find("JSON object"), std::string::npos);
  EXPECT_NE(parseNewSandbox(R"({"timeout":"x"})").error().message().find("timeout"),
            std::string::npos);
  EXPECT_NE(parseNewSandbox(R"({"timeout":-1})").error().message().find("out of range"),
            std::string::npos);
  EXPECT_NE(parseNewSandbox(R"({"metadata":{"a":1}})").error().message().find("metadata.a"),
            std::string::npos);
  EXPECT_NE(parseNewSandbox(R"({"network":{"allowOut":"x"}})").error().message().find("allowOut"),
            std::string::npos);
}

TEST(ControlPlaneTest, TimeoutBodies) {
  EXPECT_EQ(parseTimeoutBody(R"({"timeout":60})", true).value(), 60);
  EXPECT_FALSE(parseTimeoutBody("{}", false).value().has_value());
  EXPECT_FALSE(parseTimeoutBody("{}", true));
  EXPECT_FALSE(parseTimeoutBody(R"({"timeout":-5})", true));
}

TEST(ControlPlaneTest, TemplatesMapOrKeepTheirName) {
  std::map<std::string, std::string> map{{"code-interpreter-v1", "base"}};
  EXPECT_EQ(mapTemplate(map, "code-interpreter-v1"), "base");
  EXPECT_EQ(mapTemplate(map, "docker"), "docker");
}

TEST(ControlPlaneTest, SandboxJsonHasWhatThePythonModelsRequire) {
  box::Box b;
  b.id = "0123456789ab";
  b.created_at = 1764650000;
  b.expires_at = 1764650300;
  b.state = box::BoxState::kStopped;
  b.config.cpus = 2;
  b.config.memory_mib = 1024;
  b.metadata = {{"agent", "x"},
                {std::string(kTemplateMetadataKey), "base"},
                {std::string(kCreatedMetadataKey), "1764650000123456789"},
                {std::string(kAutoPauseMetadataKey), "true"}};
  auto s = sandboxJson(b, "base", "tok");
  for (const char* key : {"sandboxID", "templateID", "clientID", "envdVersion"}) {
    EXPECT_TRUE(s.contains(key)) << key;
  }
  EXPECT_EQ(s["envdAccessToken"], "tok");
  auto d = sandboxDetailJson(b, templateIdOf(b), 2048);
  for (const char* key : {"templateID", "sandboxID", "clientID", "startedAt", "endAt", "cpuCount",
                          "memoryMB", "diskSizeMB", "state", "envdVersion"}) {
    EXPECT_TRUE(d.contains(key)) << key;
  }
  EXPECT_EQ(d["state"], "paused");
  EXPECT_EQ(d["endAt"], "2025-12-02T04:38:20Z");
  EXPECT_EQ(d["metadata"], (json{{"agent", "x"}}));  // hutch's own keys are not shown
}

TEST(TimeTest, Rfc3339) {
  EXPECT_EQ(rfc3339(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(rfc3339Nanos(1500000000), "1970-01-01T00:00:01.500000000Z");
  EXPECT_EQ(rfc3339Nanos(2000000000), "1970-01-01T00:00:02Z");
}

TEST(TokenTest, TokensAreKeyedPerBoxAndCompareExactly) {
  std::string secret(32, 'k');
  auto a = accessToken(secret, "aaaaaaaaaaaa");
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(a, accessToken(secret, "aaaaaaaaaaaa"));
  EXPECT_NE(a, accessToken(secret, "bbbbbbbbbbbb"));
  EXPECT_NE(a, accessToken(std::string(32, 'j'), "aaaaaaaaaaaa"));
  EXPECT_TRUE(sameToken(a, a));
  EXPECT_FALSE(sameToken(a, a.substr(1)));
  EXPECT_FALSE(sameToken("", ""));
}

TEST(TokenTest, FileSignaturesFollowTheSdk) {
  // v1_ + unpadded base64 of sha256("path:op:user:token"); 32 bytes are 43 characters.
  auto sig = fileSignature("/home/user/x", "read", "user", "tok", std::nullopt);
  EXPECT_EQ(sig.rfind("v1_", 0), 0u);
  EXPECT_EQ(sig.size(), 3u + 43u);
  EXPECT_NE(sig, fileSignature("/home/user/x", "write", "user", "tok", std::nullopt));
  EXPECT_NE(sig, fileSignature("/home/user/x", "read", "user", "tok", 100));
}

TEST(TokenTest, SignedUrlsAreCheckedAsEnvdDoes) {
  using Query = std::map<std::string, std::string, std::less<>>;
  const int64_t now = 1000000;
  auto signedQuery = [](std::string_view op, std::string user, std::optional<int64_t> exp) {
    Query q{{"path", "hello.txt"}, {"signature", fileSignature("hello.txt", op, user, "tok", exp)}};
    if (!user.empty()) q["username"] = user;
    if (exp) q["signature_expiration"] = std::to_string(*exp);
    return q;
  };
  EXPECT_EQ(checkFileSignature(signedQuery("read", "", std::nullopt), "read", "tok", now),
            SignatureCheck::kValid);
  EXPECT_EQ(checkFileSignature(signedQuery("read", "root", now + 10), "read", "tok", now),
            SignatureCheck::kValid);
  // The SDKs sign "user" or "" for the default user.
  Query named = signedQuery("read", "user", std::nullopt);
  named.erase("username");
  EXPECT_EQ(checkFileSignature(named, "read", "tok", now), SignatureCheck::kValid);
  // Right but past its time: expired; anything wrong first is invalid.
  EXPECT_EQ(checkFileSignature(signedQuery("read", "", now - 10), "read", "tok", now),
            SignatureCheck::kExpired);
  EXPECT_EQ(checkFileSignature(signedQuery("read", "", now - 10), "read", "other", now),
            SignatureCheck::kInvalid);
  EXPECT_EQ(checkFileSignature(signedQuery("read", "", std::nullopt), "write", "tok", now),
            SignatureCheck::kInvalid);
  Query moved = signedQuery("read", "", now + 10);
  moved["signature_expiration"] = std::to_string(now + 1000);
  EXPECT_EQ(checkFileSignature(moved, "read", "tok", now), SignatureCheck::kInvalid);
  moved["signature_expiration"] = "soon";
  EXPECT_EQ(checkFileSignature(moved, "read", "tok", now), SignatureCheck::kInvalid);
  EXPECT_EQ(checkFileSignature(Query{{"path", "x"}}, "read", "tok", now), SignatureCheck::kMissing);
  EXPECT_EQ(signatureProblem(SignatureCheck::kExpired), "signature is already expired");
  EXPECT_EQ(signatureProblem(SignatureCheck::kInvalid), "invalid signature");
}

TEST(EnvdTest, UsersComeFromBasicAuthorization) {
  EXPECT_EQ(userFromAuthorization("").value(), "user");
  EXPECT_EQ(userFromAuthorization("Basic cm9vdDo=").value(), "root");  // "root:"
  EXPECT_EQ(userFromAuthorization("Bearer x").error().code(), Errc::kUnauthenticated);
  EXPECT_FALSE(userFromAuthorization("Basic !!!"));
  // The sandbox's default user (its template's last USER) when the request names none.
  EXPECT_EQ(userFromAuthorization("", "root").value(), "root");
  EXPECT_EQ(userFromAuthorization("Basic Og==", "root").value(), "root");  // ":"
  EXPECT_EQ(userFromAuthorization("Basic dXNlcjo=", "root").value(), "user");
}

TEST(EnvdTest, DefaultsOfASandboxComeFromItsMetadata) {
  box::Box b;
  EXPECT_EQ(defaultUserOf(b), "user");
  EXPECT_EQ(defaultWorkdirOf(b), "");
  b.metadata[std::string(kUserMetadataKey)] = "root";
  b.metadata[std::string(kWorkdirMetadataKey)] = "/srv/app";
  EXPECT_EQ(defaultUserOf(b), "root");
  EXPECT_EQ(defaultWorkdirOf(b), "/srv/app");
}

TEST(EnvdTest, EntriesInProto3Json) {
  proto::FileInfo info;
  info.name = "a.txt";
  info.path = "/home/user/a.txt";
  info.type = proto::FileType::kFile;
  info.size = 13;
  info.mode = 0644;
  info.permissions = "-rw-r--r--";
  info.owner = "user";
  info.group = "user";
  info.mtime_ns = 1000000000;
  auto j = entryJson(info);
  EXPECT_EQ(j["type"], "FILE_TYPE_FILE");
  EXPECT_EQ(j["size"], "13");  // int64 as a string
  EXPECT_EQ(j["mode"], 0644);
  EXPECT_EQ(j["modifiedTime"], "1970-01-01T00:00:01Z");
  EXPECT_FALSE(j.contains("symlinkTarget"));
  // A directory's mode is its permission bits (envd: 493), not Go's ModeDir bit with them.
  info.type = proto::FileType::kDir;
  info.mode = 0755;
  EXPECT_EQ(entryJson(info)["type"], "FILE_TYPE_DIRECTORY");
  EXPECT_EQ(entryJson(info)["mode"], 493);
  info.mode = 01777;  // the sticky bit, as Go's Perm() drops it
  EXPECT_EQ(entryJson(info)["mode"], 0777);
  // A symlink's target is the absolute path its text names.
  info.type = proto::FileType::kSymlink;
  info.path = "/home/user/link";
  info.symlink_target = "/x";
  EXPECT_EQ(entryJson(info)["symlinkTarget"], "/x");
  info.symlink_target = "test_file.txt";
  EXPECT_EQ(entryJson(info)["symlinkTarget"], "/home/user/test_file.txt");
  info.symlink_target = "../other/./f";
  EXPECT_EQ(entryJson(info)["symlinkTarget"], "/home/other/f");
}

TEST(EnvdTest, PathsAsEnvdResolvesThem) {
  EXPECT_EQ(cleanPath("/a//b/./c/../d/"), "/a/b/d");
  EXPECT_EQ(cleanPath("/.."), "/");
  EXPECT_EQ(cleanPath(""), "/");
  EXPECT_EQ(symlinkTargetPath("/l", "a"), "/a");
  EXPECT_EQ(symlinkTargetPath("/d/l", "/abs/../x"), "/x");
  // A working directory: from the user's home unless absolute; "~" is the home.
  EXPECT_EQ(resolveForUser("work", "/home/user"), "/home/user/work");
  EXPECT_EQ(resolveForUser("./a/../b", "/home/user"), "/home/user/b");
  EXPECT_EQ(resolveForUser("~", "/home/user"), "/home/user");
  EXPECT_EQ(resolveForUser("~/x", "/home/user"), "/home/user/x");
  EXPECT_EQ(resolveForUser("/tmp", "/home/user"), "/tmp");
  EXPECT_EQ(resolveForUser("..", "/home/user"), "/home");
}

TEST(EnvdTest, PasswdEntriesByNameOrUid) {
  const std::string passwd =
      "root:x:0:0:root:/root:/bin/bash\n"
      "# a comment\n"
      "broken:x:zz:1:::/bin/sh\n"
      "user:x:1001:1002:E2B user,,,:/home/user:/bin/bash\n";
  auto user = passwdEntry(passwd, "user");
  ASSERT_TRUE(user);
  EXPECT_EQ(user->uid, 1001u);
  EXPECT_EQ(user->gid, 1002u);
  EXPECT_EQ(user->home, "/home/user");
  EXPECT_EQ(passwdEntry(passwd, "1001")->name, "user");
  EXPECT_EQ(passwdEntry(passwd, "root")->home, "/root");
  EXPECT_FALSE(passwdEntry(passwd, "broken"));
  EXPECT_FALSE(passwdEntry(passwd, "nobody"));
  EXPECT_FALSE(passwdEntry("", "user"));
}

TEST(EnvdTest, HutchsWriteTemporariesAreRecognised) {
  EXPECT_TRUE(isWriteTemporary("/home/user/.watched.txt.hutch-d7af3e5e312c4ffa"));
  EXPECT_TRUE(isWriteTemporary(".a.hutch-0123456789abcdef"));
  EXPECT_FALSE(isWriteTemporary("/home/user/watched.txt"));
  EXPECT_FALSE(isWriteTemporary("/home/user/.a.hutch-0123"));
  EXPECT_FALSE(isWriteTemporary("/home/user/a.hutch-0123456789abcdef"));
  EXPECT_FALSE(isWriteTemporary("/home/user/.a.hutch-0123456789abcdeZ"));
}

TEST(EnvdTest, StartRequestsAsTheSdksSendThem) {
  auto j = json::parse(
      R"({"process":{"cmd":"/bin/bash","args":["-l","-c","echo hi"],"envs":{"A":"1"},"cwd":"/tmp"},"stdin":false})");
  auto s = parseStartRequest(j);
  ASSERT_TRUE(s) << s.error().describe();
  EXPECT_EQ(s->process.cmd, "/bin/bash");
  EXPECT_EQ(s->process.args.size(), 3u);
  EXPECT_EQ(s->process.cwd.value(), "/tmp");
  EXPECT_FALSE(s->tty);
  auto pty = parseStartRequest(json::parse(
      R"({"process":{"cmd":"/bin/bash","args":["-i","-l"]},"pty":{"size":{"cols":80,"rows":24}}})"));
  ASSERT_TRUE(pty);
  EXPECT_TRUE(pty->tty);
  EXPECT_EQ(pty->rows, 24);
  EXPECT_EQ(pty->cols, 80);
  EXPECT_FALSE(parseStartRequest(json::parse(R"({"process":{"args":[]}})")));
  EXPECT_FALSE(parseStartRequest(json::parse(R"({})")));
}

TEST(EnvdTest, SelectorsAndSignals) {
  EXPECT_EQ(parseSelector(json::parse(R"({"process":{"pid":42}})"))->pid.value(), 42u);
  EXPECT_EQ(parseSelector(json::parse(R"({"process":{"pid":"42"}})"))->pid.value(), 42u);
  EXPECT_EQ(parseSelector(json::parse(R"({"process":{"tag":"t"}})"))->tag.value(), "t");
  EXPECT_FALSE(parseSelector(json::parse(R"({"process":{}})")));
  EXPECT_FALSE(parseSelector(json::parse(R"({})")));
  EXPECT_EQ(parseSignal("SIGNAL_SIGKILL").value(), SIGKILL);
  EXPECT_EQ(parseSignal("SIGNAL_SIGTERM").value(), SIGTERM);
  EXPECT_FALSE(parseSignal("SIGNAL_UNSPECIFIED"));
}

TEST(EnvdTest, ExitStatusTextReadsLikeEnvds) {
  EXPECT_EQ(exitStatusText(proto::ExitStatus::exited(3)), "exit status 3");
  EXPECT_EQ(exitStatusText(proto::ExitStatus::signaled(SIGKILL)), "signal: killed");
}

}  // namespace
}  // namespace hutch::e2b

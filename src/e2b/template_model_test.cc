#include "e2b/template_model.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

namespace hutch::e2b {
namespace {

namespace fs = std::filesystem;
using box::BuildStep;
using box::CopyItem;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "e2b-template-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  void write(const std::string& rel, const std::string& text, fs::perms mode = fs::perms(0644)) {
    fs::create_directories((path_ / rel).parent_path());
    std::ofstream(path_ / rel) << text;
    fs::permissions(path_ / rel, mode);
  }

 private:
  fs::path path_;
};

TEST(TemplateRefTest, NameAndTag) {
  EXPECT_EQ(parseTemplateRef("app").value(), (TemplateRef{"app", "default"}));
  EXPECT_EQ(parseTemplateRef("my-app.v2:V1_0").value(), (TemplateRef{"my-app.v2", "V1_0"}));
  EXPECT_FALSE(parseTemplateRef(""));
  EXPECT_FALSE(parseTemplateRef("App"));  // E2B's names are lower case
  EXPECT_FALSE(parseTemplateRef("a/b"));
  EXPECT_FALSE(parseTemplateRef("app:"));
  EXPECT_FALSE(parseTemplateRef("-app"));
}

TEST(NewTemplateTest, TagsAndSize) {
  auto t = parseNewTemplate(R"({"name":"app:v1","tags":["v2","v1"],"cpuCount":4,"memoryMB":2048})");
  ASSERT_TRUE(t) << t.error().describe();
  EXPECT_EQ(t->ref.name, "app");
  EXPECT_EQ(t->tags, (std::vector<std::string>{"v1", "v2"}));
  EXPECT_EQ(t->cpus, 4u);
  EXPECT_EQ(t->memory_mib, 2048u);
  EXPECT_EQ(parseNewTemplate(R"({"name":"app"})")->tags, std::vector<std::string>{"default"});
  EXPECT_FALSE(parseNewTemplate(R"({"name":"app","cpuCount":0})"));
  EXPECT_FALSE(parseNewTemplate(R"({"tags":["x"]})"));
}

TEST(BuildStartTest, ParsesTheSdksBody) {
  auto s = parseBuildStart(R"({"fromTemplate":"base","force":true,"startCmd":"x","readyCmd":"y",
    "steps":[{"type":"RUN","args":["echo hi","root"],"force":false},
             {"type":"COPY","args":["a.txt","/app/","",""],"filesHash":"ab","force":true}]})");
  ASSERT_TRUE(s) << s.error().describe();
  EXPECT_EQ(s->from_template, "base");
  EXPECT_TRUE(s->force);
  ASSERT_EQ(s->steps.size(), 2u);
  EXPECT_EQ(s->steps[1].files_hash, "ab");
  EXPECT_TRUE(s->steps[1].force);
  EXPECT_FALSE(parseBuildStart(R"({"steps":[]})"));
  EXPECT_FALSE(parseBuildStart(R"({"fromImage":"x","steps":[{"args":[]}]})"));
}

TEST(BuildStartTest, RegistryCredentialsOfTypeRegistryOnly) {
  auto s = parseBuildStart(
      R"({"fromImage":"r.example/a:1","fromImageRegistry":{"type":"registry","username":"u","password":"p:w"}})");
  ASSERT_TRUE(s) << s.error().describe();
  ASSERT_TRUE(s->registry);
  EXPECT_EQ(s->registry->username, "u");
  EXPECT_EQ(s->registry->password, "p:w");
  auto plan = planBuild(*s, "", [](const std::string&) { return std::nullopt; });
  ASSERT_TRUE(plan) << plan.error().describe();
  ASSERT_TRUE(plan->plan.base_credentials);
  EXPECT_EQ(plan->plan.base_credentials->username, "u");
  // An image gets the user E2B's SDKs run commands as (E2B's provisioning), as the base step.
  ASSERT_EQ(plan->plan.steps.size(), 1u);
  EXPECT_EQ(plan->plan.steps[0].user, "root");
  EXPECT_NE(plan->plan.steps[0].argv.back().find("useradd -m 'user'"), std::string::npos);
  EXPECT_EQ(stepLabel(0, plan->origin), "base");
  // Without a password, without fromImage, another type: refused, the password never echoed.
  for (
      const char* body :
      {R"({"fromImage":"x","fromImageRegistry":{"type":"registry","username":"u"}})",
       R"({"fromImage":"x","fromImageRegistry":{"type":"registry","username":"a:b","password":"secret1"}})",
       R"({"fromTemplate":"base","fromImageRegistry":{"type":"registry","username":"u","password":"secret1"}})",
       R"({"fromImage":"x","fromImageRegistry":{"type":"docker","username":"u","password":"secret1"}})",
       R"({"fromImage":"x","fromImageRegistry":"u:secret1"})"}) {
    auto bad = parseBuildStart(body);
    ASSERT_FALSE(bad) << body;
    EXPECT_EQ(bad.error().code(), Errc::kInvalidArgument) << body;
    EXPECT_EQ(bad.error().describe().find("secret1"), std::string::npos) << bad.error().describe();
  }
  // The cloud registries' types are a clear "not supported".
  auto aws = parseBuildStart(
      R"({"fromImage":"x","fromImageRegistry":{"type":"aws","awsAccessKeyId":"a","awsSecretAccessKey":"s","awsRegion":"r"}})");
  ASSERT_FALSE(aws);
  EXPECT_EQ(aws.error().code(), Errc::kUnsupported);
  EXPECT_NE(aws.error().message().find("fromAWSRegistry"), std::string::npos);
  auto gcp = parseBuildStart(
      R"({"fromImage":"x","fromImageRegistry":{"type":"gcp","serviceAccountJson":"{}"}})");
  ASSERT_FALSE(gcp);
  EXPECT_EQ(gcp.error().code(), Errc::kUnsupported);
}

TEST(GlobBaseTest, AsDoublestarSplitsPatterns) {
  EXPECT_EQ(globBase("file.txt"), "file.txt");
  EXPECT_EQ(globBase("dir/"), "dir");
  EXPECT_EQ(globBase("src/*.js"), "src");
  EXPECT_EQ(globBase("*.txt"), ".");
  EXPECT_EQ(globBase("a/b/**/c"), "a/b");
}

TEST(CopyItemsTest, AFileToATargetOrIntoADirectory) {
  TempDir d;
  d.write("app/main.py", "print(1)\n", fs::perms(0755));
  auto exact = copyItems(d.path(), "app/main.py", "/srv/run.py", "");
  ASSERT_TRUE(exact) << exact.error().describe();
  ASSERT_EQ(exact->size(), 1u);
  EXPECT_EQ((*exact)[0].target, "/srv/run.py");
  EXPECT_EQ((*exact)[0].mode, 0755u);
  EXPECT_EQ((*exact)[0].source, d.path() / "app/main.py");
  auto into = copyItems(d.path(), "app/main.py", "/srv/", "0600");
  ASSERT_TRUE(into);
  EXPECT_EQ((*into)[0].target, "/srv/main.py");
  EXPECT_EQ((*into)[0].mode, 0600u);
}

TEST(CopyItemsTest, ADirectorysContentsMergeIntoTheTarget) {
  TempDir d;
  d.write("app/a.txt", "a");
  d.write("app/sub/b.txt", "b");
  fs::create_symlink("a.txt", d.path() / "app/link");
  auto items = copyItems(d.path(), "app", "/home/user/app", "");
  ASSERT_TRUE(items) << items.error().describe();
  std::map<std::string, CopyItem::Type> got;
  for (const auto& i : *items) got[i.target] = i.type;
  EXPECT_EQ(got["/home/user/app/a.txt"], CopyItem::Type::kFile);
  EXPECT_EQ(got["/home/user/app/sub"], CopyItem::Type::kDirectory);
  EXPECT_EQ(got["/home/user/app/sub/b.txt"], CopyItem::Type::kFile);
  EXPECT_EQ(got["/home/user/app/link"], CopyItem::Type::kSymlink);
  // A glob's matches were all uploaded: its fixed part is what is copied.
  auto glob = copyItems(d.path(), "app/*.txt", "/x/", "");
  ASSERT_TRUE(glob);
  EXPECT_EQ(glob->size(), 4u);
}

TEST(CopyItemsTest, NothingOutsideTheUpload) {
  TempDir d;
  d.write("a.txt", "a");
  EXPECT_FALSE(copyItems(d.path(), "../etc/passwd", "/x", ""));
  EXPECT_FALSE(copyItems(d.path(), "/etc/passwd", "/x", ""));
  EXPECT_FALSE(copyItems(d.path(), "missing", "/x", ""));
  fs::create_symlink("/etc", d.path() / "up");
  EXPECT_FALSE(copyItems(d.path(), "up/passwd", "/x", ""));
  EXPECT_FALSE(copyItems(d.path(), "a.txt", "/x", "999"));
}

TEST(PlanBuildTest, StepsMapBackToTheSdksSteps) {
  TempDir d;
  d.write("f.txt", "f");
  const std::string hash(64, 'a');
  BuildStart start;
  start.from_template = "mine";
  start.start_cmd = "serve";
  start.ready_cmd = "[ -f /tmp/up ]";
  start.steps = {{"RUN", {"echo hi"}, false, ""},
                 {"USER", {"alice"}, false, ""},
                 {"COPY", {"f.txt", "/app/", "", ""}, false, hash},
                 {"ENV", {"A", "1", "B", "2"}, true, ""},
                 {"WORKDIR", {"/app"}, false, ""},
                 {"RUN", {"id", "root"}, false, ""}};
  auto plan = planBuild(start, "hutch-mine", [&](const std::string& h) {
    return h == hash ? std::optional<fs::path>(d.path()) : std::nullopt;
  });
  ASSERT_TRUE(plan) << plan.error().describe();
  const auto& steps = plan->plan.steps;
  EXPECT_EQ(plan->plan.base_template, "hutch-mine");
  EXPECT_EQ(plan->plan.start_cmd, "serve");
  // USER of a user the box may lack makes it first: one more step, from the same SDK step.
  ASSERT_EQ(steps.size(), 7u);
  EXPECT_EQ(plan->origin, (std::vector<int>{1, 2, 2, 3, 4, 5, 6}));
  EXPECT_EQ(steps[0].kind, BuildStep::Kind::kRun);
  EXPECT_EQ(steps[0].argv, runArgv("echo hi"));
  EXPECT_EQ(steps[1].user, "root");
  EXPECT_EQ(steps[2].kind, BuildStep::Kind::kUser);
  EXPECT_EQ(steps[3].kind, BuildStep::Kind::kCopy);
  EXPECT_EQ(steps[3].chown, "alice");  // the USER's, as E2B's default owner
  EXPECT_EQ(steps[3].items.at(0).target, "/app/f.txt");
  EXPECT_EQ(steps[4].env,
            (std::vector<std::pair<std::string, std::string>>{{"A", "1"}, {"B", "2"}}));
  EXPECT_TRUE(steps[4].force);
  EXPECT_EQ(steps[5].path, "/app");
  EXPECT_EQ(steps[6].user, "root");
  // The last USER and WORKDIR: its sandboxes' defaults (a RUN's own user changes neither).
  EXPECT_EQ(plan->user, "alice");
  EXPECT_EQ(plan->workdir, "/app");
  EXPECT_EQ(stepLabel(0, plan->origin), "1");
  EXPECT_EQ(stepLabel(2, plan->origin), "2");
  EXPECT_EQ(stepLabel(box::BuildLog::kBaseStep, plan->origin), "base");
  EXPECT_EQ(stepLabel(box::BuildLog::kFinalizeStep, plan->origin), "finalize");

  start.steps = {{"COPY", {"f.txt", "/app/"}, false, std::string(64, 'b')}};
  auto missing = planBuild(start, "x", [](const std::string&) { return std::nullopt; });
  EXPECT_EQ(missing.error().code(), Errc::kFailedPrecondition);
  start.steps = {{"ENV", {"A"}, false, ""}};
  EXPECT_FALSE(planBuild(start, "x", {}));
  start.steps = {{"HEALTHCHECK", {"x"}, false, ""}};
  EXPECT_FALSE(planBuild(start, "x", {}));
}

TEST(PlanBuildTest, UserWithTrueMayAlsoSudo) {
  BuildStart start;
  start.from_template = "base";
  start.steps = {{"USER", {"bob", "true"}, false, ""}, {"USER", {"carol"}, false, ""}};
  auto plan = planBuild(start, "base", {});
  ASSERT_TRUE(plan) << plan.error().describe();
  ASSERT_EQ(plan->plan.steps.size(), 4u);
  const std::string& bob = plan->plan.steps[0].argv.at(2);
  EXPECT_NE(bob.find("'bob ALL=(ALL:ALL) NOPASSWD: ALL'"), std::string::npos) << bob;
  EXPECT_EQ(plan->plan.steps[0].user, "root");
  EXPECT_EQ(plan->plan.steps[2].argv.at(2).find("NOPASSWD"), std::string::npos);
  EXPECT_EQ(plan->user, "carol");
}

TEST(PlanBuildTest, ForceOfTheWholeBuildForcesItsFirstStep) {
  BuildStart start;
  start.from_image = "debian:12";
  start.force = true;
  start.steps = {{"RUN", {"a"}, false, ""}, {"RUN", {"b"}, false, ""}};
  auto plan = planBuild(start, "", {});
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->plan.base_image, "debian:12");
  // The first step is the image's provisioning (the user "user"), then the SDK's.
  ASSERT_EQ(plan->plan.steps.size(), 3u);
  EXPECT_TRUE(plan->plan.steps[0].force);
  EXPECT_FALSE(plan->plan.steps[1].force);
  EXPECT_FALSE(plan->plan.steps[2].force);
  EXPECT_EQ(plan->origin, (std::vector<int>{0, 1, 2}));
  // An image's provisioned user may sudo without a password, as E2B's are.
  EXPECT_NE(plan->plan.steps[0].argv.at(2).find("NOPASSWD: ALL"), std::string::npos);
  EXPECT_FALSE(plan->user);  // no USER, no WORKDIR: the base's defaults
  EXPECT_FALSE(plan->workdir);
  start.from_image.clear();
  start.from_template = "base";
  plan = planBuild(start, "base", {});
  ASSERT_TRUE(plan);
  ASSERT_EQ(plan->plan.steps.size(), 2u);
  EXPECT_TRUE(plan->plan.steps[0].force);
  EXPECT_FALSE(plan->plan.steps[1].force);
}

TEST(BuildInfoTest, PagesOfAHundredAndTheReason) {
  std::vector<LogLine> lines;
  for (int i = 0; i < 250; ++i) lines.push_back({1700000000123, "info", std::to_string(i), "1"});
  auto first = buildInfoJson("t", "b", "building", lines, {}, std::nullopt);
  EXPECT_EQ(first["logEntries"].size(), 100u);
  EXPECT_EQ(first["logs"].size(), 100u);
  EXPECT_EQ(first["logEntries"][0]["timestamp"], "2023-11-14T22:13:20.123Z");
  EXPECT_EQ(first["logEntries"][0]["step"], "1");
  EXPECT_FALSE(first.contains("reason"));
  auto last =
      buildInfoJson("t", "b", "error", lines, {.offset = 200}, LogLine{0, "error", "boom", "3"});
  EXPECT_EQ(last["logEntries"].size(), 50u);
  EXPECT_EQ(last["reason"]["message"], "boom");
  EXPECT_EQ(last["reason"]["step"], "3");
  EXPECT_EQ(
      buildInfoJson("t", "b", "ready", lines, {.offset = 999}, std::nullopt)["logEntries"].size(),
      0u);
}

TEST(BuildLogsTest, CursorDirectionLevelAndLimit) {
  std::vector<LogLine> lines = {{1000, "debug", "d", "base"},
                                {2000, "info", "a", "base"},
                                {3000, "warn", "b", "1"},
                                {4000, "error", "c", "1"}};
  auto messages = [](const json& j) {
    std::vector<std::string> out;
    for (const json& e : j["logs"]) out.push_back(e["message"]);
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(messages(buildLogsJson(lines, {}, 9000)), (V{"d", "a", "b", "c"}));
  EXPECT_EQ(messages(buildLogsJson(lines, {.cursor = 2000}, 9000)), (V{"a", "b", "c"}));
  EXPECT_EQ(messages(buildLogsJson(lines, {.cursor = 3000, .backward = true}, 9000)),
            (V{"b", "a", "d"}));
  EXPECT_EQ(messages(buildLogsJson(lines, {.limit = 2, .backward = true}, 9000)), (V{"c", "b"}));
  EXPECT_EQ(messages(buildLogsJson(lines, {.level = "warn"}, 9000)), (V{"b", "c"}));
  EXPECT_EQ(messages(buildLogsJson(lines, {.limit = 0}, 9000)), V{});
  EXPECT_EQ(buildLogsJson(lines, {}, 9000)["logs"][2]["step"], "1");
  // The status's pages filter by level before the offset.
  auto info = buildInfoJson("t", "b", "ready", lines, {.offset = 1, .level = "info"}, std::nullopt);
  EXPECT_EQ(info["logs"], json::array({"b", "c"}));

  using Q = std::map<std::string, std::string, std::less<>>;
  auto q = parseLogsQuery(Q{{"cursor", "1700000000000"},
                            {"limit", "5"},
                            {"direction", "backward"},
                            {"level", "warn"},
                            {"source", "persistent"}});
  ASSERT_TRUE(q) << q.error().describe();
  EXPECT_EQ(q->cursor, 1700000000000);
  EXPECT_EQ(q->limit, 5u);
  EXPECT_TRUE(q->backward);
  EXPECT_EQ(q->level, "warn");
  EXPECT_EQ(parseLogsQuery(Q{{"logsOffset", "7"}})->offset, 7u);
  EXPECT_EQ(parseLogsQuery(Q{})->limit, kLogPage);
  for (const Q& bad : {Q{{"limit", "101"}}, Q{{"limit", "-1"}}, Q{{"cursor", "soon"}},
                       Q{{"direction", "sideways"}}, Q{{"level", "fatal"}},
                       Q{{"source", "elsewhere"}}, Q{{"logsOffset", "x"}}}) {
    auto r = parseLogsQuery(bad);
    ASSERT_FALSE(r) << bad.begin()->first;
    EXPECT_EQ(r.error().code(), Errc::kInvalidArgument);
    EXPECT_NE(r.error().message().find(bad.begin()->first), std::string::npos)
        << r.error().message();
  }
}

TEST(CredentialScopeTest, OneForTheSameKeyAndCredentialsOnly) {
  const std::string secret(32, 's');
  using C = box::TemplateService::PullCredentials;
  const std::string scope = credentialScope(secret, "k1", C{"u", "pw"});
  EXPECT_EQ(scope.size(), 64u);
  EXPECT_EQ(scope, credentialScope(secret, "k1", C{"u", "pw"}));
  EXPECT_NE(scope, credentialScope(secret, "k2", C{"u", "pw"}));
  EXPECT_NE(scope, credentialScope(secret, "k1", C{"u", "pw2"}));
  EXPECT_NE(scope, credentialScope(secret, "k1", C{"up", "w"}));
  EXPECT_NE(scope, credentialScope(std::string(32, 't'), "k1", C{"u", "pw"}));
  EXPECT_EQ(scope.find("pw"), std::string::npos);
}

TEST(UploadTokenTest, SignedForOneOwnerHashAndTime) {
  const std::string secret(32, 's');
  const std::string hash(64, 'c');
  const std::string token = uploadToken(secret, "k1", hash, 1000);
  EXPECT_TRUE(checkUploadToken(secret, "k1", hash, "1000", token, 999));
  EXPECT_FALSE(checkUploadToken(secret, "k1", hash, "1000", token, 1001));  // expired
  EXPECT_FALSE(checkUploadToken(secret, "k2", hash, "1000", token, 999));   // another owner
  EXPECT_FALSE(checkUploadToken(secret, "k1", std::string(64, 'd'), "1000", token, 999));
  EXPECT_FALSE(checkUploadToken(secret, "k1", hash, "2000", token, 999));  // a longer life
  EXPECT_FALSE(checkUploadToken(secret, "k1", hash, "x", token, 999));
  EXPECT_FALSE(checkUploadToken(std::string(32, 't'), "k1", hash, "1000", token, 999));
  EXPECT_TRUE(validFilesHash(hash));
  EXPECT_FALSE(validFilesHash("ABC"));
  EXPECT_FALSE(validFilesHash(std::string(64, 'C')));
}

}  // namespace
}  // namespace hutch::e2b

// Templates from hostile registries (issue 32, item 7): tests/registry/hostile_registry.py
// serves the busybox test image and misbehaves as the repository's first component says (401,
// 404, 429, 500, a hang before the manifest or in the middle of a layer, a manifest or a layer
// whose bytes do not match its digest, a layer longer than its descriptor, a manifest beyond the
// size limit, a layer that unpacks past hutchd's limit). For each: the create fails with an error
// that names the registry and what was wrong, no template and nothing half-made is left, every
// blob kept in <state>/oci/blobs is what its digest says, and a pull of the good image (the same
// layer digest) then works. A hang ends by hutchd's --image-pull-timeout, and a pull whose client
// went away is stopped. Durations are never asserted, only generous bounds that prove an end.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "image_support.h"
#include "sys/spawn.h"

namespace hutch::e2e {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;
using std::chrono::seconds;

using namespace exit_code;  // NOLINT(google-build-using-namespace): the table of this file
// hutchd's --image-pull-timeout here: a hang ends after it.
constexpr seconds kPullTimeout(10);

class HostileRegistryTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/hutch-hostile-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = new fs::path(tmpl);
    auto images = buildTestImages(*dir_ / "images", {"busybox"});
    ASSERT_TRUE(images.contains("busybox"));
    layout_ = new fs::path(images["busybox"]);
    const fs::path port_file = *dir_ / "port";
    const int log = ::open((*dir_ / "registry.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(log, 0);
    auto pid = sys::spawn({.argv = {"python3", (registryScripts() / "hostile_registry.py").string(),
                                    layout_->string(), "--port-file", port_file.string()},
                           .fds = {{log, 1}, {log, 2}}});
    ::close(log);
    ASSERT_TRUE(pid) << pid.error().describe();
    registry_pid_ = *pid;
    ASSERT_TRUE(eventually([&] { return fs::exists(port_file); }, seconds(120)))
        << readFile(*dir_ / "registry.log");
    std::string port = readFile(port_file);
    while (!port.empty() && port.back() == '\n') port.pop_back();
    registry_ = new std::string("127.0.0.1:" + port);
    // The good image's manifest digest (the layout's index entry).
    json index = json::parse(readFile(*layout_ / "index.json"));
    manifest_digest_ = new std::string(index["manifests"][0]["digest"].get<std::string>());
  }
  static void TearDownTestSuite() {
    if (registry_pid_ > 0) {
      ::kill(registry_pid_, SIGKILL);
      ::waitpid(registry_pid_, nullptr, 0);
    }
    if (dir_ != nullptr) fs::remove_all(*dir_);
    delete dir_;
    delete layout_;
    delete registry_;
    delete manifest_digest_;
  }

  static std::string ref(const std::string& mode) {
    return *registry_ + "/" + mode + "/busybox:latest";
  }
  static std::string registryLog() { return readFile(*dir_ / "registry.log"); }

  static CommandResult create(const Daemon& d, const std::string& name, const std::string& image) {
    BoundedRun run =
        runBounded(d, {"template", "create", "--from-image", image, name}, kCreateBound);
    EXPECT_TRUE(run.ended) << "template create from " << image << " did not end";
    return run.result;
  }

  // A failed create: its exit code, an error naming the registry and `words`, nothing left,
  // the cache sound.
  static void expectRefused(const Daemon& d, const std::string& name, const std::string& image,
                            int exit_code, const std::vector<std::string>& words) {
    CommandResult r = create(d, name, image);
    EXPECT_EQ(r.exit_code, exit_code) << image << ": " << r.err;
    EXPECT_NE(r.err.find(*registry_), std::string::npos) << image << ": " << r.err;
    for (const std::string& w : words) {
      EXPECT_NE(r.err.find(w), std::string::npos) << image << ": no '" << w << "' in " << r.err;
    }
    EXPECT_EQ(leftoversOf(d, name), "") << image;
    EXPECT_EQ(poisonedBlob(d), "") << image;
  }

  // The good image, with the same layer, pulls and unpacks after whatever came before.
  static void expectGoodPullWorks(const Daemon& d, const std::string& name) {
    CommandResult r = create(d, name, ref("good"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    json t = templateNamed(d, name);
    EXPECT_EQ(t["image"]["ref"], ref("good")) << t.dump();
    EXPECT_EQ(t["image"]["digest"], *manifest_digest_) << t.dump();
    EXPECT_EQ(poisonedBlob(d), "");
  }

  static fs::path* dir_;
  static fs::path* layout_;
  static std::string* registry_;
  static std::string* manifest_digest_;
  static pid_t registry_pid_;
};
fs::path* HostileRegistryTest::dir_ = nullptr;
fs::path* HostileRegistryTest::layout_ = nullptr;
std::string* HostileRegistryTest::registry_ = nullptr;
std::string* HostileRegistryTest::manifest_digest_ = nullptr;
pid_t HostileRegistryTest::registry_pid_ = -1;

TEST_F(HostileRegistryTest, StatusesOfTheManifestAreNamedAndNothingIsLeft) {
  Daemon d({"--image-pull-timeout", std::to_string(kPullTimeout.count())});
  expectRefused(d, "t401", ref("unauthorized"), kPermissionDenied,
                {"401 Unauthorized", "hutch registry login"});
  expectRefused(d, "t404", ref("missing"), kNotFound, {"404 Not Found"});
  expectRefused(d, "t429", ref("ratelimited"), kTempFail, {"429 Too Many Requests"});
  expectRefused(d, "t500", ref("broken"), kUnavailable, {"500 Internal Server Error"});
  expectGoodPullWorks(d, "good");
}

TEST_F(HostileRegistryTest, StatusesOfALayerAreNamedAndTheLayerIsNotKept) {
  Daemon d({"--image-pull-timeout", std::to_string(kPullTimeout.count())});
  expectRefused(d, "b401", ref("blob-401"), kPermissionDenied, {"401 Unauthorized"});
  expectRefused(d, "b404", ref("blob-404"), kNotFound, {"404 Not Found"});
  expectRefused(d, "b429", ref("blob-429"), kTempFail, {"429 Too Many Requests"});
  expectRefused(d, "b500", ref("blob-500"), kUnavailable, {"500 Internal Server Error"});
  // The layer was never kept: the good pull fetches it (the config may have been).
  const std::string log_before = registryLog();
  expectGoodPullWorks(d, "good");
  EXPECT_NE(registryLog().substr(log_before.size()).find("good GET /v2/good/busybox/blobs/"),
            std::string::npos)
      << registryLog();
}

TEST_F(HostileRegistryTest, BytesThatAreNotTheirDigestAreRefusedAndNeverCached) {
  Daemon d({"--image-pull-timeout", std::to_string(kPullTimeout.count())});
  // A layer with one byte changed, and one with more bytes than its descriptor says.
  expectRefused(d, "altered", ref("bad-blob-digest"), kProtocol, {"do not match its digest"});
  expectRefused(d, "longer", ref("oversized-blob"), kProtocol, {"do not match its digest"});
  // A manifest asked for by digest that answers other bytes.
  expectRefused(d, "manifest", *registry_ + "/bad-manifest-digest/busybox@" + *manifest_digest_,
                kProtocol, {"does not match the digest asked for"});
  expectGoodPullWorks(d, "good");
  // The cached layer is the real one: a box of it runs busybox.
  auto ran = d.hutch({"run", "--name", "g1", "--template", "good", "--", "busybox", "echo", "ok"});
  EXPECT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(ran.out, "ok\n");
  EXPECT_EQ(d.hutch({"rm", "-f", "g1"}).exit_code, 0);
}

TEST_F(HostileRegistryTest, SizesBeyondTheLimitsAreRefused) {
  Daemon d({"--image-pull-timeout", std::to_string(kPullTimeout.count()),
            "--image-max-unpacked-mib", "64"});
  // A manifest whose layer claims 20 GiB: refused before any blob is asked for.
  const std::string log_before = registryLog();
  expectRefused(d, "huge", ref("huge"), kTempFail, {"limit"});
  EXPECT_EQ(registryLog().substr(log_before.size()).find("/blobs/"), std::string::npos)
      << registryLog().substr(log_before.size());
  // A layer of a few hundred KiB that unpacks to 96 MiB, past the 64 MiB this hutchd allows.
  CommandResult bomb = create(d, "bomb", ref("bomb"));
  EXPECT_EQ(bomb.exit_code, kTempFail) << bomb.err;
  EXPECT_NE(bomb.err.find("limit"), std::string::npos) << bomb.err;
  EXPECT_EQ(leftoversOf(d, "bomb"), "");
  EXPECT_EQ(poisonedBlob(d), "");
  expectGoodPullWorks(d, "good");
}

TEST_F(HostileRegistryTest, ARegistryThatHangsTimesOut) {
  Daemon d({"--image-pull-timeout", std::to_string(kPullTimeout.count())});
  for (const std::string mode : {"hang-manifest", "hang-blob"}) {
    BoundedRun run =
        runBounded(d, {"template", "create", "--from-image", ref(mode), "hung"}, kCreateBound);
    ASSERT_TRUE(run.ended) << mode << ": the create did not end";
    EXPECT_EQ(run.result.exit_code, kTempFail) << mode << ": " << run.result.err;
    EXPECT_NE(run.result.err.find("timed out"), std::string::npos) << run.result.err;
    EXPECT_NE(run.result.err.find(*registry_), std::string::npos) << run.result.err;
    EXPECT_EQ(leftoversOf(d, "hung"), "") << mode;
    EXPECT_EQ(poisonedBlob(d), "") << mode;
    EXPECT_TRUE(eventually([&] { return pidsMentioning(d.stateDir().string() + "/oci").empty(); },
                           seconds(60)))
        << mode << ": a skopeo of this hutchd still runs";
  }
  expectGoodPullWorks(d, "good");
}

TEST_F(HostileRegistryTest, APullWhoseClientWentAwayIsStopped) {
  // A long timeout: what stops this pull is the client's going.
  Daemon d({"--image-pull-timeout", "3600"});
  const size_t log_before = registryLog().size();
  const fs::path out = d.dir() / "gone.out";
  const fs::path err = d.dir() / "gone.err";
  pid_t cli = d.start({"template", "create", "--from-image", ref("hang-blob"), "gone"}, out, err);
  ASSERT_GT(cli, 0);
  ASSERT_TRUE(eventually(
      [&] { return registryLog().substr(log_before).find("-> hang (blob") != std::string::npos; },
      seconds(120)))
      << registryLog().substr(log_before);
  ASSERT_FALSE(pidsMentioning(d.stateDir().string() + "/oci").empty()) << "no skopeo runs";
  ::kill(cli, SIGKILL);
  collect(cli, out, err);
  // hutchd notices at its next keep-alive and stops skopeo; the registry sees the connection go.
  EXPECT_TRUE(eventually([&] { return pidsMentioning(d.stateDir().string() + "/oci").empty(); },
                         seconds(120)))
      << "the pull went on";
  EXPECT_TRUE(eventually(
      [&] {
        return registryLog().substr(log_before).find("client gone (blob") != std::string::npos;
      },
      seconds(60)))
      << registryLog().substr(log_before);
  EXPECT_TRUE(eventually([&] { return leftoversOf(d, "gone").empty(); }, seconds(60)))
      << leftoversOf(d, "gone");
  expectGoodPullWorks(d, "good");
}

// hutchd dies in the middle of a pull: the skopeo it ran dies with it (nothing keeps writing into
// the store the next hutchd cleans), the next hutchd leaves nothing half-made, and the same
// image then pulls whole (the blobs that were complete are kept; the cut one is fetched again).
TEST_F(HostileRegistryTest, APullCutByACrashLeavesNothingAndTheNextPullWorks) {
  Daemon d({"--image-pull-timeout", "3600"});
  const size_t log_before = registryLog().size();
  const fs::path out = d.dir() / "cut.out";
  const fs::path err = d.dir() / "cut.err";
  pid_t cli = d.start({"template", "create", "--from-image", ref("hang-blob"), "cut"}, out, err);
  ASSERT_GT(cli, 0);
  ASSERT_TRUE(eventually(
      [&] { return registryLog().substr(log_before).find("-> hang (blob") != std::string::npos; },
      seconds(120)))
      << registryLog().substr(log_before);
  const std::string oci = d.stateDir().string() + "/oci";
  ASSERT_FALSE(pidsMentioning(oci).empty()) << "no skopeo runs";
  d.crashAndRestart();
  EXPECT_TRUE(eventually([&] { return pidsMentioning(oci).empty(); }, seconds(60)))
      << "the dead hutchd's skopeo still runs";
  CommandResult cut = collect(cli, out, err);
  EXPECT_NE(cut.exit_code, 0) << cut.out;
  EXPECT_EQ(leftoversOf(d, "cut"), "");
  EXPECT_EQ(poisonedBlob(d), "");
  expectGoodPullWorks(d, "good");
}

}  // namespace
}  // namespace hutch::e2e

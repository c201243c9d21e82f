// Templates from image archives (issue 32, item 1): `hutch template create NAME --from-archive
// FILE|DIR|-` with the test images of tests/registry/images.sh as an OCI image layout directory,
// an OCI archive (plain, and gzip on stdin), a `docker save` archive made by skopeo, and one of
// two images; then archives that are hostile (tests/registry/archives.py): not a tar, cut short,
// entries named outside the archive, links, devices, a missing or altered blob, an altered
// docker layer, one too large. Each refusal names what is wrong and leaves nothing: no template,
// no scratch under <state>/oci/tmp, no blob that is not what its name says, no file outside.
#include <gtest/gtest.h>

#include <fstream>

#include "image_support.h"

namespace hutch::e2e {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;
using std::chrono::seconds;

using namespace exit_code;  // NOLINT(google-build-using-namespace): the table of this file

class TemplateFromArchiveTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/hutch-archives-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = new fs::path(tmpl);
    images_ = new std::map<std::string, fs::path>(
        buildTestImages(*dir_ / "images", {"busybox", "static"}));
    ASSERT_TRUE(images_->contains("busybox") && images_->contains("static"));
    const std::string tool = "python3 " + quoted((registryScripts() / "archives.py").string());
    auto run = [](const std::string& command) {
      auto r = shell(command);
      EXPECT_EQ(r.exit_code, 0) << command << ": " << r.out << r.err;
    };
    const std::string busybox = (*images_)["busybox"].string();
    for (const std::string mode : {"good", "escape", "absolute", "symlink", "device",
                                   "missing-blob", "altered-blob", "duplicate"}) {
      run(tool + " oci-tar " + quoted(busybox) + " " + quoted(archive("oci-" + mode)) + " " + mode);
    }
    run("{ gzip -c " + quoted(archive("oci-good")) + " > " + quoted(archive("oci-good.gz")) +
        "; }");
    // skopeo's docker-archive is what `docker save` writes (manifest.json, <hex>.tar layers).
    const std::string policy = (*dir_ / "policy.json").string();
    std::ofstream(policy) << R"({"default": [{"type": "insecureAcceptAnything"}]})";
    for (const auto& [name, tag] : {std::pair{"busybox", "busybox:latest"},
                                    std::pair{"static", "registry.example:5000/static:1"}}) {
      run("skopeo --policy " + quoted(policy) +
          " copy -q oci:" + quoted((*images_)[name].string() + ":latest") +
          " docker-archive:" + quoted(archive("docker-" + std::string(name)) + ":" + tag));
    }
    run(tool + " docker-merge " + quoted(archive("docker-both")) + " " +
        quoted(archive("docker-busybox")) + " " + quoted(archive("docker-static")));
    run(tool + " docker-alter-layer " + quoted(archive("docker-busybox")) + " " +
        quoted(archive("docker-altered")));
    // A TCP listener too: the CLI of another machine sends its archive over HTTPS.
    daemon_ = new Daemon({"--listen", "127.0.0.1:0"});
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
    if (dir_ != nullptr) fs::remove_all(*dir_);
    delete images_;
    delete dir_;
  }

  static std::string archive(const std::string& name) { return (*dir_ / (name + ".tar")).string(); }

  static CommandResult create(const std::string& name, const std::string& from,
                              const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args{"template", "create", "--from-archive", from, name};
    args.insert(args.end(), extra.begin(), extra.end());
    BoundedRun run = runBounded(*daemon_, args, kCreateBound);
    EXPECT_TRUE(run.ended) << "template create from " << from << " did not end";
    return run.result;
  }

  static void expectRefused(const std::string& name, const std::string& from, int exit_code,
                            const std::string& words) {
    CommandResult r = create(name, from);
    EXPECT_EQ(r.exit_code, exit_code) << from << ": " << r.err;
    EXPECT_NE(r.err.find(words), std::string::npos)
        << from << ": no '" << words << "' in " << r.err;
    EXPECT_EQ(leftoversOf(*daemon_, name), "") << from;
    EXPECT_EQ(poisonedBlob(*daemon_), "") << from;
  }

  static fs::path* dir_;
  static std::map<std::string, fs::path>* images_;
  static Daemon* daemon_;
};
fs::path* TemplateFromArchiveTest::dir_ = nullptr;
std::map<std::string, fs::path>* TemplateFromArchiveTest::images_ = nullptr;
Daemon* TemplateFromArchiveTest::daemon_ = nullptr;

TEST_F(TemplateFromArchiveTest, ALayoutAnOciArchiveStdinAndADockerSaveAllMakeTemplatesThatBoot) {
  // The layout directory, sent as a tar of it.
  auto dir = create("from-dir", (*images_)["busybox"].string());
  ASSERT_EQ(dir.exit_code, 0) << dir.err;
  json t = templateNamed(*daemon_, "from-dir");
  EXPECT_EQ(t["source"], "image") << t.dump();
  EXPECT_EQ(t["image"]["archive"], "oci-archive") << t.dump();
  EXPECT_EQ(t["defaults"]["user"], "app") << t.dump();
  // An OCI archive file.
  auto file = create("from-oci", archive("oci-good"));
  ASSERT_EQ(file.exit_code, 0) << file.err;
  EXPECT_EQ(templateNamed(*daemon_, "from-oci")["image"]["digest"], t["image"]["digest"]);
  // The same, gzip-compressed, on stdin.
  auto piped = daemon_->hutch({"template", "create", "--from-archive", "-", "from-stdin"},
                              readFile(archive("oci-good.gz")), true);
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  // A docker save archive: a Docker schema 2 image, converted by skopeo, its layers the same.
  auto docker = create("from-docker", archive("docker-busybox"));
  ASSERT_EQ(docker.exit_code, 0) << docker.err;
  json d = templateNamed(*daemon_, "from-docker");
  EXPECT_EQ(d["image"]["archive"], "docker-archive") << d.dump();
  EXPECT_EQ(d["image"]["ref"], "docker.io/library/busybox:latest") << d.dump();
  EXPECT_EQ(d["defaults"]["workdir"], "/home/app") << d.dump();
  // Boxes of them run with the image's user and working directory.
  for (const std::string name : {"from-stdin", "from-docker"}) {
    auto ran = daemon_->hutch(
        {"run", "--name", name + "-1", "--template", name, "--", "sh", "-c", "id -u; pwd"});
    EXPECT_EQ(ran.exit_code, 0) << ran.err;
    EXPECT_EQ(ran.out, "1000\n/home/app\n") << name;
    EXPECT_EQ(daemon_->hutch({"rm", "-f", name + "-1"}).exit_code, 0);
  }
  // A name in use is refused before the archive is sent.
  auto again = create("from-oci", archive("oci-good"));
  EXPECT_EQ(again.exit_code, kAlreadyExists) << again.err;
  for (const char* name : {"from-dir", "from-oci", "from-stdin", "from-docker"}) {
    EXPECT_EQ(daemon_->hutch({"template", "rm", name}).exit_code, 0) << name;
  }
  EXPECT_EQ(leftoversOf(*daemon_, "from-oci"), "");
}

TEST_F(TemplateFromArchiveTest, ARemoteCliSendsItsArchiveOverHttps) {
  const Endpoints ends = endpointsOf(*daemon_);
  const RemoteCli admin{{"--host", ends.https, "--fingerprint", ends.fingerprint},
                        makeKey(*daemon_, {"archive-admin", "--admin"})};
  // Chunked over TLS, after hutchd's 100 Continue; the progress comes back the same way.
  auto sent = daemon_->hutchAs(
      admin, {"template", "create", "--from-archive", archive("docker-static"), "remote-static"});
  ASSERT_EQ(sent.exit_code, 0) << sent.err;
  EXPECT_NE(sent.err.find("Unpacking layer 1/1"), std::string::npos) << sent.err;
  // A key that is not an admin's is refused before anything is sent.
  const RemoteCli user{admin.flags, makeKey(*daemon_, {"archive-user"})};
  auto refused = daemon_->hutchAs(
      user, {"template", "create", "--from-archive", archive("docker-static"), "remote-user"});
  EXPECT_EQ(refused.exit_code, kPermissionDenied) << refused.err;
  EXPECT_EQ(leftoversOf(*daemon_, "remote-user"), "");
  EXPECT_EQ(daemon_->hutch({"template", "rm", "remote-static"}).exit_code, 0);
}

TEST_F(TemplateFromArchiveTest, AnArchiveOfSeveralImagesNeedsTheOneNamed) {
  auto unnamed = create("both", archive("docker-both"));
  EXPECT_EQ(unnamed.exit_code, kInvalidArgument) << unnamed.err;
  EXPECT_NE(unnamed.err.find("holds 2 images"), std::string::npos) << unnamed.err;
  EXPECT_NE(unnamed.err.find("busybox:latest"), std::string::npos) << unnamed.err;
  EXPECT_NE(unnamed.err.find("registry.example:5000/static:1"), std::string::npos) << unnamed.err;
  EXPECT_EQ(leftoversOf(*daemon_, "both"), "");
  auto missing = create("both", archive("docker-both"), {"--image", "nope:1"});
  EXPECT_EQ(missing.exit_code, kNotFound) << missing.err;
  auto chosen =
      create("both", archive("docker-both"), {"--image", "registry.example:5000/static:1"});
  ASSERT_EQ(chosen.exit_code, 0) << chosen.err;
  auto hello = daemon_->hutch({"run", "--name", "both-1", "--template", "both", "--", "/hello"});
  EXPECT_EQ(hello.exit_code, 0) << hello.err;
  EXPECT_NE(hello.out.find("hello from a static binary"), std::string::npos) << hello.out;
  EXPECT_EQ(daemon_->hutch({"rm", "-f", "both-1"}).exit_code, 0);
  auto by_position = create("first", archive("docker-both"), {"--image", "@0"});
  ASSERT_EQ(by_position.exit_code, 0) << by_position.err;
  EXPECT_EQ(templateNamed(*daemon_, "first")["defaults"]["user"], "app");
  for (const char* name : {"both", "first"}) {
    EXPECT_EQ(daemon_->hutch({"template", "rm", name}).exit_code, 0) << name;
  }
}

TEST_F(TemplateFromArchiveTest, HostileArchivesAreRefusedWithNothingLeft) {
  const fs::path text = *dir_ / "not-an-archive";
  std::ofstream(text) << "hello, I am not an archive\n";
  expectRefused("h", text.string(), kInvalidArgument, "is not a tar archive");
  const std::string cut = archive("oci-cut");
  std::string whole = readFile(archive("oci-good"));
  std::ofstream(cut, std::ios::binary) << whole.substr(0, whole.size() / 2);
  expectRefused("h", cut, kInvalidArgument, "truncated");
  expectRefused("h", archive("oci-escape"), kInvalidArgument, "../../hutch-archive-escape");
  expectRefused("h", archive("oci-absolute"), kInvalidArgument, "/tmp/hutch-archive-absolute");
  expectRefused("h", archive("oci-symlink"), kInvalidArgument, "the symlink blobs/sha256/link");
  expectRefused("h", archive("oci-device"), kInvalidArgument, "dev-null (a character device)");
  expectRefused("h", archive("oci-missing-blob"), kInvalidArgument, "it lacks the blob");
  expectRefused("h", archive("oci-altered-blob"), kInvalidArgument,
                "does not hold what its digest says");
  expectRefused("h", archive("oci-duplicate"), kInvalidArgument, "holds index.json twice");
  // A docker layer with a byte changed: skopeo's digest check refuses it.
  expectRefused("h", archive("docker-altered"), kInvalidArgument,
                "does not hold what its digest says");
  // Nothing was written outside hutch's directories.
  EXPECT_FALSE(fs::exists("/tmp/hutch-archive-absolute"));
  EXPECT_FALSE(fs::exists(daemon_->stateDir() / "hutch-archive-escape"));
  EXPECT_FALSE(fs::exists(daemon_->stateDir() / "oci" / "hutch-archive-escape"));
  EXPECT_FALSE(fs::exists(daemon_->stateDir().parent_path() / "hutch-archive-escape"));
}

TEST(TemplateFromArchiveLimitTest, AnArchiveLargerThanTheLimitIsRefused) {
  char tmpl[] = "/tmp/hutch-archive-limit-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const fs::path dir(tmpl);
  auto images = buildTestImages(dir / "images", {"busybox"});
  ASSERT_TRUE(images.contains("busybox"));
  {
    Daemon d({"--image-max-archive-mib", "1"});  // the busybox layout is about 2 MiB
    BoundedRun run =
        runBounded(d, {"template", "create", "--from-archive", images["busybox"].string(), "big"},
                   kCreateBound);
    ASSERT_TRUE(run.ended);
    EXPECT_EQ(run.result.exit_code, kTempFail) << run.result.err;
    EXPECT_NE(run.result.err.find("larger than 1.0 MiB"), std::string::npos) << run.result.err;
    EXPECT_EQ(leftoversOf(d, "big"), "");
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hutch::e2e

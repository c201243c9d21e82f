// Templates from OCI images end to end (issue 32): a real registry on loopback (Debian's
// docker-registry, TLS with its own CA, basic auth: tests/registry/registry.sh), filled with
// images the tests build themselves (tests/registry/images.sh) and pushed with skopeo; hutchd
// pulls them with its credentials kept on the host, boxes boot them, and what the image's config
// says (ENV, WORKDIR, USER) is what an exec gets.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "harness.h"
#include "image_support.h"

namespace hutch::e2e {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const std::string kSource = HUTCH_E2E_SOURCE_DIR;

class ImageTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/hutch-registry-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = new fs::path(tmpl);
    const std::string scripts = kSource + "/../registry";
    auto built =
        shell("bash " + quoted(scripts + "/images.sh") + " " + quoted((*dir_ / "images").string()));
    ASSERT_EQ(built.exit_code, 0) << built.out << built.err;
    images_ = new std::map<std::string, std::string>;
    std::istringstream lines(built.out);
    for (std::string name, path; lines >> name >> path;) (*images_)[name] = path;
    auto started = shell("bash " + quoted(scripts + "/registry.sh") + " start " +
                         quoted((*dir_ / "registry").string()));
    ASSERT_EQ(started.exit_code, 0) << started.out << started.err;
    env_ = new std::map<std::string, std::string>;
    std::istringstream words(started.out);
    for (std::string word; words >> word;) {
      auto eq = word.find('=');
      if (eq != std::string::npos) (*env_)[word.substr(0, eq)] = word.substr(eq + 1);
    }
    ASSERT_FALSE(registry().empty()) << started.out;
    // (image, repository:tag, extra arguments of registry.sh push)
    const std::vector<std::array<std::string, 3>> pushes = {
        {"debian", "test/debian:latest", ""},
        {"systemd", "test/systemd:latest", ""},
        {"busybox", "test/busybox:latest", ""},
        {"busybox", "test/busybox:v2s2", " -- --format v2s2"},  // a Docker schema 2 manifest
        {"zstd", "test/busybox:zstd", ""},
        {"static", "test/static:latest", ""},
        {"layers", "test/layers:latest", ""},
        {"multiarch", "test/multiarch:latest", " --all"},
        {"arm64only", "test/arm64only:latest", " --all"}};
    for (const auto& [name, repo, extra] : pushes) {
      ASSERT_TRUE(images_->contains(name)) << name << ": " << built.out;
      auto pushed = shell("bash " + quoted(scripts + "/registry.sh") + " push " +
                          quoted((*dir_ / "registry").string()) + " " +
                          quoted((*images_)[name] + ":latest") + " " + quoted(repo) + extra);
      ASSERT_EQ(pushed.exit_code, 0) << name << ": " << pushed.out << pushed.err;
    }
    // An image cache of its own whose entries link the host's image builds and kernels: the
    // prunes below remove links and what these tests made, never the host's builds (other
    // suites' templates, docker, node...).
    const char* host_env = std::getenv("HUTCH_CACHE_DIR");
    const fs::path host = host_env != nullptr && *host_env ? host_env : "/var/cache/hutch";
    const fs::path cache = *dir_ / "image-cache";
    for (const char* part : {"images", "kernel"}) {
      fs::create_directories(cache / part);
      std::error_code ec;
      for (const auto& build : fs::directory_iterator(host / part, ec)) {
        if (build.is_directory() && !build.path().filename().string().starts_with(".")) {
          fs::create_directory_symlink(build.path(), cache / part / build.path().filename());
        }
      }
    }
    daemon_ = new Daemon({"--registry-certs", (*dir_ / "registry" / "certs.d").string(),
                          "--image-cache", cache.string()});
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
    if (dir_ != nullptr) {
      shell("bash " + quoted(kSource + "/../registry/registry.sh") + " stop " +
            quoted((*dir_ / "registry").string()));
      fs::remove_all(*dir_);
    }
    delete env_;
    delete images_;
    delete dir_;
  }
  static std::string registry() { return env_->count("REGISTRY") ? (*env_)["REGISTRY"] : ""; }
  static std::string ref(const std::string& name) {
    return registry() + "/test/" + name + ":latest";
  }
  static CommandResult login() {
    return daemon_->hutch({"registry", "login", "-u", (*env_)["REGISTRY_USER"], registry()},
                          (*env_)["REGISTRY_PASSWORD"] + "\n", true);
  }
  // hutch template create NAME --from-image REF, logged in.
  static CommandResult create(const std::string& name, const std::string& image) {
    login();
    return daemon_->hutch({"template", "create", "--from-image", image, name});
  }
  static json templateNamed(const std::string& name) {
    auto listed = json::parse(daemon_->hutch({"--json", "template", "ls"}).out, nullptr, false);
    for (const auto& t : listed) {
      if (t.value("name", "") == name) return t;
    }
    return json();
  }
  // Image directories hutchd made and not yet removed, and any half-made one.
  static std::vector<std::string> imageDirs() {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(daemon_->stateDir() / "images", ec)) {
      if (e.path().filename().string().find("-image-") != std::string::npos) {
        out.push_back(e.path().filename().string());
      }
    }
    return out;
  }

  static fs::path* dir_;
  static std::map<std::string, std::string>* images_;
  static std::map<std::string, std::string>* env_;
  static Daemon* daemon_;
};
fs::path* ImageTest::dir_ = nullptr;
std::map<std::string, std::string>* ImageTest::images_ = nullptr;
std::map<std::string, std::string>* ImageTest::env_ = nullptr;
Daemon* ImageTest::daemon_ = nullptr;

TEST_F(ImageTest, ABusyboxImageBootsWithItsUserWorkdirAndEnvironment) {
  auto made = create("bb", ref("busybox"));
  ASSERT_EQ(made.exit_code, 0) << made.err;
  json t = templateNamed("bb");
  EXPECT_EQ(t["source"], "image") << t.dump();
  EXPECT_EQ(t["image"]["ref"], ref("busybox")) << t.dump();
  EXPECT_TRUE(t["image"]["digest"].get<std::string>().starts_with("sha256:")) << t.dump();
  EXPECT_EQ(t["defaults"]["user"], "app") << t.dump();
  EXPECT_EQ(t["defaults"]["workdir"], "/home/app") << t.dump();
  EXPECT_EQ(t["defaults"]["exposed_ports"], json::array({"8080/tcp"})) << t.dump();
  ASSERT_EQ(daemon_->hutch({"run", "--name", "bb1", "--template", "bb"}).exit_code, 0);
  // As `docker run` would: the image's USER and WORKDIR, its environment.
  auto who = daemon_->hutch({"exec", "bb1", "--", "sh", "-c", "id -u; pwd; echo \"$PATH\""});
  ASSERT_EQ(who.exit_code, 0) << who.err;
  std::istringstream lines(who.out);
  std::string uid, cwd, path;
  std::getline(lines, uid);
  std::getline(lines, cwd);
  std::getline(lines, path);
  EXPECT_EQ(uid, "1000") << who.out;
  EXPECT_EQ(cwd, "/home/app") << who.out;
  EXPECT_NE(path.find("/bin"), std::string::npos) << who.out;
  // Another user when asked; the busybox under it is the image's own.
  auto root = daemon_->hutch({"exec", "-u", "root", "bb1", "--", "id", "-u"});
  EXPECT_EQ(root.out, "0\n") << root.err;
  auto file = daemon_->hutch({"exec", "bb1", "--", "readlink", "/bin/sh"});
  EXPECT_NE(file.out.find("busybox"), std::string::npos) << file.out << file.err;
  EXPECT_EQ(daemon_->hutch({"rm", "-f", "bb1"}).exit_code, 0);
  EXPECT_EQ(daemon_->hutch({"template", "rm", "bb"}).exit_code, 0);
}

TEST_F(ImageTest, ADebianImageAndAShellLessImageBoth) {
  auto deb = create("deb", ref("debian"));
  ASSERT_EQ(deb.exit_code, 0) << deb.err;
  auto os = daemon_->hutch({"run", "--name", "deb1", "--template", "deb", "--", "sh", "-c",
                            "cat /etc/debian_version; echo $LANG; id -un; pwd"});
  ASSERT_EQ(os.exit_code, 0) << os.err;
  EXPECT_NE(os.out.find("12."), std::string::npos) << os.out;
  EXPECT_NE(os.out.find("C.UTF-8\nroot\n/root\n"), std::string::npos) << os.out;
  EXPECT_EQ(daemon_->hutch({"rm", "-f", "deb1"}).exit_code, 0);

  // One static binary, no shell, no /etc/passwd, a numeric USER.
  auto bare = create("bare", ref("static"));
  ASSERT_EQ(bare.exit_code, 0) << bare.err;
  ASSERT_EQ(daemon_->hutch({"run", "--name", "bare1", "--template", "bare"}).exit_code, 0);
  auto hello = daemon_->hutch({"exec", "bare1", "--", "/hello", "one", "two"});
  EXPECT_EQ(hello.exit_code, 0) << hello.err;
  EXPECT_NE(hello.out.find("hello from a static binary"), std::string::npos) << hello.out;
  EXPECT_NE(hello.out.find("argv[1]=one"), std::string::npos) << hello.out;
  EXPECT_NE(hello.out.find("uid=65532 gid=65532"), std::string::npos) << hello.out;
  EXPECT_NE(hello.out.find("HELLO_ENV=from-image"), std::string::npos) << hello.out;
  // No /bin/sh in it: a shell string is a clear error, not a hang.
  auto shell_string = daemon_->hutch({"exec", "bare1", "--", "sh", "-c", "echo hi"});
  EXPECT_NE(shell_string.exit_code, 0);
  EXPECT_NE(shell_string.err.find("sh"), std::string::npos) << shell_string.err;
  EXPECT_EQ(daemon_->hutch({"rm", "-f", "bare1"}).exit_code, 0);
}

TEST_F(ImageTest, AnImageWithSystemdBootsItAsPid1OnlyWhenAsked) {
  // Its CMD is systemd, but without --systemd hutch-agent is PID 1, as in every image.
  auto plain = create("sdplain", ref("systemd"));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_FALSE(templateNamed("sdplain").contains("init")) << templateNamed("sdplain").dump();
  auto agent = daemon_->hutch(
      {"run", "--rm", "--template", "sdplain", "--", "cat", "/proc/1/comm", "/etc/hutch/init"});
  EXPECT_NE(agent.exit_code, 0);  // no /etc/hutch/init
  EXPECT_EQ(agent.out, "hutch-agent\n") << agent.err;

  // With it: the image's systemd is PID 1, booted before the template's snapshot (its ready
  // check), and hutch-agent is one of its services.
  login();
  auto made =
      daemon_->hutch({"template", "create", "--from-image", ref("systemd"), "--systemd", "sd"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  EXPECT_NE(made.err.find("as PID 1, with hutch-agent as its service"), std::string::npos)
      << made.err;
  EXPECT_EQ(templateNamed("sd")["init"], "/usr/lib/systemd/systemd") << templateNamed("sd").dump();
  ASSERT_EQ(daemon_->hutch({"run", "--name", "sd1", "--template", "sd"}).exit_code, 0);
  auto booted = daemon_->hutch(
      {"exec", "-u", "root", "sd1", "--", "sh", "-c",
       "cat /proc/1/comm; systemctl is-active hutch-agent; systemctl is-system-running || true"});
  ASSERT_EQ(booted.exit_code, 0) << booted.err;
  EXPECT_TRUE(booted.out.starts_with("systemd\nactive\n")) << booted.out;
  EXPECT_TRUE(booted.out.ends_with("running\n") || booted.out.ends_with("degraded\n"))
      << booted.out;
  // A service started now is systemd's, and still there for the next exec.
  auto unit = daemon_->hutch(
      {"exec", "-u", "root", "sd1", "--", "systemd-run", "--unit=hello", "sleep", "1000"});
  EXPECT_EQ(unit.exit_code, 0) << unit.err;
  auto active = daemon_->hutch({"exec", "sd1", "--", "systemctl", "is-active", "hello"});
  EXPECT_EQ(active.out, "active\n") << active.err;
  EXPECT_EQ(daemon_->hutch({"rm", "-f", "sd1"}).exit_code, 0);

  // An image without systemd is refused before anything is made, saying what to do.
  auto refused =
      daemon_->hutch({"template", "create", "--from-image", ref("debian"), "--systemd", "nosd"});
  EXPECT_EQ(refused.exit_code, 65) << refused.err;  // failed precondition
  EXPECT_NE(refused.err.find("has no systemd"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("without --systemd"), std::string::npos) << refused.err;
  EXPECT_EQ(leftoversOf(*daemon_, "nosd"), "");
  // And a box's disk keeps the init it has.
  auto from_box = daemon_->hutch({"template", "create", "--from", "x", "--systemd", "y"});
  EXPECT_NE(from_box.exit_code, 0);
  EXPECT_NE(from_box.err.find("--systemd"), std::string::npos) << from_box.err;
  for (const char* t : {"sd", "sdplain"}) {
    EXPECT_EQ(daemon_->hutch({"template", "rm", t}).exit_code, 0) << t;
  }
}

TEST_F(ImageTest, AnIndexGivesItsAmd64ImageAndAnArm64OnlyImageIsRefusedWithNothingLeft) {
  auto multi = create("multi", ref("multiarch"));
  ASSERT_EQ(multi.exit_code, 0) << multi.err;
  EXPECT_NE(multi.err.find("linux/amd64"), std::string::npos) << multi.err;
  auto arm = create("arm", ref("arm64only"));
  EXPECT_NE(arm.exit_code, 0);
  EXPECT_NE(arm.err.find("arm64"), std::string::npos) << arm.err;
  EXPECT_TRUE(templateNamed("arm").is_null());
  auto missing = create("nope", registry() + "/test/does-not-exist:1");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_TRUE(templateNamed("nope").is_null());
  for (const std::string& d : imageDirs()) {
    EXPECT_EQ(d.find(".tmp"), std::string::npos) << "a half-made image was left: " << d;
    EXPECT_EQ(d.find("arm-"), std::string::npos) << d;
  }
  EXPECT_EQ(daemon_->hutch({"template", "rm", "multi"}).exit_code, 0);
}

TEST_F(ImageTest, CredentialsAreTheHostsAndAWrongOneIsSaidSo) {
  auto listed = json::parse(daemon_->hutch({"--json", "registry", "ls"}).out, nullptr, false);
  login();
  listed = json::parse(daemon_->hutch({"--json", "registry", "ls"}).out, nullptr, false);
  ASSERT_TRUE(listed.is_array()) << listed.dump();
  ASSERT_EQ(listed.size(), 1u) << listed.dump();
  EXPECT_EQ(listed[0]["registry"], registry());
  EXPECT_FALSE(listed[0].contains("password"));
  ASSERT_EQ(daemon_->hutch({"registry", "logout", registry()}).exit_code, 0);
  auto anonymous = daemon_->hutch({"template", "create", "--from-image", ref("busybox"), "anon"});
  EXPECT_NE(anonymous.exit_code, 0);
  EXPECT_TRUE(anonymous.err.find("authentication required") != std::string::npos ||
              anonymous.err.find("unauthorized") != std::string::npos)
      << anonymous.err;
  auto wrong =
      daemon_->hutch({"registry", "login", "-u", "hutch-test", registry()}, "wrong\n", true);
  ASSERT_EQ(wrong.exit_code, 0) << wrong.err;
  auto refused = daemon_->hutch({"template", "create", "--from-image", ref("busybox"), "anon"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_TRUE(templateNamed("anon").is_null());
  auto bad = daemon_->hutch({"registry", "login", "-u", "x", "https://nope"}, "p\n", true);
  EXPECT_EQ(bad.exit_code, 64) << bad.err;
  login();
  // A tag the registry does not have is not_found (66), not a server error.
  auto missing = daemon_->hutch(
      {"template", "create", "--from-image", registry() + "/test/busybox:no-such-tag", "nt"});
  EXPECT_EQ(missing.exit_code, 66) << missing.err;
}

TEST(ImageAllowListTest, OnlyTheAllowedRegistriesArePulledFrom) {
  Daemon d({"--allowed-registry", "registry.example:5000"});
  auto refused = d.hutch({"template", "create", "--from-image", "127.0.0.1:9/team/app:1", "app"});
  EXPECT_EQ(refused.exit_code, 77) << refused.err;  // permission_denied, before any fetch
  EXPECT_NE(refused.err.find("--allowed-registry"), std::string::npos) << refused.err;
}

TEST_F(ImageTest, LayersAreAppliedWithWhiteoutsLinksAndXattrsAndBlobsAreSharedByDigest) {
  auto base = create("bb-shared", ref("busybox"));
  ASSERT_EQ(base.exit_code, 0) << base.err;
  size_t blobs_before = 0;
  std::error_code ec;
  for ([[maybe_unused]] const auto& e :
       fs::directory_iterator(daemon_->stateDir() / "oci/blobs/sha256", ec)) {
    ++blobs_before;
  }
  auto layers = create("layers", ref("layers"));
  ASSERT_EQ(layers.exit_code, 0) << layers.err;
  // The busybox layer is not fetched again: only the new layers, their manifest and config.
  size_t blobs_after = 0;
  for ([[maybe_unused]] const auto& e :
       fs::directory_iterator(daemon_->stateDir() / "oci/blobs/sha256", ec)) {
    ++blobs_after;
  }
  EXPECT_EQ(blobs_after - blobs_before, 3u + 2u) << "three new layers, a manifest and a config";
  ASSERT_EQ(daemon_->hutch({"run", "--name", "l1", "--template", "layers"}).exit_code, 0);
  // tests/registry/README.md, "layers": what a correct unpack holds, seen from inside the box.
  auto check = daemon_->hutch(
      {"exec", "-u", "root", "l1", "--", "sh", "-c",
       "cd /data; test -d keep && echo keep; test -e drop || echo dropped; ls -A /opq; "
       "cat version.txt; stat -c '%a %u:%g' version.txt setuid setgid-dir sticky owned.txt; "
       "test \"$(stat -c %i file.txt)\" = \"$(stat -c %i hardlink.txt)\" && echo linked; "
       "readlink abs-symlink; readlink dangling; test -d file-to-dir && cat "
       "file-to-dir/inside.txt; "
       "cat dir-to-file; find / -xdev -name '.wh.*' | wc -l"});
  EXPECT_EQ(check.out,
            "keep\ndropped\nc.txt\nv2\n600 1000:1000\n4755 0:0\n2775 0:1000\n1777 0:0\n"
            "640 1000:1000\nlinked\n/data/file.txt\n/nonexistent/target\ninside\nnow a file\n0\n")
      << check.out << check.err;
  EXPECT_EQ(daemon_->hutch({"rm", "-f", "l1"}).exit_code, 0);
  // xattrs and file capabilities, read from the template's disk on the host.
  json t = templateNamed("layers");
  fs::path rootfs = fs::path(t.value("dir", "")) / "rootfs.img";
  auto xattrs = shell("{ debugfs -R 'ea_list /data/xattr.txt' " + quoted(rootfs.string()) +
                      " 2>/dev/null; debugfs -R 'ea_list /data/cap-bin' " +
                      quoted(rootfs.string()) + " 2>/dev/null; }");
  EXPECT_NE(xattrs.out.find("user.hutch"), std::string::npos) << xattrs.out;
  EXPECT_NE(xattrs.out.find("hello-xattr"), std::string::npos) << xattrs.out;
  EXPECT_NE(xattrs.out.find("security.capability"), std::string::npos) << xattrs.out;
  // The same content as a zstd layer, and as a Docker schema 2 manifest.
  auto zstd = create("bb-zstd", registry() + "/test/busybox:zstd");
  EXPECT_EQ(zstd.exit_code, 0) << zstd.err;
  auto v2s2 = create("bb-v2s2", registry() + "/test/busybox:v2s2");
  EXPECT_EQ(v2s2.exit_code, 0) << v2s2.err;
  for (const char* name : {"bb-shared", "layers", "bb-zstd", "bb-v2s2"}) {
    EXPECT_EQ(daemon_->hutch({"template", "rm", name}).exit_code, 0) << name;
  }
}

// Two creates of one image at once fetch each blob once; `hutch image prune` keeps a pulled
// image while a template names it and then drops its layout and the blobs only it used.
// COPY --from an image, as Dockerfiles take tools from images (COPY --from=IMAGE /uv /bin/):
// the image is pulled as FROM pulls it, booted as a stage of its own with no steps, and the
// file fetched through its agent (here from an image with no shell at all).
TEST_F(ImageTest, ADockerfileCopiesAFileFromAnImage) {
  ASSERT_EQ(login().exit_code, 0);
  char tmpl[] = "/tmp/hutch-copy-from-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const fs::path context = tmpl;
  std::ofstream(context / "Dockerfile")
      << "FROM base\nCOPY --from=" << ref("static")
      << " /hello /usr/local/bin/hello\nRUN /usr/local/bin/hello built > /opt/said\n";
  auto built =
      daemon_->hutch({"template", "build", "withhello", "-f", (context / "Dockerfile").string(),
                      context.string(), "--memory", "512m", "--cpus", "1", "--disk", "2g"});
  fs::remove_all(context);
  ASSERT_EQ(built.exit_code, 0) << built.err;
  EXPECT_NE(built.err.find("fetching /hello"), std::string::npos) << built.err;
  ASSERT_EQ(daemon_->hutch({"run", "--name", "hello1", "--template", "withhello"}).exit_code, 0);
  auto said = daemon_->hutch({"exec", "hello1", "--", "cat", "/opt/said"});
  EXPECT_NE(said.out.find("hello from a static binary"), std::string::npos) << said.out;
  EXPECT_NE(said.out.find("argv[1]=built"), std::string::npos) << said.out;
  EXPECT_EQ(daemon_->hutch({"rm", "-f", "hello1"}).exit_code, 0);
  EXPECT_EQ(daemon_->hutch({"template", "rm", "withhello"}).exit_code, 0);
  // The base the build pulled (build-base-<hash>, kept for later builds) goes too: another test
  // counts this image's pulls.
  auto listed = json::parse(daemon_->hutch({"--json", "template", "ls"}).out, nullptr, false);
  int bases = 0;
  for (const auto& t : listed) {
    const std::string name = t.value("name", "");
    if (name.starts_with("build-base-") &&
        t.value("image", json::object()).value("ref", "") == ref("static")) {
      EXPECT_EQ(daemon_->hutch({"template", "rm", name}).exit_code, 0);
      ++bases;
    }
  }
  EXPECT_EQ(bases, 1) << listed.dump();
}

TEST_F(ImageTest, AMultiStageBuildEndsFromScratchWithOnlyWhatItCopies) {
  ASSERT_EQ(login().exit_code, 0);
  char tmpl[] = "/tmp/hutch-scratch-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const fs::path context = tmpl;
  // The usual shape: build in one stage, ship only the result in an empty image.
  std::ofstream(context / "Dockerfile") << "FROM " << ref("busybox") << " AS build\n"
                                        << "RUN echo made-in-the-build-stage > /tmp/made.txt\n"
                                        << "FROM scratch\n"
                                        << "COPY --from=build /tmp/made.txt /made.txt\n"
                                        << "COPY --from=build /bin/busybox /busybox\n"
                                        << "COPY --from=" << ref("static") << " /hello /hello\n"
                                        << "ENV HELLO_ENV=from-scratch\n"
                                        << "CMD [\"/hello\"]\n";
  auto built =
      daemon_->hutch({"template", "build", "scr", "-f", (context / "Dockerfile").string(),
                      context.string(), "--memory", "512m", "--cpus", "1", "--disk", "2g"});
  ASSERT_EQ(built.exit_code, 0) << built.err;
  EXPECT_NE(built.err.find("scratch: an empty image"), std::string::npos) << built.err;
  ASSERT_EQ(daemon_->hutch({"run", "--name", "scr1", "--template", "scr"}).exit_code, 0);
  auto hello = daemon_->hutch({"exec", "scr1", "--", "/hello", "from-scratch"});
  EXPECT_EQ(hello.exit_code, 0) << hello.err;
  EXPECT_NE(hello.out.find("argv[1]=from-scratch"), std::string::npos) << hello.out;
  EXPECT_NE(hello.out.find("HELLO_ENV=from-scratch"), std::string::npos) << hello.out;
  // busybox-static, copied too, reads what the build stage made.
  auto made = daemon_->hutch({"exec", "scr1", "--", "/busybox", "cat", "/made.txt"});
  EXPECT_EQ(made.out, "made-in-the-build-stage\n") << made.err;
  // Nothing of the build stage, and no shell: only what was copied (and hutch's agent).
  auto shell_string = daemon_->hutch({"exec", "scr1", "--", "sh", "-c", "true"});
  EXPECT_NE(shell_string.exit_code, 0);
  fs::remove_all(context);
  EXPECT_EQ(daemon_->hutch({"rm", "-f", "scr1"}).exit_code, 0);
  EXPECT_EQ(daemon_->hutch({"template", "rm", "scr"}).exit_code, 0);
}

TEST_F(ImageTest, TwoCreatesAtOncePullOnceAndPruneDropsWhatNoTemplateUses) {
  daemon_->hutch({"template", "rm", "bare"});  // another test's template of the same image
  auto emptied = daemon_->hutch({"image", "prune", "--keep", "0"});
  ASSERT_EQ(emptied.exit_code, 0) << emptied.err;
  login();
  const fs::path log = *dir_ / "registry" / "registry.log";
  const size_t log_start = readFile(log).size();
  const fs::path out_a = *dir_ / "a.out", err_a = *dir_ / "a.err";
  const fs::path out_b = *dir_ / "b.out", err_b = *dir_ / "b.err";
  pid_t a =
      daemon_->start({"template", "create", "--from-image", ref("static"), "st-a"}, out_a, err_a);
  pid_t b =
      daemon_->start({"template", "create", "--from-image", ref("static"), "st-b"}, out_b, err_b);
  auto made_a = collect(a, out_a, err_a);
  auto made_b = collect(b, out_b, err_b);
  ASSERT_EQ(made_a.exit_code, 0) << made_a.err;
  ASSERT_EQ(made_b.exit_code, 0) << made_b.err;
  // Every blob the registry served in that time, by digest: each exactly once.
  std::map<std::string, int> served;
  std::istringstream lines(readFile(log).substr(log_start));
  for (std::string line; std::getline(lines, line);) {
    if (line.find("response completed") == std::string::npos ||
        line.find("http.request.method=GET") == std::string::npos ||
        line.find("http.response.status=200") == std::string::npos) {
      continue;
    }
    const size_t at = line.find("/test/static/blobs/sha256:");
    if (at != std::string::npos) {
      ++served[line.substr(at + std::string("/test/static/blobs/").size(), 71)];
    }
  }
  auto blob = [](const std::string& digest) {
    return daemon_->stateDir() / "oci/blobs/sha256" / digest.substr(7);
  };
  // Each layer was fetched once (skopeo reads the small config blob on every copy).
  const std::string image_digest =
      templateNamed("st-a").value("image", json::object()).value("digest", "");
  ASSERT_EQ(templateNamed("st-b").value("image", json::object()).value("digest", ""), image_digest);
  json manifest = json::parse(readFile(blob(image_digest)), nullptr, false);
  ASSERT_TRUE(manifest.contains("layers")) << image_digest;
  for (const auto& layer : manifest["layers"]) {
    EXPECT_EQ(served[layer.value("digest", "")], 1) << layer.dump();
  }
  // One template goes: the image stays for the other.
  ASSERT_EQ(daemon_->hutch({"template", "rm", "st-a"}).exit_code, 0);
  auto kept = daemon_->hutch({"--json", "image", "prune", "--keep", "0"});
  ASSERT_EQ(kept.exit_code, 0) << kept.err;
  json pulled = json::parse(kept.out, nullptr, false).value("pulled_images", json::array());
  std::string digest;
  for (const auto& p : pulled) {
    if (p.value("reason", "") == "template st-b") digest = p.value("digest", "");
  }
  ASSERT_FALSE(digest.empty()) << kept.out;
  for (const auto& [d, times] : served) EXPECT_TRUE(fs::exists(blob(d))) << d;
  // The last one goes: so do its layout and its blobs, and the text output says so.
  ASSERT_EQ(daemon_->hutch({"template", "rm", "st-b"}).exit_code, 0);
  auto dry = daemon_->hutch({"image", "prune", "--keep", "0", "--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_NE(dry.out.find(digest.substr(0, 19) + "   would remove"), std::string::npos) << dry.out;
  for (const auto& [d, times] : served) EXPECT_TRUE(fs::exists(blob(d))) << d;
  auto gone = daemon_->hutch({"image", "prune", "--keep", "0"});
  ASSERT_EQ(gone.exit_code, 0) << gone.err;
  EXPECT_NE(gone.out.find(digest.substr(0, 19) + "   removed"), std::string::npos) << gone.out;
  EXPECT_FALSE(fs::exists(daemon_->stateDir() / "oci/layouts" / digest.substr(7)));
  for (const auto& [d, times] : served) EXPECT_FALSE(fs::exists(blob(d))) << d;
  // Other tests' templates keep theirs: none is left that no template links.
  auto unlinked_roots = [] {
    int n = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(daemon_->stateDir() / "oci/roots", ec)) {
      struct stat st {};
      if (::stat((e.path() / "rootfs.img").c_str(), &st) != 0 || st.st_nlink <= 1) ++n;
    }
    return n;
  };
  EXPECT_EQ(unlinked_roots(), 0);
  // And the image can be pulled again; a second template of it links the root disk the first
  // made (one inode) instead of unpacking again.
  auto again = create("st-c", ref("static"));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.err.find("made before"), std::string::npos) << again.err;
  auto linked = create("st-d", ref("static"));
  ASSERT_EQ(linked.exit_code, 0) << linked.err;
  EXPECT_NE(linked.err.find("Using the root disk made before"), std::string::npos) << linked.err;
  EXPECT_EQ(linked.err.find("Unpacking"), std::string::npos) << linked.err;
  auto inode = [](const std::string& name) {
    struct stat st {};
    const fs::path disk = fs::path(templateNamed(name).value("dir", "")) / "rootfs.img";
    return ::stat(disk.c_str(), &st) == 0 ? st.st_ino : 0;
  };
  EXPECT_NE(inode("st-c"), 0u);
  EXPECT_EQ(inode("st-c"), inode("st-d"));
  ASSERT_EQ(daemon_->hutch({"run", "--name", "st-d1", "--template", "st-d"}).exit_code, 0);
  auto hello = daemon_->hutch({"exec", "st-d1", "--", "/hello"});
  EXPECT_NE(hello.out.find("hello from a static binary"), std::string::npos) << hello.err;
  EXPECT_EQ(daemon_->hutch({"rm", "-f", "st-d1"}).exit_code, 0);
  for (const char* name : {"st-c", "st-d"}) {
    EXPECT_EQ(daemon_->hutch({"template", "rm", name}).exit_code, 0);
  }
  auto last = daemon_->hutch({"--json", "image", "prune", "--keep", "0"});
  ASSERT_EQ(last.exit_code, 0) << last.err;
  EXPECT_EQ(json::parse(last.out, nullptr, false)["root_disks"].value("removed", 0), 1) << last.out;
  EXPECT_EQ(unlinked_roots(), 0);
}

}  // namespace
}  // namespace hutch::e2e

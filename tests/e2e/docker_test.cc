// The docker template on real boxes: Docker Engine inside the box (no host Docker, no registry:
// images are built here from Debian's busybox-static and loaded as tarballs, docker-save and
// OCI), `docker compose up -d --wait` with two services reached from the host through a
// published port, and dockerd plus a volume's data surviving stop/start and a checkpoint
// rollback. Needs HUTCH_TEST_DOCKER_IMAGE (scripts/test.sh builds the template); skipped without
// it. Lean on purpose: under TCG one `docker run` takes several seconds.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <thread>

#include "harness.h"
#include "tcp_client.h"

namespace hutch::e2e {
namespace {

// A `docker save` archive of a one-layer image "hutch-busybox:latest": the host's static
// busybox with a few applet links. Built with tar and sha256sum, no Docker on the host.
std::filesystem::path buildBusyboxImage(const std::filesystem::path& dir) {
  std::string script = R"sh(
set -e
cd "$1"
rm -rf root img && mkdir -p root/bin root/etc root/tmp img
cp /bin/busybox root/bin/busybox
for a in sh httpd wget cat echo sleep true ls mkdir; do ln -s busybox root/bin/$a; done
echo 'root:x:0:0:root:/root:/bin/sh' > root/etc/passwd
tar -C root --numeric-owner --owner=0 --group=0 -cf layer.tar .
L=$(sha256sum layer.tar | cut -d' ' -f1)
printf '{"architecture":"amd64","os":"linux","config":{"Cmd":["sh"],"Env":["PATH=/bin"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$L" > config.json
C=$(sha256sum config.json | cut -d' ' -f1)
mkdir img/$L && mv layer.tar img/$L/layer.tar && mv config.json img/$C.json
printf '[{"Config":"%s.json","RepoTags":["hutch-busybox:latest"],"Layers":["%s/layer.tar"]}]' "$C" "$L" > img/manifest.json
tar -C img -cf busybox-image.tar .
tar -C root -cf rootfs.tar .
)sh";
  std::ofstream(dir / "make-image.sh") << script;
  std::string cmd = "sh " + (dir / "make-image.sh").string() + " " + dir.string();
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  return dir / "busybox-image.tar";
}

// An OCI image layout (index.json, oci-layout, blobs/sha256/..., no manifest.json) of the same
// busybox tree, tagged "hutch-oci:v1" by its ref name annotation, with a gzip layer; the archive
// itself is gzip-compressed. Docker 20.10 cannot load it: hutch image load converts it. Also
// writes oci-missing-blob.tar, the same layout without its layer. Needs buildBusyboxImage first.
std::filesystem::path buildOciImage(const std::filesystem::path& dir) {
  std::string script = R"sh(
set -e
cd "$1"
rm -rf oci && mkdir -p oci/blobs/sha256
tar -C root --numeric-owner --owner=0 --group=0 -cf oci-layer.tar .
D=$(sha256sum oci-layer.tar | cut -d' ' -f1)
gzip -n -f oci-layer.tar
L=$(sha256sum oci-layer.tar.gz | cut -d' ' -f1)
LS=$(stat -c %s oci-layer.tar.gz)
mv oci-layer.tar.gz oci/blobs/sha256/$L
printf '{"architecture":"amd64","os":"linux","config":{"Cmd":["sh"],"Env":["PATH=/bin"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$D" > oci/config
C=$(sha256sum oci/config | cut -d' ' -f1); CS=$(stat -c %s oci/config); mv oci/config oci/blobs/sha256/$C
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:%s","size":%s}]}' "$C" "$CS" "$L" "$LS" > oci/manifest
M=$(sha256sum oci/manifest | cut -d' ' -f1); MS=$(stat -c %s oci/manifest); mv oci/manifest oci/blobs/sha256/$M
printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"hutch-oci:v1"}}]}' "$M" "$MS" > oci/index.json
printf '{"imageLayoutVersion":"1.0.0"}' > oci/oci-layout
tar -C oci -czf oci-image.tar.gz .
tar -C oci --exclude "./blobs/sha256/$L" -cf oci-missing-blob.tar .
)sh";
  std::ofstream(dir / "make-oci.sh") << script;
  std::string cmd = "sh " + (dir / "make-oci.sh").string() + " " + dir.string();
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  return dir / "oci-image.tar.gz";
}

constexpr const char* kCompose = R"yaml(version: "2.4"
services:
  web:
    image: hutch-busybox
    command: ["sh", "-c", "mkdir -p /www && echo hello-from-compose > /www/index.html && exec httpd -f -p 8080 -h /www"]
    ports: ["8080:8080"]
    healthcheck:
      test: ["CMD", "wget", "-q", "-O", "/dev/null", "http://localhost:8080/index.html"]
      interval: 1s
      retries: 120
  client:
    image: hutch-busybox
    command: ["sh", "-c", "until wget -q -O - http://web:8080/index.html; do sleep 0.5; done; exec sleep 100000"]
    depends_on: [web]
)yaml";

// A service that exits at once: `up --wait` must fail and name it.
constexpr const char* kComposeExits = R"yaml(version: "2.4"
services:
  quitter:
    image: hutch-busybox
    command: ["sh", "-c", "exit 3"]
)yaml";

class DockerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::getenv("HUTCH_TEST_DOCKER_IMAGE") == nullptr) {
      GTEST_SKIP() << "HUTCH_TEST_DOCKER_IMAGE is not set: build the docker template "
                      "(scripts/build-image.sh --recipe images/docker; scripts/test.sh does)";
    }
    if (!std::filesystem::exists("/bin/busybox")) {
      GTEST_SKIP() << "/bin/busybox is missing: apt-get install busybox-static";
    }
    daemon_ = std::make_unique<Daemon>();
  }
  void TearDown() override { daemon_.reset(); }
  Daemon& d() { return *daemon_; }

  // Runs `docker ARGS...` in the box as the default user (a member of the docker group).
  CommandResult docker(const std::string& box, std::vector<std::string> args,
                       const std::string& cwd = "") {
    std::vector<std::string> argv{"exec"};
    if (!cwd.empty()) argv.insert(argv.end(), {"-w", cwd});
    argv.insert(argv.end(), {box, "--", "docker"});
    argv.insert(argv.end(), args.begin(), args.end());
    return d().hutch(argv);
  }

  // dockerd answers (at once when the box came from the template's snapshot).
  bool waitForDocker(const std::string& box) {
    for (int i = 0; i < 240; ++i) {
      if (docker(box, {"info", "--format", "{{.ServerVersion}}"}).exit_code == 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    return false;
  }

  void loadBusybox(const std::string& box) {
    auto image = buildBusyboxImage(d().dir());
    auto loaded = d().hutch({"image", "load", box, image.string()});
    ASSERT_EQ(loaded.exit_code, 0) << loaded.err;
    EXPECT_NE(loaded.out.find("Loaded image: hutch-busybox:latest"), std::string::npos)
        << loaded.out;
  }

  std::unique_ptr<Daemon> daemon_;
};

TEST_F(DockerTest, ImagesBuildRunAndAComposeStackReachedFromTheHost) {
  uint16_t port = freePort();
  auto run = d().hutch(
      {"run", "--name", "dk", "--template", "docker", "-p", std::to_string(port) + ":8080"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  // Restored from the template's snapshot, taken once dockerd answered: the engine answers the
  // very first request, no retry.
  auto box = d().inspect("dk");
  ASSERT_TRUE(box.is_object());
  EXPECT_EQ(box.value("boot", "").rfind("restored from template snapshot ", 0), 0u) << box.dump();
  auto first = docker("dk", {"info", "--format", "{{.ServerVersion}}"});
  ASSERT_EQ(first.exit_code, 0) << "dockerd did not answer at once: " << first.err;
  EXPECT_NE(first.out, "\n");
  auto services = d().hutch({"--json", "services", "dk"});
  EXPECT_NE(services.out.find("\"running\""), std::string::npos) << services.out;
  auto log = d().hutch({"logs", "dk", "--service", "dockerd"});
  EXPECT_EQ(log.exit_code, 0) << log.err;
  EXPECT_NE(log.out.find("API listen on"), std::string::npos) << log.out;

  // The default user is not root, and uses docker itself (the docker group, no sudo): a plain
  // `docker load -i` of an archive copied in with hutch cp, docker ps and docker run.
  auto uid = d().hutch({"exec", "dk", "--", "id", "-u"});
  ASSERT_EQ(uid.exit_code, 0) << uid.err;
  ASSERT_FALSE(uid.out.empty());
  EXPECT_NE(uid.out, "0\n");
  EXPECT_NE(docker("dk", {"image", "inspect", "hutch-busybox"}).exit_code, 0) << "loaded already";
  auto archive = buildBusyboxImage(d().dir());
  auto copied = d().hutch({"cp", archive.string(), "dk:/tmp/busybox-image.tar"});
  ASSERT_EQ(copied.exit_code, 0) << copied.err;
  auto plain = d().hutch({"exec", "dk", "--", "sh", "-c",
                          "id -u && docker load -i /tmp/busybox-image.tar && docker ps -q && "
                          "docker run --rm hutch-busybox echo ran-as-user"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.out.rfind(uid.out, 0), 0u) << plain.out;  // the same user, not root
  EXPECT_NE(plain.out.find("Loaded image: hutch-busybox:latest\n"), std::string::npos) << plain.out;
  EXPECT_NE(plain.out.find("ran-as-user\n"), std::string::npos) << plain.out;

  loadBusybox("dk");  // hutch image load (docker load as root) of the same archive
  auto ran = docker("dk", {"run", "--rm", "hutch-busybox", "true"});
  EXPECT_EQ(ran.exit_code, 0) << ran.err;

  // docker import of a plain root filesystem tarball, fed through exec -i.
  auto rootfs = readFile(d().dir() / "rootfs.tar");
  auto imported = d().hutch({"exec", "-i", "dk", "--", "docker", "import", "-", "hutch-imported"},
                            rootfs, true);
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  auto echo = docker("dk", {"run", "--rm", "hutch-imported", "/bin/echo", "imported"});
  EXPECT_EQ(echo.out, "imported\n") << echo.err;

  // An OCI image layout (gzip, read from stdin), converted by hutch image load; then one that
  // lacks its layer blob, refused before anything reaches docker.
  auto oci = readFile(buildOciImage(d().dir()));
  auto oci_loaded = d().hutch({"image", "load", "dk", "-"}, oci, true);
  ASSERT_EQ(oci_loaded.exit_code, 0) << oci_loaded.err;
  EXPECT_NE(oci_loaded.out.find("Loaded image: hutch-oci:v1"), std::string::npos) << oci_loaded.out;
  auto oci_ran = docker("dk", {"run", "--rm", "hutch-oci:v1", "cat", "/etc/passwd"});
  EXPECT_EQ(oci_ran.out, "root:x:0:0:root:/root:/bin/sh\n") << oci_ran.err;
  auto broken = d().hutch({"image", "load", "dk", (d().dir() / "oci-missing-blob.tar").string()});
  EXPECT_NE(broken.exit_code, 0);
  EXPECT_NE(broken.err.find("lacks the blob"), std::string::npos) << broken.err;

  // docker build FROM a loaded image, with a RUN step.
  auto dockerfile = d().hutch({"exec", "dk", "--", "sh", "-c",
                               "mkdir -p build && printf 'FROM hutch-busybox\\nRUN echo built > "
                               "/built\\n' > build/Dockerfile"});
  ASSERT_EQ(dockerfile.exit_code, 0);
  auto built = docker("dk", {"build", "-q", "-t", "hutch-built", "build"}, "/home/hutch");
  ASSERT_EQ(built.exit_code, 0) << built.out << built.err;
  EXPECT_EQ(docker("dk", {"run", "--rm", "hutch-built", "cat", "/built"}).out, "built\n");

  // Two services: a web server and a client that reaches it by name; the host reaches the web
  // server through the box's published port (host -> hutchd -> agent -> docker-proxy).
  auto compose = d().hutch(
      {"exec", "-i", "dk", "--", "sh", "-c", "mkdir -p app && cat > app/docker-compose.yml"},
      kCompose, true);
  ASSERT_EQ(compose.exit_code, 0);
  // `docker compose` is the template's plugin over Debian's compose v1: --wait returns once web
  // is healthy and client runs.
  auto up = d().hutch(
      {"exec", "-w", "/home/hutch/app", "dk", "--", "docker", "compose", "up", "-d", "--wait"});
  ASSERT_EQ(up.exit_code, 0) << up.err;
  auto page = waitForHttp(port, "/index.html", "hello-from-compose", std::chrono::seconds(30));
  ASSERT_TRUE(page && page->find("hello-from-compose") != std::string::npos);
  std::string client_log;
  for (int i = 0; i < 60 && client_log.find("hello-from-compose") == std::string::npos; ++i) {
    client_log = d().hutch({"exec", "-w", "/home/hutch/app", "dk", "--", "docker", "compose",
                            "logs", "client"})
                     .out;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  EXPECT_NE(client_log.find("hello-from-compose"), std::string::npos) << client_log;

  // A service that exits at once: --wait fails, naming it.
  ASSERT_EQ(d().hutch({"exec", "-i", "dk", "--", "sh", "-c",
                       "mkdir -p quits && cat > quits/docker-compose.yml"},
                      kComposeExits, true)
                .exit_code,
            0);
  auto quits = d().hutch({"exec", "-w", "/home/hutch/quits", "dk", "--", "docker", "compose", "up",
                          "-d", "--wait", "--wait-timeout", "60"});
  EXPECT_NE(quits.exit_code, 0);
  EXPECT_NE(quits.err.find("service quitter exited (code 3)"), std::string::npos) << quits.err;
}

TEST_F(DockerTest, DockerdAndVolumeDataSurviveStopStartAndRollback) {
  ASSERT_EQ(d().hutch({"run", "--name", "vol", "--template", "docker"}).exit_code, 0);
  ASSERT_TRUE(waitForDocker("vol"));
  loadBusybox("vol");
  auto write = docker("vol", {"run", "--rm", "-v", "data:/data", "hutch-busybox", "sh", "-c",
                              "echo persisted > /data/f"});
  ASSERT_EQ(write.exit_code, 0) << write.err;

  ASSERT_EQ(d().hutch({"stop", "vol"}).exit_code, 0);
  ASSERT_EQ(d().hutch({"start", "vol"}).exit_code, 0);
  ASSERT_TRUE(waitForDocker("vol")) << "dockerd did not come back after start";
  auto read = docker("vol", {"run", "--rm", "-v", "data:/data", "hutch-busybox", "cat", "/data/f"});
  EXPECT_EQ(read.out, "persisted\n") << read.err;

  ASSERT_EQ(d().hutch({"checkpoint", "vol", "--name", "cp"}).exit_code, 0);
  ASSERT_EQ(docker("vol", {"run", "--rm", "-v", "data:/data", "hutch-busybox", "sh", "-c",
                           "echo changed > /data/f"})
                .exit_code,
            0);
  auto rolled = d().hutch({"rollback", "vol", "cp"});
  ASSERT_EQ(rolled.exit_code, 0) << rolled.err;
  // Restored with its memory: dockerd answers right away, the volume holds the old data.
  EXPECT_EQ(docker("vol", {"info", "--format", "{{.ServerVersion}}"}).exit_code, 0);
  auto again =
      docker("vol", {"run", "--rm", "-v", "data:/data", "hutch-busybox", "cat", "/data/f"});
  EXPECT_EQ(again.out, "persisted\n") << again.err;
}

// A template whose ready check never returns (the docker template's is `docker info`): the
// check is killed at hutchd's ready timeout (--ready-timeout, 20 s here), and the box that asked
// for the snapshot boots cold instead of waiting forever. Base image only.
TEST(TemplateReadyCheckTest, AHangingCheckIsKilledAtTheReadyTimeout) {
  Daemon d({"--ready-timeout", "20"});
  ASSERT_EQ(d.hutch({"run", "--name", "src"}).exit_code, 0);
  auto hang = d.hutch({"exec", "-u", "root", "src", "--", "sh", "-c",
                       "mkdir -p /etc/hutch && printf '#!/bin/sh\\nexec sleep 1000\\n' > "
                       "/etc/hutch/ready && chmod 755 /etc/hutch/ready"});
  ASSERT_EQ(hang.exit_code, 0) << hang.err;
  ASSERT_EQ(d.hutch({"stop", "src"}).exit_code, 0);
  auto made = d.hutch({"template", "create", "--from", "src", "hangs"});
  ASSERT_EQ(made.exit_code, 0) << made.err;

  // `run` waits for the template's snapshot, whose VM runs the check.
  auto out = d.dir() / "hanging-run.out";
  auto err = d.dir() / "hanging-run.err";
  pid_t cli = d.start({"run", "--name", "after", "--template", "hangs"}, out, err);
  ASSERT_GT(cli, 0);
  // Only against a hang: 20 s of ready timeout plus two boots take about a minute here.
  const auto limit = std::chrono::steady_clock::now() + std::chrono::minutes(12);
  while (processAlive(cli) && std::chrono::steady_clock::now() < limit) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  const bool hung = processAlive(cli);
  if (hung) ::kill(cli, SIGKILL);
  auto run = collect(cli, out, err);
  ASSERT_FALSE(hung) << "hutch run still waits for the template snapshot after 12 minutes";
  ASSERT_EQ(run.exit_code, 0) << run.err;

  auto box = d.inspect("after");
  ASSERT_TRUE(box.is_object());
  const std::string boot = box.value("boot", "");
  EXPECT_EQ(boot.rfind("cold boot: no template snapshot (", 0), 0u) << boot;
  EXPECT_NE(boot.find("The template's ready check '/etc/hutch/ready' did not pass within 20 s "
                      "(it was still running and was killed)"),
            std::string::npos)
      << boot;
  EXPECT_EQ(d.hutch({"exec", "after", "--", "true"}).exit_code, 0);
  EXPECT_NE(readFile(d.dir() / "hutchd.log").find("still runs at its deadline: killing it"),
            std::string::npos);
  // The template VM is gone, and no snapshot of it was recorded.
  EXPECT_TRUE(pidsMentioning((d.stateDir() / "snapshots").string()).empty());
  auto df = d.hutch({"--json", "df"});
  ASSERT_EQ(df.exit_code, 0) << df.err;
  auto space = nlohmann::json::parse(df.out, nullptr, false);
  ASSERT_TRUE(space.is_object() && space["template_snapshots"].is_object()) << df.out;
  EXPECT_EQ(space["template_snapshots"].value("count", -1), 1) << df.out;  // base's only
}

}  // namespace
}  // namespace hutch::e2e

#include "image/skopeo_argv.h"

#include <gtest/gtest.h>

namespace hutch::image {
namespace {

SkopeoGlobal global() {
  return {.policy = "/var/lib/hutch/oci/policy.json", .tmpdir = "/var/lib/hutch/oci/tmp"};
}

TEST(SkopeoArgvTest, InspectOfAPrivateRegistryWithItsOwnCa) {
  SkopeoInspect inspect{.skopeo = "/usr/bin/skopeo",
                        .global = global(),
                        .access = {.authfile = "/var/lib/hutch/registries.json",
                                   .cert_dir = "/etc/hutch/certs.d/registry.example:5000"},
                        .image = "docker://registry.example:5000/team/app:1"};
  Argv want = {"/usr/bin/skopeo",
               "--policy",
               "/var/lib/hutch/oci/policy.json",
               "--tmpdir",
               "/var/lib/hutch/oci/tmp",
               "inspect",
               "--raw",
               "--authfile",
               "/var/lib/hutch/registries.json",
               "--cert-dir",
               "/etc/hutch/certs.d/registry.example:5000",
               "--retry-times",
               "3",
               "docker://registry.example:5000/team/app:1"};
  EXPECT_EQ(inspect.render(), want);
}

TEST(SkopeoArgvTest, InspectOfTheConfigAnonymouslyOverPlainHttp) {
  SkopeoInspect inspect{.global = {},
                        .access = {.insecure = true},
                        .image = "docker://127.0.0.1:5000/app@sha256:ab",
                        .config = true,
                        .retries = 0};
  Argv want = {"skopeo",        "inspect",    "--raw",
               "--config",      "--no-creds", "--tls-verify=false",
               "--retry-times", "0",          "docker://127.0.0.1:5000/app@sha256:ab"};
  EXPECT_EQ(inspect.render(), want);
}

TEST(SkopeoArgvTest, CopyFromARegistryIntoASharedBlobLayout) {
  SkopeoCopy copy{.global = global(),
                  .access = {.authfile = "/a.json"},
                  .source = "docker://docker.io/library/python@sha256:ab",
                  .layout = "/var/lib/hutch/oci/layouts/ab",
                  .ref_name = "image",
                  .shared_blobs = "/var/lib/hutch/oci/blobs"};
  Argv want = {"skopeo",
               "--policy",
               "/var/lib/hutch/oci/policy.json",
               "--tmpdir",
               "/var/lib/hutch/oci/tmp",
               "copy",
               "--src-authfile",
               "/a.json",
               "--retry-times",
               "3",
               "--dest-shared-blob-dir",
               "/var/lib/hutch/oci/blobs",
               "docker://docker.io/library/python@sha256:ab",
               "oci:/var/lib/hutch/oci/layouts/ab:image"};
  EXPECT_EQ(copy.render(), want);
}

TEST(SkopeoArgvTest, CopyFromAnArchiveTakesNoRegistryOptions) {
  SkopeoCopy copy{.access = {.authfile = "/a.json", .insecure = true},
                  .source = "docker-archive:/tmp/app.tar",
                  .layout = "/l",
                  .ref_name = "image",
                  .shared_blobs = "/b"};
  Argv want = {"skopeo",
               "copy",
               "--retry-times",
               "3",
               "--dest-shared-blob-dir",
               "/b",
               "docker-archive:/tmp/app.tar",
               "oci:/l:image"};
  EXPECT_EQ(copy.render(), want);
}

TEST(SkopeoArgvTest, ACommandTimeoutIsAGlobalOptionInGoDurationForm) {
  SkopeoCopy copy{
      .global = {.policy = "/p.json", .tmpdir = "/t", .command_timeout = std::chrono::minutes(30)},
      .access = {.insecure = true},
      .source = "docker://127.0.0.1:5000/app@sha256:ab",
      .layout = "/l",
      .ref_name = "image",
      .shared_blobs = "/b"};
  Argv want = {"skopeo",
               "--policy",
               "/p.json",
               "--tmpdir",
               "/t",
               "--command-timeout",
               "1800s",
               "copy",
               "--src-no-creds",
               "--src-tls-verify=false",
               "--retry-times",
               "3",
               "--dest-shared-blob-dir",
               "/b",
               "docker://127.0.0.1:5000/app@sha256:ab",
               "oci:/l:image"};
  EXPECT_EQ(copy.render(), want);
  SkopeoInspect inspect{.global = {.command_timeout = std::chrono::seconds(20)},
                        .image = "docker://r.example/a:1",
                        .retries = 0};
  Argv inspect_want = {
      "skopeo", "--command-timeout",     "20s", "inspect", "--raw", "--no-creds", "--retry-times",
      "0",      "docker://r.example/a:1"};
  EXPECT_EQ(inspect.render(), inspect_want);
}

}  // namespace
}  // namespace hutch::image

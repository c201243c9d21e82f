// skopeo's command lines as typed parts (the shape of src/vmm/qemu/qemu_argv.h). hutchd pulls
// images with Debian's skopeo: it speaks every registry's protocol (token and basic auth,
// mirrors from the host's registries.conf, retries), verifies digests as it copies, and writes
// OCI layouts whose blobs one shared directory keeps once by digest (docs/templates.md). Nothing
// here starts a process, so it is all tested on the rendered argv.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

namespace hutch::image {

using Argv = std::vector<std::string>;

// How to reach one registry. Global options first (before the verb), then the verb's own:
// --policy FILE (hutch's policy: accept any image; digests are checked by skopeo and again by
// hutch), --tmpdir DIR (blobs being fetched, on the state directory's filesystem, not /var/tmp),
// --command-timeout Ns (skopeo 1.9 and later: the whole command, retries included, ends with
// "context deadline exceeded" past it; a registry that stops sending mid-blob or never answers
// cannot hold a pull for ever).
struct SkopeoGlobal {
  std::filesystem::path policy;             // empty: skopeo's default (/etc/containers/policy.json)
  std::filesystem::path tmpdir;             // empty: skopeo's default
  std::chrono::seconds command_timeout{0};  // zero: none
  void appendTo(Argv& argv) const;
};

// Credentials and TLS for a registry: --[src-]authfile (a Docker config.json that hutchd keeps,
// 0600, never given to a box), --[src-]cert-dir (a CA for this registry: *.crt), and
// --[src-]tls-verify=false only for a registry that may be reached without verified TLS (plain
// HTTP on loopback, or one the host named insecure): skopeo then tries HTTPS without
// verification and falls back to HTTP. `prefix` is "" for inspect, "src-" for copy's source.
struct RegistryAccess {
  std::filesystem::path authfile;  // empty: anonymous (--[src-]no-creds)
  std::filesystem::path cert_dir;  // empty: the system's CAs
  bool insecure = false;
  void appendTo(Argv& argv, std::string_view prefix) const;
  bool operator==(const RegistryAccess&) const = default;
};

// skopeo inspect --raw [--config] IMAGE: the manifest (or index) as the registry serves it, or
// the image's config blob. `image` is a transport reference ("docker://...").
struct SkopeoInspect {
  std::filesystem::path skopeo = "skopeo";
  SkopeoGlobal global;
  RegistryAccess access;
  std::string image;
  bool config = false;
  unsigned retries = 3;
  Argv render() const;
};

// skopeo copy SOURCE oci:LAYOUT:REF --dest-shared-blob-dir BLOBS: one image (the source names
// one manifest, by digest) into an OCI layout whose blobs live in BLOBS, shared by every layout;
// a blob already there is not fetched again.
struct SkopeoCopy {
  std::filesystem::path skopeo = "skopeo";
  SkopeoGlobal global;
  RegistryAccess access;  // for a docker:// source; ignored for archives
  std::string source;     // docker://…@sha256:…, docker-archive:PATH, oci-archive:PATH, oci:DIR
  std::filesystem::path layout;
  std::string ref_name;
  std::filesystem::path shared_blobs;
  unsigned retries = 3;
  Argv render() const;
};

}  // namespace hutch::image

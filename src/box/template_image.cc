// Templates from OCI images (issue 32): `hutch template create NAME --from-image REF`.
//
// The image is pulled by skopeo into an OCI layout whose blobs live in one shared directory
// (<state>/oci/blobs, each blob once by digest, so a second image on the same base fetches only
// its new layers), its layers are applied in order to a new tree with hutch's confined writer
// (image::RootDir: nothing an image says can make hutchd write outside the tree), the agent and
// the kernel's modules are added, and mkfs.ext4 -d makes the tree the template's root disk. The
// kernel and initramfs are those of the kernel template (base). The image's ENV, WORKDIR, USER,
// ENTRYPOINT/CMD, EXPOSE and labels become the template's defaults (manifest.json "defaults").
// Everything runs on the worker pool; progress lines go to `progress` as they come.
#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>

#include "base/unique_fd.h"
#include "box/box.h"
#include "box/template_service.h"
#include "event/offload.h"
#include "image/digest.h"
#include "image/layer_apply.h"
#include "image/layout.h"
#include "image/manifest.h"
#include "image/reference.h"
#include "image/root_dir.h"
#include "image/rootfs_image.h"
#include "image/skopeo_argv.h"
#include "sys/files.h"
#include "sys/run.h"

namespace hutch::box {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr std::string_view kRefName = "image";

std::string mib(uint64_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
}

// An exclusive lock on `path` for as long as it lives (flock: two creates of one image wait for
// each other, and the second finds the blobs the first fetched).
Result<UniqueFd> lockFile(const fs::path& path) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return fail(sysError("Cannot open " + path.string(), errno));
  while (::flock(fd.get(), LOCK_EX) != 0) {
    if (errno != EINTR) return fail(sysError("Cannot lock " + path.string(), errno));
  }
  return fd;
}

// The template's defaults from the image config, as manifest.json keeps them.
json defaultsJson(const image::ImageConfig& c) {
  return json{{"env", c.env},       {"workdir", c.working_dir},
              {"user", c.user},     {"entrypoint", c.entrypoint},
              {"cmd", c.cmd},       {"exposed_ports", c.exposed_ports},
              {"labels", c.labels}, {"stop_signal", c.stop_signal}};
}

// What skopeo's failure means for the caller: the registry has no such image (404), refused
// hutchd's credentials (403), or could not be reached or answered wrongly (503). skopeo says
// which in its message (the registry's own error codes: MANIFEST_UNKNOWN, NAME_UNKNOWN,
// UNAUTHORIZED, DENIED).
Error registryError(const image::Reference& ref, const Error& error) {
  const std::string& text = error.message();
  auto says = [&text](std::string_view what) { return text.find(what) != std::string::npos; };
  if (error.code() == Errc::kResourceExhausted) return error;
  if (says("manifest unknown") || says("name unknown") || says("not found")) {
    return Error(Errc::kNotFound, fmt::format("The registry has no image {}: {}", ref.str(), text));
  }
  if (says("unauthorized") || says("authentication required") || says("denied")) {
    return Error(Errc::kPermissionDenied,
                 fmt::format("The registry {} refused to give {} to hutchd; log in with the "
                             "credentials it needs (hutch registry login {}): {}",
                             ref.registry, ref.str(), ref.registry, text));
  }
  return Error(Errc::kUnavailable,
               fmt::format("Cannot get {} from its registry: {}", ref.str(), text));
}

}  // namespace

image::RegistryAccess TemplateService::accessFor(const image::Reference& ref) const {
  image::RegistryAccess access;
  const ImagePullConfig& ic = config_.image;
  std::error_code ec;
  if (!ic.authfile.empty() && fs::exists(ic.authfile, ec)) access.authfile = ic.authfile;
  // Docker's certs.d layout: <dir>/<host[:port]>/*.crt.
  if (!ic.certs_dir.empty() && fs::is_directory(ic.certs_dir / ref.registry, ec)) {
    access.cert_dir = ic.certs_dir / ref.registry;
  }
  // As Docker does: a loopback registry may be plain HTTP (or unverified TLS) unless the host
  // gave a CA for it; any other only when the host named it (--insecure-registry).
  const bool named = std::find(ic.insecure_registries.begin(), ic.insecure_registries.end(),
                               ref.registry) != ic.insecure_registries.end();
  access.insecure = named || (image::isLoopbackRegistry(ref) && access.cert_dir.empty());
  return access;
}

boost::asio::awaitable<Result<json>> TemplateService::createFromImage(std::string name,
                                                                      std::string reference,
                                                                      Progress progress) {
  Making making(making_);
  HUTCH_CO_TRY_VOID(checkNewName(name));
  HUTCH_CO_TRY(image::Reference ref, image::parseReference(reference));
  const auto& allowed = config_.image.allowed_registries;
  if (!allowed.empty() &&
      std::find(allowed.begin(), allowed.end(), ref.registry) == allowed.end()) {
    co_return fail(Errc::kPermissionDenied,
                   fmt::format("This hutchd pulls images only from {} (--allowed-registry), not "
                               "from {}",
                               fmt::join(allowed, ", "), ref.registry));
  }
  if (!fs::exists(config_.agent)) {
    co_return fail(Errc::kFailedPrecondition,
                   fmt::format("The guest agent {} is missing; build hutch first or start hutchd "
                               "with --agent",
                               config_.agent.string()));
  }
  auto kernel = templates_.find(config_.image.kernel_template);
  if (!kernel) {
    co_return fail(Errc::kFailedPrecondition,
                   fmt::format("Boxes of an image boot the kernel of template '{}', which this "
                               "hutchd does not have ({}); build it first (hutch template build "
                               "{})",
                               config_.image.kernel_template, kernel.error().message(),
                               config_.image.kernel_template));
  }
  const std::string release = kernel->manifest.value("kernel_version", "");
  HUTCH_CO_TRY(fs::path modules, kernelModules(release));
  const std::string key =
      fmt::format("{}", std::chrono::system_clock::to_time_t(std::chrono::system_clock::now()));
  fs::path dir = config_.images_dir / fmt::format("{}-image-{}", name, key);
  auto work = [this, name, key, ref, dir, modules, kernel = *kernel, release,
               progress]() -> Result<json> {
    auto say = [&progress](const std::string& line) {
      if (progress) progress(line + "\n");
    };
    fs::path tmp = dir.string() + ".tmp";
    auto made = importImage(ref, tmp, modules, release, say);
    if (made) {
      json manifest = *made;
      manifest["name"] = name;
      manifest["image_key"] = "image-" + key;
      manifest["kernel_version"] = release;
      for (const char* k : {"kernel_cmdline", "kernel_cmdline_template", "initramfs_key"}) {
        if (kernel.manifest.contains(k)) manifest[k] = kernel.manifest[k];
      }
      auto linked = linkKernel(kernel, tmp);
      if (!linked) made = fail(linked.error());
      if (made) {
        std::ofstream(tmp / "manifest.json") << manifest.dump(2) << "\n";
        std::error_code ec;
        fs::rename(tmp, dir, ec);
        if (ec) {
          made =
              fail(Errc::kInternal, "Cannot move " + tmp.string() + " into place: " + ec.message());
        }
      }
    }
    if (!made) {
      std::error_code ec;
      fs::remove_all(tmp, ec);  // nothing half-made is left
    }
    return made;
  };
  auto made = co_await event::offload(pool_, std::move(work));
  if (!made) {
    co_return fail(
        made.error().withContext(fmt::format("Cannot make template {} from {}", name, ref.str())));
  }
  HUTCH_CO_TRY_VOID(templates_.link(name, dir));
  spdlog::info("template {}: made from image {} ({}) in {}", name, ref.str(),
               made->value("image", json::object()).value("digest", ""), dir.string());
  HUTCH_CO_TRY(storage::Template t, templates_.find(name));
  co_return describe(t);
}

Result<std::vector<image::RegistryLogin>> TemplateService::registryLogins() {
  return image::listLogins(config_.image.authfile);
}

Result<image::RegistryLogin> TemplateService::registryLogin(std::string_view registry,
                                                            std::string_view username,
                                                            std::string_view password) {
  HUTCH_TRY(std::string host, image::normalizeRegistry(registry));
  HUTCH_TRY_VOID(image::saveLogin(config_.image.authfile, host, username, password));
  spdlog::info("registry {}: credentials of {} kept", host, username);
  return image::RegistryLogin{host, std::string(username)};
}

Result<std::string> TemplateService::registryLogout(std::string_view registry) {
  HUTCH_TRY(std::string host, image::normalizeRegistry(registry));
  HUTCH_TRY_VOID(image::removeLogin(config_.image.authfile, host));
  spdlog::info("registry {}: credentials removed", host);
  return host;
}

Result<fs::path> TemplateService::kernelModules(const std::string& release) const {
  // The recipes' builds keep the kernel's modules beside its vmlinux in the image cache
  // (scripts/image/kernel.sh: <cache>/kernel/<package>_<version>/modules/<release>).
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(config_.cache_dir / "kernel", ec)) {
    fs::path candidate = entry.path() / "modules" / release;
    if (!release.empty() && fs::is_directory(candidate, ec)) return candidate;
  }
  return fail(Errc::kFailedPrecondition,
              fmt::format("The modules of kernel {} are not in {}; build the kernel template "
                          "again (hutch template build {})",
                          release.empty() ? "(unknown)" : release,
                          (config_.cache_dir / "kernel").string(), config_.image.kernel_template));
}

Result<json> TemplateService::importImage(const image::Reference& ref, const fs::path& tmp,
                                          const fs::path& modules, const std::string& release,
                                          const std::function<void(const std::string&)>& say) {
  const ImagePullConfig& ic = config_.image;
  const fs::path oci = ic.oci_dir;
  std::error_code ec;
  for (const fs::path& d : {oci / "blobs", oci / "layouts", oci / "tmp"}) {
    fs::create_directories(d, ec);
    if (ec) return fail(Errc::kInternal, "Cannot create " + d.string() + ": " + ec.message());
  }
  // hutch checks every digest itself; skopeo's signature policy is not hutch's (and a host may
  // have none: /etc/containers/policy.json comes with another package).
  const fs::path policy = oci / "policy.json";
  if (!fs::exists(policy, ec)) {
    HUTCH_TRY_VOID(sys::writeFileAtomic(policy,
                                        R"({"default": [{"type": "insecureAcceptAnything"}]})"
                                        "\n"));
  }
  image::SkopeoGlobal global{.policy = policy, .tmpdir = oci / "tmp"};
  image::RegistryAccess access = accessFor(ref);
  const image::Limits& limits = ic.limits;

  // 1. The manifest (or index) the reference names, checked before anything large is fetched:
  // an index is narrowed to linux/amd64 here, and the copy then names that manifest by digest,
  // so what is unpacked is what was checked, whatever the tag points to meanwhile.
  say(fmt::format("Resolving {}", ref.str()));
  auto inspect = [&](const image::Reference& r) -> Result<std::string> {
    auto out = sys::runStdout(
        image::SkopeoInspect{
            .skopeo = ic.skopeo, .global = global, .access = access, .image = r.transport()}
            .render(),
        limits.max_document_bytes);
    if (!out) return fail(registryError(r, out.error()));
    return out;
  };
  HUTCH_TRY(std::string raw, inspect(ref));
  HUTCH_TRY(image::MediaDocument doc, image::parseDocument(raw, "", limits));
  std::string digest = image::sha256Digest(raw);
  if (!ref.digest.empty() && digest != ref.digest) {
    return fail(Errc::kInvalidArgument,
                fmt::format("The registry answered {} with a document of digest {}; it does not "
                            "match the digest asked for",
                            ref.str(), digest));
  }
  image::Reference pinned = ref;
  if (auto* index = std::get_if<image::Index>(&doc)) {
    HUTCH_TRY(image::Descriptor chosen, image::selectPlatform(*index));
    say(fmt::format("{} is a multi-platform image: using {} ({})", ref.str(),
                    chosen.platform ? chosen.platform->str() : "linux/amd64", chosen.digest));
    digest = chosen.digest;
    pinned.tag.clear();
    pinned.digest = digest;
    HUTCH_TRY(raw, inspect(pinned));
    HUTCH_TRY_VOID(image::verifyDigest(digest, raw));
    HUTCH_TRY(doc, image::parseDocument(raw, "", limits));
  }
  const auto* checked = std::get_if<image::Manifest>(&doc);
  if (checked == nullptr) {
    return fail(
        Errc::kInvalidArgument,
        fmt::format("{} names an index inside an index; name one image by its digest", ref.str()));
  }
  const std::string hex(image::digestHex(digest));
  pinned.tag.clear();
  pinned.digest = digest;

  // 2. The copy: blobs already in the shared directory are not fetched again.
  const fs::path layout = oci / "layouts" / hex;
  HUTCH_TRY(UniqueFd lock, lockFile(oci / "layouts" / (hex + ".lock")));
  say(fmt::format("Pulling {}", pinned.str()));
  image::SkopeoCopy copy{.skopeo = ic.skopeo,
                         .global = global,
                         .access = access,
                         .source = pinned.transport(),
                         .layout = layout,
                         .ref_name = std::string(kRefName),
                         .shared_blobs = oci / "blobs"};
  std::string pending;
  auto on_output = [&pending, &say](std::string_view piece) {
    pending += piece;
    for (size_t nl; (nl = pending.find('\n')) != std::string::npos; pending.erase(0, nl + 1)) {
      if (nl > 0) say(pending.substr(0, nl));
    }
  };
  auto copied = sys::runCapture(copy.render(), on_output);
  if (!copied) return fail(registryError(pinned, copied.error()));
  HUTCH_TRY(image::ResolvedImage resolved,
            image::resolveLayout(layout, oci / "blobs", kRefName, limits));
  lock.reset();
  // skopeo writes a Docker schema 2 image into the OCI layout as an OCI one: its manifest and
  // config are converted (other digests), its layers are the same blobs. What is unpacked must
  // be what was checked, layer by layer (and each layer's diff_id is checked as it is unpacked).
  auto layers = [](const image::Manifest& m) {
    std::vector<std::string> out;
    for (const auto& l : m.layers) out.push_back(l.digest);
    return out;
  };
  if (layers(resolved.manifest) != layers(*checked) ||
      (resolved.manifest.media_type == checked->media_type &&
       resolved.manifest.config.digest != checked->config.digest)) {
    return fail(Errc::kInvalidArgument,
                fmt::format("The pulled image's layers are not those of {}, which was resolved; "
                            "pull it again",
                            digest));
  }
  const image::ImageConfig& config = resolved.config;
  if (config.os != "linux" || config.architecture != "amd64") {
    return fail(Errc::kInvalidArgument,
                fmt::format("{} is an image for {}/{}; boxes run linux/amd64 images", ref.str(),
                            config.os, config.architecture));
  }

  // 3. The tree: each layer in order, confined to it.
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp / "tree", ec);
  if (ec) return fail(Errc::kInternal, "Cannot create " + tmp.string() + ": " + ec.message());
  if (::chmod((tmp / "tree").c_str(), 0755) != 0) {
    return fail(sysError("Cannot chmod " + (tmp / "tree").string(), errno));
  }
  HUTCH_TRY(image::RootDir root, image::RootDir::open(tmp / "tree"));
  image::ApplyUsage usage;
  for (size_t i = 0; i < resolved.layers.size(); ++i) {
    const auto& layer = resolved.layers[i];
    say(fmt::format("Unpacking layer {}/{} {} ({})", i + 1, resolved.layers.size(),
                    layer.descriptor.digest, mib(static_cast<uint64_t>(layer.descriptor.size))));
    HUTCH_TRY(UniqueFd blob, image::openBlob(resolved.blob_root, layer.descriptor.digest));
    HUTCH_TRY(image::LayerStats stats,
              image::applyLayer(root, blob.get(), layer.descriptor, ic.apply_limits, usage));
    if (i < config.diff_ids.size() && !stats.diff_id.empty() &&
        stats.diff_id != config.diff_ids[i]) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("Layer {} unpacks to {}, but the image config says {}",
                              layer.descriptor.digest, stats.diff_id, config.diff_ids[i]));
    }
  }

  // 4. What hutch adds: the agent (PID 1), the kernel's modules, the mount points it needs.
  say(fmt::format("Adding hutch-agent and the modules of kernel {}", release));
  for (const char* d : {"proc", "sys", "dev", "run", "tmp", "etc", "usr/sbin"}) {
    HUTCH_TRY_VOID(root.mkdirAll(d, 0755));
  }
  if (auto st = root.lstat("tmp"); st && *st && S_ISDIR((*st)->st_mode)) {
    HUTCH_TRY_VOID(root.chmod("tmp", 01777));
  }
  UniqueFd agent(::open(config_.agent.c_str(), O_RDONLY | O_CLOEXEC));
  if (!agent) return fail(sysError("Cannot open " + config_.agent.string(), errno));
  HUTCH_TRY_VOID(root.writeFile("usr/sbin/hutch-agent", agent.get(), 0755));
  HUTCH_TRY_VOID(root.mkdirAll("lib/modules", 0755));
  HUTCH_TRY_VOID(root.remove("lib/modules/" + release));
  HUTCH_TRY_VOID(root.copyTreeFrom(modules, "lib/modules/" + release));

  // 5. The root disk.
  HUTCH_TRY(image::TreeSize size, image::measureTree(tmp / "tree"));
  image::Ext4Layout ext4 = image::ext4LayoutFor(size);
  say(fmt::format("Writing the root disk: {} in {} files, a {} image", mib(size.bytes), size.files,
                  mib(ext4.image_bytes)));
  const fs::path rootfs = tmp / "rootfs.img";
  {
    UniqueFd file(::open(rootfs.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!file || ::ftruncate(file.get(), static_cast<off_t>(ext4.image_bytes)) != 0) {
      return fail(sysError("Cannot create " + rootfs.string(), errno));
    }
  }
  HUTCH_TRY_VOID(sys::runCapture(
      image::MkfsExt4{.tree = tmp / "tree", .image = rootfs, .inodes = ext4.inodes}.render()));
  fs::remove_all(tmp / "tree", ec);
  // Read-only, and readable by every box's uid (their QEMUs open it in their jails).
  fs::permissions(rootfs, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);

  json manifest{{"created", utcNow()},
                {"source", "image"},
                {"image",
                 {{"ref", ref.str()},
                  {"digest", digest},
                  {"config_digest", resolved.config_digest},
                  {"platform", "linux/amd64"},
                  {"layers", resolved.layers.size()},
                  {"bytes", usage.bytes}}},
                {"defaults", defaultsJson(config)}};
  say(fmt::format("Image {} unpacked ({} in {} layers)", ref.str(), mib(usage.bytes),
                  resolved.layers.size()));
  return manifest;
}

}  // namespace hutch::box

// Templates from OCI images (issue 32): `hutch template create NAME --from-image REF`, and from
// an image archive a client sends (`--from-archive FILE|DIR|-`).
//
// The image is pulled by skopeo (or copied from the archive) into an OCI layout whose blobs live
// in one shared directory (<state>/oci/blobs, each blob once by digest, so a second image on the
// same base fetches only its new layers), its layers are applied in order to a new tree with
// hutch's confined writer
// (image::RootDir: nothing an image says can make hutchd write outside the tree), the agent and
// the kernel's modules are added, and mkfs.ext4 -d makes the tree the template's root disk. The
// kernel and initramfs are those of the kernel template (base). The image's ENV, WORKDIR, USER,
// ENTRYPOINT/CMD, EXPOSE and labels become the template's defaults (manifest.json "defaults").
// Everything runs on the worker pool; progress lines go to `progress` as they come. Each pull or
// import works in a directory of its own under <state>/oci/tmp (skopeo's --tmpdir, the layout
// it writes an archive's image to), removed when it ends, whatever the end.
#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "base/unique_fd.h"
#include "box/box.h"
#include "box/template_service.h"
#include "event/offload.h"
#include "image/digest.h"
#include "image/image_archive.h"
#include "image/layer_apply.h"
#include "image/layout.h"
#include "image/manifest.h"
#include "image/reference.h"
#include "image/root_dir.h"
#include "image/rootfs_image.h"
#include "image/skopeo_argv.h"
#include "image/skopeo_error.h"
#include "image/systemd_init.h"
#include "sys/files.h"
#include "sys/run.h"

namespace hutch::box {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr std::string_view kRefName = "image";
// Docker's name of the empty image (FROM scratch).
constexpr std::string_view kScratch = "scratch";
// How long after skopeo's own --command-timeout hutchd kills it, if it has not ended by then.
constexpr auto kKillGrace = std::chrono::seconds(30);
// An archive's bytes are written to its file in pieces of this size, each on the worker pool.
constexpr size_t kArchiveWrite = size_t{4} << 20;

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

// A new directory `<parent>/<prefix>XXXXXX`, removed with all it holds when the last copy goes.
Result<std::shared_ptr<const fs::path>> scratchDir(const fs::path& parent,
                                                   const std::string& prefix) {
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) return fail(Errc::kInternal, "Cannot create " + parent.string() + ": " + ec.message());
  std::string tmpl = (parent / (prefix + "XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return fail(sysError("Cannot create a directory in " + parent.string(), errno));
  }
  return std::shared_ptr<const fs::path>(new fs::path(tmpl), [](const fs::path* dir) {
    std::error_code ignored;
    fs::remove_all(*dir, ignored);
    delete dir;
  });
}

// The template's defaults from the image config, as manifest.json keeps them.
json defaultsJson(const image::ImageConfig& c) {
  return json{{"env", c.env},       {"workdir", c.working_dir},
              {"user", c.user},     {"entrypoint", c.entrypoint},
              {"cmd", c.cmd},       {"exposed_ports", c.exposed_ports},
              {"labels", c.labels}, {"stop_signal", c.stop_signal}};
}

// skopeo's output as lines for `say`.
std::function<void(std::string_view)> linesTo(std::string& pending,
                                              const std::function<void(const std::string&)>& say) {
  return [&pending, &say](std::string_view piece) {
    pending += piece;
    for (size_t nl; (nl = pending.find('\n')) != std::string::npos; pending.erase(0, nl + 1)) {
      if (nl > 0) say(pending.substr(0, nl));
    }
  };
}

Result<> checkCancel(const sys::CancelFlag& cancel) {
  if (cancel && cancel->load()) {
    return fail(Errc::kCancelled, "Stopped: whoever asked for it went away");
  }
  return ok();
}

// <oci>/{blobs,layouts,tmp} and hutch's skopeo policy (accept: hutch checks every digest itself;
// skopeo's signature policy is not hutch's, and a host may have none:
// /etc/containers/policy.json comes with another package).
Result<fs::path> prepareOciDir(const fs::path& oci) {
  std::error_code ec;
  for (const fs::path& d : {oci / "blobs", oci / "layouts", oci / "tmp"}) {
    fs::create_directories(d, ec);
    if (ec) return fail(Errc::kInternal, "Cannot create " + d.string() + ": " + ec.message());
  }
  const fs::path policy = oci / "policy.json";
  if (!fs::exists(policy, ec)) {
    HUTCH_TRY_VOID(sys::writeFileAtomic(policy,
                                        R"({"default": [{"type": "insecureAcceptAnything"}]})"
                                        "\n"));
  }
  return policy;
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

Result<TemplateService::ImageKernel> TemplateService::imageKernel() const {
  if (!fs::exists(config_.agent)) {
    return fail(Errc::kFailedPrecondition,
                fmt::format("The guest agent {} is missing; build hutch first or start hutchd "
                            "with --agent",
                            config_.agent.string()));
  }
  auto kernel = templates_.find(config_.image.kernel_template);
  if (!kernel) {
    return fail(Errc::kFailedPrecondition,
                fmt::format("Boxes of an image boot the kernel of template '{}', which this "
                            "hutchd does not have ({}); build it first (hutch template build {})",
                            config_.image.kernel_template, kernel.error().message(),
                            config_.image.kernel_template));
  }
  std::string release = kernel->manifest.value("kernel_version", "");
  HUTCH_TRY(fs::path modules, kernelModules(release));
  return ImageKernel{.kernel = *kernel, .release = std::move(release), .modules = modules};
}

boost::asio::awaitable<Result<json>> TemplateService::createFromImage(
    std::string name, std::string reference, Progress progress, sys::CancelFlag cancel,
    std::optional<PullCredentials> credentials, ImageInit init) {
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
  FetchImage fetch = [this, ref, cancel, credentials = std::move(credentials)](const Say& say) {
    return pullImage(ref, say, cancel, credentials);
  };
  co_return co_await makeFromImage(std::move(name), ref.str(), std::move(fetch),
                                   std::move(progress), std::move(cancel), init);
}

boost::asio::awaitable<Result<TemplateService::ReceivedArchive>> TemplateService::receiveArchive(
    std::string name, std::optional<uint64_t> length, BodyReader read) {
  HUTCH_CO_TRY_VOID(checkNewName(name));
  HUTCH_CO_TRY_VOID(imageKernel());
  const uint64_t limit = config_.image.max_archive_bytes;
  auto too_large = [limit] {
    return Error(Errc::kResourceExhausted,
                 fmt::format("The archive is larger than {}, the limit of this hutchd "
                             "(--image-max-archive-mib)",
                             mib(limit)));
  };
  if (length && *length > limit) co_return fail(too_large());
  HUTCH_CO_TRY(std::shared_ptr<const fs::path> dir,
               scratchDir(config_.image.oci_dir / "tmp", "archive-"));
  // The file goes with its directory: `dir`'s deleter runs when the last copy of this goes.
  std::shared_ptr<const fs::path> owned(new fs::path(*dir / "archive"),
                                        [dir](const fs::path* p) { delete p; });
  UniqueFd fd(::open(owned->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) co_return fail(sysError("Cannot create " + owned->string(), errno));
  uint64_t bytes = 0;
  std::string pending;
  auto flush = [this, raw = fd.get()](std::string data) {
    return event::offload(pool_, [raw, data = std::move(data)]() -> Result<> {
      for (size_t done = 0; done < data.size();) {
        const ssize_t n = ::write(raw, data.data() + done, data.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return fail(sysError("Cannot keep the archive", errno));
        done += static_cast<size_t>(n);
      }
      return ok();
    });
  };
  while (true) {
    Result<std::string> chunk = co_await read();
    if (!chunk) co_return fail(chunk.error().withContext("The archive was not received whole"));
    if (chunk->empty()) break;
    bytes += chunk->size();
    if (bytes > limit) co_return fail(too_large());
    pending += *chunk;
    if (pending.size() >= kArchiveWrite) {
      HUTCH_CO_TRY_VOID(co_await flush(std::exchange(pending, std::string())));
    }
  }
  if (!pending.empty()) HUTCH_CO_TRY_VOID(co_await flush(std::move(pending)));
  if (bytes == 0)
    co_return fail(Errc::kInvalidArgument, "The archive is empty: send it as the body");
  spdlog::info("template {}: received an archive of {}", name, mib(bytes));
  co_return ReceivedArchive{.file = std::move(owned), .bytes = bytes};
}

boost::asio::awaitable<Result<json>> TemplateService::createScratch(std::string name,
                                                                    Progress progress,
                                                                    sys::CancelFlag cancel) {
  FetchImage fetch = [](const Say& say) -> Result<FetchedImage> {
    say("scratch: an empty image, no layers");
    FetchedImage empty;
    empty.resolved.manifest_digest = std::string(kScratch);  // the root disk cache's key
    empty.resolved.config.os = "linux";
    empty.resolved.config.architecture = "amd64";
    empty.source = json{{"ref", kScratch}, {"digest", ""}};
    return empty;
  };
  co_return co_await makeFromImage(std::move(name), std::string(kScratch), std::move(fetch),
                                   std::move(progress), std::move(cancel), ImageInit::kAgent);
}

boost::asio::awaitable<Result<json>> TemplateService::createFromArchive(
    std::string name, ReceivedArchive archive, std::string image, Progress progress,
    sys::CancelFlag cancel, ImageInit init) {
  FetchImage fetch = [this, archive, image, cancel](const Say& say) {
    return importArchive(archive, image, say, cancel);
  };
  co_return co_await makeFromImage(std::move(name), "an archive", std::move(fetch),
                                   std::move(progress), std::move(cancel), init);
}

boost::asio::awaitable<Result<json>> TemplateService::makeFromImage(
    std::string name, std::string what, FetchImage fetch, Progress progress, sys::CancelFlag cancel,
    ImageInit init) {
  Making making(making_);
  HUTCH_CO_TRY_VOID(checkNewName(name));
  HUTCH_CO_TRY(ImageKernel kernel, imageKernel());
  const std::string key =
      fmt::format("{}", std::chrono::system_clock::to_time_t(std::chrono::system_clock::now()));
  fs::path dir = config_.images_dir / fmt::format("{}-image-{}", name, key);
  auto work = [this, name, key, dir, kernel, progress, fetch, cancel, init]() -> Result<json> {
    Say say = [&progress](const std::string& line) {
      if (progress) progress(line + "\n");
    };
    const fs::path tmp = dir.string() + ".tmp";
    auto made = [&]() -> Result<json> {
      HUTCH_TRY(FetchedImage fetched, fetch(say));
      HUTCH_TRY(std::string root_key, rootKey(fetched, kernel, init));
      json manifest;
      if (std::optional<json> reused = reuseRoot(root_key, fetched, tmp)) {
        say(
            fmt::format("Using the root disk made before from {} (the same image, agent and "
                        "kernel)",
                        fetched.resolved.manifest_digest));
        manifest = std::move(*reused);
      } else {
        HUTCH_TRY(manifest, unpackImage(fetched, tmp, kernel, init, say, cancel));
        keepRoot(root_key, tmp, manifest);
      }
      manifest["name"] = name;
      manifest["image_key"] = "image-" + key;
      manifest["kernel_version"] = kernel.release;
      for (const char* k : {"kernel_cmdline", "kernel_cmdline_template", "initramfs_key"}) {
        if (kernel.kernel.manifest.contains(k)) manifest[k] = kernel.kernel.manifest[k];
      }
      HUTCH_TRY_VOID(linkKernel(kernel.kernel, tmp));
      HUTCH_TRY_VOID(checkCancel(cancel));
      std::ofstream(tmp / "manifest.json") << manifest.dump(2) << "\n";
      std::error_code ec;
      fs::rename(tmp, dir, ec);
      if (ec) {
        return fail(Errc::kInternal,
                    "Cannot move " + tmp.string() + " into place: " + ec.message());
      }
      return manifest;
    }();
    if (!made) {
      std::error_code ec;
      fs::remove_all(tmp, ec);  // nothing half-made is left
    }
    return made;
  };
  auto made = co_await event::offload(pool_, std::move(work));
  if (!made) {
    co_return fail(
        made.error().withContext(fmt::format("Cannot make template {} from {}", name, what)));
  }
  HUTCH_CO_TRY_VOID(templates_.link(name, dir));
  spdlog::info("template {}: made from {} {} ({}) in {}", name, what,
               made->value("image", json::object()).value("ref", ""),
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

Result<std::string> TemplateService::rootKey(const FetchedImage& image, const ImageKernel& kernel,
                                             ImageInit init) const {
  image::Sha256 hash;
  hash.update(
      fmt::format("hutch-root-v1\n{}\n{}\n", image.resolved.manifest_digest, kernel.release));
  if (init == ImageInit::kSystemd) hash.update(std::string_view("init=systemd\n"));
  UniqueFd agent(::open(config_.agent.c_str(), O_RDONLY | O_CLOEXEC));
  if (!agent) return fail(sysError("Cannot open " + config_.agent.string(), errno));
  std::array<char, 1 << 16> buf{};
  for (;;) {
    const ssize_t n = ::read(agent.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(sysError("Cannot read " + config_.agent.string(), errno));
    if (n == 0) break;
    hash.update(buf.data(), static_cast<size_t>(n));
  }
  return std::string(image::digestHex(hash.finish()));
}

std::optional<json> TemplateService::reuseRoot(const std::string& key, const FetchedImage& image,
                                               const fs::path& tmp) const {
  const fs::path kept = config_.image.oci_dir / "roots" / key;
  auto text = sys::readFile(kept / "image.json");
  if (!text) return std::nullopt;
  json made = json::parse(*text, nullptr, false);
  if (!made.is_object() || !made.value("image", json()).is_object()) return std::nullopt;
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec || ::link((kept / "rootfs.img").c_str(), (tmp / "rootfs.img").c_str()) != 0) {
    fs::remove_all(tmp, ec);
    return std::nullopt;
  }
  made["created"] = utcNow();
  // What made the disk (unpackImage's fields), then this create's own words for the image (its
  // reference, or the archive it came in): none of the earlier create's.
  json described = image.source;
  for (const char* k : {"config_digest", "platform", "layers", "bytes"}) {
    if (made["image"].contains(k)) described[k] = made["image"][k];
  }
  made["image"] = std::move(described);
  return made;
}

void TemplateService::keepRoot(const std::string& key, const fs::path& tmp,
                               const json& made) const {
  const fs::path roots = config_.image.oci_dir / "roots";
  const fs::path kept = roots / key;
  std::error_code ec;
  if (fs::exists(kept, ec)) return;
  auto staging = scratchDir(roots, key + ".tmp-");
  if (!staging) return;
  // Best effort: without it the next create of the image unpacks it again.
  if (::link((tmp / "rootfs.img").c_str(), (**staging / "rootfs.img").c_str()) != 0 ||
      !sys::writeFileAtomic(**staging / "image.json", made.dump() + "\n")) {
    spdlog::warn("The root disk of {} is not kept for the next create: {}", key,
                 std::strerror(errno));
    return;
  }
  fs::rename(**staging, kept, ec);  // another create of the image may have kept it first
}

Result<TemplateService::FetchedImage> TemplateService::pullImage(
    const image::Reference& ref, const Say& say, const sys::CancelFlag& cancel,
    const std::optional<PullCredentials>& credentials) {
  const ImagePullConfig& ic = config_.image;
  const fs::path oci = ic.oci_dir;
  HUTCH_TRY(fs::path policy, prepareOciDir(oci));
  HUTCH_TRY(std::shared_ptr<const fs::path> job, scratchDir(oci / "tmp", "pull-"));
  image::SkopeoGlobal global{.policy = policy, .tmpdir = *job, .command_timeout = ic.pull_timeout};
  const sys::RunLimits limits{.timeout = ic.pull_timeout + kKillGrace, .cancel = cancel};
  image::RegistryAccess access = accessFor(ref);
  if (credentials) {
    // This pull's own auth file, in its scratch directory (0700): gone when the pull is.
    const fs::path authfile = *job / "auth.json";
    HUTCH_TRY_VOID(
        image::saveLogin(authfile, ref.registry, credentials->username, credentials->password));
    access.authfile = authfile;
  }
  // What skopeo's failure means: the registry's status, a hang, a blob that is not what its
  // digest says (image/skopeo_error.h); hutchd's own stop (cancel, its kill) as it is.
  auto failed = [&](const image::Reference& r, const Error& error) -> Error {
    if (error.code() == Errc::kCancelled || error.code() == Errc::kResourceExhausted) {
      return error;
    }
    if (error.code() == Errc::kTimeout) {
      return Error(Errc::kTimeout, fmt::format("Pulling {} from the registry {} timed out: {}",
                                               r.str(), r.registry, error.message()));
    }
    return image::registryPullError(image::classifySkopeoFailure(error.message()), r.registry,
                                    r.str(), ic.pull_timeout);
  };

  // 1. The manifest (or index) the reference names, checked before anything large is fetched:
  // an index is narrowed to linux/amd64 here, and the copy then names that manifest by digest,
  // so what is unpacked is what was checked, whatever the tag points to meanwhile.
  say(fmt::format("Resolving {}", ref.str()));
  auto inspect = [&](const image::Reference& r) -> Result<std::string> {
    auto out = sys::runStdout(
        image::SkopeoInspect{
            .skopeo = ic.skopeo, .global = global, .access = access, .image = r.transport()}
            .render(),
        ic.limits.max_document_bytes, limits);
    if (!out) return fail(failed(r, out.error()));
    return out;
  };
  HUTCH_TRY(std::string raw, inspect(ref));
  HUTCH_TRY(image::MediaDocument doc, image::parseDocument(raw, "", ic.limits));
  std::string digest = image::sha256Digest(raw);
  if (!ref.digest.empty() && digest != ref.digest) {
    return fail(Errc::kProtocol,
                fmt::format("The registry {} answered {} with a manifest of digest {}; it does "
                            "not match the digest asked for (a corrupted or substituted image)",
                            ref.registry, ref.str(), digest));
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
    if (image::sha256Digest(raw) != digest) {
      return fail(Errc::kProtocol,
                  fmt::format("The registry {} answered {} with a manifest of digest {}; it does "
                              "not match the digest its index gives (a corrupted or substituted "
                              "image)",
                              ref.registry, pinned.str(), image::sha256Digest(raw)));
    }
    HUTCH_TRY(doc, image::parseDocument(raw, "", ic.limits));
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

  // 2. The copy: blobs already in the shared directory are not fetched again; skopeo keeps a
  // blob only once it has all of it and its digest matched.
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
  auto copied = sys::runCapture(copy.render(), linesTo(pending, say), limits);
  if (!copied) return fail(failed(pinned, copied.error()));
  HUTCH_TRY(image::ResolvedImage resolved,
            image::resolveLayout(layout, oci / "blobs", kRefName, ic.limits));
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
  return FetchedImage{.resolved = std::move(resolved),
                      .source = {{"ref", ref.str()}, {"digest", digest}}};
}

Result<TemplateService::FetchedImage> TemplateService::importArchive(
    const ReceivedArchive& archive, const std::string& want, const Say& say,
    const sys::CancelFlag& cancel) {
  const ImagePullConfig& ic = config_.image;
  const fs::path oci = ic.oci_dir;
  const std::string name = "The archive";
  HUTCH_TRY(fs::path policy, prepareOciDir(oci));
  HUTCH_TRY(std::shared_ptr<const fs::path> job, scratchDir(oci / "tmp", "import-"));

  // 1. What the archive holds, read once and checked before skopeo reads it
  // (image/image_archive.h): the image to use, all its blobs there and what their digests say.
  say(fmt::format("Reading the archive ({})", mib(archive.bytes)));
  UniqueFd fd(::open(archive.file->c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return fail(sysError("Cannot open " + archive.file->string(), errno));
  HUTCH_TRY(image::ArchiveScan scan,
            image::scanImageArchive(
                fd.get(), name, {.max_total_bytes = ic.max_archive_bytes, .verify_blobs = true}));
  fd.reset();
  HUTCH_TRY_VOID(checkCancel(cancel));
  HUTCH_TRY(image::ArchiveListing listing, image::listArchiveImages(scan, name));
  HUTCH_TRY(image::ArchivedImage chosen, image::chooseArchiveImage(listing, want, name));
  HUTCH_TRY_VOID(image::checkArchiveImage(scan, listing, chosen, name, ic.limits));
  HUTCH_TRY(std::string source, image::archiveSource(listing, chosen, *archive.file));
  const std::string_view transport = image::transportName(listing.format);

  // 2. The copy, into a layout of this job's that becomes layouts/<manifest digest> as a pull's
  // is; its blobs join the shared directory (each kept only once its digest matched).
  say(fmt::format("Importing {} from the {} archive", chosen.describe(), transport));
  const fs::path layout = *job / "layout";
  image::SkopeoCopy copy{
      .skopeo = ic.skopeo,
      .global = {.policy = policy, .tmpdir = *job, .command_timeout = ic.pull_timeout},
      .access = {},
      .source = source,
      .layout = layout,
      .ref_name = std::string(kRefName),
      .shared_blobs = oci / "blobs"};
  std::string pending;
  auto copied = sys::runCapture(copy.render(), linesTo(pending, say),
                                {.timeout = ic.pull_timeout + kKillGrace, .cancel = cancel});
  if (!copied) {
    if (copied.error().code() != Errc::kInternal) return fail(copied.error());
    const image::SkopeoFailure f = image::classifySkopeoFailure(copied.error().message());
    if (f.kind == image::SkopeoFailure::Kind::kTimedOut) {
      return fail(Errc::kTimeout, fmt::format("Importing {} from the archive timed out (hutchd "
                                              "--image-pull-timeout): {}",
                                              chosen.describe(), f.message));
    }
    return fail(
        Errc::kInvalidArgument,
        fmt::format("{} of the {} archive cannot be copied{}: {}", chosen.describe(), transport,
                    f.kind == image::SkopeoFailure::Kind::kDigestMismatch
                        ? " (a blob does not hold what its digest says: the archive is "
                          "damaged or altered)"
                        : "",
                    f.message));
  }
  HUTCH_TRY(image::ResolvedImage resolved,
            image::resolveLayout(layout, oci / "blobs", kRefName, ic.limits));
  const fs::path kept = oci / "layouts" / std::string(image::digestHex(resolved.manifest_digest));
  {
    HUTCH_TRY(UniqueFd lock, lockFile(kept.string() + ".lock"));
    std::error_code ec;
    if (!fs::exists(kept / "index.json", ec)) {
      fs::remove_all(kept, ec);
      fs::rename(layout, kept, ec);
      if (ec)
        spdlog::warn("Cannot keep the layout {} as {}: {}", layout.string(), kept.string(),
                     ec.message());
    }
  }
  json described{{"ref", chosen.names.empty() ? "" : chosen.names.front()},
                 {"archive", transport},
                 {"digest", resolved.manifest_digest}};
  return FetchedImage{.resolved = std::move(resolved), .source = std::move(described)};
}

Result<json> TemplateService::unpackImage(const FetchedImage& fetched, const fs::path& tmp,
                                          const ImageKernel& kernel, ImageInit init, const Say& say,
                                          const sys::CancelFlag& cancel) {
  const ImagePullConfig& ic = config_.image;
  const image::ResolvedImage& resolved = fetched.resolved;
  const image::ImageConfig& config = resolved.config;
  const std::string what = fetched.source.value("ref", "");
  const std::string label = what.empty() ? resolved.manifest_digest : what;
  if (config.os != "linux" || config.architecture != "amd64") {
    return fail(Errc::kInvalidArgument,
                fmt::format("{} is an image for {}/{}; boxes run linux/amd64 images", label,
                            config.os, config.architecture));
  }

  // 3. The tree: each layer in order, confined to it.
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp / "tree", ec);
  if (ec) return fail(Errc::kInternal, "Cannot create " + tmp.string() + ": " + ec.message());
  if (::chmod((tmp / "tree").c_str(), 0755) != 0) {
    return fail(sysError("Cannot chmod " + (tmp / "tree").string(), errno));
  }
  HUTCH_TRY(image::RootDir root, image::RootDir::open(tmp / "tree"));
  image::ApplyUsage usage;
  for (size_t i = 0; i < resolved.layers.size(); ++i) {
    HUTCH_TRY_VOID(checkCancel(cancel));
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
  HUTCH_TRY_VOID(checkCancel(cancel));
  say(fmt::format("Adding hutch-agent and the modules of kernel {}", kernel.release));
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
  HUTCH_TRY_VOID(root.remove("lib/modules/" + kernel.release));
  HUTCH_TRY_VOID(root.copyTreeFrom(kernel.modules, "lib/modules/" + kernel.release));
  std::string init_path;
  if (init == ImageInit::kSystemd) {
    HUTCH_TRY(init_path, image::addSystemdInit(root));
    say(fmt::format("Boots {} as PID 1, with hutch-agent as its service", init_path));
  }

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
      image::MkfsExt4{.tree = tmp / "tree", .image = rootfs, .inodes = ext4.inodes}.render(), {},
      {.cancel = cancel}));
  fs::remove_all(tmp / "tree", ec);
  // Read-only, and readable by every box's uid (their QEMUs open it in their jails).
  fs::permissions(rootfs, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);

  json source = fetched.source;
  source["config_digest"] = resolved.config_digest;
  source["platform"] = "linux/amd64";
  source["layers"] = resolved.layers.size();
  source["bytes"] = usage.bytes;
  say(fmt::format("Image {} unpacked ({} in {} layers)", label, mib(usage.bytes),
                  resolved.layers.size()));
  json made{{"created", utcNow()},
            {"source", "image"},
            {"image", std::move(source)},
            {"defaults", defaultsJson(config)}};
  if (!init_path.empty()) made["init"] = init_path;
  return made;
}

}  // namespace hutch::box

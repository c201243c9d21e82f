// Templates as a service: list them, build them from recipes, freeze a stopped box's disk into a
// new one, and remove them (refused while a box uses them). Runs on the event loop; the slow
// parts (image builds, disk conversion) run on the worker pool.
#pragma once

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on
#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "image/layer_apply.h"
#include "image/layout.h"
#include "image/manifest.h"
#include "image/reference.h"
#include "image/registry_auth.h"
#include "image/skopeo_argv.h"
#include "storage/box_store.h"
#include "storage/image_cache.h"
#include "storage/templates.h"
#include "sys/run.h"

namespace hutch::box {

// Where templates from images come from (template_image.cc).
struct ImagePullConfig {
  std::filesystem::path oci_dir;    // <state>/oci: blobs/ (shared, by digest), layouts/, tmp/
  std::filesystem::path certs_dir;  // CAs of registries: <dir>/<host[:port]>/*.crt (certs.d)
  std::filesystem::path authfile;   // registry credentials (a Docker config.json, 0600)
  std::vector<std::string> insecure_registries;  // host[:port] reachable without verified TLS
  std::vector<std::string> allowed_registries;   // when not empty, the only ones pulled from
  std::string kernel_template = "base";          // whose kernel and initramfs such boxes boot
  std::filesystem::path skopeo = "skopeo";
  image::Limits limits;
  image::ApplyLimits apply_limits;
  // Each skopeo command of a pull or an import ends past this (skopeo --command-timeout: a
  // registry that hangs), and is killed soon after if it did not.
  std::chrono::seconds pull_timeout{3600};
  // An archive a client sends (createFromArchive): its size as sent, and as unpacked.
  uint64_t max_archive_bytes = uint64_t{16} << 30;
};

struct TemplateConfig {
  std::filesystem::path images_dir;   // <state>/images: templates hutch made from boxes
  std::filesystem::path recipes_dir;  // images/ of the source tree: one folder per recipe
  std::filesystem::path builder;      // scripts/build-image.sh
  std::filesystem::path agent;        // the hutch-agent binary to put into built images
  std::filesystem::path cache_dir;    // the image build cache
  ImagePullConfig image;
};

class TemplateService {
 public:
  TemplateService(boost::asio::thread_pool& pool, storage::BoxStore& boxes,
                  const storage::TemplateStore& templates, TemplateConfig config);

  // Every template with its manifest and the boxes using it.
  Result<std::vector<nlohmann::json>> list();
  // Builds (or finds in the cache) the image of recipe `name` and links the template to it.
  // `progress` gets the builder's output as it comes, on a worker thread.
  using Progress = std::function<void(std::string_view)>;
  boost::asio::awaitable<Result<nlohmann::json>> build(std::string name, Progress progress = {});
  // Freezes a stopped box's disk (flattened to a raw image) as template `name`. The new
  // template keeps its parent's kernel, image defaults and start command; `extra` (the builder's
  // defaults, start command and build record) is merged over them into its manifest.
  boost::asio::awaitable<Result<nlohmann::json>> createFromBox(
      std::string name, std::string box_key, nlohmann::json extra = nlohmann::json::object());
  // One template by name.
  Result<storage::Template> find(const std::string& name) const { return templates_.find(name); }
  // validateName, and kAlreadyExists when a template has that name.
  Result<> checkNewName(const std::string& name) const;
  // Pulls image `reference` (a registry's, by tag or digest) and makes it template `name`: its
  // filesystem with hutch-agent as PID 1 and the kernel template's kernel, its config as the
  // template's defaults (docs/templates.md). `progress` gets lines as it goes, on a worker
  // thread. Nothing is left when it fails.
  // `cancel`, once set (the client went away), stops the pull: the create fails kCancelled.
  // `credentials`, when given, are used for this one pull instead of the host's logins (E2B's
  // fromImageRegistry): written only into the pull's own scratch directory (0700, removed when
  // the pull ends) for skopeo's --authfile, never logged, never kept, never given to a box.
  // `init` kSystemd boots the image's systemd as PID 1 with hutch-agent its service
  // (image/systemd_init.h); kFailedPrecondition for an image without systemd.
  struct PullCredentials {
    std::string username;
    std::string password;
  };
  enum class ImageInit { kAgent, kSystemd };
  boost::asio::awaitable<Result<nlohmann::json>> createFromImage(
      std::string name, std::string reference, Progress progress = {}, sys::CancelFlag cancel = {},
      std::optional<PullCredentials> credentials = {}, ImageInit init = ImageInit::kAgent);
  // Template `name` of Docker's `scratch`: an empty image, so only what hutch adds (the agent,
  // the kernel's modules, the mount points); what a Dockerfile's `FROM scratch` starts from.
  boost::asio::awaitable<Result<nlohmann::json>> createScratch(std::string name,
                                                               Progress progress = {},
                                                               sys::CancelFlag cancel = {});
  // An image archive a client sent, kept in a directory of its own under <state>/oci/tmp that
  // goes when the last copy of this does.
  struct ReceivedArchive {
    std::shared_ptr<const std::filesystem::path> file;
    uint64_t bytes = 0;
  };
  // The next piece of a request body; an empty string at its end.
  using BodyReader = std::function<boost::asio::awaitable<Result<std::string>>()>;
  // Receives an archive for template `name` (`hutch template create NAME --from-archive`):
  // first checks that the template can be made (its name is free, the agent and the kernel
  // template are there) and that `length` (the body's announced size, if any) is within
  // max_archive_bytes, so that a refusal comes before the upload; then saves what `read` gives,
  // kResourceExhausted past max_archive_bytes.
  boost::asio::awaitable<Result<ReceivedArchive>> receiveArchive(std::string name,
                                                                 std::optional<uint64_t> length,
                                                                 BodyReader read);
  // Makes template `name` of the image `image` names in the archive (a docker save RepoTag, an
  // OCI ref.name, "@N"; empty: its only image), as createFromImage makes one from a registry's
  // (image/image_archive.h: what an archive may hold, and how it is checked before skopeo
  // copies it). Nothing is left when it fails.
  boost::asio::awaitable<Result<nlohmann::json>> createFromArchive(
      std::string name, ReceivedArchive archive, std::string image, Progress progress = {},
      sys::CancelFlag cancel = {}, ImageInit init = ImageInit::kAgent);
  // Credentials for registries hutchd pulls from (image/registry_auth.h): kept on the host.
  Result<std::vector<image::RegistryLogin>> registryLogins();
  Result<image::RegistryLogin> registryLogin(std::string_view registry, std::string_view username,
                                             std::string_view password);
  Result<std::string> registryLogout(std::string_view registry);
  // Refused with kFailedPrecondition while boxes use the template.
  Result<> remove(const std::string& name);
  // At start: removes the directories in images_dir that nothing uses (left by a hutchd that
  // died in a `template create --from`: a `.tmp` copy, or an image no template names yet).
  void removeLeftovers();
  // Removes the builds in the image cache that nothing uses: no template, box or snapshot of
  // this hutchd, no other hutchd that recorded a use, none within options.keep (their template
  // snapshots go with them). {"images": [{dir, bytes, kept, reason}], "freed_bytes", "dry_run"}
  // With no limit_bytes (a person asked), also the pulled images no template names and the
  // blobs only they used (image/store_prune.h): "pulled_images": [{digest, kept, reason}],
  // "blobs": {removed, kept, reason?}.
  // (a dry run removes nothing: freed_bytes is what it would free).
  boost::asio::awaitable<Result<nlohmann::json>> prune(storage::PruneOptions options);

 private:
  // Canonical build directory -> what uses it here ("template base", "box b1", ...).
  Result<std::map<std::string, std::string>> imagesInUse();
  Result<> dropTemplateSnapshots(const std::filesystem::path& image_dir);
  Result<nlohmann::json> describe(const storage::Template& t);
  Result<std::vector<std::string>> usersOf(const storage::Template& t);
  // Now, as manifests record it ("2026-12-06T22:12:17Z").
  static std::string utcNow();
  // template_image.cc: how to reach the registry of `ref`; the kernel's modules; the pull.
  image::RegistryAccess accessFor(const image::Reference& ref) const;
  Result<std::filesystem::path> kernelModules(const std::string& release) const;
  static Result<> linkKernel(const storage::Template& kernel, const std::filesystem::path& dir);
  // An image copied into an OCI layout (pullImage, importArchive), ready to be unpacked;
  // `source` is what the template's manifest says of it ("image": ref, digest, archive).
  struct FetchedImage {
    image::ResolvedImage resolved;
    nlohmann::json source;
  };
  using Say = std::function<void(const std::string&)>;
  using FetchImage = std::function<Result<FetchedImage>(const Say& say)>;
  // What every template from an image shares: the checks, the kernel, then on the worker pool
  // `fetch`, unpackImage and the template's directory written and renamed into place.
  boost::asio::awaitable<Result<nlohmann::json>> makeFromImage(std::string name, std::string what,
                                                               FetchImage fetch, Progress progress,
                                                               sys::CancelFlag cancel,
                                                               ImageInit init);
  // The kernel template boxes of images boot, and its modules; kFailedPrecondition without
  // them or without the agent.
  struct ImageKernel {
    storage::Template kernel;
    std::string release;
    std::filesystem::path modules;
  };
  Result<ImageKernel> imageKernel() const;
  Result<FetchedImage> pullImage(const image::Reference& ref, const Say& say,
                                 const sys::CancelFlag& cancel,
                                 const std::optional<PullCredentials>& credentials = {});
  Result<FetchedImage> importArchive(const ReceivedArchive& archive, const std::string& want,
                                     const Say& say, const sys::CancelFlag& cancel);
  Result<nlohmann::json> unpackImage(const FetchedImage& image, const std::filesystem::path& tmp,
                                     const ImageKernel& kernel, ImageInit init, const Say& say,
                                     const sys::CancelFlag& cancel);
  // The root disks made from pulled images, kept in <oci>/roots/<key> (a hard link of the
  // read-only rootfs.img and the manifest fields it was made with) by what makes them: the
  // image's manifest digest, the agent's bytes, the kernel release and the init. A second
  // template of the same image links it instead of unpacking again; store_prune.h removes one no
  // template links.
  Result<std::string> rootKey(const FetchedImage& image, const ImageKernel& kernel,
                              ImageInit init) const;
  std::optional<nlohmann::json> reuseRoot(const std::string& key, const FetchedImage& image,
                                          const std::filesystem::path& tmp) const;
  void keepRoot(const std::string& key, const std::filesystem::path& tmp,
                const nlohmann::json& made) const;

  // Counts template builds and image pulls under way (prune removes nothing meanwhile).
  struct Making {
    explicit Making(int& count) : count_(count) { ++count_; }
    ~Making() { --count_; }
    Making(const Making&) = delete;
    Making& operator=(const Making&) = delete;

   private:
    int& count_;
  };
  int making_ = 0;
  // The manifest digest of each pulled image a template was made from -> "template NAME".
  std::map<std::string, std::string> pulledImagesInUse();

  boost::asio::thread_pool& pool_;
  storage::BoxStore& boxes_;
  const storage::TemplateStore& templates_;
  TemplateConfig config_;
  storage::ImageCache cache_;
};

}  // namespace hutch::box

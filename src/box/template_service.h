// Templates as a service: list them, build them from recipes, freeze a stopped box's disk into a
// new one, and remove them (refused while a box uses them). Runs on the event loop; the slow
// parts (image builds, disk conversion) run on the worker pool.
#pragma once

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on
#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/result.h"
#include "image/layer_apply.h"
#include "image/manifest.h"
#include "image/reference.h"
#include "image/registry_auth.h"
#include "image/skopeo_argv.h"
#include "storage/box_store.h"
#include "storage/image_cache.h"
#include "storage/templates.h"

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
  // Freezes a stopped box's disk (flattened to a raw image) as template `name`.
  boost::asio::awaitable<Result<nlohmann::json>> createFromBox(std::string name,
                                                               std::string box_key);
  // Pulls image `reference` (a registry's, by tag or digest) and makes it template `name`: its
  // filesystem with hutch-agent as PID 1 and the kernel template's kernel, its config as the
  // template's defaults (docs/templates.md). `progress` gets lines as it goes, on a worker
  // thread. Nothing is left when it fails.
  boost::asio::awaitable<Result<nlohmann::json>> createFromImage(std::string name,
                                                                 std::string reference,
                                                                 Progress progress = {});
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
  // (a dry run removes nothing: freed_bytes is what it would free).
  boost::asio::awaitable<Result<nlohmann::json>> prune(storage::PruneOptions options);

 private:
  // Canonical build directory -> what uses it here ("template base", "box b1", ...).
  Result<std::map<std::string, std::string>> imagesInUse();
  Result<> dropTemplateSnapshots(const std::filesystem::path& image_dir);
  Result<nlohmann::json> describe(const storage::Template& t);
  Result<std::vector<std::string>> usersOf(const storage::Template& t);
  // validateName, and kAlreadyExists when a template has that name.
  Result<> checkNewName(const std::string& name) const;
  // Now, as manifests record it ("2026-12-06T22:12:17Z").
  static std::string utcNow();
  // template_image.cc: how to reach the registry of `ref`; the kernel's modules; the pull.
  image::RegistryAccess accessFor(const image::Reference& ref) const;
  Result<std::filesystem::path> kernelModules(const std::string& release) const;
  static Result<> linkKernel(const storage::Template& kernel, const std::filesystem::path& dir);
  Result<nlohmann::json> importImage(const image::Reference& ref, const std::filesystem::path& tmp,
                                     const std::filesystem::path& modules,
                                     const std::string& release,
                                     const std::function<void(const std::string&)>& say);

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

  boost::asio::thread_pool& pool_;
  storage::BoxStore& boxes_;
  const storage::TemplateStore& templates_;
  TemplateConfig config_;
  storage::ImageCache cache_;
};

}  // namespace hutch::box

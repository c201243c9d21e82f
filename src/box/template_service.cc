#include "box/template_service.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <fstream>

#include "base/fault.h"
#include "box/box.h"
#include "box/snapshot.h"
#include "event/offload.h"
#include "image/store_prune.h"
#include "jail/box_dir.h"
#include "sys/run.h"

namespace hutch::box {

std::string TemplateService::utcNow() {
  auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return buf;
}

namespace {

// Hard link when possible (same filesystem, no extra space), else copy.
Result<> linkOrCopy(const std::filesystem::path& from, const std::filesystem::path& to) {
  std::error_code ec;
  std::filesystem::create_hard_link(from, to, ec);
  if (ec) std::filesystem::copy_file(from, to, ec);
  if (ec) {
    return fail(Errc::kInternal,
                fmt::format("Cannot copy {} to {}: {}", from.string(), to.string(), ec.message()));
  }
  return ok();
}

}  // namespace

TemplateService::TemplateService(boost::asio::thread_pool& pool, storage::BoxStore& boxes,
                                 const storage::TemplateStore& templates, TemplateConfig config)
    : pool_(pool),
      boxes_(boxes),
      templates_(templates),
      config_(std::move(config)),
      cache_(config_.cache_dir, templates_.dir().parent_path()) {}

Result<> TemplateService::linkKernel(const storage::Template& kernel,
                                     const std::filesystem::path& dir) {
  HUTCH_TRY_VOID(linkOrCopy(kernel.kernel, dir / "vmlinux"));
  return linkOrCopy(kernel.initrd, dir / "initrd.img");
}

Result<> TemplateService::checkNewName(const std::string& name) const {
  HUTCH_TRY_VOID(validateName(name));
  if (templates_.find(name)) {
    return fail(Errc::kAlreadyExists,
                fmt::format("A template named '{}' already exists; remove it or choose another "
                            "name",
                            name));
  }
  return ok();
}

Result<std::vector<std::string>> TemplateService::usersOf(const storage::Template& t) {
  HUTCH_TRY(std::vector<Box> all, boxes_.list());
  std::vector<std::string> users;
  for (const Box& b : all) {
    // By name, and by build: a box pins the build it was made from even if the name moved.
    if (b.config.template_name == t.name || b.image_dir == t.dir.string()) users.push_back(b.name);
  }
  return users;
}

Result<nlohmann::json> TemplateService::describe(const storage::Template& t) {
  HUTCH_TRY(std::vector<std::string> users, usersOf(t));
  std::error_code ec;
  auto size = std::filesystem::file_size(t.rootfs, ec);
  std::string source = "recipe";
  if (!t.manifest.value("source_box", "").empty()) source = "box";
  if (t.manifest.contains("image")) source = "image";
  if (t.manifest.contains("build")) source = "build";
  nlohmann::json j{{"name", t.name},
                   {"dir", t.dir.string()},
                   {"image_key", t.image_key},
                   {"kernel_version", t.manifest.value("kernel_version", "")},
                   {"created", t.manifest.value("created", "")},
                   {"source", source},
                   {"source_box", t.manifest.value("source_box", "")},
                   {"disk_bytes", ec ? 0 : size},
                   {"used_by", users}};
  // A template from an image: which one (by digest), and the defaults its config gave.
  if (t.manifest.contains("image")) j["image"] = t.manifest["image"];
  if (t.manifest.contains("defaults")) j["defaults"] = t.manifest["defaults"];
  // PID 1 when it is not hutch-agent (--systemd: the image's systemd).
  if (t.manifest.contains("init")) j["init"] = t.manifest["init"];
  // A built template: its base and cache key; a start command and ready check.
  if (t.manifest.contains("build")) j["build"] = t.manifest["build"];
  if (t.manifest.contains("start")) j["start"] = t.manifest["start"];
  return j;
}

Result<std::vector<nlohmann::json>> TemplateService::list() {
  std::vector<nlohmann::json> out;
  for (const std::string& name : templates_.names()) {
    HUTCH_TRY(storage::Template t, templates_.find(name));
    HUTCH_TRY(nlohmann::json j, describe(t));
    out.push_back(std::move(j));
  }
  return out;
}

boost::asio::awaitable<Result<nlohmann::json>> TemplateService::build(std::string name,
                                                                      Progress progress) {
  Making making(making_);
  HUTCH_CO_TRY_VOID(validateName(name));
  std::filesystem::path recipe = config_.recipes_dir / name;
  if (!std::filesystem::exists(recipe / "packages")) {
    co_return fail(Errc::kNotFound,
                   fmt::format("No recipe '{}' in {}", name, config_.recipes_dir.string()));
  }
  if (!std::filesystem::exists(config_.agent)) {
    co_return fail(Errc::kFailedPrecondition,
                   fmt::format("The guest agent {} is missing; build hutch first or start hutchd "
                               "with --agent",
                               config_.agent.string()));
  }
  spdlog::info("template {}: building from {} (log: {})", name, recipe.string(),
               (config_.images_dir / ("build-" + name + ".log")).string());
  std::vector<std::string> argv{
      "bash",     config_.builder.string(), "--agent", config_.agent.string(),
      "--recipe", recipe.string(),          "--cache", config_.cache_dir.string()};
  std::filesystem::path log = config_.images_dir / ("build-" + name + ".log");
  // The builder writes to the log, not to a pipe of hutchd's: it outlives a hutchd killed
  // half-way and ends its build cleanly (its result lands in the cache, where the next build of
  // the recipe finds it, after waiting for it if need be).
  auto run_build = [argv, log, progress]() -> Result<std::string> {
    return sys::runLogged(argv, log, progress);
  };
  auto built = co_await event::offload(pool_, std::move(run_build));
  if (!built) {
    co_return fail(Errc::kInternal,
                   fmt::format("Building template {} failed; see {}", name, log.string()));
  }
  // The builder prints the image directory as its last line.
  std::string out = *built;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  std::filesystem::path image_dir = out.substr(out.rfind('\n') + 1);
  HUTCH_CO_TRY_VOID(templates_.link(name, image_dir));
  HUTCH_CO_TRY(storage::Template t, templates_.find(name));
  co_return describe(t);
}

boost::asio::awaitable<Result<nlohmann::json>> TemplateService::createFromBox(
    std::string name, std::string box_key, nlohmann::json extra) {
  HUTCH_CO_TRY_VOID(checkNewName(name));
  HUTCH_CO_TRY(Box box, boxes_.find(box_key));
  // A suspended box's disk is consistent too: QEMU flushed it when it saved the state.
  if (box.state != BoxState::kStopped && box.state != BoxState::kSuspended) {
    co_return fail(Errc::kFailedPrecondition,
                   fmt::format("Box {} is {}; stop it first so its disk is consistent", box.name,
                               stateName(box.state)));
  }
  std::filesystem::path from(box.image_dir);
  std::filesystem::path disk = templates_.dir().parent_path() / "boxes" / box.id / box.disk;
  std::string key = fmt::format(
      "{}-{}", box.id, std::chrono::system_clock::to_time_t(std::chrono::system_clock::now()));
  std::filesystem::path dir = config_.images_dir / (name + "-" + key);
  nlohmann::json manifest{{"name", name},
                          {"image_key", "box-" + key},
                          {"source_box", box.name},
                          {"source_box_id", box.id},
                          {"parent_image", from.string()},
                          {"created", utcNow()}};
  std::ifstream parent(from / "manifest.json");
  if (parent) {
    auto j = nlohmann::json::parse(parent, nullptr, false);
    if (j.is_object()) {
      // The boot (a kernel template's, for a box of an image) and what boxes of it take from
      // the parent's image: a frozen box keeps its image's config, as `docker commit` does.
      for (const char* k :
           {"kernel_version", "kernel_cmdline", "kernel_cmdline_template", "initramfs_key",
            "agent_sha256", "image", "defaults", "start", "init"}) {
        if (j.contains(k)) manifest[k] = j[k];
      }
    }
  }
  if (extra.is_object()) {
    for (const auto& [k, v] : extra.items()) manifest[k] = v;
  }
  // The box's QEMU wrote its disk: the disk must be a file, and stand only on hutch's layers and
  // its template's base, or the flattened template could hold any file root can read.
  std::error_code canonical_ec;
  std::filesystem::path state =
      std::filesystem::weakly_canonical(templates_.dir().parent_path(), canonical_ec);
  std::vector<std::string> backing = {jail::globLiteral(state / "layers") + "/*.qcow2",
                                      jail::globLiteral(state / "snapshots") + "/*/layer.qcow2",
                                      jail::globLiteral(from / "rootfs.img")};
  auto freeze = [from, disk, dir, manifest, backing]() -> Result<> {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(std::filesystem::symlink_status(disk, ec))) {
      return fail(Errc::kFailedPrecondition, disk.string() + " is not a regular file");
    }
    HUTCH_TRY(auto chain, jail::qcow2BackingChain(disk));
    HUTCH_TRY_VOID(jail::checkBackingFiles(chain, backing));
    std::filesystem::path tmp = dir.string() + ".tmp";
    std::filesystem::remove_all(tmp, ec);
    std::filesystem::create_directories(tmp, ec);
    if (ec) return fail(Errc::kInternal, "Cannot create " + tmp.string() + ": " + ec.message());
    // Flattened: the new template does not depend on the box or on its parent's base image.
    HUTCH_TRY_VOID(sys::runCapture({"qemu-img", "convert", "-f", "qcow2", "-O", "raw",
                                    disk.string(), (tmp / "rootfs.img").string()}));
    HUTCH_TRY_VOID(linkOrCopy(from / "vmlinux", tmp / "vmlinux"));
    HUTCH_TRY_VOID(linkOrCopy(from / "initrd.img", tmp / "initrd.img"));
    std::ofstream(tmp / "manifest.json") << manifest.dump(2) << "\n";
    // Read-only, and readable by every box's uid (their QEMUs open it in their jails).
    std::filesystem::permissions(tmp / "rootfs.img", std::filesystem::perms::owner_read |
                                                         std::filesystem::perms::group_read |
                                                         std::filesystem::perms::others_read);
    fault::point("template.image-copied");
    std::filesystem::rename(tmp, dir, ec);
    if (ec) return fail(Errc::kInternal, "Cannot move " + tmp.string() + ": " + ec.message());
    fault::point("template.image-written");
    return ok();
  };
  auto frozen = co_await event::offload(pool_, std::move(freeze));
  HUTCH_CO_TRY_VOID(frozen);
  HUTCH_CO_TRY_VOID(templates_.link(name, dir));
  spdlog::info("template {}: made from box {} in {}", name, box.name, dir.string());
  HUTCH_CO_TRY(storage::Template t, templates_.find(name));
  co_return describe(t);
}

void TemplateService::removeLeftovers() {
  // What a `template create --from` that died left: its copy under <dir>.tmp, or the finished
  // <dir> no template names (its link was not made). Only what createFromBox makes: a recipe
  // build (were the image cache pointed here) and the build logs stay.
  auto in_use = imagesInUse();
  if (!in_use) {
    spdlog::warn("Not looking for unused template images: {}", in_use.error().describe());
    return;
  }
  auto made_from_box = [](const std::filesystem::path& dir) {
    std::ifstream in(dir / "manifest.json");
    auto manifest = nlohmann::json::parse(in, nullptr, false);
    const std::string key = manifest.is_object() ? manifest.value("image_key", "") : "";
    return key.starts_with("box-") || key.starts_with("image-");
  };
  std::error_code ec;
  std::vector<std::filesystem::path> unused;
  for (const auto& entry : std::filesystem::directory_iterator(config_.images_dir, ec)) {
    if (!entry.is_directory(ec) || entry.is_symlink(ec)) continue;
    if (entry.path().extension() == ".tmp") {
      unused.push_back(entry.path());
      continue;
    }
    std::filesystem::path dir = std::filesystem::weakly_canonical(entry.path(), ec);
    if (!ec && !in_use->contains(dir.string()) && made_from_box(dir)) {
      unused.push_back(entry.path());
    }
  }
  for (const std::filesystem::path& dir : unused) {
    spdlog::info(
        "Removing {}: no template, box or snapshot uses it (a template create that did "
        "not finish)",
        dir.string());
    std::filesystem::remove_all(dir, ec);
    if (ec) spdlog::warn("Cannot remove {}: {}", dir.string(), ec.message());
  }
  // What pulls and archive imports that did not finish left in their scratch directories
  // (template_image.cc); none runs yet.
  std::filesystem::remove_all(config_.image.oci_dir / "tmp", ec);
}

Result<> TemplateService::remove(const std::string& name) {
  HUTCH_TRY(storage::Template t, templates_.find(name));
  HUTCH_TRY(std::vector<std::string> users, usersOf(t));
  if (!users.empty()) {
    return fail(Errc::kFailedPrecondition,
                fmt::format("Template {} is used by {} box(es): {}; remove them first", name,
                            users.size(), fmt::join(users, ", ")));
  }
  HUTCH_TRY_VOID(templates_.remove(name));
  // A template hutch made from a box lives in images_dir and goes with it; a recipe build stays
  // in the build cache, where a rebuild finds it.
  if (t.dir.parent_path() == config_.images_dir) {
    std::error_code ec;
    std::filesystem::remove_all(t.dir, ec);
    HUTCH_TRY_VOID(dropTemplateSnapshots(t.dir));
  }
  return ok();
}

Result<> TemplateService::dropTemplateSnapshots(const std::filesystem::path& image_dir) {
  // Template snapshots stand on the image: they go with it (their layers are collected once
  // nothing stands on them).
  HUTCH_TRY(std::vector<Snapshot> snapshots, boxes_.listSnapshots());
  const std::string prefix = image_dir.string() + "|";
  std::error_code ec;
  for (const Snapshot& snap : snapshots) {
    if (snap.kind != SnapshotKind::kTemplate || !snap.template_key.starts_with(prefix)) continue;
    HUTCH_TRY_VOID(boxes_.removeSnapshot(snap.id));
    std::filesystem::remove_all(snap.dir, ec);
    spdlog::info("{}: removed its template snapshot {}", image_dir.string(), snap.id);
  }
  return ok();
}

Result<std::map<std::string, std::string>> TemplateService::imagesInUse() {
  std::map<std::string, std::string> used;
  auto note = [&](const std::filesystem::path& dir, std::string what) {
    if (dir.empty()) return;
    std::error_code ec;
    std::filesystem::path canonical = std::filesystem::weakly_canonical(dir, ec);
    used.emplace(ec ? dir.string() : canonical.string(), std::move(what));
  };
  for (const std::string& name : templates_.names()) {
    if (auto t = templates_.find(name)) note(t->dir, "template " + name);
  }
  HUTCH_TRY(std::vector<Box> all, boxes_.list());
  for (const Box& b : all) note(b.image_dir, "box " + b.name);
  // Checkpoints, forks, saved boxes and suspended ones restore onto their build's disk.
  HUTCH_TRY(std::vector<Snapshot> snapshots, boxes_.listSnapshots());
  for (const Snapshot& snap : snapshots) {
    if (snap.kind == SnapshotKind::kTemplate) continue;
    if (auto manifest = loadManifest(snap.dir)) {
      note(manifest->image_dir, fmt::format("{} snapshot {}", snapshotKindName(snap.kind),
                                            snap.name.empty() ? snap.id : snap.name));
    }
  }
  return used;
}

std::map<std::string, std::string> TemplateService::pulledImagesInUse() {
  std::map<std::string, std::string> used;
  for (const std::string& name : templates_.names()) {
    auto t = templates_.find(name);
    if (!t) continue;
    auto image = t->manifest.find("image");
    if (image != t->manifest.end() && image->is_object() && image->contains("digest") &&
        (*image)["digest"].is_string()) {
      used.emplace((*image)["digest"].get<std::string>(), "template " + name);
    }
  }
  return used;
}

boost::asio::awaitable<Result<nlohmann::json>> TemplateService::prune(
    storage::PruneOptions options) {
  HUTCH_CO_TRY(auto in_use, imagesInUse());
  // A build the builder finished is in the cache before its template names it, and a pull's
  // blobs are in the store before its layout names them: while a template is being made,
  // nothing is removed (a later prune does it).
  const bool making = making_ > 0;
  struct Plan {
    std::vector<storage::PruneDecision> decisions;
    image::StorePrune store;
  };
  const image::StorePruneOptions store_options{.dry_run = options.dry_run || making,
                                               .keep = options.keep};
  auto plan = [this, in_use, options, making, store_options,
               pulled = pulledImagesInUse()]() -> Result<Plan> {
    HUTCH_TRY(auto images, cache_.scan(in_use));
    auto decisions =
        storage::planPrune(images, in_use, options, std::filesystem::file_time_type::clock::now());
    if (!options.dry_run) {
      for (storage::PruneDecision& d : decisions) {
        if (!d.remove) continue;
        if (making) {
          d.remove = false;
          d.reason = "a template is being made; prune again when it is done";
          continue;
        }
        if (auto removed = cache_.remove(d.dir); !removed) {
          d.remove = false;
          d.reason = removed.error().message();
        }
      }
    }
    // The pulled images' layouts, blobs and root disks: what no template names. Under a size
    // limit (hutchd's own prune), the store gets what the builds kept leave of it.
    image::StorePruneOptions store_limited = store_options;
    if (options.limit_bytes) {
      uint64_t kept = 0;
      for (const storage::PruneDecision& d : decisions) kept += d.remove ? 0 : d.bytes;
      store_limited.limit_bytes = *options.limit_bytes - std::min(kept, *options.limit_bytes);
    }
    HUTCH_TRY(image::StorePrune store, image::pruneStore(config_.image.oci_dir, pulled,
                                                         store_limited, config_.image.limits));
    return Plan{std::move(decisions), std::move(store)};
  };
  HUTCH_CO_TRY(Plan done, co_await event::offload(pool_, std::move(plan)));
  nlohmann::json images = nlohmann::json::array();
  uint64_t freed = 0;
  for (const storage::PruneDecision& d : done.decisions) {
    if (d.remove) {
      freed += d.bytes;
      if (!options.dry_run) {
        spdlog::info("image cache: removed {} ({} MiB, {})", d.dir.string(), d.bytes >> 20,
                     d.reason);
        HUTCH_CO_TRY_VOID(dropTemplateSnapshots(d.dir));
      }
    }
    images.push_back(
        {{"dir", d.dir.string()}, {"bytes", d.bytes}, {"kept", !d.remove}, {"reason", d.reason}});
  }
  nlohmann::json layouts = nlohmann::json::array();
  for (image::LayoutDecision& d : done.store.layouts) {
    if (making && d.remove) d.reason = "a template is being made; prune again when it is done";
    const bool removed = d.remove && !making;
    if (removed && !options.dry_run) spdlog::info("image store: removed the image {}", d.digest);
    layouts.push_back({{"digest", d.digest}, {"kept", !removed}, {"reason", d.reason}});
  }
  for (const std::string& problem : done.store.problems) spdlog::warn("image store: {}", problem);
  if (!making) freed += done.store.freed_bytes;
  nlohmann::json blobs{{"removed", making ? 0 : done.store.blobs_removed},
                       {"kept", done.store.blobs_kept + (making ? done.store.blobs_removed : 0)}};
  if (!done.store.blobs_kept_because.empty()) blobs["reason"] = done.store.blobs_kept_because;
  nlohmann::json roots{{"removed", making ? 0 : done.store.roots_removed},
                       {"kept", done.store.roots_kept + (making ? done.store.roots_removed : 0)}};
  if (!options.dry_run && !making && done.store.blobs_removed > 0) {
    spdlog::info("image store: removed {} blobs no image uses", done.store.blobs_removed);
  }
  co_return nlohmann::json{{"images", std::move(images)}, {"pulled_images", std::move(layouts)},
                           {"blobs", std::move(blobs)},   {"root_disks", std::move(roots)},
                           {"freed_bytes", freed},        {"dry_run", options.dry_run}};
}

}  // namespace hutch::box

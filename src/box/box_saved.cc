// Saved boxes (SnapshotKind::kSaved, E2B's snapshots): a running box captured with its memory,
// kept after the box is removed, and the boxes started from one.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "box/box_service.h"
#include "box/snapshot_helpers.h"

namespace hutch::box {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// What a box made from a saved one inherits from the box that was saved.
std::string savedSourceJson(const Box& box) {
  return json{{"name", box.name},
              {"template", box.config.template_name},
              {"cpus", box.config.cpus},
              {"memory_mib", box.config.memory_mib},
              {"disk_mib", box.config.disk_mib},
              {"accel", box.accel},
              {"image_dir", box.image_dir},
              {"network_policy", box.network_policy},
              {"env", box.env},
              {"metadata", box.metadata}}
      .dump();
}

}  // namespace

Result<Box> savedSource(const Snapshot& saved) {
  json j = json::parse(saved.source, nullptr, false);
  if (!j.is_object()) {
    return fail(Errc::kFailedPrecondition,
                fmt::format("Snapshot {} has a corrupt record of its box; remove it", saved.name));
  }
  try {
    Box box;
    box.id = saved.box_id;
    box.name = j.at("name").get<std::string>();
    box.config.template_name = j.at("template").get<std::string>();
    box.config.cpus = j.at("cpus").get<unsigned>();
    box.config.memory_mib = j.at("memory_mib").get<uint64_t>();
    box.config.disk_mib = j.at("disk_mib").get<uint64_t>();
    box.accel = j.at("accel").get<std::string>();
    box.image_dir = j.at("image_dir").get<std::string>();
    box.network_policy = j.at("network_policy").get<std::string>();
    box.env = j.at("env").get<BoxEnv>();
    box.metadata = j.at("metadata").get<BoxMetadata>();
    return box;
  } catch (const json::exception& e) {
    return fail(Errc::kFailedPrecondition,
                fmt::format("Snapshot {} has a corrupt record of its box ({}); remove it",
                            saved.name, e.what()));
  }
}

asio::awaitable<Result<Snapshot>> BoxService::save(const std::string& key, std::string name) {
  HUTCH_CO_TRY(std::string resuspend, co_await readyForCapture(key));
  auto saved = co_await saveBox(key, std::move(name));
  co_await afterCapture(key, resuspend);
  co_return saved;
}

asio::awaitable<Result<Snapshot>> BoxService::saveBox(const std::string& key, std::string name) {
  HUTCH_CO_TRY(auto found, runningBox(key, "a snapshot"));
  auto [box, runtime] = std::move(found);
  if (!box.secrets.empty()) {
    co_return fail(Errc::kFailedPrecondition,
                   fmt::format("Box {} uses host secrets; a snapshot would carry their "
                               "placeholders past the box. Use a checkpoint or a fork instead",
                               box.name));
  }
  HUTCH_CO_TRY_VOID(checkNotBusy(box, *runtime, "try again"));
  Snapshot snap;
  snap.id = randomId();
  snap.kind = SnapshotKind::kSaved;
  snap.box_id = box.id;
  snap.owner_id = box.owner.id;
  snap.name = name.empty() ? "snap-" + snap.id.substr(0, 8) : std::move(name);
  HUTCH_CO_TRY_VOID(validateName(snap.name));
  if (store_.findSaved(snap.owner_id, snap.name)) {
    co_return fail(
        Errc::kAlreadyExists,
        fmt::format("A snapshot named '{}' already exists; choose another name", snap.name));
  }
  snap.source = savedSourceJson(box);
  snap.dir = config_.snapshots_dir / snap.id;
  snap.created_at = unixNow();
  WriteClaim claim(*this, snap.dir);  // until the record is in the store
  HUTCH_CO_TRY_VOID(makeDirectories(snap.dir));
  std::optional<Busy> busy(std::in_place, *runtime);
  auto captured = co_await capture(box, *runtime, snap.dir);
  busy.reset();
  if (!captured) {
    removeQuietly(snap.dir);
    co_return fail(captured.error().withContext(fmt::format("Cannot snapshot {}", box.name)));
  }
  snap.layer = captured->layer;
  snap.size_bytes = allocatedBytes(snap.dir) + allocatedBytes(snap.layer);
  auto manifest = manifestFor(box, SnapshotKind::kSaved, *captured);
  Result<> kept = manifest ? ok() : fail(manifest.error());
  if (kept) kept = co_await writeManifestOffLoop(snap.dir, *manifest);
  if (kept) kept = store_.insertSnapshot(snap);
  if (!kept) {
    removeQuietly(snap.dir);
    collectGarbage();
    co_return fail(kept.error());
  }
  spdlog::info("box={} saved as snapshot {} ({}) in {} ms ({} MiB)", box.id, snap.name, snap.id,
               captured->stats.took.count(), snap.size_bytes >> 20);
  publish("box.saved", box,
          {{"snapshot", snap.name}, {"snapshot_id", snap.id}, {"size_bytes", snap.size_bytes}});
  co_return snap;
}

Result<std::vector<Snapshot>> BoxService::saved(const std::optional<std::string>& owner) {
  return store_.savedSnapshots(owner);
}

Result<Snapshot> BoxService::findSaved(const std::optional<std::string>& owner,
                                       const std::string& key) {
  return store_.findSaved(owner, key);
}

asio::awaitable<Result<Box>> BoxService::createFromSaved(const Snapshot& saved, BoxSpec spec) {
  if (saved.kind != SnapshotKind::kSaved) {
    co_return fail(Errc::kInvalidArgument, fmt::format("{} is not a saved box", saved.id));
  }
  if (!spec.name.empty()) HUTCH_CO_TRY_VOID(validateName(spec.name));
  HUTCH_CO_TRY_VOID(validateEnv(spec.env));
  HUTCH_CO_TRY(Box source, savedSource(saved));
  auto manifest = co_await readManifestOffLoop(saved.dir);
  if (!manifest) {
    co_return fail(Errc::kFailedPrecondition, fmt::format("Snapshot {} cannot be restored: {}",
                                                          saved.name, manifest.error().describe()));
  }
  if (auto why =
          incompatibility(*manifest, config_.env, source.config.cpus, source.config.memory_mib)) {
    co_return fail(
        Errc::kFailedPrecondition,
        fmt::format("Snapshot {} cannot be restored on this host: {}", saved.name, *why));
  }
  HUTCH_CO_TRY_VOID(quotas_.check(spec.owner,
                                  {.boxes = 1,
                                   .cpus = source.config.cpus,
                                   .memory_mib = source.config.memory_mib,
                                   .disk_mib = Quotas::diskMib(source.config, source.image_dir)},
                                  "create"));
  // The new box is the saved one's child: its processes, policy and environment, under the
  // caller's name, owner, labels and lifetime.
  source.owner = spec.owner;
  source.metadata = std::move(spec.metadata);
  for (auto& [k, v] : spec.env) source.env[k] = std::move(v);
  const std::string id = randomId();
  std::string name = spec.name.empty() ? "box-" + id.substr(0, 8) : std::move(spec.name);
  RestoreSource from{.state = saved.dir / "state",
                     .layer = saved.layer,
                     .disk_bytes = manifest->disk_bytes,
                     .label = fmt::format("snapshot {}", saved.name)};
  HUTCH_CO_TRY(Box box, co_await createFromCapture(source, id, std::move(name), from));
  if (spec.expires_at != 0) {
    HUTCH_CO_TRY(box, setLifetime(box.id, spec.expires_at, spec.on_expiry));
  }
  publish("box.created", box,
          {{"template", box.config.template_name},
           {"cpus", box.config.cpus},
           {"memory_mib", box.config.memory_mib},
           {"from", "snapshot"},
           {"snapshot", saved.name},
           {"boot", box.boot}});
  co_return box;
}

Result<> BoxService::removeSaved(const Snapshot& saved) {
  if (saved.kind != SnapshotKind::kSaved) {
    return fail(Errc::kInvalidArgument, fmt::format("{} is not a saved box", saved.id));
  }
  HUTCH_TRY_VOID(store_.removeSnapshot(saved.id));
  // Its disk layer stays while boxes made from it stand on it (collectGarbage).
  removeQuietly(saved.dir);
  collectGarbage();
  spdlog::info("snapshot {} ({}) removed", saved.name, saved.id);
  return ok();
}

}  // namespace hutch::box

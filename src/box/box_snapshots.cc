// BoxService's snapshot operations: fork, checkpoints and rollback, space accounting and garbage
// collection (template snapshots are in box_template_snapshot.cc, the warm pool in box_pool.cc).
// See docs/snapshots.md for the design and its measurements.
#include <fmt/format.h>
#include <openssl/sha.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <set>
#include <tuple>

#include "base/fault.h"
#include "box/box_service.h"
#include "box/network_service.h"
#include "box/snapshot_helpers.h"
#include "event/offload.h"
#include "guest/identity.h"
#include "storage/overlay.h"
#include "sys/files.h"

namespace hutch::box {

namespace fs = std::filesystem;

void freeze(const fs::path& path) {
  if (auto frozen = sys::freezeFile(path); !frozen) spdlog::warn("{}", frozen.error().describe());
}

uint64_t allocatedBytes(const fs::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return 0;
  uint64_t total = static_cast<uint64_t>(st.st_blocks) * 512;
  if (!S_ISDIR(st.st_mode)) return total;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (::lstat(it->path().c_str(), &st) == 0) total += static_cast<uint64_t>(st.st_blocks) * 512;
  }
  return total;
}

Result<> makeDirectories(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return fail(Errc::kInternal, fmt::format("Cannot create {}: {}", dir.string(), ec.message()));
  return ok();
}

void removeQuietly(const fs::path& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) spdlog::warn("Cannot delete {}: {}", path.string(), ec.message());
}

std::string machineIdFor(const std::string& box_id) {
  std::array<unsigned char, SHA256_DIGEST_LENGTH> digest{};
  std::string input = "hutch-machine-id:" + box_id;
  ::SHA256(reinterpret_cast<const unsigned char*>(input.data()), input.size(), digest.data());
  std::string hex;
  for (size_t i = 0; i < 16; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

asio::awaitable<Result<>> BoxService::applyIdentity(const Box& box, Runtime& runtime,
                                                    bool grow_root) {
  // A restored guest wakes up as the snapshot: its hostname, machine id, clock and RNG state.
  guest::Identity identity = guest::makeIdentity(box.name);
  identity.machine_id = machineIdFor(box.id);  // stable across rollbacks of one box
  identity.grow_root = grow_root;
  // The last step of a boot: the guest has as long as its boot has (on a host saturated by many
  // running TCG boxes, 10 s was not enough for the 98th of them: bench/density_bench.py).
  auto applied = co_await runtime.agent->applyIdentity(
      identity, std::chrono::duration_cast<std::chrono::milliseconds>(config_.boot_timeout));
  if (!applied) co_return fail(applied.error().withContext("Cannot give the box its identity"));
  co_return ok();
}

// ---- template snapshots ----

Result<std::pair<Box, std::shared_ptr<BoxService::Runtime>>> BoxService::runningBox(
    const std::string& key, std::string_view what) {
  HUTCH_TRY(Box box, store_.find(key));
  auto it = runtimes_.find(box.id);
  if (box.state != BoxState::kRunning || it == runtimes_.end() || !it->second->vm) {
    return fail(Errc::kFailedPrecondition, fmt::format("Box {} is {}; {} needs a running box",
                                                       box.name, stateName(box.state), what));
  }
  if (!box.shares.empty()) {
    return fail(Errc::kFailedPrecondition,
                fmt::format("Box {} has shared folders (hutch run -v), whose device QEMU cannot "
                            "save: {} needs a box without them",
                            box.name, what));
  }
  HUTCH_TRY_VOID(checkNotBusy(box, *it->second, "try again"));
  return std::make_pair(std::move(box), it->second);
}

namespace {
// How long a capture waits for the guest's `sync`: seconds even for a busy TCG guest with
// hundreds of MiB dirty; a guest that takes longer is stuck (or hostile), not slow.
constexpr auto kGuestSyncLimit = std::chrono::seconds(30);
}  // namespace

// The work is named before the co_await: GCC 12 destroys a temporary in a co_await expression
// twice.
asio::awaitable<Result<SnapshotManifest>> BoxService::readManifestOffLoop(const fs::path& dir) {
  auto work = [dir] { return readManifest(dir); };
  auto read = co_await event::offload(pool_, std::move(work));
  co_return read;
}

asio::awaitable<Result<>> BoxService::writeManifestOffLoop(const fs::path& dir,
                                                           const SnapshotManifest& manifest) {
  auto work = [dir, manifest] { return writeManifest(dir, manifest); };
  auto written = co_await event::offload(pool_, std::move(work));
  co_return written;
}

asio::awaitable<void> BoxService::flushGuest(const std::shared_ptr<guest::AgentClient>& agent,
                                             std::string_view box_name) {
  if (!agent) co_return;
  proto::ExecRequest request;
  request.argv = {"sync"};
  auto session = co_await agent->exec(std::move(request));
  if (!session) {
    spdlog::warn("{}: sync before the capture did not start ({}); capturing without it", box_name,
                 session.error().describe());
    co_return;
  }
  auto limit = std::make_shared<asio::steady_timer>(loop_, kGuestSyncLimit);
  limit->async_wait([weak = std::weak_ptr(*session),
                     name = std::string(box_name)](const boost::system::error_code& ec) {
    auto live = weak.lock();
    if (ec || !live || live->finished()) return;
    spdlog::warn("{}: sync before the capture still runs after {} s; capturing without it", name,
                 kGuestSyncLimit.count());
    live->abandon(Error(Errc::kTimeout, "sync did not finish in time"));
  });
  for (;;) {
    auto event = co_await (*session)->next();
    if (!event || event->kind == guest::ExecEvent::Kind::kExit) break;
  }
  limit->cancel();
}

asio::awaitable<Result<BoxService::Capture>> BoxService::capture(Box& box, Runtime& runtime,
                                                                 const fs::path& dir) {
  HUTCH_CO_TRY(Capture cap, co_await freezeDisk(box, runtime, dir));
  HUTCH_CO_TRY_VOID(co_await saveAndResume(box, runtime, cap));
  co_return cap;
}

asio::awaitable<Result<>> BoxService::saveAndResume(const Box& box, Runtime& runtime,
                                                    Capture& cap) {
  auto saved = co_await runtime.vm->saveState(cap.state);
  auto resumed = co_await runtime.vm->resume();
  if (!resumed) spdlog::error("box={} cannot resume: {}", box.id, resumed.error().describe());
  if (!saved) co_return fail(saved.error());
  cap.stats = *saved;
  co_return ok();
}

asio::awaitable<Result<BoxService::Capture>> BoxService::freezeDisk(Box& box, Runtime& runtime,
                                                                    const fs::path& dir) {
  // Pause; freeze the disk: its file gets a second name in layers/ (a hard link) and the VM's
  // writes move to a new file on top of it. The VM stays paused for saveAndResume() (device
  // state and RAM), and the frozen layer can be opened by other VMs from now on.
  //
  // The frozen file keeps its name in the box directory while this QEMU runs: QEMU reopens
  // block nodes by file name (read-only after the switch, again when a migration's source is
  // resumed), so that name must keep pointing at the same inode. boot() prunes it later.
  // A journal lets a restarted hutchd finish or undo a half-done switch
  // (recoverInterruptedCapture).
  fs::path box_dir = boxDir(box.id);
  fs::path old_top = box_dir / box.disk;
  fs::path journal = box_dir / "capture.json";
  std::string layer_id = randomId();
  Capture cap;
  cap.state = dir / "state";
  cap.layer = config_.layers_dir / (layer_id + ".qcow2");
  std::string new_name = "disk-" + layer_id + ".qcow2";
  fs::path new_top = box_dir / new_name;
  uint64_t disk_bytes = 0;
  {
    auto chain = backingChain(old_top);
    std::error_code ec;
    if (chain) disk_bytes = fs::file_size(chain->back(), ec);
    // The raw base's size is the virtual size, unless the box was made with --disk.
    if (box.config.disk_mib != 0) disk_bytes = box.config.disk_mib << 20;
  }
  cap.disk_bytes = disk_bytes;
  std::error_code ec;
  fs::create_directories(config_.layers_dir, ec);

  co_await flushGuest(runtime.agent, box.name);
  HUTCH_CO_TRY_VOID(co_await runtime.vm->pause());
  auto resume = [&]() -> asio::awaitable<void> {
    auto resumed = co_await runtime.vm->resume();
    if (!resumed) spdlog::error("box={} cannot resume: {}", box.id, resumed.error().describe());
  };
  auto undo = [&](Error error) -> asio::awaitable<Result<Capture>> {
    fs::remove(new_top, ec);
    fs::remove(cap.layer, ec);
    fs::remove(journal, ec);
    co_await resume();
    co_return fail(std::move(error));
  };
  // Not followed: the box's uid owns its directory and could have put a symlink there.
  if (auto linked = sys::linkFile(old_top, cap.layer); !linked) {
    Error error = linked.error();
    co_return co_await undo(std::move(error));
  }
  nlohmann::json record{{"old", box.disk}, {"new", new_name}, {"layer", cap.layer.string()}};
  auto journaled = sys::writeFileAtomic(journal, record.dump() + "\n");
  if (!journaled) {
    Error error = journaled.error();
    co_return co_await undo(std::move(error));
  }
  fs::path layer = cap.layer;
  // Made in the capture's own (root's) directory and renamed into place: qemu-img would follow
  // a symlink the box's uid planted at the new name (which the journal above tells it).
  fs::path staged = dir / new_name;
  auto make_top = [layer, staged, new_top, disk_bytes]() -> Result<> {
    HUTCH_TRY_VOID(storage::createLayerOverlay(layer, staged, disk_bytes));
    std::error_code ec;
    fs::rename(staged, new_top, ec);
    if (ec) {
      fs::remove(staged, ec);
      return fail(Errc::kInternal,
                  fmt::format("Cannot move {} into place: {}", staged.string(), ec.message()));
    }
    return ok();
  };
  Result<> switched = co_await event::offload(pool_, std::move(make_top));
  if (switched) switched = co_await runtime.vm->switchDisk(new_top);
  if (!switched) {
    Error error = switched.error().withContext("Cannot freeze the box's disk");
    co_return co_await undo(std::move(error));
  }
  box.disk = new_name;
  auto stored = store_.update(box);
  freeze(cap.layer);
  fault::point("capture.disk-frozen", runtime.vm->pid());
  if (!stored) {
    // The journal stays: a restarted hutchd reads it and records the new top.
    co_await resume();
    co_return fail(stored.error());
  }
  fs::remove(journal, ec);
  co_return cap;
}

// Deletes the box directory's disk files other than `keep`: names of frozen layers that a
// QEMU that is gone held open (their layers/ names stay).
void BoxService::pruneDiskFiles(const Box& box, const std::string& keep) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(boxDir(box.id), ec)) {
    std::string name = entry.path().filename().string();
    if (name != keep && name.starts_with("disk") && name.ends_with(".qcow2")) {
      fs::remove(entry.path(), ec);
    }
  }
}

Result<SnapshotManifest> BoxService::manifestFor(const Box& box, SnapshotKind kind,
                                                 const Capture& capture) {
  SnapshotManifest manifest;
  manifest.kind = kind;
  manifest.env = config_.env;
  manifest.ram = "stream";
  manifest.cpus = box.config.cpus;
  manifest.memory_mib = box.config.memory_mib;
  manifest.image_dir = box.image_dir;
  manifest.layer = capture.layer.string();
  manifest.disk_bytes = capture.disk_bytes;
  manifest.created_at = unixNow();
  return manifest;
}

asio::awaitable<Result<Box>> BoxService::createFromCapture(const Box& parent, std::string id,
                                                           std::string name,
                                                           const RestoreSource& source) {
  Box child;
  child.id = std::move(id);
  child.name = name.empty() ? fmt::format("{}-fork-{}", parent.name, child.id.substr(0, 4)) : name;
  child.config = parent.config;
  child.state = BoxState::kCreating;
  child.accel = parent.accel;
  child.image_dir = parent.image_dir;
  // Its processes hold the parent's environment: the same policy, secrets and placeholders,
  // and the parent's CA is in the trust store on its disk.
  child.network_policy = parent.network_policy;
  child.secrets = parent.secrets;
  child.owner = parent.owner;
  child.env = parent.env;
  child.metadata = parent.metadata;
  child.boot = fmt::format("restored from {}", source.label);
  child.created_at = child.updated_at = unixNow();
  HUTCH_CO_TRY_VOID(store_.insert(child));
  if (network_ && !child.secrets.empty()) {
    if (auto ca = network_->inheritCa(parent.id, child.id); !ca) {
      (void)setState(child, BoxState::kFailed, ca.error().describe());
      co_return fail(ca.error());
    }
  }
  std::error_code ec;
  fs::create_directories(boxDir(child.id), ec);
  if (ec) {
    (void)setState(child, BoxState::kFailed, "cannot create its directory: " + ec.message());
    co_return fail(Errc::kInternal, "Cannot create the box directory: " + ec.message());
  }
  spdlog::info("box={} name={} {}", child.id, child.name, child.boot);
  co_return co_await bootBox(child, &source);
}

asio::awaitable<Result<std::string>> BoxService::readyForCapture(const std::string& key) {
  HUTCH_CO_TRY(Box box, store_.find(key));
  if (box.state == BoxState::kPaused) HUTCH_CO_TRY_VOID(co_await wake(box.id));
  if (box.state != BoxState::kSuspended) co_return std::string();
  // A suspended box is resumed for the capture and suspended again after it, as it was.
  std::string by = suspendedBy(box.id);
  HUTCH_CO_TRY_VOID(co_await start(box.id));
  co_return by.empty() ? std::string("request") : by;
}

asio::awaitable<void> BoxService::afterCapture(const std::string& key, const std::string& by) {
  if (by.empty()) co_return;
  auto suspended = co_await suspend(key, by);
  if (!suspended) {
    spdlog::warn("box={} stays running: it cannot be suspended again after the capture: {}", key,
                 suspended.error().describe());
  }
}

asio::awaitable<Result<std::vector<Box>>> BoxService::fork(const std::string& key, ForkSpec spec) {
  auto parent = store_.find(key);
  const observe::Subject subject = parent ? observe::subjectOf(*parent) : observe::Subject{};
  HUTCH_CO_TRY(std::string resuspend, co_await readyForCapture(key));
  auto done = [&](const std::vector<Box>& children, int64_t ms) {
    nlohmann::json ids = nlohmann::json::array();
    for (const Box& child : children) {
      ids.push_back(child.id);
      publish("box.created", child,
              {{"template", child.config.template_name},
               {"cpus", child.config.cpus},
               {"memory_mib", child.config.memory_mib},
               {"from", "fork"},
               {"parent", parent ? parent->id : ""},
               {"boot", child.boot}});
    }
    if (parent) publish("box.forked", *parent, {{"children", ids}, {"duration_ms", ms}});
  };
  auto body = forkBox(key, std::move(spec));
  auto children = co_await reported("fork", subject, std::move(body), done);
  co_await afterCapture(key, resuspend);
  co_return children;
}

asio::awaitable<Result<Snapshot>> BoxService::checkpoint(const std::string& key, std::string name) {
  const observe::Subject subject = subjectOf(key);
  HUTCH_CO_TRY(std::string resuspend, co_await readyForCapture(key));
  auto done = [&](const Snapshot& taken, int64_t ms) {
    if (auto box = store_.find(key)) {
      publish("box.checkpointed", *box,
              {{"checkpoint", taken.name},
               {"snapshot_id", taken.id},
               {"size_bytes", taken.size_bytes},
               {"duration_ms", ms}});
    }
  };
  auto body = checkpointBox(key, std::move(name));
  auto taken = co_await reported("checkpoint", subject, std::move(body), done);
  co_await afterCapture(key, resuspend);
  co_return taken;
}

asio::awaitable<Result<Box>> BoxService::rollback(const std::string& key, const std::string& name) {
  auto done = [&](const Box& restored, int64_t ms) {
    publish("box.rolled_back", restored, {{"checkpoint", name}, {"duration_ms", ms}});
  };
  const observe::Subject subject = subjectOf(key);
  auto body = rollbackBox(key, name);
  co_return co_await reported("rollback", subject, std::move(body), done);
}

asio::awaitable<Result<std::vector<Box>>> BoxService::forkBox(const std::string& key,
                                                              ForkSpec spec) {
  if (spec.count < 1 || spec.count > 64) {
    co_return fail(Errc::kInvalidArgument,
                   fmt::format("A fork makes 1 to 64 boxes, not {}", spec.count));
  }
  if (!spec.names.empty() && spec.names.size() != spec.count) {
    co_return fail(Errc::kInvalidArgument,
                   fmt::format("{} names for {} boxes: give one name per box, or none",
                               spec.names.size(), spec.count));
  }
  for (const std::string& name : spec.names) {
    HUTCH_CO_TRY_VOID(validateName(name));
    HUTCH_CO_TRY(bool taken, store_.nameTaken(name));
    if (taken) {
      co_return fail(Errc::kAlreadyExists,
                     fmt::format("A box named '{}' already exists; choose another name", name));
    }
  }
  HUTCH_CO_TRY(auto found, runningBox(key, "fork"));
  auto [parent, runtime] = std::move(found);
  // The children count against the parent's owner from now until they are recorded.
  const Demand demand{.boxes = spec.count,
                      .cpus = uint64_t{spec.count} * parent.config.cpus,
                      .memory_mib = spec.count * parent.config.memory_mib,
                      .disk_mib = spec.count * Quotas::diskMib(parent.config, parent.image_dir)};
  HUTCH_CO_TRY_VOID(quotas_.check(parent.owner, demand, "fork"));
  Quotas::Reservation reserved(quotas_, parent.owner.id, demand);
  // Busy until the children run: no other capture of the parent, no garbage collection while
  // the children's disks are being laid on the new layer.
  std::optional<Busy> busy(std::in_place, *runtime);
  Snapshot snap;
  snap.id = randomId();
  snap.kind = SnapshotKind::kFork;
  snap.box_id = parent.id;
  snap.dir = config_.snapshots_dir / snap.id;
  snap.created_at = unixNow();
  // Recorded only while the children start; removed after.
  std::optional<WriteClaim> claim(std::in_place, *this, snap.dir);
  std::error_code ec;
  fs::create_directories(snap.dir, ec);
  auto frozen = co_await freezeDisk(parent, *runtime, snap.dir);
  if (!frozen) {
    removeQuietly(snap.dir);
    co_return fail(frozen.error().withContext(fmt::format("Cannot fork {}", parent.name)));
  }
  // The children's VMs start now, on the frozen layer, while the parent's RAM is saved; each
  // loads the state once it is written (boot() waits on `pending`).
  auto pending = std::make_shared<PendingState>(loop_);
  RestoreSource source{.state = frozen->state,
                       .layer = frozen->layer,
                       .disk_bytes = frozen->disk_bytes,
                       .label = fmt::format("a fork of {}", parent.name),
                       .pending = pending};
  auto outcome = std::make_shared<ForkOutcome>(loop_, spec.count);
  std::vector<std::string> ids;
  for (unsigned i = 0; i < spec.count; ++i) {
    ids.push_back(randomId());
    std::string name = spec.names.empty() ? "" : spec.names[i];
    asio::co_spawn(loop_, forkChild(parent, ids.back(), std::move(name), source, outcome, i),
                   asio::detached);
  }
  Capture captured = *frozen;
  auto saved = co_await saveAndResume(parent, *runtime, captured);
  if (saved) {
    snap.layer = captured.layer;
    snap.size_bytes = captured.stats.bytes;
    auto manifest = manifestFor(parent, SnapshotKind::kFork, captured);
    if (manifest) {
      saved = co_await writeManifestOffLoop(snap.dir, *manifest);
    } else {
      saved = fail(manifest.error());
    }
  }
  if (saved) saved = store_.insertSnapshot(snap);
  pending->finish(saved);
  if (saved) {
    spdlog::info("box={} captured for a fork in {} ms ({} MiB of state)", parent.id,
                 captured.stats.took.count(), captured.stats.bytes >> 20);
  }
  while (outcome->running > 0) co_await outcome->changed.wait();

  std::vector<Box> children;
  std::optional<Error> first_error;
  for (auto& child : outcome->children) {
    if (child && *child) {
      children.push_back(**child);
    } else if (!first_error) {
      first_error = child ? child->error() : Error(Errc::kInternal, "A fork's child never ran");
    }
  }
  Result<std::vector<Box>> result = std::move(children);
  if (!saved || first_error) {
    // All or nothing: without the state nothing could be restored; with a child that failed,
    // the others go too, so the caller never has to find out which of N were made.
    for (const std::string& id : ids) {
      if (store_.find(id)) (void)co_await remove(id, true);
    }
    result = !saved ? fail(saved.error().withContext(fmt::format("Cannot fork {}", parent.name)))
                    : fail(first_error->withContext(
                          fmt::format("Cannot fork {}: a child failed, so none of the {} was kept",
                                      parent.name, spec.count)));
  }
  // The children hold their RAM; their disks stand on the layer, which stays while they do.
  (void)store_.removeSnapshot(snap.id);
  removeQuietly(snap.dir);
  busy.reset();
  claim.reset();
  collectGarbage();
  co_return result;
}

asio::awaitable<void> BoxService::forkChild(Box parent, std::string id, std::string name,
                                            RestoreSource source,
                                            std::shared_ptr<ForkOutcome> outcome, unsigned index) {
  // Whatever happens, the fork waiting for its children hears of this one (co_spawn with
  // `detached` would swallow an exception and leave the fork, and its busy parent, waiting).
  Result<Box> child = fail(Errc::kInternal, "A fork's child never ran");
  try {
    child = co_await createFromCapture(parent, std::move(id), std::move(name), source);
  } catch (const std::exception& e) {
    child = fail(Errc::kInternal, std::string("A fork's child failed: ") + e.what());
  }
  outcome->children[index] = std::move(child);
  --outcome->running;
  outcome->changed.notify();
}

asio::awaitable<Result<Snapshot>> BoxService::checkpointBox(const std::string& key,
                                                            std::string name) {
  HUTCH_CO_TRY(auto found, runningBox(key, "a checkpoint"));
  auto [box, runtime] = std::move(found);
  Snapshot snap;
  snap.id = randomId();
  snap.kind = SnapshotKind::kCheckpoint;
  snap.box_id = box.id;
  snap.name = name.empty() ? "cp-" + snap.id.substr(0, 6) : name;
  HUTCH_CO_TRY_VOID(validateName(snap.name));
  if (store_.findCheckpoint(box.id, snap.name)) {
    co_return fail(Errc::kAlreadyExists,
                   fmt::format("Box {} already has a checkpoint named '{}'; choose another name "
                               "or remove that one",
                               box.name, snap.name));
  }
  snap.dir = config_.snapshots_dir / snap.id;
  snap.created_at = unixNow();
  WriteClaim claim(*this, snap.dir);  // until the record is in the store
  HUTCH_CO_TRY_VOID(makeDirectories(snap.dir));
  std::optional<Busy> busy(std::in_place, *runtime);
  auto captured = co_await capture(box, *runtime, snap.dir);
  busy.reset();
  if (!captured) {
    removeQuietly(snap.dir);
    co_return fail(captured.error().withContext(fmt::format("Cannot checkpoint {}", box.name)));
  }
  snap.layer = captured->layer;
  snap.size_bytes = allocatedBytes(snap.dir) + allocatedBytes(snap.layer);
  auto manifest = manifestFor(box, SnapshotKind::kCheckpoint, *captured);
  Result<> kept = manifest ? ok() : fail(manifest.error());
  if (kept) kept = co_await writeManifestOffLoop(snap.dir, *manifest);
  if (kept) {
    fault::point("checkpoint.saved", runtime->vm ? runtime->vm->pid() : 0);
    kept = store_.insertSnapshot(snap);
  }
  if (!kept) {
    removeQuietly(snap.dir);
    co_return fail(kept.error());
  }
  spdlog::info("box={} checkpoint {} in {} ms ({} MiB)", box.id, snap.name,
               captured->stats.took.count(), snap.size_bytes >> 20);
  co_return snap;
}

Result<std::vector<Snapshot>> BoxService::checkpoints(const std::string& key) {
  HUTCH_TRY(Box box, store_.find(key));
  return store_.checkpoints(box.id);
}

asio::awaitable<Result<>> BoxService::removeCheckpoint(const std::string& key,
                                                       const std::string& name) {
  HUTCH_CO_TRY(Box box, store_.find(key));
  HUTCH_CO_TRY(Snapshot snap, store_.findCheckpoint(box.id, name));
  // Its disk layer stays while a box or a later checkpoint stands on it (collectGarbage).
  HUTCH_CO_TRY_VOID(store_.removeSnapshot(snap.id));
  removeQuietly(snap.dir);
  collectGarbage();
  spdlog::info("box={} checkpoint {} removed", box.id, snap.name);
  co_return ok();
}

asio::awaitable<Result<Box>> BoxService::rollbackBox(const std::string& key,
                                                     const std::string& name) {
  HUTCH_CO_TRY(Box box, store_.find(key));
  HUTCH_CO_TRY(Snapshot snap, store_.findCheckpoint(box.id, name));
  auto manifest = co_await readManifestOffLoop(snap.dir);
  if (!manifest) {
    co_return fail(Errc::kFailedPrecondition, fmt::format("Checkpoint {} cannot be restored: {}",
                                                          snap.name, manifest.error().describe()));
  }
  if (auto why = incompatibility(*manifest, config_.env, box.config.cpus, box.config.memory_mib)) {
    co_return fail(
        Errc::kFailedPrecondition,
        fmt::format("Checkpoint {} cannot be restored on this host: {}", snap.name, *why));
  }
  if (box.state == BoxState::kCreating || box.state == BoxState::kStopping) {
    co_return fail(Errc::kFailedPrecondition,
                   fmt::format("Box {} is {}; wait until it is running or stopped", box.name,
                               stateName(box.state)));
  }
  if (box.state != BoxState::kRunning) {
    HUTCH_CO_TRY_VOID(quotas_.check(
        box.owner, {.cpus = box.config.cpus, .memory_mib = box.config.memory_mib}, "rollback"));
  }
  if (box.state == BoxState::kSuspended) HUTCH_CO_TRY_VOID(dropSuspend(box.id));
  if (auto it = runtimes_.find(box.id); it != runtimes_.end()) {
    std::shared_ptr<Runtime> runtime = it->second;
    HUTCH_CO_TRY_VOID(checkNotBusy(box, *runtime, "try again"));
    runtime->stopping = true;  // its watcher must not call this exit a failure
    if (runtime->agent) runtime->agent->close();
    if (runtime->vm && !runtime->exited) HUTCH_CO_TRY_VOID(co_await runtime->vm->kill());
    runtimes_.erase(it);
    HUTCH_CO_TRY_VOID(setState(box, BoxState::kStopping));
    HUTCH_CO_TRY_VOID(setState(box, BoxState::kStopped));
  }
  HUTCH_CO_TRY_VOID(setState(box, BoxState::kCreating));
  RestoreSource source{.state = snap.dir / "state",
                       .layer = snap.layer,
                       .disk_bytes = manifest->disk_bytes,
                       .label = fmt::format("checkpoint {}", snap.name)};
  box.boot = fmt::format("rolled back to {}", source.label);
  spdlog::info("box={} rolling back to checkpoint {}", box.id, snap.name);
  auto restored = co_await bootBox(box, &source);
  collectGarbage();
  co_return restored;
}

// ---- space ----

void BoxService::collectGarbage() {
  // A template snapshot being made, or any snapshot directory claimed while it is written: their
  // files have no record yet. Swept by a later collection.
  if (!flights_.empty() || !writing_.empty()) return;
  for (const auto& [id, runtime] : runtimes_) {
    if (runtime->busy) return;  // a capture is under way
  }
  auto snapshots = store_.listSnapshots();
  if (!snapshots) {
    spdlog::warn("Garbage collection skipped: {}", snapshots.error().describe());
    return;
  }
  std::set<fs::path> live_layers;
  std::set<std::string> live_snapshots;
  auto keepChain = [&](const fs::path& top) {
    auto chain = backingChain(top);
    if (!chain) {
      spdlog::warn("{}", chain.error().describe());
      return;
    }
    for (const fs::path& layer : *chain) live_layers.insert(layer.lexically_normal());
  };
  for (const Snapshot& snap : *snapshots) {
    live_snapshots.insert(snap.id);
    // A suspend record has no layer of its own: it holds the box's disk, kept below.
    if (!snap.layer.empty()) keepChain(snap.layer);
  }
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(config_.boxes_dir, ec)) {
    std::error_code inner;
    for (const auto& file : fs::directory_iterator(entry.path(), inner)) {
      std::string name = file.path().filename().string();
      if (name.starts_with("disk") && name.ends_with(".qcow2")) keepChain(file.path());
    }
  }
  for (const auto& entry : fs::directory_iterator(config_.layers_dir, ec)) {
    if (!live_layers.contains(entry.path().lexically_normal())) {
      spdlog::info("Deleting unused disk layer {}", entry.path().string());
      removeQuietly(entry.path());
    }
  }
  for (const auto& entry : fs::directory_iterator(config_.snapshots_dir, ec)) {
    std::string id = entry.path().filename().string();
    if (live_snapshots.contains(id)) continue;
    if (live_layers.contains((entry.path() / "layer.qcow2").lexically_normal())) {
      // Boxes still stand on its disk layer (and running ones map its memory file, which
      // unlinking does not disturb): keep only the layer.
      std::error_code inner;
      for (const auto& file : fs::directory_iterator(entry.path(), inner)) {
        if (file.path().filename() != "layer.qcow2") removeQuietly(file.path());
      }
      continue;
    }
    spdlog::info("Deleting snapshot directory {} (no record)", entry.path().string());
    removeQuietly(entry.path());
  }
}

Result<DiskUsage> BoxService::diskUsage() {
  DiskUsage usage;
  HUTCH_TRY(auto snapshots, store_.listSnapshots());
  std::set<fs::path> counted;
  for (const Snapshot& snap : snapshots) {
    DiskUsage::Line& line =
        snap.kind == SnapshotKind::kTemplate ? usage.template_snapshots : usage.checkpoints;
    line.count++;
    line.bytes += allocatedBytes(snap.dir);
    counted.insert(snap.layer.lexically_normal());
    if (snap.layer.parent_path() != snap.dir) line.bytes += allocatedBytes(snap.layer);
  }
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(config_.layers_dir, ec)) {
    if (counted.contains(entry.path().lexically_normal())) continue;
    usage.layers.count++;
    usage.layers.bytes += allocatedBytes(entry.path());
  }
  HUTCH_TRY(auto boxes, store_.list());
  for (const Box& box : boxes) {
    usage.boxes.count++;
    usage.boxes.bytes += allocatedBytes(boxDir(box.id));
  }
  std::set<fs::path> builds;
  for (const std::string& name : templates_.names()) {
    auto tmpl = templates_.find(name);
    if (tmpl && builds.insert(tmpl->dir).second) {
      usage.templates.count++;
      usage.templates.bytes += allocatedBytes(tmpl->dir);
    }
  }
  return usage;
}

}  // namespace hutch::box

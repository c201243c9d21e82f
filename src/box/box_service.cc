#include "box/box_service.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>

#include "base/fault.h"
#include "box/network_service.h"
#include "box/snapshot_helpers.h"
#include "event/offload.h"
#include "jail/box_dir.h"
#include "jail/box_ids.h"
#include "storage/overlay.h"
#include "sys/unix_socket.h"

namespace hutch::box {

BoxService::BoxService(asio::any_io_executor loop, asio::thread_pool& pool,
                       storage::BoxStore& store, const storage::TemplateStore& templates,
                       vmm::VmBackend& backend, ServiceConfig config)
    : loop_(std::move(loop)),
      pool_(pool),
      store_(store),
      templates_(templates),
      backend_(backend),
      config_(std::move(config)),
      image_cache_(config_.image_cache, config_.boxes_dir.parent_path()),
      warm_pool_(loop_, *this,
                 {.size = config_.pool_size, .max = config_.pool_max, .idle = config_.pool_idle}) {}

BoxService::~BoxService() {
  detachAll();
}

Result<> BoxService::setState(Box& box, BoxState state, std::string reason) {
  if (box.state != state) HUTCH_TRY_VOID(checkTransition(box.state, state));
  const BoxState was = box.state;
  box.state = state;
  box.reason = std::move(reason);
  box.updated_at = unixNow();
  if (state != BoxState::kRunning && state != BoxState::kStopping) box.pid = 0;
  HUTCH_TRY_VOID(store_.update(box));
  if (observer_) observer_->boxStateChanged(box);
  state_changed_.notify();
  if (state == BoxState::kFailed && was != BoxState::kFailed) {
    publish("box.failed", box, {{"reason", box.reason}, {"was", stateName(was)}});
  }
  return ok();
}

void BoxService::publish(const std::string& type, const Box& box, const nlohmann::json& data) {
  if (activity_.events) activity_.events->publish(type, observe::subjectOf(box), data);
}

void BoxService::publishFailure(std::string_view operation, const observe::Subject& subject,
                                const Error& error) {
  if (!activity_.events) return;
  activity_.events->publish(
      "operation.failed", subject,
      {{"operation", operation},
       {"error", {{"code", errcName(error.code())}, {"message", error.message()}}}});
}

observe::Subject BoxService::subjectOf(const std::string& key) {
  auto box = store_.find(key);
  return box ? observe::subjectOf(*box) : observe::Subject{};
}

namespace {

// A warm pool create says so in the box's boot note (create(), box.created's "pool").
constexpr std::string_view kWarmPoolNote = "(warm pool)";

}  // namespace

asio::awaitable<Result<Box>> BoxService::create(BoxSpec spec) {
  const observe::Subject owner{.owner_id = spec.owner.id};
  auto done = [this](const Box& made, int64_t ms) {
    const char* pool = config_.pool_size == 0 || !config_.use_snapshots     ? "off"
                       : made.boot.find(kWarmPoolNote) != std::string::npos ? "hit"
                                                                            : "miss";
    publish("box.created", made,
            {{"template", made.config.template_name},
             {"cpus", made.config.cpus},
             {"memory_mib", made.config.memory_mib},
             {"from", "template"},
             {"pool", pool},
             {"boot", made.boot},
             {"duration_ms", ms}});
  };
  auto body = createBox(std::move(spec));
  co_return co_await reported("create", owner, std::move(body), done);
}

asio::awaitable<Result<Box>> BoxService::start(const std::string& key) {
  auto done = [this](const Box& started, int64_t ms) {
    publish("box.started", started, {{"boot", started.boot}, {"duration_ms", ms}});
  };
  auto body = startBox(key);
  const observe::Subject subject = subjectOf(key);
  co_return co_await reported("start", subject, std::move(body), done);
}

asio::awaitable<Result<Box>> BoxService::stop(const std::string& key) {
  auto done = [this](const Box& stopped, int64_t ms) {
    publish("box.stopped", stopped, {{"by", "request"}, {"duration_ms", ms}});
  };
  auto body = stopBox(key);
  const observe::Subject subject = subjectOf(key);
  co_return co_await reported("stop", subject, std::move(body), done);
}

asio::awaitable<Result<>> BoxService::remove(const std::string& key, bool force) {
  auto box = store_.find(key);
  std::string state;
  auto done = [&](int64_t ms) {
    if (box) publish("box.removed", *box, {{"state", state}, {"duration_ms", ms}});
  };
  const observe::Subject subject = box ? observe::subjectOf(*box) : observe::Subject{};
  auto body = removeBox(key, force, state);
  co_return co_await reported("remove", subject, std::move(body), done);
}

asio::awaitable<Result<Box>> BoxService::createBox(BoxSpec spec) {
  // Pool refills wait while creates are under way.
  auto creating = warm_pool_.createUnderWay();
  HUTCH_CO_TRY_VOID(spec.config.validate());
  if (!spec.name.empty()) HUTCH_CO_TRY_VOID(validateName(spec.name));
  HUTCH_CO_TRY_VOID(validateEnv(spec.env));
  HUTCH_CO_TRY_VOID(checkShares(spec));
  HUTCH_CO_TRY(storage::Template tmpl, templates_.find(spec.config.template_name));
  std::error_code ec;
  uint64_t base_mib = (std::filesystem::file_size(tmpl.rootfs, ec) + (1u << 20) - 1) >> 20;
  if (spec.config.disk_mib != 0 && spec.config.disk_mib < base_mib) {
    co_return fail(Errc::kInvalidArgument,
                   fmt::format("disk must be at least {} MiB, the size of template '{}'", base_mib,
                               tmpl.name));
  }

  HUTCH_CO_TRY_VOID(quotas_.check(spec.owner,
                                  {.boxes = 1,
                                   .cpus = spec.config.cpus,
                                   .memory_mib = spec.config.memory_mib,
                                   .disk_mib = Quotas::diskMib(spec.config, tmpl.dir.string())},
                                  "create"));
  std::string key =
      templateSnapshotKey(tmpl.dir.string(), spec.config.cpus, spec.config.memory_mib);
  std::optional<PooledVm> pooled;
  if (config_.use_snapshots && spec.config.disk_mib == 0 && spec.shares.empty()) {
    pooled = warm_pool_.take(key, spec.config);
  }

  std::string policy;
  std::vector<BoxSecret> secrets;
  if (network_) {
    auto resolved = network_->policyFor(spec.network_policy, tmpl.dir);
    auto named = network_->secretsFor(spec.secrets, spec.secrets_owner.value_or(spec.owner.id));
    if (!resolved || !named) {
      if (pooled) warm_pool_.giveBack(key, std::move(*pooled));
      co_return fail(!resolved ? resolved.error() : named.error());
    }
    policy = std::move(*resolved);
    secrets = std::move(*named);
    if (spec.secrets_owner && *spec.secrets_owner != spec.owner.id) {
      for (BoxSecret& secret : secrets) secret.owner = spec.secrets_owner;
    }
  } else if (!spec.network_policy.empty() || !spec.secrets.empty()) {
    if (pooled) warm_pool_.giveBack(key, std::move(*pooled));
    co_return fail(Errc::kUnsupported,
                   "This hutchd runs without networking (--no-network): boxes have no network, "
                   "so a network policy or secrets mean nothing; leave them out");
  }

  Box box;
  box.network_policy = std::move(policy);
  box.secrets = std::move(secrets);
  box.id = pooled ? pooled->id : randomId();
  box.name = spec.name.empty() ? "box-" + box.id.substr(0, 8) : spec.name;
  box.config = spec.config;
  box.state = BoxState::kCreating;
  box.accel = std::string(vmm::accelName(config_.accel.accel));
  box.image_dir = tmpl.dir.string();
  box.owner = spec.owner;
  box.env = imageEnvironment(tmpl.manifest, spec.env);
  box.metadata = spec.metadata;
  box.expires_at = spec.expires_at;
  box.on_expiry = spec.expires_at != 0 ? spec.on_expiry : Expiry::kNone;
  box.shares = spec.shares;
  box.created_at = box.updated_at = unixNow();
  if (pooled) box.uid_index = pooled->uid_index;  // its VM already runs as that uid
  if (auto inserted = store_.insert(box); !inserted) {
    // A name already taken: the pooled VM is still good, and must not be dropped running.
    if (pooled) warm_pool_.giveBack(key, std::move(*pooled));
    co_return fail(inserted.error());
  }
  if (pooled) uid_indices_.release(static_cast<uint32_t>(pooled->uid_index));
  if (box.expires_at != 0) next_expiry_ = 0;  // expireDue looks again
  spdlog::info("box={} name={} creating from template {}", box.id, box.name, tmpl.name);

  std::filesystem::path dir = boxDir(box.id);
  std::filesystem::create_directories(dir, ec);
  if (pooled) {
    box.boot =
        fmt::format("restored from template snapshot {} {}", pooled->snapshot_id, kWarmPoolNote);
    auto made = co_await bootBox(box, nullptr, std::move(pooled->vm), std::move(pooled->agent));
    warm_pool_.refill(key, tmpl, box.config);
    co_return made;
  }
  if (!box.shares.empty()) {
    box.boot = "cold boot: a box with shared folders is never restored from a snapshot";
  } else if (!ec && config_.use_snapshots && box.config.disk_mib == 0) {
    std::string note;
    auto snapshot = co_await templateSnapshot(tmpl, box.config, note);
    if (snapshot) {
      RestoreSource source{.state = snapshot->dir / "state",
                           .memory_file = snapshot->dir / "memory",
                           .layer = snapshot->layer,
                           .disk_bytes = std::filesystem::file_size(tmpl.rootfs, ec),
                           .label = fmt::format("template snapshot {}", snapshot->id)};
      box.boot = fmt::format("restored from {}{}", source.label, note);
      auto made = co_await bootBox(box, &source);
      warm_pool_.refill(key, tmpl, box.config);
      co_return made;
    }
    box.boot =
        fmt::format("cold boot: no template snapshot ({}){}", snapshot.error().describe(), note);
    spdlog::warn("box={} {}", box.id, box.boot);
  } else if (!config_.use_snapshots) {
    box.boot = "cold boot: snapshots are off (hutchd --no-snapshots)";
  } else if (box.config.disk_mib != 0) {
    box.boot = "cold boot: a disk size other than the template's is grown at boot";
  }
  std::filesystem::path disk = dir / "disk.qcow2";
  std::filesystem::path base = tmpl.rootfs;
  uint64_t size = box.config.disk_mib;
  // Named, not a temporary inside co_await: GCC 12 destroys such temporaries twice.
  auto make_overlay = [base, disk, size] { return storage::createOverlay(base, disk, size); };
  Result<> overlay = ok();
  if (ec) {
    overlay =
        fail(Errc::kInternal, fmt::format("Cannot create {}: {}", dir.string(), ec.message()));
  } else {
    overlay = co_await event::offload(pool_, std::move(make_overlay));
  }
  if (!overlay) {
    (void)setState(box, BoxState::kFailed, overlay.error().describe());
    co_return fail(overlay.error());
  }
  co_return co_await bootBox(box);
}

asio::awaitable<Result<Box>> BoxService::startBox(const std::string& key) {
  HUTCH_CO_TRY(Box box, store_.find(key));
  if (box.state != BoxState::kStopped && box.state != BoxState::kFailed &&
      box.state != BoxState::kSuspended) {
    co_return fail(Errc::kFailedPrecondition,
                   fmt::format("Box {} is {}; only a stopped, suspended or failed box can be "
                               "started",
                               box.name, stateName(box.state)));
  }
  if (!std::filesystem::exists(boxDir(box.id) / box.disk)) {
    co_return fail(Errc::kFailedPrecondition,
                   fmt::format("Box {} has no disk (it failed before its disk was made); "
                               "remove it and run a new one",
                               box.name));
  }
  HUTCH_CO_TRY_VOID(quotas_.check(
      box.owner, {.cpus = box.config.cpus, .memory_mib = box.config.memory_mib}, "start"));
  if (box.state == BoxState::kSuspended) co_return co_await resumeSuspended(std::move(box));
  HUTCH_CO_TRY_VOID(setState(box, BoxState::kCreating));
  spdlog::info("box={} starting", box.id);
  box.boot = "cold boot from its disk";
  co_return co_await bootBox(box);
}

asio::awaitable<Result<Box>> BoxService::bootBox(Box& box, const RestoreSource* from,
                                                 std::unique_ptr<vmm::Vm> launched,
                                                 std::shared_ptr<guest::AgentClient> agent) {
  auto runtime = std::make_shared<Runtime>(loop_);
  runtimes_[box.id] = runtime;
  auto booted = co_await boot(box, runtime, from, std::move(launched), std::move(agent));
  if (runtime->removed) {
    co_return fail(Errc::kCancelled, fmt::format("Box {} was removed while starting", box.name));
  }
  if (!booted) {
    spdlog::warn("box={} failed to start: {}", box.id, booted.error().describe());
    runtime->stopping = true;  // the watcher must not report this exit a second time
    if (runtime->vm && !runtime->exited) co_await runtime->vm->kill();
    runtimes_.erase(box.id);
    networkDown(box.id, box.uid_index);
    (void)setState(box, BoxState::kFailed, booted.error().describe());
    co_return fail(booted.error().withContext(fmt::format(
        "Box {} failed to start (see 'hutch logs {}' for its console)", box.name, box.name)));
  }
  fault::point("boot.agent-ready", box.pid);
  HUTCH_CO_TRY_VOID(setState(box, BoxState::kRunning));
  spdlog::info("box={} running (pid {})", box.id, box.pid);
  co_return box;
}

vmm::VmSpec BoxService::vmSpecFor(const Box& box) const {
  std::filesystem::path dir = boxDir(box.id);
  std::filesystem::path image(box.image_dir);
  vmm::VmSpec spec;
  spec.id = box.id;
  spec.cpus = box.config.cpus;
  spec.memory_mib = box.config.memory_mib;
  spec.accel = config_.accel.accel;
  spec.tcg_cpu_model = config_.env.guest_cpu;
  spec.tsc_khz = config_.tsc_khz;
  spec.kernel = image / "vmlinux";
  spec.initrd = image / "initrd.img";
  spec.disk = dir / box.disk;
  spec.run_dir = dir;
  if (box.uid_index >= 0) spec.uid_index = static_cast<uint32_t>(box.uid_index);
  spec.backing_files = backingFilesFor(image);
  spec.free_page_reporting = config_.env.freePageReporting();
  for (size_t i = 0; i < box.shares.size(); ++i) {
    spec.shares.push_back({.tag = shareTag(i),
                           .host_dir = box.shares[i].host_dir,
                           .read_only = box.shares[i].read_only});
  }
  // Box names allow '_' and '.', hostnames only '-' between labels.
  std::string hostname = box.name;
  std::replace(hostname.begin(), hostname.end(), '_', '-');
  spec.guest_params["hostname"] = hostname;
  if (network_ && box.uid_index >= 0) {
    spec.netns = network_->netnsPath(static_cast<uint32_t>(box.uid_index));
    NetworkService::setGuestParams(spec.guest_params);
  }
  return spec;
}

asio::awaitable<Result<>> BoxService::prepareNetwork(uint32_t index) {
  if (!network_) co_return ok();
  NetworkService* network = network_;
  auto make = [network, index]() -> Result<> {
    HUTCH_TRY_VOID(network->prepare(index));
    return ok();
  };
  co_return co_await event::offload(pool_, std::move(make));
}

void BoxService::networkDown(const std::string& box_id, int64_t index) {
  if (!network_) return;
  if (!box_id.empty()) network_->detach(box_id);
  if (index >= 0) network_->release(static_cast<uint32_t>(index));
}

std::vector<std::string> BoxService::backingFilesFor(const std::filesystem::path& image_dir) const {
  // A box's disk stands on frozen layers, a template snapshot's layer and a template's base.
  auto literal = [](const std::filesystem::path& path) {
    std::error_code ec;
    std::filesystem::path real = std::filesystem::weakly_canonical(path, ec);
    return jail::globLiteral(ec ? path : real);
  };
  std::vector<std::string> patterns{literal(image_dir) + "/rootfs.img"};
  if (!config_.layers_dir.empty()) patterns.push_back(literal(config_.layers_dir) + "/*.qcow2");
  if (!config_.snapshots_dir.empty()) {
    patterns.push_back(literal(config_.snapshots_dir) + "/*/layer.qcow2");
  }
  return patterns;
}

asio::awaitable<Result<>> BoxService::boot(Box& box, std::shared_ptr<Runtime> runtime,
                                           const RestoreSource* from,
                                           std::unique_ptr<vmm::Vm> launched,
                                           std::shared_ptr<guest::AgentClient> pooled_agent) {
  if (box.uid_index < 0) {
    // The box's own uid and gid for its VMM, kept until the box is removed.
    HUTCH_CO_TRY(box.uid_index, uid_indices_.lowestFree());
    HUTCH_CO_TRY_VOID(store_.update(box));
  }
  vmm::VmSpec spec = vmSpecFor(box);
  if (!std::filesystem::exists(spec.kernel)) {
    co_return fail(Errc::kFailedPrecondition,
                   fmt::format("The template build this box was made from is gone ({}); the box "
                               "cannot boot without its kernel",
                               box.image_dir));
  }
  const bool restored = from != nullptr || launched != nullptr;
  if (!restored) pruneDiskFiles(box, box.disk);
  if (launched) {
    runtime->vm = std::move(launched);  // restored already, paused (the warm pool)
  } else if (from && from->keep_disk) {
    // A suspended box: its own disk as it was (QEMU flushed it when it saved the state). Names
    // a checkpoint left for the QEMU that is gone now go: one is a second link to a frozen
    // layer, which the jail refuses to show a VMM.
    pruneDiskFiles(box, box.disk);
    spec.incoming_state = from->state;
    spec.ram = vmm::GuestRam::kPrivate;
  } else if (from) {
    // A fresh overlay on the frozen layer: whatever the box's disk held before is replaced.
    pruneDiskFiles(box, "");
    box.disk = "disk.qcow2";
    spec.disk = boxDir(box.id) / box.disk;
    std::filesystem::path layer = from->layer;
    std::filesystem::path disk = spec.disk;
    uint64_t bytes = from->disk_bytes;
    auto make_overlay = [layer, disk, bytes]() -> Result<> {
      std::error_code ec;
      std::filesystem::remove(disk, ec);
      return storage::createLayerOverlay(layer, disk, bytes);
    };
    HUTCH_CO_TRY_VOID(co_await event::offload(pool_, std::move(make_overlay)));
    spec.incoming_state = from->pending ? std::filesystem::path() : from->state;
    spec.incoming_later = from->pending != nullptr;
    spec.ram = from->memory_file.empty() ? vmm::GuestRam::kPrivate : vmm::GuestRam::kMappedFile;
    spec.memory_file = from->memory_file;
  }
  if (!runtime->vm) {
    HUTCH_CO_TRY_VOID(co_await prepareNetwork(static_cast<uint32_t>(box.uid_index)));
    image_cache_.markUsed(box.image_dir);
    HUTCH_CO_TRY(runtime->vm, co_await backend_.launch(spec));
  }
  if (from && from->pending) {
    // QEMU is up and waits; the state it restores is being saved meanwhile (a fork).
    while (!from->pending->done) co_await from->pending->changed.wait();
    if (!*from->pending->done) co_return fail(from->pending->done->error());
    HUTCH_CO_TRY_VOID(co_await runtime->vm->loadState(from->state));
  }
  box.pid = runtime->vm->pid();
  HUTCH_CO_TRY_VOID(store_.update(box));
  fault::point("boot.vm-launched", box.pid);
  asio::co_spawn(loop_, watch(box.id, runtime), asio::detached);
  if (restored) HUTCH_CO_TRY_VOID(co_await runtime->vm->resume());

  auto deadline = std::chrono::steady_clock::now() + config_.boot_timeout;
  Result<std::shared_ptr<guest::AgentClient>> agent = fail(Errc::kInternal, "no agent");
  if (pooled_agent && pooled_agent->isOpen()) {
    agent = std::move(pooled_agent);  // handshaken when the pool warmed the VM up
  } else {
    agent = co_await connectAgent(*runtime->vm, spec.agentSocket(), deadline);
  }
  if (!agent) {
    if (runtime->exited) {
      co_return fail(Errc::kUnavailable, "QEMU " + runtime->exit_reason + " during boot");
    }
    co_return fail(agent.error().withContext(
        fmt::format("The guest agent did not answer within {} s", config_.boot_timeout.count())));
  }
  runtime->agent = std::move(*agent);
  asio::co_spawn(loop_, watchAgent(box.id, runtime), asio::detached);
  if (restored) HUTCH_CO_TRY_VOID(co_await applyIdentity(box, *runtime, false));
  HUTCH_CO_TRY_VOID(co_await networkUp(box, *runtime));
  HUTCH_CO_TRY_VOID(co_await mountShares(box, runtime));
  if (!restored) co_await runStartCommandOnColdBoot(box, *runtime);
  co_return ok();
}

asio::awaitable<Result<std::shared_ptr<guest::AgentClient>>> BoxService::connectAgent(
    vmm::Vm& vm, const std::filesystem::path& socket,
    std::chrono::steady_clock::time_point deadline) {
  Result<guest::ByteChannel> channel = fail(Errc::kInternal, "not connected");
  if (UniqueFd early = vm.takeAgentChannel()) {
    guest::ByteChannel connected(loop_);
    connected.assign(asio::generic::stream_protocol(AF_UNIX, SOCK_STREAM), early.release());
    channel = std::move(connected);
  } else {
    channel = co_await guest::connectUnix(loop_, socket.string(), deadline);
  }
  if (!channel) co_return fail(channel.error());
  auto client = guest::AgentClient::create(std::move(*channel));
  auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  auto hello = co_await client->handshake(std::max(remaining, std::chrono::milliseconds(1)));
  if (!hello) {
    client->close();
    co_return fail(hello.error());
  }
  co_return client;
}

asio::awaitable<void> BoxService::watch(std::string id, std::shared_ptr<Runtime> runtime) {
  asio::co_spawn(loop_, watchDisk(id, runtime), asio::detached);
  std::string how = co_await runtime->vm->waitExit();
  runtime->exited = true;
  runtime->exit_reason = how;
  // Before anyone waiting for the exit goes on (a stop, a start after it): its network goes
  // with the VM. A runtime already replaced (rollback) or removed leaves that to its successor.
  if (auto it = runtimes_.find(id); it != runtimes_.end() && it->second == runtime) {
    if (auto box = store_.find(id); box) networkDown(id, box->uid_index);
  }
  runtime->exit_signal.cancel();
  if (runtime->agent) runtime->agent->close();
  if (runtime->stopping || runtime->removed) co_return;
  auto box = store_.find(id);
  if (!box) co_return;
  spdlog::warn("box={} QEMU {} unexpectedly", id, how);
  if (box->state == BoxState::kRunning) {
    runtimes_.erase(id);
    co_await recordFailure(*box, fmt::format("QEMU {} unexpectedly", how));
  }
}

asio::awaitable<void> BoxService::watchAgent(std::string id, std::shared_ptr<Runtime> runtime) {
  std::shared_ptr<guest::AgentClient> agent = runtime->agent;
  if (!agent) co_return;
  Error why = co_await agent->closed();
  // hutchd's own close (stop, suspend, rollback, rm, the VM's exit) is not the agent's doing.
  if (why.code() == Errc::kCancelled) co_return;
  // A guest that powers itself off closes the channel just before its VM exits: watch() says so.
  asio::steady_timer grace(loop_);
  for (int i = 0; i < 20 && !runtime->exited; ++i) {
    grace.expires_after(std::chrono::milliseconds(100));
    boost::system::error_code ec;
    co_await grace.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  auto it = runtimes_.find(id);
  if (it == runtimes_.end() || it->second != runtime || runtime->agent != agent) co_return;
  if (runtime->exited || runtime->stopping || runtime->removed || runtime->busy) co_return;
  auto box = store_.find(id);
  if (!box || box->state != BoxState::kRunning) co_return;
  spdlog::warn("box={} the agent's connection ended: {}; stopping the box's VM", id,
               why.describe());
  runtime->stopping = true;  // watch() networks it down and leaves the state to us
  (void)setState(*box, BoxState::kFailed,
                 fmt::format("The agent's connection ended ({}); its VM was stopped: start boots "
                             "it again from its disk",
                             why.describe()));
  if (auto killed = co_await runtime->vm->kill(); !killed) {
    spdlog::error("box={} its QEMU cannot be killed: {}", id, killed.error().describe());
  }
  co_await waitExit(*runtime, std::chrono::seconds(10));
  if (auto now = runtimes_.find(id); now != runtimes_.end() && now->second == runtime) {
    runtimes_.erase(now);
  }
}

asio::awaitable<bool> BoxService::waitExit(Runtime& runtime,
                                           std::chrono::steady_clock::duration timeout) {
  if (runtime.exited) co_return true;
  runtime.exit_signal.expires_after(timeout);
  boost::system::error_code ec;
  co_await runtime.exit_signal.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  co_return runtime.exited;
}

Result<std::vector<Box>> BoxService::list(const storage::OwnerFilter& owner) {
  HUTCH_TRY(std::vector<Box> boxes, store_.list(owner));
  for (Box& box : boxes) box = withRuntimeState(std::move(box));
  return boxes;
}

Result<Box> BoxService::get(const std::string& key, const storage::OwnerFilter& owner) {
  HUTCH_TRY(Box box, store_.find(key, owner));
  return withRuntimeState(std::move(box));
}

asio::awaitable<Result<Box>> BoxService::stopBox(const std::string& key) {
  HUTCH_CO_TRY(Box box, store_.find(key));
  if (box.state == BoxState::kSuspended) {
    // Shutting a suspended box down: its saved memory goes, its disk stays.
    HUTCH_CO_TRY_VOID(dropSuspend(box.id));
    HUTCH_CO_TRY_VOID(setState(box, BoxState::kStopped));
    co_return box;
  }
  if (box.state == BoxState::kPaused) {
    HUTCH_CO_TRY_VOID(co_await wake(box.id));
    HUTCH_CO_TRY(box, store_.find(box.id));
  }
  auto it = runtimes_.find(box.id);
  if (box.state != BoxState::kRunning || it == runtimes_.end()) {
    co_return fail(
        Errc::kFailedPrecondition,
        fmt::format("Box {} is {}, not running; nothing to stop", box.name, stateName(box.state)));
  }
  std::shared_ptr<Runtime> runtime = it->second;
  HUTCH_CO_TRY_VOID(checkNotBusy(box, *runtime, "stop it"));
  runtime->stopping = true;
  HUTCH_CO_TRY_VOID(setState(box, BoxState::kStopping));
  if (runtime->agent) {
    auto off = co_await runtime->agent->poweroff(
        std::chrono::duration_cast<std::chrono::milliseconds>(config_.stop_timeout));
    if (!off) spdlog::warn("box={} poweroff request failed: {}", box.id, off.error().describe());
  }
  if (!co_await waitExit(*runtime, config_.stop_timeout)) {
    spdlog::warn("box={} did not power off within {} s; killing QEMU", box.id,
                 config_.stop_timeout.count());
    co_await runtime->vm->kill();
    co_await waitExit(*runtime, std::chrono::seconds(10));
  }
  runtimes_.erase(box.id);
  if (runtime->removed) co_return fail(Errc::kCancelled, "Box was removed while stopping");
  // Guest RAM is gone with the VM; its backing file would only take disk space.
  std::error_code ec;
  std::filesystem::remove(boxDir(box.id) / "memory", ec);
  HUTCH_CO_TRY(box, store_.find(box.id));
  HUTCH_CO_TRY_VOID(setState(box, BoxState::kStopped));
  spdlog::info("box={} stopped", box.id);
  co_return box;
}

asio::awaitable<Result<>> BoxService::removeBox(const std::string& key, bool force,
                                                std::string& state) {
  HUTCH_CO_TRY(Box box, store_.find(key));
  state = stateName(box.state);
  bool live = box.state == BoxState::kRunning || box.state == BoxState::kCreating ||
              box.state == BoxState::kStopping || box.state == BoxState::kPaused;
  if (live && !force) {
    co_return fail(Errc::kFailedPrecondition,
                   fmt::format("Box {} is {}; stop it first or force removal with "
                               "'hutch rm -f {}'",
                               box.name, stateName(box.state), box.name));
  }
  // The records go first, all in one transaction: from here on the box is gone for every
  // caller, and rm answers; if they cannot be written (a full disk) nothing was touched and the
  // box goes on. What takes time (its QEMU killed, its files deleted, its checkpoints' and
  // suspended state's directories collected) is done in the background (cleanUp); its uid
  // index is held until then. A hutchd that dies meanwhile finishes it at start: a box
  // directory without a record is an orphan (removeOrphans), so nothing is left behind.
  auto suspended = store_.findSuspend(box.id);
  HUTCH_CO_TRY_VOID(store_.removeWithItsSnapshots(box.id));
  if (suspended) removeQuietly(suspended->dir);  // its saved RAM: as large as the box's memory
  std::shared_ptr<Runtime> runtime;
  if (auto it = runtimes_.find(box.id); it != runtimes_.end()) {
    runtime = it->second;
    runtimes_.erase(it);
    runtime->removed = true;
    if (runtime->agent) runtime->agent->close();
  }
  fault::point("remove.recorded", runtime && runtime->vm ? runtime->vm->pid() : 0);
  if (box.uid_index >= 0) uid_indices_.hold(static_cast<uint32_t>(box.uid_index));
  ++cleaning_;
  if (observer_) observer_->boxRemoved(box.id);
  asio::co_spawn(loop_, cleanUp(box, runtime), asio::detached);
  spdlog::info("box={} removed", box.id);
  co_return ok();
}

asio::awaitable<void> BoxService::cleanUp(Box box, std::shared_ptr<Runtime> runtime) {
  if (runtime && runtime->vm && !runtime->exited) {
    if (auto killed = co_await runtime->vm->kill(); !killed) {
      spdlog::error("box={} its QEMU cannot be killed: {}", box.id, killed.error().describe());
    }
  }
  if (network_) {
    network_->forget(box.id);
    if (box.uid_index >= 0) network_->release(static_cast<uint32_t>(box.uid_index));
  }
  std::filesystem::path dir = boxDir(box.id);
  auto delete_dir = [dir]() -> Result<> {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    if (ec) {
      return fail(Errc::kInternal, fmt::format("Cannot delete {}: {}", dir.string(), ec.message()));
    }
    return ok();
  };
  auto deleted = co_await event::offload(pool_, std::move(delete_dir));
  if (!deleted) spdlog::error("box={} {}", box.id, deleted.error().describe());
  if (box.uid_index >= 0) uid_indices_.release(static_cast<uint32_t>(box.uid_index));
  --cleaning_;
  // Its checkpoints' and its suspended state's directories, and layers nothing stands on now.
  collectGarbage();
  spdlog::debug("box={} cleaned up", box.id);
}

asio::awaitable<void> BoxService::finishCleanups(std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (cleaning_ > 0 && std::chrono::steady_clock::now() < deadline) {
    asio::steady_timer wait(loop_, std::chrono::milliseconds(20));
    boost::system::error_code ec;
    co_await wait.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  if (cleaning_ > 0) {
    spdlog::warn("{} removed boxes not cleaned up yet; the next start finishes them", cleaning_);
  }
}

asio::awaitable<Result<std::shared_ptr<BoxAgent>>> BoxService::agentFor(
    const std::string& key, const observe::Actor& actor) {
  HUTCH_CO_TRY(Box box, store_.find(key));
  // Idle pause is invisible: what is done in a paused box (or one suspended for being idle)
  // wakes it first.
  if (box.state == BoxState::kPaused || box.state == BoxState::kSuspended) {
    HUTCH_CO_TRY_VOID(co_await wake(box.id));
    HUTCH_CO_TRY(box, store_.find(box.id));
  }
  auto it = runtimes_.find(box.id);
  if (box.state == BoxState::kRunning && it != runtimes_.end() && it->second->agent &&
      !it->second->agent->isOpen()) {
    // Between the agent's connection ending and watchAgent() stopping the VM, the box still
    // reads as running: say what is true instead of "is running; needs a running box".
    co_return fail(Errc::kUnavailable,
                   fmt::format("Box {}'s agent is not connected ({}); hutch is stopping its VM: "
                               "start it again once 'hutch ls' shows it failed",
                               box.name, it->second->agent->closedError().message()));
  }
  if (auto lost = unrecorded_failures_.find(box.id); box.state == BoxState::kRunning &&
                                                     it == runtimes_.end() &&
                                                     lost != unrecorded_failures_.end()) {
    co_return fail(Errc::kUnavailable,
                   fmt::format("Box {} has failed ({}), which hutchd cannot record yet: free "
                               "space on the filesystem of hutchd's state directory, then start "
                               "it again",
                               box.name, lost->second));
  }
  if (box.state == BoxState::kRunning && it != runtimes_.end() && !it->second->stalled.empty()) {
    co_return fail(Errc::kUnavailable, fmt::format("Box {} is {}", box.name, it->second->stalled));
  }
  if (box.state != BoxState::kRunning || it == runtimes_.end() || !it->second->agent ||
      !it->second->agent->isOpen()) {
    std::string hint;
    if (box.state == BoxState::kFailed) hint = " (" + box.reason + ")";
    if (box.state == BoxState::kSuspended || box.state == BoxState::kStopped) {
      hint = fmt::format("; start it first (hutch start {})", box.name);
    }
    co_return fail(Errc::kFailedPrecondition,
                   fmt::format("Box {} is {}; exec needs a running box{}", box.name,
                               stateName(box.state), hint));
  }
  std::weak_ptr<Runtime> runtime = it->second;
  it->second->last_activity = std::chrono::steady_clock::now();
  BoxAgent::Hooks hooks{.touch =
                            [runtime] {
                              if (auto r = runtime.lock())
                                r->last_activity = std::chrono::steady_clock::now();
                            },
                        .sessions =
                            [runtime](int delta) {
                              if (auto r = runtime.lock()) r->active_sessions += delta;
                            }};
  auto max_exec = std::chrono::milliseconds(box.config.max_exec_ms);
  co_return std::make_shared<BoxAgent>(std::move(box), it->second->agent, actor, activity_,
                                       max_exec, std::move(hooks));
}

Result<> BoxService::checkNotBusy(const Box& box, const Runtime& runtime, std::string_view then) {
  if (!runtime.busy) return ok();
  return fail(Errc::kFailedPrecondition,
              fmt::format("Box {} is busy with a fork, checkpoint, rollback, suspend or diff; {} "
                          "when that is done",
                          box.name, then));
}

}  // namespace hutch::box

// BoxService's warm pool: restored, warmed-up, paused VMs per template snapshot and size,
// handed out on create and refilled in the background; and the orphans a dead hutchd's pool left.
// See docs/snapshots.md ("Warm pool").
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <functional>

#include "box/box_service.h"
#include "box/network_service.h"
#include "box/snapshot_helpers.h"
#include "event/offload.h"
#include "guest/identity.h"
#include "storage/overlay.h"

namespace hutch::box {

namespace fs = std::filesystem;

namespace {

// A pooled VM that can no longer be handed out; `release` gives its uid index back once its QEMU
// is gone. (Parameters, not lambda captures: a coroutine lambda's captures die with the lambda
// object, before the coroutine ends.)
asio::awaitable<void> discardPooled(std::shared_ptr<vmm::Vm> vm, fs::path dir,
                                    std::function<void()> release) {
  co_await vm->kill();
  release();
  removeQuietly(dir);
}

}  // namespace

std::optional<BoxService::Pooled> BoxService::takePooled(const std::string& key,
                                                         const BoxConfig& config) {
  auto it = warm_.find(key);
  if (it == warm_.end()) return std::nullopt;
  auto current = store_.findTemplateSnapshot(key);
  while (!it->second.empty()) {
    Pooled entry = std::move(it->second.back());
    it->second.pop_back();
    bool usable = current && *current && (*current)->id == entry.snapshot_id &&
                  !entry.vm->exited() && entry.agent && entry.agent->isOpen();
    if (usable) {
      // Checked again: the snapshot may have been refused since (its manifest changed).
      auto manifest = readManifest((*current)->dir);
      usable = manifest && !incompatibility(*manifest, config_.env, config.cpus, config.memory_mib);
    }
    if (usable) return entry;
    std::string id = entry.id;
    std::shared_ptr<vmm::Vm> vm = std::move(entry.vm);
    fs::path dir = boxDir(id);
    int64_t index = entry.uid_index;
    ++discarding_;
    auto release = [this, index] {
      networkDown("", index);
      held_uid_indices_.erase(static_cast<uint32_t>(index));
      --discarding_;
    };
    asio::co_spawn(loop_, discardPooled(vm, dir, release), asio::detached);
  }
  return std::nullopt;
}

unsigned BoxService::poolTarget(const std::string& key) const {
  auto it = pool_target_.find(key);
  return it == pool_target_.end() ? config_.pool_size : it->second;
}

void BoxService::notePoolUse(const std::string& key, bool hit) {
  if (config_.pool_size == 0) return;
  pool_used_[key] = std::chrono::steady_clock::now();
  if (hit) return;
  // Creates come faster than the pool refills: keep one more ready, within the limit.
  unsigned target = poolTarget(key);
  if (target < std::max(config_.pool_max, config_.pool_size)) {
    pool_target_[key] = target + 1;
    spdlog::info("Warm pool {}: a create found it empty; it now keeps {}", key.substr(0, 12),
                 target + 1);
  }
}

void BoxService::shrinkIdlePools() {
  const auto now = std::chrono::steady_clock::now();
  for (auto& [key, target] : pool_target_) {
    if (target <= config_.pool_size || now - pool_used_[key] < config_.pool_idle) continue;
    --target;
    pool_used_[key] = now;  // one VM per idle period
    auto it = warm_.find(key);
    if (it == warm_.end() || it->second.size() <= target) continue;
    Pooled entry = std::move(it->second.back());
    it->second.pop_back();
    spdlog::info("Warm pool {}: unused for {} s; it now keeps {}", key.substr(0, 12),
                 config_.pool_idle.count(), target);
    std::shared_ptr<vmm::Vm> vm = std::move(entry.vm);
    if (entry.agent) entry.agent->close();
    int64_t index = entry.uid_index;
    ++discarding_;
    auto release = [this, index] {
      networkDown("", index);
      held_uid_indices_.erase(static_cast<uint32_t>(index));
      --discarding_;
    };
    asio::co_spawn(loop_, discardPooled(vm, boxDir(entry.id), release), asio::detached);
  }
}

void BoxService::refillPool(const std::string& key, const storage::Template& tmpl,
                            const BoxConfig& config) {
  if (config_.pool_size == 0 || draining_) return;
  pool_shapes_.try_emplace(
      key,
      PoolStatus{.template_name = tmpl.name, .cpus = config.cpus, .memory_mib = config.memory_mib});
  if (filling_.contains(key)) return;
  if (warm_[key].size() >= poolTarget(key)) return;
  filling_.insert(key);
  asio::co_spawn(loop_, fillPool(key, tmpl, config), asio::detached);
}

asio::awaitable<void> BoxService::fillPool(std::string key, storage::Template tmpl,
                                           BoxConfig config) {
  while (!draining_ && warm_[key].size() < poolTarget(key)) {
    // A refill is a restore: it waits for the creates under way instead of slowing them down.
    co_await waitForCreates();
    if (draining_) break;
    auto snapshot = store_.findTemplateSnapshot(key);
    if (!snapshot || !*snapshot) break;
    Snapshot snap = **snapshot;
    Box box;
    box.id = randomId();
    box.name = "pool-" + box.id;
    box.config = config;
    box.image_dir = tmpl.dir.string();
    // Its own uid from now on; the box that takes it keeps it.
    auto index = freeUidIndex();
    if (!index) {
      spdlog::warn("Warm pool for {}: {}", tmpl.name, index.error().describe());
      break;
    }
    box.uid_index = *index;
    held_uid_indices_.insert(*index);  // at once: a create may pick an index while we wait
    vmm::VmSpec spec = vmSpecFor(box);
    std::error_code ec;
    fs::create_directories(boxDir(box.id), ec);
    fs::path layer = snap.layer;
    fs::path disk = spec.disk;
    uint64_t bytes = fs::file_size(tmpl.rootfs, ec);
    auto make_overlay = [layer, disk, bytes] {
      return storage::createLayerOverlay(layer, disk, bytes);
    };
    auto overlay = co_await event::offload(pool_, std::move(make_overlay));
    if (!overlay) {
      held_uid_indices_.erase(*index);
      spdlog::warn("Warm pool for {}: {}", tmpl.name, overlay.error().describe());
      removeQuietly(boxDir(box.id));
      break;
    }
    spec.incoming_state = snap.dir / "state";
    spec.ram = vmm::GuestRam::kMappedFile;
    spec.memory_file = snap.dir / "memory";
    // No co_await inside a conditional expression: GCC 12 mangles the temporaries.
    Result<std::unique_ptr<vmm::Vm>> vm = fail(Errc::kInternal, "not launched");
    auto net = co_await prepareNetwork(*index);
    if (net) {
      image_cache_.markUsed(box.image_dir);
      vm = co_await backend_.launch(spec);
    } else {
      vm = fail(net.error());
    }
    std::shared_ptr<guest::AgentClient> agent;
    if (vm) {
      auto warmed = co_await warmUp(**vm, spec);
      if (warmed) {
        agent = std::move(*warmed);
      } else {
        co_await (*vm)->kill();
        vm = fail(warmed.error().withContext("Cannot warm the VM up"));
      }
    }
    if (!vm) {
      networkDown("", *index);
      held_uid_indices_.erase(*index);
      spdlog::warn("Warm pool for {}: {}", tmpl.name, vm.error().describe());
      removeQuietly(boxDir(box.id));
      break;
    }
    if (draining_) {
      // hutchd is shutting down: drainPool no longer sees this one.
      co_await (*vm)->kill();
      networkDown("", *index);
      held_uid_indices_.erase(*index);
      removeQuietly(boxDir(box.id));
      break;
    }
    spdlog::debug("Warm pool for {}: box {} ready (warmed up, paused)", tmpl.name, box.id);
    warm_[key].push_back(Pooled{box.id, snap.id, std::move(*vm), std::move(agent), box.uid_index});
  }
  filling_.erase(key);
}

asio::awaitable<Result<std::shared_ptr<guest::AgentClient>>> BoxService::warmUp(
    vmm::Vm& vm, const vmm::VmSpec& spec) {
  // A restored QEMU starts with an empty translation cache (TCG): the first command a box runs
  // costs ~0.1-0.15 s of CPU translating the guest kernel's fork and exec paths, ld.so and the
  // agent's exec path, against ~0.02 s for the next one (docs/snapshots.md). Paid here, in the
  // background, rather than by the create that takes the VM. Nothing of it stays in the box but
  // files the box's own identity rewrites.
  HUTCH_CO_TRY_VOID(co_await vm.resume());
  auto deadline = std::chrono::steady_clock::now() + config_.boot_timeout;
  HUTCH_CO_TRY(auto agent, co_await connectAgent(vm, spec.agentSocket(), deadline));
  // The identity path too (hostname, files in /etc, clock, RNG): the box that takes the VM
  // applies its own over it.
  guest::Identity identity = guest::makeIdentity("hutch-pool");
  identity.machine_id = machineIdFor(spec.id);
  HUTCH_CO_TRY_VOID(co_await agent->applyIdentity(identity, std::chrono::seconds(10)));
  proto::ExecRequest request;
  request.argv = {"true"};
  request.user = config_.default_user;
  // An image need have neither `true` nor that user (a distroless image has no program but its
  // own): then only the identity path was warmed.
  auto session = co_await agent->exec(request);
  for (; session;) {
    HUTCH_CO_TRY(auto event, co_await (*session)->next());
    if (event.kind == guest::ExecEvent::Kind::kExit) break;
  }
  HUTCH_CO_TRY_VOID(co_await vm.pause());
  co_return agent;
}

asio::awaitable<void> BoxService::waitForCreates() {
  while (creating_ > 0 && !draining_) {
    asio::steady_timer wait(loop_, std::chrono::milliseconds(50));
    boost::system::error_code ec;
    co_await wait.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

std::vector<PoolStatus> BoxService::poolStatus() const {
  std::vector<PoolStatus> out;
  for (const auto& [key, shape] : pool_shapes_) {
    PoolStatus status = shape;
    auto it = warm_.find(key);
    status.ready = it == warm_.end() ? 0 : it->second.size();
    status.size = poolTarget(key);
    status.filling = filling_.contains(key);
    out.push_back(std::move(status));
  }
  std::sort(out.begin(), out.end(), [](const PoolStatus& a, const PoolStatus& b) {
    return std::tie(a.template_name, a.cpus, a.memory_mib) <
           std::tie(b.template_name, b.cpus, b.memory_mib);
  });
  return out;
}

asio::awaitable<void> BoxService::drainPool() {
  // A fill under way would launch a VM after the drain, a discard might not have killed its VM
  // yet: stop the fills and wait for both.
  draining_ = true;
  while (!filling_.empty() || discarding_ > 0) {
    asio::steady_timer wait(loop_, std::chrono::milliseconds(20));
    boost::system::error_code ec;
    co_await wait.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  auto warm = std::move(warm_);
  warm_.clear();
  for (auto& [key, entries] : warm) {
    for (Pooled& entry : entries) {
      co_await entry.vm->kill();
      networkDown("", entry.uid_index);
      held_uid_indices_.erase(static_cast<uint32_t>(entry.uid_index));
      removeQuietly(boxDir(entry.id));
    }
  }
}

asio::awaitable<void> BoxService::removeOrphans() {
  auto boxes = store_.list();
  if (!boxes) co_return;
  std::set<std::string> known;
  for (const Box& box : *boxes) known.insert(box.id);
  std::error_code ec;
  std::vector<fs::path> orphans;
  for (const auto& entry : fs::directory_iterator(config_.boxes_dir, ec)) {
    if (!known.contains(entry.path().filename().string())) orphans.push_back(entry.path());
  }
  for (const fs::path& dir : orphans) {
    if (auto vm = co_await backend_.adopt(dir); vm) co_await (*vm)->kill();
    spdlog::info(
        "Removing {} (no box record: a warm pool VM of an earlier hutchd, or a box "
        "whose rm it did not finish)",
        dir.string());
    backend_.releaseRunDir(dir);
    removeQuietly(dir);
  }
  if (network_) network_->forgetAllBut(known);
}

}  // namespace hutch::box

// BoxService as the warm pool's Source (warm_pool.h): the pool's VMs restored from a template
// snapshot, warmed up, and disposed of; and the orphans a dead hutchd's pool left.
// See docs/snapshots.md ("Warm pool").
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "box/box_service.h"
#include "box/network_service.h"
#include "box/snapshot_helpers.h"
#include "event/offload.h"
#include "guest/identity.h"
#include "storage/overlay.h"

namespace hutch::box {

namespace fs = std::filesystem;

bool BoxService::usable(const PooledVm& vm, const std::string& key, const BoxConfig& config) {
  if (vm.vm->exited() || !vm.agent || !vm.agent->isOpen()) return false;
  auto current = store_.findTemplateSnapshot(key);
  if (!current || !*current || (*current)->id != vm.snapshot_id) return false;
  // Read again: the snapshot may have been refused since (its manifest changed).
  auto manifest = readManifest((*current)->dir);
  return manifest && !incompatibility(*manifest, config_.env, config.cpus, config.memory_mib);
}

asio::awaitable<void> BoxService::discard(PooledVm vm) {
  if (vm.agent) vm.agent->close();
  co_await vm.vm->kill();
  networkDown("", vm.uid_index);
  uid_indices_.release(static_cast<uint32_t>(vm.uid_index));
  removeQuietly(boxDir(vm.id));
}

asio::awaitable<Result<PooledVm>> BoxService::make(std::string key, storage::Template tmpl,
                                                   BoxConfig config) {
  auto snapshot = store_.findTemplateSnapshot(key);
  if (!snapshot) co_return fail(snapshot.error());
  if (!*snapshot) co_return fail(Errc::kNotFound, "its template snapshot is gone");
  Snapshot snap = **snapshot;
  Box box;
  box.id = randomId();
  box.name = "pool-" + box.id;
  box.config = config;
  box.image_dir = tmpl.dir.string();
  // Its own uid from now on; the box that takes it keeps it.
  // Held at once: a create may pick an index while we wait.
  HUTCH_CO_TRY(const uint32_t index, uid_indices_.take());
  box.uid_index = index;
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
    uid_indices_.release(index);
    removeQuietly(boxDir(box.id));
    co_return fail(overlay.error());
  }
  spec.incoming_state = snap.dir / "state";
  spec.ram = vmm::GuestRam::kMappedFile;
  spec.memory_file = snap.dir / "memory";
  // No co_await inside a conditional expression: GCC 12 mangles the temporaries.
  Result<std::unique_ptr<vmm::Vm>> vm = fail(Errc::kInternal, "not launched");
  auto net = co_await prepareNetwork(index);
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
    networkDown("", index);
    uid_indices_.release(index);
    removeQuietly(boxDir(box.id));
    co_return fail(vm.error());
  }
  co_return PooledVm{box.id, snap.id, std::move(*vm), std::move(agent), box.uid_index};
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

// BoxService's template snapshots: a template's first box of a size boots cold, passes the
// template's ready check, and is saved (memory, device state, disk layer, manifest); every later
// box of that template and size restores from it. See docs/snapshots.md.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/statvfs.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

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
using nlohmann::json;

namespace {

constexpr const char* kReadyCheck = "/etc/hutch/ready";

}  // namespace

asio::awaitable<Result<Snapshot>> BoxService::templateSnapshot(const storage::Template& tmpl,
                                                               const BoxConfig& config,
                                                               std::string& note) {
  std::string key = templateSnapshotKey(tmpl.dir.string(), config.cpus, config.memory_mib);
  HUTCH_CO_TRY(auto existing, store_.findTemplateSnapshot(key));
  if (existing) {
    auto manifest = co_await readManifestOffLoop(existing->dir);
    std::optional<std::string> why;
    if (!manifest) {
      why = manifest.error().describe();
    } else {
      why = incompatibility(*manifest, config_.env, config.cpus, config.memory_mib);
    }
    if (!why) co_return *existing;
    // Never restored: it goes, and a new one is made from a cold boot.
    note = fmt::format(" (made now: snapshot {} was refused: {})", existing->id, *why);
    spdlog::warn("Template snapshot {} refused: {}", existing->id, *why);
    // Its files go once no box stands on its disk layer (collectGarbage).
    HUTCH_CO_TRY_VOID(store_.removeSnapshot(existing->id));
    collectGarbage();
  }
  if (auto it = flights_.find(key); it != flights_.end()) {
    std::shared_ptr<Flight> flight = it->second;
    while (!flight->result) {
      boost::system::error_code ec;
      co_await flight->done.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    co_return *flight->result;
  }
  auto flight = std::make_shared<Flight>(loop_);
  flight->done.expires_at(std::chrono::steady_clock::time_point::max());
  flights_[key] = flight;
  auto made = co_await makeTemplateSnapshot(tmpl, config);
  flight->result = made;
  flights_.erase(key);
  flight->done.cancel();
  co_return made;
}

asio::awaitable<Result<>> BoxService::runReadyCheck(guest::AgentClient& agent,
                                                    proto::ExecRequest check,
                                                    bool absent_is_ready) {
  std::string command;
  for (const std::string& arg : check.argv) command += (command.empty() ? "" : " ") + arg;
  const auto deadline = std::chrono::steady_clock::now() + config_.ready_timeout;
  const auto timed_out = [&](const std::string& how) {
    return fail(Errc::kTimeout,
                fmt::format("The template's ready check '{}' did not pass within {} s ({}): make "
                            "it return at once, 0 when the image is ready and non-zero before "
                            "(it is run again until it passes)",
                            command, config_.ready_timeout.count(), how));
  };
  // Bounds one run of the check: at the deadline SIGKILL to its process group; 10 s later, if the
  // agent still sent no exit, the agent connection is closed (which ends next() with an error; the
  // template VM is discarded after a failed check anyway). Shared with its timer's handler, which
  // may run after the run is over: disarm() makes it a no-op.
  struct Watchdog : std::enable_shared_from_this<Watchdog> {
    Watchdog(const asio::any_io_executor& executor, std::chrono::steady_clock::time_point at)
        : timer(executor, at) {}
    void arm(const std::shared_ptr<guest::ExecSession>& session, guest::AgentClient& client) {
      timer.async_wait([self = shared_from_this(), weak = std::weak_ptr(session),
                        &client](const boost::system::error_code& ec) {
        auto live = weak.lock();
        if (ec || self->disarmed || !live || live->finished()) return;
        self->fired = true;
        spdlog::warn("The template's ready check (pid {}) still runs at its deadline: killing it",
                     live->pid());
        (void)live->signal(SIGKILL);
        self->timer.expires_after(std::chrono::seconds(10));
        self->timer.async_wait([self, &client](const boost::system::error_code& again) {
          if (again || self->disarmed) return;
          spdlog::warn("The template's ready check did not end when killed: closing the agent");
          client.close();
        });
      });
    }
    void disarm() {
      disarmed = true;
      timer.cancel();
    }
    asio::steady_timer timer;
    bool fired = false;
    bool disarmed = false;
  };
  std::string last = "never ran";
  while (std::chrono::steady_clock::now() < deadline) {
    // A guest that never answers the exec (a wedged agent or kernel) must not hold the template
    // past the deadline either: then the agent connection is closed, which fails the exec.
    auto started = std::make_shared<bool>(false);
    auto start_timer = std::make_shared<asio::steady_timer>(loop_, deadline);
    start_timer->async_wait([started, &agent](const boost::system::error_code& ec) {
      if (ec || *started) return;
      spdlog::warn("The template's ready check did not start by its deadline: closing the agent");
      agent.close();
    });
    auto session = co_await agent.exec(check);
    *started = true;
    start_timer->cancel();
    // An image without the check is ready once its agent answers.
    if (!session && session.error().code() == Errc::kNotFound && absent_is_ready) co_return ok();
    if (!session && std::chrono::steady_clock::now() >= deadline) {
      co_return timed_out("it did not start: the guest agent did not answer");
    }
    if (!session) co_return fail(session.error().withContext("Cannot run the ready check"));
    // No run outlives the deadline.
    auto watchdog = std::make_shared<Watchdog>(loop_, deadline);
    watchdog->arm(*session, agent);
    for (;;) {
      auto event = co_await (*session)->next();
      if (!event) {
        watchdog->disarm();
        if (watchdog->fired) co_return timed_out("it hung, and the agent did not answer its kill");
        co_return fail(event.error().withContext("The ready check broke off"));
      }
      if (event->kind != guest::ExecEvent::Kind::kExit) continue;
      watchdog->disarm();
      if (watchdog->fired) co_return timed_out("it was still running and was killed");
      if (event->exit_status.code && *event->exit_status.code == 0) co_return ok();
      last = event->exit_status.code ? fmt::format("exit {}", *event->exit_status.code)
                                     : std::string("killed by a signal");
      break;
    }
    asio::steady_timer pause(loop_, std::min(deadline, std::chrono::steady_clock::now() +
                                                           std::chrono::milliseconds(500)));
    boost::system::error_code ec;
    co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  co_return timed_out("last: " + last);
}

asio::awaitable<Result<>> BoxService::startTemplateCommand(guest::AgentClient& agent,
                                                           const storage::Template& tmpl,
                                                           bool settle) {
  const json start = tmpl.manifest.value("start", json::object());
  const json defaults = tmpl.manifest.value("defaults", json::object());
  proto::ExecRequest base;
  base.user = defaults.value("user", "");
  if (base.user.empty()) base.user = "root";
  base.cwd = defaults.value("workdir", "");
  if (base.cwd.empty()) base.cwd = "/";
  for (const json& e : defaults.value("env", json::array())) {
    if (e.is_string()) base.env.push_back(e.get<std::string>());
  }
  const std::string cmd = start.value("cmd", "");
  const std::string ready = start.value("ready", "");
  if (!cmd.empty()) {
    proto::ExecRequest run = base;
    run.argv = {"/bin/sh", "-c", cmd};
    run.detach = true;
    auto session = co_await agent.exec(run);
    if (!session) {
      co_return fail(session.error().withContext(
          fmt::format("Cannot start the template's start command '{}' (it runs with /bin/sh -c "
                      "as {})",
                      cmd, run.user)));
    }
    spdlog::info("Template {}: start command running (pid {}, log {})", tmpl.name,
                 (*session)->pid(), (*session)->logPath());
  }
  if (ready.empty()) {
    if (cmd.empty() || !settle) co_return ok();
    // E2B's default when only a start command is given.
    asio::steady_timer wait(loop_, std::chrono::seconds(20));
    boost::system::error_code ec;
    co_await wait.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    co_return ok();
  }
  proto::ExecRequest check = base;
  check.argv = {"/bin/sh", "-c", ready};
  co_return co_await runReadyCheck(agent, check, false);
}

asio::awaitable<void> BoxService::runStartCommandOnColdBoot(const Box& box, Runtime& runtime) {
  if (box.image_dir.empty() || !runtime.agent) co_return;
  // Named: GCC 12 destroys temporaries inside a co_await expression twice (offload's moved
  // copies of `load` among them): its members must be movable, never const copies.
  auto load = [file = std::filesystem::path(box.image_dir) /
                      "manifest.json"]() -> Result<std::string> {
    std::error_code ec;
    if (!std::filesystem::exists(file, ec)) return std::string();
    return sys::readFile(file);
  };
  auto read = co_await event::offload(pool_, std::move(load));
  if (!read || read->empty()) co_return;
  storage::Template tmpl{.name = box.config.template_name,
                         .manifest = json::parse(*read, nullptr, false)};
  if (!tmpl.manifest.is_object() || !tmpl.manifest.value("start", json()).is_object() ||
      tmpl.manifest["start"].value("cmd", "").empty()) {
    co_return;
  }
  Result<> started = co_await startTemplateCommand(*runtime.agent, tmpl, /*settle=*/false);
  if (started) {
    publish("box.start_command", box, {{"ok", true}});
    co_return;
  }
  Error error = started.error();
  spdlog::warn("box {}: its template's start command on a cold boot: {}", box.name,
               error.describe());
  publish("box.start_command", box, {{"ok", false}, {"error", error.message()}});
}

asio::awaitable<Result<Snapshot>> BoxService::makeTemplateSnapshot(const storage::Template& tmpl,
                                                                   const BoxConfig& config) {
  auto started = std::chrono::steady_clock::now();
  Snapshot snap;
  snap.id = randomId();
  snap.kind = SnapshotKind::kTemplate;
  snap.template_key = templateSnapshotKey(tmpl.dir.string(), config.cpus, config.memory_mib);
  snap.dir = config_.snapshots_dir / snap.id;
  snap.layer = snap.dir / "layer.qcow2";
  snap.created_at = unixNow();
  WriteClaim claim(*this, snap.dir);  // until the record is in the store (beside flights_)
  if (auto made = makeDirectories(snap.dir); !made) co_return fail(made.error());
  std::error_code ec;
  spdlog::info("Making template snapshot {} of {} ({} vCPU, {} MiB) by a cold boot", snap.id,
               tmpl.name, config.cpus, config.memory_mib);
  auto cleanup = [&] { removeQuietly(snap.dir); };
  // The template VM's RAM is a file in the snapshot's directory: on a full disk its QEMU dies of
  // SIGBUS at the first page it cannot back. Say that, rather than only how it died.
  auto onSpace = [&](Error error) {
    struct statvfs st {};
    if (::statvfs(config_.snapshots_dir.c_str(), &st) != 0) return error;
    const uint64_t free_mib = (static_cast<uint64_t>(st.f_bavail) * st.f_frsize) >> 20;
    if (free_mib >= config.memory_mib) return error;
    return Error(Errc::kResourceExhausted,
                 fmt::format("{}: No space left on device for its memory file (up to {} MiB; the "
                             "state directory's filesystem has {} MiB free)",
                             error.message(), config.memory_mib, free_mib));
  };

  fs::path base = tmpl.rootfs;
  fs::path layer = snap.layer;
  auto make_layer = [base, layer] { return storage::createOverlay(base, layer); };
  auto layered = co_await event::offload(pool_, std::move(make_layer));
  if (!layered) {
    cleanup();
    co_return fail(layered.error());
  }
  vmm::VmSpec spec;
  spec.id = "template-" + snap.id;
  spec.cpus = config.cpus;
  spec.memory_mib = config.memory_mib;
  spec.accel = config_.accel.accel;
  spec.tcg_cpu_model = config_.env.guest_cpu;
  spec.tsc_khz = config_.tsc_khz;
  spec.kernel = tmpl.kernel;
  spec.initrd = tmpl.initrd;
  spec.disk = snap.layer;
  spec.run_dir = snap.dir;
  spec.ram = vmm::GuestRam::kSharedFile;
  spec.memory_file = snap.dir / "memory";
  spec.free_page_reporting = config_.env.freePageReporting();
  spec.guest_params["hostname"] = "hutch-template";
  spec.backing_files = backingFilesFor(tmpl.dir);
  // The template VM gets a uid of its own for as long as it runs.
  auto index = uid_indices_.take();
  if (!index) {
    cleanup();
    co_return fail(index.error());
  }
  spec.uid_index = *index;
  struct Release {
    BoxService& service;
    uint32_t index;
    ~Release() {
      service.networkDown("", index);
      service.uid_indices_.release(index);
    }
  } release{*this, *index};
  if (network_) {
    spec.netns = network_->netnsPath(*index);
    NetworkService::setGuestParams(spec.guest_params);
  }
  auto net = co_await prepareNetwork(*index);
  if (!net) {
    cleanup();
    co_return fail(net.error().withContext("The template VM has no network"));
  }

  image_cache_.markUsed(tmpl.dir);
  auto vm = co_await backend_.launch(spec);
  if (!vm) {
    cleanup();
    co_return fail(onSpace(vm.error().withContext("The template VM did not start")));
  }
  // From here every failure must stop the VM.
  auto give_up = [&](Error error) -> asio::awaitable<Result<Snapshot>> {
    co_await (*vm)->kill();
    cleanup();
    co_return fail(onSpace(std::move(error)));
  };
  auto agent = co_await connectAgent(**vm, spec.agentSocket(),
                                     std::chrono::steady_clock::now() + config_.boot_timeout);
  if (!agent) {
    Error error = agent.error().withContext("The template VM's agent did not answer");
    co_return co_await give_up(std::move(error));
  }
  fault::point("template.vm-booted", (*vm)->pid());
  // The image's own ready check (the docker template waits for dockerd to answer), so boxes
  // restored from the snapshot have what the image promises already running.
  Result<> ready = ok();
  if (tmpl.manifest.is_object() && tmpl.manifest.value("start", json()).is_object()) {
    ready = co_await startTemplateCommand(**agent, tmpl, /*settle=*/true);
  } else {
    proto::ExecRequest check;
    check.argv = {kReadyCheck};
    check.user = "root";
    ready = co_await runReadyCheck(**agent, check, true);
  }
  // Named errors: GCC 12 destroys temporaries inside a co_await expression twice.
  if (!ready) {
    Error error = ready.error();
    co_return co_await give_up(std::move(error));
  }
  co_await flushGuest(*agent, "template " + tmpl.name);
  auto paused = co_await (*vm)->pause();
  if (!paused) {
    Error error = paused.error();
    co_return co_await give_up(std::move(error));
  }
  fs::path state_file = snap.dir / "state";
  auto saved = co_await (*vm)->saveState(state_file);
  (*agent)->close();
  if (!saved) {
    Error error = saved.error();
    co_return co_await give_up(std::move(error));
  }
  co_await (*vm)->kill();
  for (const char* transient : {"qmp.sock", "agent.sock", "qemu.pid"}) {
    fs::remove(snap.dir / transient, ec);
  }
  freeze(snap.dir / "memory");
  freeze(snap.layer);
  freeze(snap.dir / "state");

  SnapshotManifest manifest;
  manifest.kind = SnapshotKind::kTemplate;
  manifest.env = config_.env;
  manifest.ram = "file";
  manifest.cpus = config.cpus;
  manifest.memory_mib = config.memory_mib;
  manifest.image_dir = tmpl.dir.string();
  manifest.image_key = tmpl.image_key;
  manifest.layer = snap.layer.string();
  manifest.disk_bytes = fs::file_size(tmpl.rootfs, ec);
  manifest.created_at = snap.created_at;
  auto written = co_await writeManifestOffLoop(snap.dir, manifest);
  if (!written) {
    cleanup();
    co_return fail(written.error());
  }
  snap.size_bytes = allocatedBytes(snap.dir);
  fault::point("template.snapshot-saved");
  auto inserted = store_.insertSnapshot(snap);
  if (!inserted) {
    cleanup();
    co_return fail(inserted.error());
  }
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started);
  spdlog::info("Template snapshot {} ready in {} ms ({} MiB on disk, state {} KiB)", snap.id,
               took.count(), snap.size_bytes >> 20, saved->bytes >> 10);
  co_return snap;
}

// ---- captures of running boxes ----

}  // namespace hutch::box

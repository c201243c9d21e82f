// BoxService: every box operation, transport-agnostic. Runs on the daemon's event loop (one
// thread); blocking work (qemu-img, deleting directories) goes to the worker pool.
#pragma once

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "box/box.h"
#include "box/box_agent.h"
#include "box/quotas.h"
#include "box/snapshot.h"
#include "box/uid_indices.h"
#include "box/warm_pool.h"
#include "event/async_event.h"
#include "guest/agent_client.h"
#include "jail/box_ids.h"
#include "storage/box_store.h"
#include "storage/image_cache.h"
#include "storage/templates.h"
#include "vmm/accel.h"
#include "vmm/backend.h"

namespace hutch::box {

namespace asio = boost::asio;

struct ServiceConfig {
  std::filesystem::path boxes_dir;  // <state>/boxes: one directory per box
  vmm::AccelDecision accel;
  uint64_t tsc_khz = 0;
  std::chrono::seconds boot_timeout{120};  // QEMU start -> agent handshake
  std::chrono::seconds stop_timeout{30};   // poweroff request -> QEMU gone
  std::string boot_id;                     // this host boot (/proc/sys/kernel/random/boot_id)
  std::string default_user = "hutch";      // exec's user when the request names none
  // Snapshots: <state>/snapshots/<id>/ and frozen disk layers in <state>/layers/.
  std::filesystem::path snapshots_dir;
  std::filesystem::path layers_dir;
  SnapshotEnv env;  // this host, as snapshot manifests record it
  // The image build cache: every VM start records its build's use there (image_cache.h).
  std::filesystem::path image_cache;
  bool use_snapshots = true;  // false: every create boots cold (hutchd --no-snapshots)
  std::chrono::seconds ready_timeout{180};  // a template's ready check before its snapshot
  unsigned pool_size = 0;  // restored, paused boxes kept ready per template snapshot
  // The pool grows (by one, up to pool_max) when a create finds it empty, and shrinks back to
  // pool_size when no create used it for pool_idle.
  unsigned pool_max = 0;
  std::chrono::seconds pool_idle{600};
  // Idle pause (docs/snapshots.md "Suspend and idle pause"): a box that does no work for
  // idle_pause is paused (a box's own idle_pause_ms overrides it; zero: never), and a box
  // paused for idle_suspend more is suspended (zero: never).
  std::chrono::milliseconds idle_pause{0};
  std::chrono::milliseconds idle_suspend{0};
  // Guest CPU time (of all its vCPUs) below this share of one CPU over an idle check is no work.
  double idle_cpu_share = 0.02;
  // hutch diff (box_diff.cc): the helper that reads disks, and the first of the jail's ids (a
  // box's diff runs as the box's own uid; nobody's without the jail).
  std::filesystem::path diff_helper;
  std::optional<uint32_t> id_base;
};

class NetworkService;

// Told of every box state change (after it is stored) and of removals: what lives and dies with
// a running box outside BoxService (published ports, port_forwards.h) follows it this way.
class BoxObserver {
 public:
  virtual ~BoxObserver() = default;
  virtual void boxStateChanged(const Box& box) = 0;
  virtual void boxRemoved(const std::string& box_id) = 0;
  // Connections open into the box from outside (published ports): work, for idle pause.
  virtual size_t openConnections(const std::string& box_id) const = 0;
};

// The environment of a new box of a template whose manifest is `manifest`: an image template's
// ENV (docs/templates.md), with `requested` over it. Names the box cannot carry are left out.
BoxEnv imageEnvironment(const nlohmann::json& manifest, const BoxEnv& requested);

// The box a saved snapshot was taken of, as it was recorded then (its template, sizes, network
// policy, environment and metadata); kFailedPrecondition when that record is corrupt.
Result<Box> savedSource(const Snapshot& saved);

class BoxService : private WarmPool::Source {
 public:
  BoxService(asio::any_io_executor loop, asio::thread_pool& pool, storage::BoxStore& store,
             const storage::TemplateStore& templates, vmm::VmBackend& backend,
             ServiceConfig config);
  ~BoxService() override;

  // Boots a new box and returns once its agent answers (state running), or the error that made
  // it fail (the box then stays, state failed, with the reason, for `inspect` and `logs`).
  asio::awaitable<Result<Box>> create(BoxSpec spec);
  // Every box, or only those of one owner (storage::OwnerFilter).
  Result<std::vector<Box>> list(const storage::OwnerFilter& owner = std::nullopt);
  // By id, unique id prefix or name, among the boxes `owner` sees.
  Result<Box> get(const std::string& key, const storage::OwnerFilter& owner = std::nullopt);
  // Boots a stopped or failed box again from its own disk (every file is where it was left);
  // resumes a suspended one (every process as it was; a cold boot when its state cannot be
  // loaded here, box.boot says why).
  asio::awaitable<Result<Box>> start(const std::string& key);
  // Clean shutdown: the agent syncs and powers off; QEMU is killed if it does not exit in time.
  asio::awaitable<Result<Box>> stop(const std::string& key);
  // Takes a running box's CA (it has one while it has host secrets) out of its trust store, so
  // that a disk frozen into a template after it trusts nothing the box's egress proxy signed.
  // Nothing to do for a box without secrets.
  asio::awaitable<Result<>> removeCa(const std::string& key);
  // Suspend (box_suspend.cc): the box's memory and devices saved next to its disk, its QEMU
  // gone. `by` ("request", "idle", "expiry") is recorded: a box suspended for being idle is
  // resumed by the next thing done in it (agentFor); one suspended on request needs start().
  asio::awaitable<Result<Box>> suspend(const std::string& key, std::string_view by = "request");
  // How a box was suspended ("request", "idle", "expiry"); "" when it is not.
  std::string suspendedBy(const std::string& box_id);
  // Idle pause: the vCPUs stop, QEMU stays (no CPU used); wake() continues it.
  asio::awaitable<Result<Box>> pause(const std::string& key);
  // A paused box runs again; a box suspended for being idle is resumed. Others are untouched.
  asio::awaitable<Result<>> wake(const std::string& key);
  // Pauses boxes that did no work for their idle period and suspends boxes paused long enough.
  asio::awaitable<void> idleCheck();
  // What hutchd does every second: scanConsoles(), expireDue(), idleCheck(), and idle warm
  // pools shrink.
  asio::awaitable<void> tick() {
    scanConsoles();
    warm_pool_.shrinkIdle();
    co_await expireDue();
    co_await idleCheck();
  }
  // Removes the box's VM (force needed if it is running), its directory and its record.
  asio::awaitable<Result<>> remove(const std::string& key, bool force);
  // How `actor` acts inside a running box (box_agent.h: every exec and file operation through it
  // is reported). A paused box, or one suspended for being idle, is woken first;
  // kFailedPrecondition if the box is not running otherwise.
  asio::awaitable<Result<std::shared_ptr<BoxAgent>>> agentFor(const std::string& key,
                                                              const observe::Actor& actor);
  Result<std::filesystem::path> consoleLog(const std::string& key);
  // What a running box's VMM uses of the host (its cgroup): memory, CPU time, tasks.
  Result<vmm::ResourceUsage> usage(const std::string& key);
  const std::string& defaultUser() const { return config_.default_user; }
  // What an exec or a file operation in box `key` gets when the request leaves it out: for a
  // box of an image template, the image's USER (root when it names none) and WORKDIR; for
  // others --default-user and no working directory (the agent takes the user's home).
  struct ExecDefaults {
    std::string user;
    std::string cwd;
  };
  ExecDefaults execDefaults(const std::string& key);
  // Every VM gets a NIC in a walled network namespace and every running box is served by
  // hutch-egress (network_service.h). Without one (hutchd --no-network) boxes have no NIC.
  // Set before anything runs; it must outlive the service.
  void setNetwork(NetworkService* network) { network_ = network; }
  NetworkService* network() const { return network_; }
  // Changes a box's egress policy (`text`: a preset or JSON), live if it runs.
  Result<Box> setPolicy(const std::string& key, const std::string& text,
                        const observe::Actor& actor);
  // Sets when the box's lifetime ends (unix seconds; 0: never) and what happens then. It does
  // not change updated_at, which says since when the box is in its state.
  Result<Box> setLifetime(const std::string& key, int64_t expires_at, Expiry on_expiry);
  // Does what each box whose lifetime has ended asks for (remove, stop or suspend it).
  asio::awaitable<void> expireDue();
  // Reads what running boxes' consoles printed since the last call and publishes the guest
  // kernel's OOM kills (box.oom_kill).
  void scanConsoles();
  // One observer (or none); it must outlive the service or be reset to nullptr first.
  void setObserver(BoxObserver* observer) { observer_ = observer; }
  // Where events and audit records go (docs/observability.md); they must outlive the service.
  void setActivity(ActivitySinks sinks) {
    activity_ = sinks;
    quotas_.setEvents(sinks.events);
  }
  const ActivitySinks& activity() const { return activity_; }
  // The limits of an owner (docs/api.md "Owners"), checked at create, fork, start and rollback.
  // Without one, nothing is limited.
  void setQuotas(Quotas::Lookup lookup) { quotas_.setLookup(std::move(lookup)); }

  // Captures a running box (paused for the capture, then resumed) and starts spec.count new boxes
  // from it, each with its own disk overlay and identity; running processes and unsaved files
  // are in every child.
  asio::awaitable<Result<std::vector<Box>>> fork(const std::string& key, ForkSpec spec);
  // Checkpoints of a running box: disk and memory, restorable with rollback().
  asio::awaitable<Result<Snapshot>> checkpoint(const std::string& key, std::string name);
  Result<std::vector<Snapshot>> checkpoints(const std::string& key);
  asio::awaitable<Result<>> removeCheckpoint(const std::string& key, const std::string& name);
  // Returns the box to exactly the checkpoint's state (files and processes); the box runs
  // afterwards, whatever state it was in.
  asio::awaitable<Result<Box>> rollback(const std::string& key, const std::string& name);

  // hutch diff (box_diff.cc, docs/diff.md): the files added, changed and deleted on the box's
  // disk since `from`: "" or "template" (the template snapshot it was restored from, or its
  // template's disk), "image" (the template's disk), or a checkpoint's name. Works on running
  // (synced and paused while its top layer is copied), paused, stopped, suspended and failed
  // boxes; the box's filesystem is read by the sandboxed hutch-diff helper only.
  struct DiffRequest {
    std::string from;
    bool all = false;                 // no built-in noise rules (diff::Filter::defaults)
    std::vector<std::string> ignore;  // the caller's patterns (diff::Filter)
    size_t limit = 100000;            // changes listed at most (the total is always given)
    observe::Actor actor;             // who asks: the audit log records it
  };
  // The API's diff object: changes, hidden (counts by rule), notes, total, truncated, from,
  // box, took_ms.
  asio::awaitable<Result<nlohmann::json>> diff(const std::string& key, DiffRequest request);
  // One regular file's unified diff (`diff -u`, a/PATH and b/PATH, /dev/null for a side where
  // it does not exist; each side read up to 1 MiB).
  struct DiffPatch {
    std::string text;
    nlohmann::json meta;  // before, after ({type,size,mode} or null), truncated, from
  };
  asio::awaitable<Result<DiffPatch>> diffPatch(const std::string& key, std::string path,
                                               std::string from, observe::Actor actor);
  // A pax tar of what was added and changed (regular files, directories, symlinks), as an open
  // file with no name left.
  asio::awaitable<Result<UniqueFd>> diffExport(const std::string& key, DiffRequest request);
  // What one diff works with: both views' chains (top first), a root-only scratch directory
  // (removed with it) holding a consistent copy of the box's top layer, the ids the helper runs
  // as.
  struct DiffWork {
    std::filesystem::path dir;
    jail::BoxIds ids;
    std::vector<std::filesystem::path> before;
    std::vector<std::filesystem::path> after;
    nlohmann::json from;  // what the baseline is, for the answer
    Box box;
    DiffWork() = default;
    DiffWork(const DiffWork&) = delete;
    DiffWork& operator=(const DiffWork&) = delete;
    ~DiffWork();
  };
  // Saved boxes (E2B's snapshots): a running box captured like a checkpoint (paused for the
  // capture, then resumed), kept after the box is removed, owned by the box's owner and named
  // uniquely per owner (empty: generated). A box with host secrets cannot be saved: its
  // placeholders and CA would outlive it.
  asio::awaitable<Result<Snapshot>> save(const std::string& key, std::string name);
  // Saved boxes of an owner (nullopt: everyone's), and one by id or name.
  Result<std::vector<Snapshot>> saved(const std::optional<std::string>& owner);
  Result<Snapshot> findSaved(const std::optional<std::string>& owner, const std::string& key);
  // A new box from a saved one, running with every process and file as they were when it was
  // saved. From `spec` it takes the name, owner, metadata, lifetime, and environment variables
  // (added to the saved box's, for commands started from now on).
  asio::awaitable<Result<Box>> createFromSaved(const Snapshot& saved, BoxSpec spec);
  Result<> removeSaved(const Snapshot& saved);
  Result<DiskUsage> diskUsage();
  // Every warm pool made so far (one per template and size that a create used), by template.
  std::vector<PoolStatus> poolStatus() const { return warm_pool_.status(); }
  // Deletes disk layers no box or snapshot stands on and snapshot directories with no record.
  void collectGarbage();

  // After a hutchd restart: boxes recorded as running whose QEMU still runs are adopted (VM and
  // agent reattached); the others, and boxes caught mid-operation, are marked failed with why.
  asio::awaitable<Result<>> recoverAfterRestart();
  // Stops watching all VMs (they keep running) — for daemon shutdown.
  void detachAll();
  // Kills the warm pool's VMs (they are no one's boxes) — for daemon shutdown.
  asio::awaitable<void> drainPool() { return warm_pool_.drain(); }
  // Waits (up to `limit`) for the background cleanup of boxes already removed: their QEMUs
  // killed, networks and directories deleted — for daemon shutdown, so that `rm` followed at
  // once by a stop leaves nothing running. What is not done by then is finished at next start.
  asio::awaitable<void> finishCleanups(std::chrono::seconds limit);

 private:
  struct Runtime {
    explicit Runtime(const asio::any_io_executor& ex) : exit_signal(ex) {}
    std::unique_ptr<vmm::Vm> vm;
    std::shared_ptr<guest::AgentClient> agent;
    asio::steady_timer exit_signal;  // cancelled when the VM exits
    bool exited = false;
    bool stopping = false;
    bool removed = false;
    bool busy = false;  // a capture or rollback is under way
    std::string exit_reason;
    std::chrono::steady_clock::time_point last_activity;  // exec, files, connections (BoxAgent)
    uint64_t console_offset = 0;  // how far scanConsoles() has read console.log
    std::chrono::steady_clock::time_point paused_at;
    int active_sessions = 0;  // exec sessions open through BoxAgent (idle pause)
    // The guest's own CPU time at the last idle check (from its /proc/stat), in clock ticks.
    uint64_t guest_busy_ticks = 0;
    uint64_t guest_total_ticks = 0;
    bool sampling = false;  // an idle check is reading /proc/stat
    std::chrono::steady_clock::time_point last_sample;
    // Set while the VMM holds the guest stopped because the host's disk is full (watchDisk):
    // what it said. Kept here, not in the database, which may not be writable either.
    std::string stalled;
  };
  // Holds a runtime busy (no other capture, rollback, suspend or diff of it) while it lives.
  class Busy {
   public:
    explicit Busy(Runtime& runtime) : runtime_(runtime) { runtime_.busy = true; }
    ~Busy() { runtime_.busy = false; }
    Busy(const Busy&) = delete;
    Busy& operator=(const Busy&) = delete;

   private:
    Runtime& runtime_;
  };
  // Claims a snapshot directory while it is written: from its creation until its record is in
  // the store (or it is removed). While any claim is held, collectGarbage() sweeps nothing: a
  // directory or disk layer not yet recorded is not garbage, whatever else happens meanwhile
  // (another snapshot removed, the box itself removed and its runtime gone).
  class WriteClaim {
   public:
    WriteClaim(BoxService& service, std::filesystem::path dir)
        : service_(service), dir_(std::move(dir)) {
      service_.writing_.insert(dir_);
    }
    ~WriteClaim() { service_.writing_.erase(service_.writing_.find(dir_)); }
    WriteClaim(const WriteClaim&) = delete;
    WriteClaim& operator=(const WriteClaim&) = delete;

   private:
    BoxService& service_;
    std::filesystem::path dir_;
  };
  // kFailedPrecondition while `runtime` is busy, saying so and what to do: "try again", "stop
  // it", ... `when it is done`.
  static Result<> checkNotBusy(const Box& box, const Runtime& runtime, std::string_view then);

  // Where a restore comes from.
  // A capture's state file while it is being written: a fork's children start their VMs
  // meanwhile and load it once it is done.
  struct PendingState {
    explicit PendingState(const asio::any_io_executor& ex) : changed(ex) {}
    event::AsyncEvent changed;
    std::optional<Result<>> done;
    void finish(Result<> result) {
      done = std::move(result);
      changed.notify();
    }
  };
  struct RestoreSource {
    std::filesystem::path state;
    std::filesystem::path memory_file;      // empty: the RAM is in the state file
    std::filesystem::path layer;            // the frozen disk the box's new overlay stands on
    uint64_t disk_bytes = 0;                // the layer's virtual size
    std::string label;                      // for the box's boot note and logs
    std::shared_ptr<PendingState> pending;  // set: `state` is still being written
    bool keep_disk = false;  // a suspended box: its own disk, no new overlay on `layer`
  };
  struct Capture {
    std::filesystem::path state;
    std::filesystem::path layer;
    uint64_t disk_bytes = 0;
    vmm::SaveStats stats;
  };
  struct Flight {  // one template snapshot being made; others wait for it
    explicit Flight(const asio::any_io_executor& ex) : done(ex) {}
    asio::steady_timer done;
    std::optional<Result<Snapshot>> result;
  };

  // `launched`: a VM restored already and paused (the warm pool), with its agent if it has one.
  asio::awaitable<Result<Box>> bootBox(Box& box, const RestoreSource* from = nullptr,
                                       std::unique_ptr<vmm::Vm> launched = nullptr,
                                       std::shared_ptr<guest::AgentClient> agent = nullptr);
  asio::awaitable<Result<>> boot(Box& box, std::shared_ptr<Runtime> runtime,
                                 const RestoreSource* from, std::unique_ptr<vmm::Vm> launched,
                                 std::shared_ptr<guest::AgentClient> agent);
  // WarmPool::Source (box_pool.cc): the warm pool's VMs are restored, warmed up and disposed
  // of here.
  asio::awaitable<Result<PooledVm>> make(std::string key, storage::Template tmpl,
                                         BoxConfig config) override;
  bool usable(const PooledVm& vm, const std::string& key, const BoxConfig& config) override;
  asio::awaitable<void> discard(PooledVm vm) override;
  // The last steps of rm, in the background: the QEMU killed, the network and uid given back,
  // the directory deleted.
  asio::awaitable<void> cleanUp(Box box, std::shared_ptr<Runtime> runtime);
  // Runs a pool VM once before it waits: resume, handshake, one command as the default user,
  // pause. The agent it returns stays connected.
  asio::awaitable<Result<std::shared_ptr<guest::AgentClient>>> warmUp(vmm::Vm& vm,
                                                                      const vmm::VmSpec& spec);
  // Box directories with no record: pool VMs of an earlier hutchd. Their QEMU is killed.
  asio::awaitable<void> removeOrphans();
  vmm::VmSpec vmSpecFor(const Box& box) const;
  // fnmatch patterns of the files a disk may stand on (VmSpec::backing_files).
  std::vector<std::string> backingFilesFor(const std::filesystem::path& image_dir) const;
  asio::awaitable<Result<>> applyIdentity(const Box& box, Runtime& runtime, bool grow_root);
  // The template snapshot a new box of `config` restores from: a compatible one, or one made
  // now by booting the template cold. `note` says why an older one was not used.
  asio::awaitable<Result<Snapshot>> templateSnapshot(const storage::Template& tmpl,
                                                     const BoxConfig& config, std::string& note);
  asio::awaitable<Result<Snapshot>> makeTemplateSnapshot(const storage::Template& tmpl,
                                                         const BoxConfig& config);
  // Runs `check` until it exits 0, every 500 ms, for at most --ready-timeout. With
  // `absent_is_ready` a check that is not there (kNotFound: the image has no /etc/hutch/ready)
  // passes at once.
  asio::awaitable<Result<>> runReadyCheck(guest::AgentClient& agent, proto::ExecRequest check,
                                          bool absent_is_ready);
  // A template's start command (docs/templates.md "Start and ready commands"), started detached
  // so that it runs in the snapshot, then its ready check (none given and `settle`: 20 s, as
  // E2B waits before its snapshot).
  asio::awaitable<Result<>> startTemplateCommand(guest::AgentClient& agent,
                                                 const storage::Template& tmpl, bool settle);
  // A box that booted cold (not restored from its template's snapshot, where the start command
  // already runs) starts its template's start command and waits for its ready check, as a
  // container runs its CMD at every start. A failure is the box's event "box.start_command"
  // and a warning, not the boot's failure (as an unhealthy container still runs).
  asio::awaitable<void> runStartCommandOnColdBoot(const Box& box, Runtime& runtime);
  // Runs `sync` in the guest, so that what it wrote but still holds in its page cache is on its
  // disk before a capture: a checkpoint's or fork's frozen layer, a template snapshot's layer and
  // a suspended box's disk then hold every file the guest wrote (what reads only the disk, like
  // a template made from it or a cold boot, sees them). Bounded: a guest that does not finish in
  // kGuestSyncLimit is given up on (its `sync` killed), and the capture goes on, crash-consistent.
  asio::awaitable<void> flushGuest(const std::shared_ptr<guest::AgentClient>& agent,
                                   std::string_view box_name);
  // readManifest and writeManifest on the worker pool: they read whole snapshot files (hashes).
  asio::awaitable<Result<SnapshotManifest>> readManifestOffLoop(const std::filesystem::path& dir);
  asio::awaitable<Result<>> writeManifestOffLoop(const std::filesystem::path& dir,
                                                 const SnapshotManifest& manifest);
  // A running box's disk and RAM into `dir` and layers/: freezeDisk() then saveAndResume().
  asio::awaitable<Result<Capture>> capture(Box& box, Runtime& runtime,
                                           const std::filesystem::path& dir);
  asio::awaitable<Result<Capture>> freezeDisk(Box& box, Runtime& runtime,
                                              const std::filesystem::path& dir);
  asio::awaitable<Result<>> saveAndResume(const Box& box, Runtime& runtime, Capture& capture);
  Result<SnapshotManifest> manifestFor(const Box& box, SnapshotKind kind, const Capture& capture);
  Result<std::pair<Box, std::shared_ptr<Runtime>>> runningBox(const std::string& key,
                                                              std::string_view what);
  asio::awaitable<Result<Box>> createFromCapture(const Box& parent, std::string id,
                                                 std::string name, const RestoreSource& source);
  // The children of one fork, made concurrently (forkChild), each in its slot.
  struct ForkOutcome {
    ForkOutcome(const asio::any_io_executor& ex, unsigned count)
        : changed(ex), children(count), running(count) {}
    event::AsyncEvent changed;
    std::vector<std::optional<Result<Box>>> children;
    unsigned running;
  };
  asio::awaitable<void> forkChild(Box parent, std::string id, std::string name,
                                  RestoreSource source, std::shared_ptr<ForkOutcome> outcome,
                                  unsigned index);
  void recoverInterruptedCapture(Box& box);
  void pruneDiskFiles(const Box& box, const std::string& keep);
  // The agent of `vm`, on the channel the backend connected before the guest ran if it made one,
  // else on `socket`; handshaken.
  asio::awaitable<Result<std::shared_ptr<guest::AgentClient>>> connectAgent(
      vmm::Vm& vm, const std::filesystem::path& socket,
      std::chrono::steady_clock::time_point deadline);
  asio::awaitable<Result<>> adopt(Box& box);
  // The network namespace for the VM of uid index `index`, made afresh (nothing without a
  // NetworkService).
  asio::awaitable<Result<>> prepareNetwork(uint32_t index);
  // A running box: hutch-egress serves it; its CA goes into its trust store when it has secrets.
  // The box's /etc/npmrc and /etc/pip.conf: the host's registries its policy allows
  // (NetworkService::registryFiles). Nothing is run when there is nothing to write, unless
  // `even_if_empty` (a policy change: a file hutch wrote before goes).
  asio::awaitable<Result<>> writeRegistryFiles(const Box& box, Runtime& runtime,
                                               bool even_if_empty);
  asio::awaitable<Result<>> networkUp(const Box& box, Runtime& runtime);
  // Runs `script` (kInstallCa, kRemoveCa) as root in the box with the box's CA in $HUTCH_CA.
  asio::awaitable<Result<>> runCaScript(const std::string& box_id, guest::AgentClient& agent,
                                        const char* script, std::string what);
  // Runs argv as root in the box to its end, `stdin_data` (if any) on its standard input; its
  // standard error is the error when it fails.
  static asio::awaitable<Result<>> runAsRoot(guest::AgentClient& agent,
                                             std::vector<std::string> argv,
                                             std::vector<std::string> env, std::string what,
                                             std::string stdin_data);
  // Shared folders (box_shares.cc): only the host's administrator may ask (a key's box must not
  // see the host's files), in a valid form, of host directories that can be shared.
  static Result<> checkShares(const BoxSpec& spec);
  // The virtio-fs tag of a box's i-th shared folder.
  static std::string shareTag(size_t i);
  // A booted box's shared folders, mounted where it asked (BoxShare::box_dir).
  // The VM is killed if that takes longer than the boot timeout (a server that never answers).
  asio::awaitable<Result<>> mountShares(const Box& box, std::shared_ptr<Runtime> runtime);
  // The VM of the box (or of a template or pool VM: empty id) is gone: no more egress, no
  // namespace.
  void networkDown(const std::string& box_id, int64_t index);
  asio::awaitable<void> watch(std::string id, std::shared_ptr<Runtime> runtime);
  // Waits for the box's agent connection to end. Ended by the agent while the box runs (it broke
  // the protocol, stopped reading, or went away without its VM), the box is failed with that
  // reason and its VM stopped: `start` boots it again from its disk.
  asio::awaitable<void> watchAgent(std::string id, std::shared_ptr<Runtime> runtime);
  // While the VM runs: when its VMM stops the guest for lack of space on the host (a write to
  // its disk failed), the box reads as stalled (get, list, agentFor say why, with an event);
  // once the state directory's filesystem has room again the VM is resumed and its write goes
  // through. Nothing is lost: the guest never saw an error.
  asio::awaitable<void> watchDisk(std::string id, std::shared_ptr<Runtime> runtime);
  // `box` with what its runtime knows that its record does not (a stall), for get() and list().
  Box withRuntimeState(Box box) const;
  asio::awaitable<bool> waitExit(Runtime& runtime, std::chrono::steady_clock::duration timeout);
  Result<> setState(Box& box, BoxState state, std::string reason = {});
  // Events (docs/observability.md): one about `box`; an operation that failed with the box as
  // it was (or, without a box record, about its owner).
  void publish(const std::string& type, const Box& box,
               const nlohmann::json& data = nlohmann::json::object());
  void publishFailure(std::string_view operation, const observe::Subject& subject,
                      const Error& error);
  // What an operation on the box `key` names is about, looked up before it runs (nothing when
  // no box has that name).
  observe::Subject subjectOf(const std::string& key);
  // Every public verb's reporting, once: its `body` timed; a failure published as
  // "operation.failed" about `subject`, a success handed to `done` (with the milliseconds it
  // took), which publishes the verb's own event. Callers bind `body` and `done` to locals first:
  // GCC 12 mishandles temporaries inside a co_await expression.
  template <typename T, typename Done>
  asio::awaitable<Result<T>> reported(std::string_view operation, observe::Subject subject,
                                      asio::awaitable<Result<T>> body, Done& done) {
    const auto t0 = std::chrono::steady_clock::now();
    Result<T> result = co_await std::move(body);
    if (!result) {
      publishFailure(operation, subject, result.error());
    } else if constexpr (std::is_void_v<T>) {
      done(msSince(t0));
    } else {
      done(*result, msSince(t0));
    }
    co_return result;
  }
  // The public operations' bodies (reported() around them).
  asio::awaitable<Result<Box>> createBox(BoxSpec spec);
  asio::awaitable<Result<Box>> startBox(const std::string& key);
  asio::awaitable<Result<Box>> stopBox(const std::string& key);
  asio::awaitable<Result<>> removeBox(const std::string& key, bool force, std::string& state);
  asio::awaitable<Result<std::vector<Box>>> forkBox(const std::string& key, ForkSpec spec);
  asio::awaitable<Result<Snapshot>> checkpointBox(const std::string& key, std::string name);
  asio::awaitable<Result<Box>> rollbackBox(const std::string& key, const std::string& name);
  asio::awaitable<Result<Snapshot>> saveBox(const std::string& key, std::string name);
  asio::awaitable<Result<Box>> suspendBox(const std::string& key, std::string_view by);
  asio::awaitable<Result<std::unique_ptr<DiffWork>>> prepareDiff(const std::string& key,
                                                                 const std::string& from);
  // A diff read the box's whole disk: the audit log says who, what and whether it worked.
  void auditDiff(const Box& box, const observe::Actor& actor, const std::string& type,
                 nlohmann::json data, const Result<>& outcome);
  // Before a capture (fork, checkpoint, save): a paused box is woken, a suspended one resumed;
  // returns how to suspend it again afterwards ("" : leave it running).
  asio::awaitable<Result<std::string>> readyForCapture(const std::string& key);
  asio::awaitable<void> afterCapture(const std::string& key, const std::string& by);
  // Resumes a suspended box from its state, or boots it cold when that cannot be loaded.
  asio::awaitable<Result<Box>> resumeSuspended(Box box);
  // Forgets a box's suspended state (record and files), and its parked connections.
  Result<> dropSuspend(const std::string& box_id);
  // Connections through published ports across a suspend (docs/snapshots.md "Suspend"): parked
  // in the agent before the guest stops, kept here while the box is suspended, resumed through
  // the new agent once it is back (or through the old one if the suspend did not happen), and
  // closed when it boots cold, is removed or is shut down.
  asio::awaitable<void> parkConnections(const Box& box, Runtime& runtime);
  // Marks a box whose VM ended unexpectedly failed, trying again while the database refuses.
  asio::awaitable<void> recordFailure(Box box, std::string reason);
  asio::awaitable<void> resumeConnections(const std::string& box_id,
                                          std::shared_ptr<guest::AgentClient> agent);
  void dropConnections(const std::string& box_id);
  // One idle check of a running box: whether it did work since the last one.
  asio::awaitable<void> sampleIdle(std::string box_id, std::shared_ptr<Runtime> runtime);
  std::chrono::milliseconds idlePauseOf(const Box& box) const;
  std::filesystem::path boxDir(const std::string& id) const { return config_.boxes_dir / id; }

  asio::any_io_executor loop_;
  asio::thread_pool& pool_;
  storage::BoxStore& store_;
  const storage::TemplateStore& templates_;
  vmm::VmBackend& backend_;
  ServiceConfig config_;
  storage::ImageCache image_cache_;
  std::map<std::string, std::shared_ptr<Runtime>> runtimes_;
  std::map<std::string, std::vector<std::shared_ptr<guest::TcpStream>>> parked_;  // by box id
  // Boxes whose VM ended while the database refused to record it (recordFailure), and why.
  std::map<std::string, std::string> unrecorded_failures_;
  std::map<std::string, std::shared_ptr<Flight>> flights_;  // by template snapshot key
  std::multiset<std::filesystem::path> writing_;  // snapshot directories claimed (WriteClaim)
  // Image templates' defaults (manifest.json "defaults"), by build directory: builds never
  // change once made.
  std::map<std::string, nlohmann::json> image_defaults_;
  UidIndices uid_indices_{store_};
  WarmPool warm_pool_;
  int cleaning_ = 0;  // removed boxes still being cleaned up
  BoxObserver* observer_ = nullptr;
  ActivitySinks activity_;
  int64_t next_expiry_ = 0;                 // unix seconds of the next lifetime to end; 0: unknown
  event::AsyncEvent state_changed_{loop_};  // setState() notifies it
  NetworkService* network_ = nullptr;
  Quotas quotas_{store_};
};

}  // namespace hutch::box

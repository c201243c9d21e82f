#include "vmm/qemu/qemu_backend.h"

#include <fmt/format.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <charconv>
#include <cstdlib>
#include <ctime>

#include "jail/box_dir.h"
#include "jail/box_ids.h"
#include "jail/share.h"
#include "net/netns.h"
#include "sys/files.h"
#include "sys/pidfd.h"
#include "sys/proc_fs.h"
#include "sys/run.h"
#include "sys/spawn.h"
#include "sys/unix_socket.h"
#include "vmm/accel.h"
#include "vmm/log.h"
#include "vmm/qemu/qemu_argv.h"

namespace hutch::vmm::qemu {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr std::string_view kLogMarker = "--- hutch: starting QEMU";
constexpr size_t kLogTailBytes = 2048;

std::string joinArgv(const Argv& argv) {
  std::string out;
  for (const std::string& arg : argv) {
    if (!out.empty()) out.push_back(' ');
    bool quote = arg.empty() || arg.find_first_of(" \t\"'\\$") != std::string::npos;
    out += quote ? "'" + arg + "'" : arg;
  }
  return out;
}

std::string timestamp() {
  std::time_t now = std::time(nullptr);
  char buf[32];
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// What QEMU printed since our last start marker in qemu.log, trimmed for an error message.
std::string logTail(const std::filesystem::path& log) {
  auto tail = sys::readTail(log, kLogTailBytes * 2);
  if (!tail) return "(no qemu.log: " + tail.error().describe() + ")";
  std::string text = *tail;
  if (size_t marker = text.rfind(kLogMarker); marker != std::string::npos) {
    size_t nl = text.find('\n', marker);
    text.erase(0, nl == std::string::npos ? text.size() : nl + 1);
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (text.size() > kLogTailBytes) text.erase(0, text.size() - kLogTailBytes);
  if (text.empty()) return "(qemu.log says nothing)";
  return text;
}

Result<pid_t> readPidFile(const std::filesystem::path& file) {
  auto content = sys::readFile(file, 64);
  if (!content) return fail(content.error());
  pid_t pid = 0;
  const char* begin = content->data();
  const char* end = begin + content->size();
  auto [ptr, ec] = std::from_chars(begin, end, pid);
  if (ec != std::errc() || pid <= 0 || (ptr != end && *ptr != '\n')) {
    return fail(Errc::kInvalidArgument, file.string() + " does not hold a pid");
  }
  return pid;
}

void removeStale(const std::filesystem::path& path) {
  std::error_code ignored;
  std::filesystem::remove(path, ignored);
}

// Kills a QEMU whose launch failed, waits for it to be gone and returns `error`.
asio::awaitable<Error> abandon(QemuVm& vm, Error error) {
  auto killed = co_await vm.killNow();
  if (!killed) vmmLog().error("Abandoning QEMU pid {}: {}", vm.pid(), killed.error().describe());
  removeStale(vm.runDir() / "qemu.pid");
  co_return error;
}

// Starts the server of each shared directory (jail/share.h) and returns QEMU's end of each
// vhost-user socket. Like QMP's, the socket is made and connected here before either side runs;
// virtiofsd gets the listener and accepts QEMU's connection. A server ends when QEMU does.
Result<std::vector<UniqueFd>> startShares(const VmSpec& spec, const jail::BoxIds& ids,
                                          const QemuJailOptions& jail, int log_fd) {
  std::vector<UniqueFd> qemu_ends;
  for (size_t i = 0; i < spec.shares.size(); ++i) {
    const VmShare& share = spec.shares[i];
    std::string context = "Cannot share " + share.host_dir.string() + " with box " + spec.id;
    if (auto usable = jail::checkShareDir(share.host_dir); !usable) {
      return fail(usable.error().withContext(context));
    }
    std::filesystem::path socket = spec.run_dir / ("share" + std::to_string(i) + ".sock");
    removeStale(socket);
    auto listener = sys::listenUnix(socket);
    if (!listener) return fail(listener.error().withContext(context));
    auto client = sys::connectUnix(socket);
    removeStale(socket);  // both ends are open: nothing else may connect
    if (!client) return fail(client.error().withContext(context));
    constexpr int kListenFd = 3;
    // cache=auto: the guest keeps attributes up to 1 s but drops a file's cached data when it
    // opens it, so every read after an open sees the host's edit (bench/share_bench.py: no stale
    // read in either direction; cache=none lists 6x slower, docs/benchmarks.md).
    std::vector<std::string> server = {jail.virtiofsd.string(),
                                       "--fd=" + std::to_string(kListenFd),
                                       "-o",
                                       std::string("source=") + jail::kShareMountPoint,
                                       "-o",
                                       "cache=auto",
                                       "-o",
                                       "sandbox=namespace",
                                       "-o",
                                       "log_level=warn",
                                       "--rlimit-nofile=0"};
    jail::ShareSpec share_spec{
        .name = spec.id, .dir = share.host_dir, .read_only = share.read_only, .box = ids};
    sys::SpawnOptions options;
    options.argv = jail::shareCommand(jail.helper, share_spec, server);
    options.fds = {{log_fd, 1}, {log_fd, 2}, {listener->get(), kListenFd}};
    options.new_session = true;
    options.cwd = "/";
    auto helper = sys::spawn(options);
    if (!helper) return fail(helper.error().withContext(context));
    // hutch-jail returns once virtiofsd runs (its child, left to init): a few milliseconds.
    int status = 0;
    while (::waitpid(*helper, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      return fail(Errc::kFailedPrecondition, context + ": " + logTail(spec.vmmLog()));
    }
    qemu_ends.push_back(std::move(*client));
  }
  return qemu_ends;
}

bool isUnder(const std::filesystem::path& path, const std::filesystem::path& dir) {
  auto rel = path.lexically_normal().lexically_relative(dir.lexically_normal());
  return !rel.empty() && *rel.begin() != ".." && rel != ".";
}

}  // namespace

std::vector<jail::BindPath> jailPathsFor(const VmSpec& spec, const std::filesystem::path& binary,
                                         const std::vector<std::filesystem::path>& backing,
                                         const std::filesystem::path& ram_preload) {
  using Access = jail::BindPath::Access;
  std::vector<jail::BindPath> paths;
  auto add = [&](const std::filesystem::path& path, Access access, bool exec = false) {
    if (path.empty() || isUnder(path, spec.run_dir)) return;  // the run dir is bound whole
    for (const jail::BindPath& known : paths) {
      if (known.path == path.lexically_normal()) return;
    }
    paths.push_back({path.lexically_normal(), access, exec});
  };
  // Sockets, logs, the pid file, the disk overlay and a template VM's memory file.
  paths.push_back({spec.run_dir.lexically_normal(), Access::kReadWrite, false});
  add(spec.kernel, Access::kReadOnly);
  add(spec.initrd, Access::kReadOnly);
  add(spec.disk, Access::kReadWrite);
  // QEMU opens each layer below the overlay by the name in the header above it.
  for (const std::filesystem::path& layer : backing) add(layer, Access::kReadOnly);
  switch (spec.ram) {
    case GuestRam::kPrivate: break;
    case GuestRam::kSharedFile: add(spec.memory_file, Access::kReadWrite); break;
    case GuestRam::kMappedFile:
      // A snapshot's RAM, shared by every box restored from it: mapped copy-on-write, never
      // written. The preload library lets QEMU 7.2 open it read-only (ram_preload.cc).
      add(spec.memory_file, Access::kReadOnly);
      add(ram_preload, Access::kReadOnly, true);
      break;
  }
  // The restore's state file is not bound: hutchd opens it and passes the descriptor over QMP.
  if (!isUnder(binary, "/usr")) add(binary, Access::kReadOnly, true);
  return paths;
}

namespace {

// The value of an option-value path that QEMU's parser reads up to an unescaped comma (",,"
// is a literal comma: escapeOptionValue), from the start of `text`.
std::string unescapeOptionValue(std::string_view text) {
  std::string value;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == ',') {
      if (i + 1 < text.size() && text[i + 1] == ',') {
        value += ',';
        ++i;
        continue;
      }
      break;
    }
    value += text[i];
  }
  return value;
}

}  // namespace

std::filesystem::path qemuRunDir(const std::vector<std::string>& cmdline) {
  if (cmdline.empty()) return {};
  std::string program = std::filesystem::path(cmdline.front()).filename().string();
  if (program.rfind("qemu-system-", 0) != 0) return {};
  // QEMU inherits its QMP socket (fd=N), so the run dir shows in the console log's path; QEMUs
  // an older hutchd started name their QMP socket's path instead.
  constexpr std::string_view kConsole = "file,id=console,path=";
  constexpr std::string_view kQmp = "unix:";
  for (size_t i = 1; i + 1 < cmdline.size(); ++i) {
    std::string_view value = cmdline[i + 1];
    std::filesystem::path file;
    if (cmdline[i] == "-chardev" && value.starts_with(kConsole)) {
      file = unescapeOptionValue(value.substr(kConsole.size()));
      if (file.filename() != "console.log") continue;
    } else if (cmdline[i] == "-qmp" && value.starts_with(kQmp)) {
      file = unescapeOptionValue(value.substr(kQmp.size()));
      if (file.filename() != "qmp.sock") continue;
    } else {
      continue;
    }
    return file.parent_path().lexically_normal();
  }
  return {};
}

bool isQemuForRunDir(const std::vector<std::string>& cmdline,
                     const std::filesystem::path& run_dir) {
  std::filesystem::path dir = qemuRunDir(cmdline);
  return !dir.empty() && dir == run_dir.lexically_normal();
}

Result<pid_t> findRunningQemu(const std::filesystem::path& run_dir) {
  auto pid = readPidFile(run_dir / "qemu.pid");
  if (!pid) {
    return fail(Errc::kNotFound,
                "No QEMU runs for " + run_dir.string() + " (" + pid.error().describe() + ")");
  }
  auto cmdline = sys::readCmdline(*pid);
  if (!cmdline || !isQemuForRunDir(*cmdline, run_dir)) {
    return fail(Errc::kNotFound, "No QEMU runs for " + run_dir.string() + ": process " +
                                     std::to_string(*pid) +
                                     " from qemu.pid is gone or is "
                                     "something else");
  }
  return *pid;
}

QemuBackend::QemuBackend(asio::any_io_executor executor, std::filesystem::path qemu_binary,
                         QemuBackendOptions options)
    : executor_(std::move(executor)),
      binary_(std::move(qemu_binary)),
      options_(std::move(options)) {
  HostProbe host = probeHost();
  kvm_usable_ = options_.kvm_usable ? *options_.kvm_usable : host.dev_kvm_usable;
  pvm_host_ = host.isPvm();
  if (auto resolved = sys::findExecutable(binary_.string())) binary_ = *resolved;
}

Capabilities QemuBackend::capabilities() const {
  return Capabilities{.pause = true, .snapshot = true, .kvm = kvm_usable_, .tcg = true};
}

asio::awaitable<Result<std::unique_ptr<Vm>>> QemuBackend::launch(const VmSpec& spec) {
  auto vm = co_await launchQemu(spec);
  if (!vm) co_return fail(vm.error());
  co_return std::unique_ptr<Vm>(std::move(*vm));
}

asio::awaitable<Result<std::unique_ptr<Vm>>> QemuBackend::adopt(std::filesystem::path run_dir) {
  auto vm = co_await adoptQemu(std::move(run_dir));
  if (!vm) co_return fail(vm.error());
  co_return std::unique_ptr<Vm>(std::move(*vm));
}

std::string vmCgroupName(const std::filesystem::path& run_dir) {
  std::filesystem::path dir = run_dir.lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();
  return dir.filename().string();
}

Result<jail::JailSpec> jailSpecFor(const VmSpec& spec, jail::BoxIds ids,
                                   const QemuJailOptions& options,
                                   const std::filesystem::path& qemu_binary) {
  // The chain comes from image headers the VM's QEMU could write: only hutch's own layers and
  // template images may be shown to it.
  HUTCH_TRY(auto chain, jail::qcow2BackingChain(spec.disk));
  HUTCH_TRY_VOID(jail::checkBackingFiles(chain, spec.backing_files));
  std::filesystem::path preload = options.ram_preload.empty()
                                      ? options.helper.parent_path() / "hutch-ram-preload.so"
                                      : options.ram_preload;
  jail::JailSpec js;
  js.name = spec.id;
  js.uid = ids.uid;
  js.gid = ids.gid;
  js.cwd = spec.run_dir;
  js.paths = jailPathsFor(spec, qemu_binary, chain, preload);
  js.keep_fds = {QemuArgv::kQmpFd, QemuArgv::kAgentFd};
  for (size_t i = 0; i < spec.shares.size(); ++i) {
    js.keep_fds.push_back(QemuArgv::kShareFd + static_cast<int>(i));
  }
  if (!spec.netns.empty()) js.keep_fds.push_back(QemuArgv::kTapFd);
  if (spec.ram == GuestRam::kMappedFile) {
    js.env = {"LD_PRELOAD=" + preload.string(), "HUTCH_READONLY_RAM=" + spec.memory_file.string()};
  }
  if (spec.accel == Accel::kKvm) js.devices = {"/dev/kvm"};
  HUTCH_TRY(js.cgroup, options.cgroups.boxCgroup(vmCgroupName(spec.run_dir)));
  uint64_t overhead = jail::kVmmOverheadMib;
  if (spec.accel == Accel::kTcg) overhead += AccelOption{}.tcg_tb_size_mib;
  js.limits = jail::CgroupLimits::forVm(spec.cpus, spec.memory_mib, overhead);
  return js;
}

namespace {

// The ids on a "Uid:" or "Gid:" line of /proc/PID/status: real, effective, saved, filesystem.
std::vector<uint64_t> statusIds(const std::string& status, std::string_view key) {
  std::vector<uint64_t> ids;
  std::string prefix = "\n" + std::string(key) + ":";
  size_t at = status.find(prefix);
  if (at == std::string::npos) return ids;
  size_t end = status.find('\n', at + 1);
  std::string line = status.substr(at + prefix.size(), end - at - prefix.size());
  const char* p = line.c_str();
  for (;;) {
    char* next = nullptr;
    unsigned long long value = std::strtoull(p, &next, 10);
    if (next == p) break;
    ids.push_back(value);
    p = next;
  }
  return ids;
}

}  // namespace

Result<std::optional<VmJail>> adoptedJail(const std::filesystem::path& run_dir, pid_t pid,
                                          const jail::CgroupHost& cgroups) {
  std::string context = "Not adopting pid " + std::to_string(pid) + " for " + run_dir.string();
  struct stat st {};
  if (::lstat(run_dir.c_str(), &st) != 0) {
    return fail(sysError("Cannot check " + run_dir.string(), errno).withContext(context));
  }
  if (!S_ISDIR(st.st_mode)) {
    return fail(Errc::kFailedPrecondition, context + ": it is not a directory");
  }
  auto status = sys::readFile("/proc/" + std::to_string(pid) + "/status", 1 << 16);
  if (!status) return fail(status.error().withContext(context));
  std::string text = "\n" + *status;
  auto check = [&](std::string_view key, uint64_t want) -> Result<> {
    std::vector<uint64_t> ids = statusIds(text, key);
    bool all = ids.size() == 4 &&
               std::all_of(ids.begin(), ids.end(), [want](uint64_t id) { return id == want; });
    if (all) return ok();
    std::string seen;
    for (uint64_t id : ids) seen += (seen.empty() ? "" : " ") + std::to_string(id);
    return fail(Errc::kFailedPrecondition,
                fmt::format("{}: it runs with {} {}, not the run dir's owner {} (a QEMU's "
                            "command line can lie; its ids cannot)",
                            context, key, seen, want));
  };
  HUTCH_TRY_VOID(check("Uid", st.st_uid));
  HUTCH_TRY_VOID(check("Gid", st.st_gid));
  // An unjailed QEMU's run dir (hutchd --no-jail) is root's, and so is that QEMU: checked above,
  // so a jailed process that took over a stale pid is never adopted as an unjailed one.
  if (st.st_uid == 0) return std::optional<VmJail>();
  HUTCH_TRY(jail::BoxCgroup cgroup, cgroups.boxCgroup(vmCgroupName(run_dir)));
  auto held = cgroup.holds(pid);
  if (!held) return fail(held.error().withContext(context));
  // A box an earlier hutchd without --cgroup-parent started lives below that hutchd's cgroup.
  if (auto legacy = cgroups.legacyBoxCgroup(vmCgroupName(run_dir)); !*held && legacy) {
    auto there = legacy->holds(pid);
    if (there && *there) {
      cgroup = std::move(*legacy);
      held = true;
    }
  }
  if (!*held) {
    return fail(Errc::kFailedPrecondition, context + ": it is not in the run dir's cgroup " +
                                               cgroup.dirs.front().path.string() +
                                               " (a QEMU's command line can lie; the "
                                               "kernel's cgroup membership cannot)");
  }
  return std::optional<VmJail>(VmJail{jail::BoxIds{st.st_uid, st.st_gid}, std::move(cgroup)});
}

Result<QemuBackend::Started> QemuBackend::startProcess(const VmSpec& spec) const {
  HUTCH_TRY_VOID(spec.validate());
  if (spec.accel == Accel::kKvm && !kvm_usable_) {
    return fail(Errc::kUnsupported,
                "VM " + spec.id + " asks for KVM but this host cannot use it: use tcg");
  }
  if (auto running = findRunningQemu(spec.run_dir)) {
    return fail(Errc::kAlreadyExists, "QEMU pid " + std::to_string(*running) +
                                          " already runs for " + spec.run_dir.string() +
                                          ": kill it or adopt it");
  }
  for (const auto& stale : {spec.qmpSocket(), spec.agentSocket(), spec.run_dir / "qemu.pid"}) {
    removeStale(stale);
  }

  Argv argv = QemuArgv::forSpec(spec, binary_, pvm_host_).render();
  std::string context = "Cannot start QEMU for VM " + spec.id;
  auto log = sys::openForAppend(spec.vmmLog());
  if (!log) return fail(log.error().withContext(context));
  std::string header =
      std::string(kLogMarker) + " at " + timestamp() + ": " + joinArgv(argv) + "\n";
  if (::write(log->get(), header.data(), header.size()) < 0) {
    return fail(sysError("Cannot write " + spec.vmmLog().string(), errno).withContext(context));
  }

  sys::SpawnOptions options;
  options.argv = argv;
  options.fds = {{log->get(), 1}, {log->get(), 2}};
  // hutchd makes QEMU's two sockets and connects to them before QEMU runs: nothing polls for
  // the socket files, and the agent channel is up before a snapshot's guest wakes (it never sees
  // its host go away and come back).
  auto qmp_listener = sys::listenUnix(spec.qmpSocket());
  if (!qmp_listener) return fail(qmp_listener.error().withContext(context));
  auto agent_listener = sys::listenUnix(spec.agentSocket());
  if (!agent_listener) return fail(agent_listener.error().withContext(context));
  auto qmp_client = sys::connectUnix(spec.qmpSocket());
  if (!qmp_client) return fail(qmp_client.error().withContext(context));
  auto agent_client = sys::connectUnix(spec.agentSocket());
  if (!agent_client) return fail(agent_client.error().withContext(context));
  options.fds.push_back({qmp_listener->get(), QemuArgv::kQmpFd});
  options.fds.push_back({agent_listener->get(), QemuArgv::kAgentFd});
  UniqueFd tap;
  if (!spec.netns.empty()) {
    auto opened = net::openTap(spec.netns, spec.tap);
    if (!opened) return fail(opened.error().withContext(context));
    tap = std::move(*opened);
    options.fds.push_back({tap.get(), QemuArgv::kTapFd});
  }
  options.new_session = true;
  options.cwd = spec.run_dir;
  std::optional<VmJail> vm_jail;
  UniqueFd jail_spec;
  if (options_.jail) {
    // Everything that needs root happens in hutch-jail, before it execs QEMU in its place (as
    // PID 1 of a new PID namespace, so the pid we hold is QEMU's).
    if (!spec.uid_index) {
      return fail(Errc::kInvalidArgument, "VM " + spec.id + " has no uid index to be jailed with");
    }
    auto ids = jail::boxIds(*spec.uid_index, options_.jail->id_base);
    if (!ids) return fail(ids.error().withContext(context));
    // qemu.log (our descriptor) and qemu.pid stay root's.
    if (auto given = jail::prepareBoxDir(spec.run_dir, *ids); !given) {
      return fail(given.error().withContext(context));
    }
    auto js = jailSpecFor(spec, *ids, *options_.jail, binary_);
    if (!js) return fail(js.error().withContext(context));
    auto memfd = jail::specMemfd(*js);
    if (!memfd) return fail(memfd.error().withContext(context));
    jail_spec = std::move(*memfd);
    constexpr int kSpecFd = 3;
    options.argv = jail::jailCommand(options_.jail->helper, kSpecFd, argv);
    options.fds.push_back({jail_spec.get(), kSpecFd});
    options.clone_flags = CLONE_NEWPID;
    vm_jail = VmJail{*ids, js->cgroup};
  }
  std::vector<UniqueFd> share_ends;
  if (!spec.shares.empty()) {
    // The sharing process must not run as root (jail/share.h), so it needs the jail's ids.
    if (!vm_jail) {
      return fail(Errc::kUnsupported, "VM " + spec.id +
                                          " shares host directories, which needs the jail "
                                          "(hutchd runs with --no-jail)");
    }
    auto ends = startShares(spec, vm_jail->ids, *options_.jail, log->get());
    if (!ends) return fail(ends.error());
    share_ends = std::move(*ends);
    for (size_t i = 0; i < share_ends.size(); ++i) {
      options.fds.push_back({share_ends[i].get(), QemuArgv::kShareFd + static_cast<int>(i)});
    }
  }
  auto pid = sys::spawn(options);
  if (!pid) return fail(pid.error().withContext(context));

  // We are the parent: until reaped the pid cannot be reused, so kill-by-pid is safe here.
  auto killAndReap = [&] {
    ::kill(*pid, SIGKILL);
    while (::waitpid(*pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    removeStale(spec.run_dir / "qemu.pid");
  };
  auto pidfd = sys::pidfdOpen(*pid);
  if (!pidfd) {
    killAndReap();
    return fail(pidfd.error().withContext(context));
  }
  auto written = sys::writeFileAtomic(spec.run_dir / "qemu.pid", std::to_string(*pid) + "\n");
  if (!written) {
    killAndReap();
    return fail(written.error().withContext(context));
  }
  return Started{*pid, std::move(*pidfd), std::move(vm_jail), std::move(*qmp_client),
                 std::move(*agent_client)};
}

asio::awaitable<Result<std::unique_ptr<QemuVm>>> QemuBackend::launchQemu(const VmSpec& spec) {
  auto started = startProcess(spec);
  if (!started) co_return fail(started.error());
  pid_t pid = started->pid;
  bool jailed = started->jail.has_value();
  auto vm = std::make_unique<QemuVm>(executor_, pid, std::move(started->pidfd), spec.run_dir,
                                     options_.vm, std::move(started->jail));
  vm->setAgentChannel(std::move(started->agent));
  vmmLog().info("box={} QEMU pid {} started ({}{})", spec.id, pid, accelName(spec.accel),
                jailed ? fmt::format(", jailed as uid {}", vm->jail()->ids.uid) : "");

  // From here on a failure must not leave QEMU behind: abandon() kills it.
  asio::local::stream_protocol::socket qmp_socket(executor_);
  qmp_socket.assign(asio::local::stream_protocol(), started->qmp.release());
  auto qmp = co_await QmpClient::handshake(std::move(qmp_socket), options_.start_timeout);
  if (!qmp) {
    Error error = qmp.error().withContext("QEMU for VM " + spec.id + " failed to start");
    // A QEMU that died closed the socket before its greeting: say how it ended.
    if (co_await vm->waitExitFor(milliseconds(200))) {
      error = Error(Errc::kUnavailable, "QEMU for VM " + spec.id + " " + *vm->exitText() +
                                            " before QMP answered: " + logTail(spec.vmmLog()));
    }
    co_return fail(co_await abandon(*vm, std::move(error)));
  }
  vm->attachQmp(*qmp);
  auto status = co_await vm->queryStatus();
  if (!status) {
    Error error = status.error().withContext("QEMU for VM " + spec.id);
    co_return fail(co_await abandon(*vm, std::move(error)));
  }
  if (!spec.incoming_state.empty()) {
    auto loaded = co_await vm->loadState(spec.incoming_state);
    if (!loaded) {
      Error error = loaded.error().withContext("QEMU for VM " + spec.id);
      if (vm->exited()) error = error.withContext("qemu.log: " + logTail(spec.vmmLog()));
      co_return fail(co_await abandon(*vm, std::move(error)));
    }
    vmmLog().info("box={} QEMU pid {} restored from {}, paused", spec.id, pid,
                  spec.incoming_state.string());
    co_return std::move(vm);
  }
  if (spec.incoming_later) {
    if (*status != "inmigrate") {
      Error error(Errc::kInternal, "QEMU for VM " + spec.id + " is '" + *status +
                                       "' after start, not waiting for a state to load");
      co_return fail(co_await abandon(*vm, std::move(error)));
    }
    vmmLog().info("box={} QEMU pid {} waits for its state", spec.id, pid);
    co_return std::move(vm);
  }
  if (*status != "running") {
    Error error(Errc::kInternal,
                "QEMU for VM " + spec.id + " is '" + *status + "' after start, not running");
    co_return fail(co_await abandon(*vm, std::move(error)));
  }
  vmmLog().info("box={} QEMU pid {} running (QEMU {})", spec.id, pid, (*qmp)->qemuVersion());
  co_return std::move(vm);
}

asio::awaitable<Result<std::shared_ptr<QmpClient>>> QemuBackend::connectQmp(
    QemuVm& vm, std::filesystem::path socket, milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  std::filesystem::path log = vm.runDir() / "qemu.log";
  Error last(Errc::kUnavailable, "QMP socket " + socket.string() + " never appeared");
  for (;;) {
    if (vm.exited()) {
      co_return fail(Errc::kUnavailable,
                     "QEMU " + *vm.exitText() + " before QMP answered: " + logTail(log));
    }
    auto remaining = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (remaining <= milliseconds(0)) break;
    std::error_code ec;
    if (std::filesystem::exists(socket, ec)) {
      auto client = co_await QmpClient::connect(socket, remaining);
      if (client) co_return client;
      last = client.error();
      // A greeting timeout or protocol error will not get better by retrying.
      if (last.code() != Errc::kUnavailable) break;
    }
    // exited() is checked again at the top, so the sleep is bounded by QEMU's exit too.
    co_await vm.waitExitFor(std::min(milliseconds(20), std::max(remaining, milliseconds(1))));
  }
  if (vm.exited()) {
    co_return fail(Errc::kUnavailable,
                   "QEMU " + *vm.exitText() + " before QMP answered: " + logTail(log));
  }
  co_return fail(Errc::kTimeout, "QEMU did not answer on QMP within " +
                                     std::to_string(timeout.count()) + " ms (" + last.describe() +
                                     "); qemu.log: " + logTail(log));
}

asio::awaitable<Result<std::unique_ptr<QemuVm>>> QemuBackend::adoptQemu(
    std::filesystem::path run_dir) {
  auto pid = findRunningQemu(run_dir);
  if (!pid) co_return fail(pid.error());
  auto pidfd = sys::pidfdOpen(*pid);
  if (!pidfd) co_return fail(pidfd.error().withContext("Cannot adopt QEMU in " + run_dir.string()));
  // The pidfd pins the process; check again that the pid was not reused in between.
  auto cmdline = sys::readCmdline(*pid);
  if (!cmdline || !isQemuForRunDir(*cmdline, run_dir)) {
    co_return fail(Errc::kNotFound, "No QEMU runs for " + run_dir.string() + ": pid " +
                                        std::to_string(*pid) + " exited meanwhile");
  }
  // Jailed, which box it is comes from hutchd's own records (the run dir's owner and its
  // cgroup), checked against what the kernel says about the process.
  std::optional<VmJail> vm_jail;
  if (options_.jail) {
    auto trusted = adoptedJail(run_dir, *pid, options_.jail->cgroups);
    if (!trusted) co_return fail(trusted.error());
    vm_jail = std::move(*trusted);
    // The pidfd pins the process, not its pid: the facts above were about the same process
    // only if it still runs.
    if (sys::pidfdExited(pidfd->get())) {
      co_return fail(Errc::kNotFound, "No QEMU runs for " + run_dir.string() + ": pid " +
                                          std::to_string(*pid) + " exited meanwhile");
    }
  }
  auto vm = std::make_unique<QemuVm>(executor_, *pid, std::move(*pidfd), run_dir, options_.vm,
                                     std::move(vm_jail));
  // hutchd made the socket (root's, 0600), but it sits in a directory the box's uid owns: the
  // box may have swapped it for a symlink (root would follow it to another box's QEMU) or a
  // socket of its own. Only the socket hutchd made is connected to, through its descriptor.
  auto qmp_socket = sys::openTrustedSocket(run_dir / "qmp.sock", 0);
  if (!qmp_socket) {
    co_return fail(qmp_socket.error().withContext("Not adopting QEMU pid " + std::to_string(*pid) +
                                                  " (left running)"));
  }
  // The earlier hutchd's QMP connection may take a moment to be noticed as closed.
  auto qmp = co_await connectQmp(*vm, qmp_socket->procPath(), milliseconds(3000));
  if (!qmp) {
    co_return fail(qmp.error().withContext("Cannot reconnect to QEMU pid " + std::to_string(*pid) +
                                           " (left running)"));
  }
  vm->attachQmp(*qmp);
  auto status = co_await vm->queryStatus();
  if (!status)
    co_return fail(status.error().withContext("Adopting QEMU pid " + std::to_string(*pid)));
  vmmLog().info("Adopted QEMU pid {} in {} ({})", *pid, run_dir.string(), *status);
  co_return std::move(vm);
}

void QemuBackend::releaseRunDir(const std::filesystem::path& run_dir) {
  if (!jailed()) return;
  auto cgroup = options_.jail->cgroups.boxCgroup(vmCgroupName(run_dir));
  Result<> removed = cgroup ? cgroup->remove() : fail(cgroup.error());
  if (!removed) vmmLog().warn("{}: {}", run_dir.string(), removed.error().describe());
  if (auto legacy = options_.jail->cgroups.legacyBoxCgroup(vmCgroupName(run_dir))) {
    if (auto gone = legacy->remove(); !gone) {
      vmmLog().warn("{}: {}", run_dir.string(), gone.error().describe());
    }
  }
}

std::vector<std::filesystem::path> QemuBackend::killStrays(
    const std::filesystem::path& root, const std::set<std::filesystem::path>& keep) {
  const std::filesystem::path base = root.lexically_normal();
  std::vector<std::pair<UniqueFd, std::filesystem::path>> killed;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    pid_t pid = 0;
    const std::string name = entry.path().filename().string();
    auto [end, err] = std::from_chars(name.data(), name.data() + name.size(), pid);
    if (err != std::errc() || end != name.data() + name.size() || pid <= 1) continue;
    auto pidfd = sys::pidfdOpen(pid);
    if (!pidfd) continue;
    // Read after the pidfd pins the process: the command line is that process's.
    auto cmdline = sys::readCmdline(pid);
    if (!cmdline) continue;
    std::filesystem::path dir = qemuRunDir(*cmdline);
    if (dir.empty() || keep.contains(dir)) continue;
    auto [mismatch, rest] = std::mismatch(base.begin(), base.end(), dir.begin(), dir.end());
    if (mismatch != base.end() || rest == dir.end()) continue;  // not below root
    if (auto signalled = sys::pidfdSignal(pidfd->get(), SIGKILL); !signalled) {
      vmmLog().warn("Cannot kill stray QEMU pid {} ({}): {}", pid, dir.string(),
                    signalled.error().describe());
      continue;
    }
    vmmLog().warn("Killed QEMU pid {} of {}: no box or VM of this hutchd owns it", pid,
                  dir.string());
    killed.emplace_back(std::move(*pidfd), std::move(dir));
  }
  // Gone before their directories are deleted (they are not our children: no reaping).
  const auto deadline = Clock::now() + milliseconds(5000);
  std::vector<std::filesystem::path> dirs;
  for (auto& [pidfd, dir] : killed) {
    while (!sys::pidfdExited(pidfd.get()) && Clock::now() < deadline) {
      ::usleep(10 * 1000);
    }
    dirs.push_back(std::move(dir));
  }
  return dirs;
}

Result<std::string> qemuVersion(const std::filesystem::path& binary) {
  HUTCH_TRY(std::string out, sys::runCapture({binary.string(), "--version"}));
  constexpr std::string_view kPrefix = "QEMU emulator version ";
  size_t at = out.find(kPrefix);
  if (at == std::string::npos) {
    return fail(Errc::kInvalidArgument,
                binary.string() + " --version does not say which QEMU it is: " + out);
  }
  std::string version = out.substr(at + kPrefix.size());
  version = version.substr(0, version.find('\n'));
  return version;
}

Result<> checkCpuModel(std::string_view model, std::string_view cpu_help) {
  const std::string_view name = model.substr(0, model.find(','));
  // Each model is a line "x86 NAME   description"; the flags that follow are listed apart.
  for (std::string_view rest = cpu_help; !rest.empty();) {
    const size_t eol = rest.find('\n');
    std::string_view line = rest.substr(0, eol);
    rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 1);
    if (!line.starts_with("x86 ")) continue;
    line.remove_prefix(4);
    while (line.starts_with(' ')) line.remove_prefix(1);
    if (line.substr(0, line.find(' ')) == name) return ok();
  }
  return fail(Errc::kInvalidArgument,
              fmt::format("QEMU has no CPU model '{}': 'qemu-system-x86_64 -cpu help' lists "
                          "them (max emulates every instruction QEMU can)",
                          name));
}

}  // namespace hutch::vmm::qemu

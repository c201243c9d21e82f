// hutchd: the one place where everything is built and wired (no singletons elsewhere).
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <charconv>
#include <csignal>
#include <cstdlib>
#include <filesystem>

#include "api/auth.h"
#include "api/handlers.h"
#include "api/http_server.h"
#include "api/secret_service.h"
#include "box/box_gauges.h"
#include "box/box_service.h"
#include "box/network_service.h"
#include "box/port_forwards.h"
#include "box/snapshot.h"
#include "daemon/layout.h"
#include "e2b/facade.h"
#include "egress/proxy/ca.h"
#include "jail/box_ids.h"
#include "jail/cgroup.h"
#include "mcp/box_tools.h"
#include "mcp/http_endpoint.h"
#include "mcp/server.h"
#include "net/box_net.h"
#include "net/secrets.h"
#include "observe/audit_log.h"
#include "observe/event_bus.h"
#include "observe/loop_lag.h"
#include "observe/metrics.h"
#include "ssh/host_key.h"
#include "ssh/ssh_keys.h"
#include "ssh/ssh_routes.h"
#include "ssh/ssh_server.h"
#include "storage/box_store.h"
#include "storage/event_store.h"
#include "storage/key_store.h"
#include "storage/ssh_key_store.h"
#include "storage/templates.h"
#include "sys/files.h"
#include "sys/run.h"
#include "tls/server_cert.h"
#include "vmm/accel.h"
#include "vmm/qemu/qemu_backend.h"

namespace {

constexpr const char* kVersion = "0.1.0";

int run(int argc, char** argv) {
  CLI::App app{"hutchd: the hutch daemon. Serves the HTTP/JSON API on a unix socket."};
  std::string socket_path = "/run/hutch/hutchd.sock";
  std::string state_dir = "/var/lib/hutch";
  std::string accel_text = "auto";
  std::string qemu = "qemu-system-x86_64";
  std::string log_level = "info";
  unsigned boot_timeout = 120;
  std::string default_user = "hutch";
  // Beside an installed hutchd, else in the build tree it was built in (layout.h).
  std::error_code exe_error;
  const hutch::daemon::Layout layout =
      hutch::daemon::defaultLayout(std::filesystem::read_symlink("/proc/self/exe", exe_error),
                                   {.recipes = HUTCH_SOURCE_DIR "/images",
                                    .builder = HUTCH_SOURCE_DIR "/scripts/build-image.sh",
                                    .agent = HUTCH_AGENT_PATH,
                                    .ui_dir = HUTCH_SOURCE_DIR "/web/dashboard/dist",
                                    .jail = HUTCH_JAIL_PATH,
                                    .egress = HUTCH_EGRESS_PATH,
                                    .diff = HUTCH_DIFF_PATH});
  std::string recipes = layout.recipes;
  std::string builder = layout.builder;
  std::string agent = layout.agent;
  std::string ui_dir = layout.ui_dir;
  const char* cache_env = std::getenv("HUTCH_CACHE_DIR");
  std::string image_cache = cache_env && *cache_env ? cache_env : "/var/cache/hutch";
  app.add_option("--socket", socket_path, "API socket")->capture_default_str();
  app.add_option("--state-dir", state_dir, "Database, templates and boxes")->capture_default_str();
  app.add_option("--accel", accel_text, "auto, kvm or tcg")->capture_default_str();
  app.add_option("--qemu", qemu, "QEMU system emulator binary")->capture_default_str();
  app.add_option("--boot-timeout", boot_timeout, "Seconds a box may take to boot")
      ->capture_default_str();
  app.add_option("--default-user", default_user, "exec's user when a request names none")
      ->capture_default_str();
  app.add_option("--recipes", recipes, "Template recipes (one folder each)")->capture_default_str();
  app.add_option("--builder", builder, "The image builder script")->capture_default_str();
  app.add_option("--agent", agent, "hutch-agent binary put into built images")
      ->capture_default_str();
  app.add_option("--image-cache", image_cache, "Image build cache (env HUTCH_CACHE_DIR)")
      ->capture_default_str();
  std::string registry_certs = "/etc/hutch/certs.d";
  app.add_option("--registry-certs", registry_certs,
                 "CAs of registries hutchd pulls images from, as Docker's certs.d: "
                 "DIR/HOST[:PORT]/*.crt")
      ->capture_default_str();
  std::vector<std::string> insecure_registries;
  app.add_option("--insecure-registry", insecure_registries,
                 "A registry (HOST[:PORT]) that may be reached over plain HTTP or unverified TLS "
                 "(loopback registries without a CA in --registry-certs always may); repeatable");
  std::vector<std::string> allowed_registries;
  app.add_option("--allowed-registry", allowed_registries,
                 "Pull images only from these registries (HOST[:PORT], docker.io for Docker "
                 "Hub); repeatable. Without it, any registry the host can reach");
  std::string kernel_template = "base";
  app.add_option("--image-kernel-template", kernel_template,
                 "The template whose kernel and initramfs boxes of OCI images boot")
      ->capture_default_str();
  uint64_t image_pull_timeout = 3600;
  app.add_option("--image-pull-timeout", image_pull_timeout,
                 "Seconds each step of an image pull or archive import may take (a registry "
                 "that hangs); past it the template create fails, timed out")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{7} * 86400));
  uint64_t image_max_archive_mib = uint64_t{16} << 10;
  app.add_option("--image-max-archive-mib", image_max_archive_mib,
                 "The largest image archive a client may send (template create --from-archive), "
                 "as sent and unpacked")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30));
  uint64_t image_max_unpacked_mib = uint64_t{64} << 10;
  app.add_option("--image-max-unpacked-mib", image_max_unpacked_mib,
                 "The most an image's layers may unpack to, summed")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30));
  uint64_t image_cache_max_gib = 64;
  app.add_option("--image-cache-max-gib", image_cache_max_gib,
                 "Past this size the image cache loses its least recently used builds that no "
                 "box, template or snapshot uses and none started from in a day, then the "
                 "pulled images and root disks no template names, oldest first (0: never; "
                 "hutch image prune removes them at once)")
      ->capture_default_str();
  app.add_option("--ui-dir", ui_dir,
                 "The web dashboard's built files, served at /ui/ on the TCP listeners "
                 "(web/dashboard/build.sh builds them)")
      ->capture_default_str();
  size_t event_retention = 100000;
  app.add_option(
         "--event-retention", event_retention,
         "Events kept in the database (the oldest beyond are deleted; docs/observability.md)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{100}, size_t{100000000}));
  bool no_audit = false;
  app.add_flag("--no-audit", no_audit,
               "Keep no audit log (<state>/audit/audit.log): for measuring what it costs");
  bool no_events = false;
  app.add_flag("--no-events", no_events,
               "Publish no events (GET /v1/events stays empty, metrics count nothing): for "
               "measuring what they cost");
  unsigned ready_timeout = 180;
  app.add_option(
         "--ready-timeout", ready_timeout,
         "Seconds a template's ready check (/etc/hutch/ready) may take before its snapshot; "
         "a check still running then is killed and the box boots cold")
      ->capture_default_str()
      ->check(CLI::Range(1U, 86400U));
  unsigned idle_pause = 300;
  app.add_option("--idle-pause", idle_pause,
                 "Seconds a box may do no work before it is paused (no CPU; the next exec, file "
                 "operation or connection resumes it); 0: never. A box's own --idle-pause wins")
      ->capture_default_str()
      ->check(CLI::Range(0U, 31622400U));
  unsigned idle_suspend = 3600;
  app.add_option("--idle-suspend", idle_suspend,
                 "Seconds a box may stay paused before it is suspended to disk (its memory freed; "
                 "resumed the same way); 0: never")
      ->capture_default_str()
      ->check(CLI::Range(0U, 31622400U));
  unsigned pool_size = 1;
  app.add_option("--pool-size", pool_size,
                 "Restored, paused boxes kept ready per template and size (0: none; see "
                 "docs/snapshots.md)")
      ->capture_default_str();
  unsigned pool_max = 4;
  app.add_option("--pool-max", pool_max,
                 "How far a warm pool grows when creates find it empty (it shrinks back to "
                 "--pool-size when unused for --pool-idle)")
      ->capture_default_str()
      ->check(CLI::Range(0U, 64U));
  unsigned pool_idle = 600;
  app.add_option("--pool-idle", pool_idle,
                 "Seconds a grown warm pool may go unused before it gives a VM back")
      ->capture_default_str()
      ->check(CLI::Range(1U, 86400U));
  std::string jail = layout.jail;
  bool no_jail = false;
  uint32_t uid_base = hutch::jail::kDefaultIdBase;
  app.add_option("--jail", jail, "The hutch-jail helper every QEMU is started through")
      ->capture_default_str();
  app.add_flag("--no-jail", no_jail,
               "Run QEMU unjailed, as root (debugging only: see docs/security.md)");
  std::string cgroup_parent;
  app.add_option("--cgroup-parent", cgroup_parent,
                 "Put the boxes' cgroups in this cgroup (/hutch: PARENT/BOX-ID) instead of below "
                 "hutchd's own (the systemd unit passes /hutch: a unit restarts only if no "
                 "controllers are enabled below it; see docs/install.md)");
  auto* uid_base_option =
      app.add_option("--uid-base", uid_base,
                     "First uid (and gid) of the boxes' VMMs: box N runs as uid-base + N "
                     "(default: 2080374784 for /var/lib/hutch, a range of its own for another "
                     "state directory, kept in STATE/uid-base)");
  bool no_snapshots = false;
  app.add_flag("--no-snapshots", no_snapshots,
               "Boot every box cold instead of restoring its template's snapshot");
  bool no_memory_return = false;
  app.add_flag("--no-memory-return", no_memory_return,
               "Give boxes no virtio balloon: pages a guest frees stay with its QEMU (see "
               "docs/snapshots.md, 'Memory back')");
  std::string tcg_cpu_model;
  app.add_option("--tcg-cpu-model", tcg_cpu_model,
                 "The CPU boxes see when emulated (no KVM): a QEMU -cpu model and flags, e.g. "
                 "max for software that needs AVX2 (default: QEMU's qemu64, which boots "
                 "fastest). Under KVM boxes see the host's CPU.");
  bool no_network = false;
  app.add_flag("--no-network", no_network,
               "Give boxes no network at all (no NIC, no hutch-egress; see docs/network.md)");
  std::string egress = layout.egress;
  app.add_option("--egress", egress, "The hutch-egress proxy boxes reach the network through")
      ->capture_default_str();
  std::string default_policy = "none";
  app.add_option("--default-network-policy", default_policy,
                 "Egress policy of boxes whose request and template name none: none, allow-all, "
                 "debian-mirrors, npm, pypi or a JSON file")
      ->capture_default_str();
  std::string upstream_ca;
  app.add_option("--egress-upstream-ca", upstream_ca,
                 "Extra CA certificates (PEM) hutch-egress trusts for upstream TLS, besides the "
                 "system's");
  std::string diff_helper = layout.diff;
  app.add_option("--diff-helper", diff_helper,
                 "The hutch-diff helper that reads boxes' disks for hutch diff and export")
      ->capture_default_str();
  std::string egress_resolv_conf;
  app.add_option("--egress-resolv-conf", egress_resolv_conf,
                 "The resolv.conf whose nameservers hutch-egress asks (default /etc/resolv.conf)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
      ->capture_default_str();
  std::vector<std::string> listen;
  std::vector<std::string> listen_http;
  std::vector<std::string> listen_ssh;
  std::string tls_cert;
  std::string tls_key;
  app.add_option("--listen", listen,
                 "Serve the API over HTTPS on ADDR:PORT (repeatable); every request needs an API "
                 "key (hutch key create)")
      ->allow_extra_args(false);
  app.add_option("--listen-ssh", listen_ssh,
                 "Serve SSH into boxes on ADDR:PORT (repeatable): public keys registered with "
                 "'hutch key ssh add', the user name naming the box (docs/ssh.md)")
      ->allow_extra_args(false);
  app.add_option("--listen-http", listen_http,
                 "Serve the API over plain HTTP on a loopback ADDR:PORT (repeatable; keys needed)")
      ->allow_extra_args(false);
  app.add_option("--tls-cert", tls_cert,
                 "The TLS certificate (PEM) of --listen (default: one hutchd makes in "
                 "<state>/tls)");
  app.add_option("--tls-key", tls_key, "The private key (PEM) of --tls-cert");
  std::vector<std::string> e2b_templates;
  app.add_option("--e2b-template", e2b_templates,
                 "E2B template NAME=TEMPLATE: sandboxes of E2B template NAME are made from hutch "
                 "template TEMPLATE (repeatable; unmapped names are hutch templates)")
      ->allow_extra_args(false);
  std::string e2b_network_policy = "allow-all";
  app.add_option("--e2b-network-policy", e2b_network_policy,
                 "Egress policy of E2B sandboxes that ask for none, or only for internet access "
                 "(E2B's default: on): none, allow-all, debian-mirrors, npm, pypi or a JSON file")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  hutch::e2b::FacadeOptions e2b_options;
  for (const std::string& mapping : e2b_templates) {
    auto eq = mapping.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == mapping.size()) {
      spdlog::error("--e2b-template {}: give NAME=TEMPLATE (e.g. code-interpreter-v1=base)",
                    mapping);
      return 64;
    }
    e2b_options.templates[mapping.substr(0, eq)] = mapping.substr(eq + 1);
  }
  if (std::filesystem::exists(e2b_network_policy)) {
    auto text = hutch::sys::readFile(e2b_network_policy);
    if (!text) {
      spdlog::error("--e2b-network-policy: {}", text.error().describe());
      return 66;
    }
    e2b_network_policy = *text;
  }
  if (auto checked = hutch::egress::parsePolicyText(e2b_network_policy); !checked) {
    spdlog::error("--e2b-network-policy: {}", checked.error().describe());
    return 64;
  }
  e2b_options.network_policy = e2b_network_policy;

  spdlog::set_default_logger(spdlog::stderr_color_mt("hutchd"));
  spdlog::set_level(spdlog::level::from_str(log_level));
  std::signal(SIGPIPE, SIG_IGN);

  if (tls_cert.empty() != tls_key.empty()) {
    spdlog::error(
        "--tls-cert and --tls-key go together: give both, or neither for a certificate "
        "hutchd makes");
    return 64;
  }
  for (const std::string& address : listen_http) {
    if (auto loopback = hutch::api::checkLoopback(address); !loopback) {
      spdlog::error("--listen-http {}: {}", address, loopback.error().describe());
      return 64;
    }
  }

  std::optional<hutch::vmm::Accel> accel_override;
  if (accel_text != "auto") {
    auto parsed = hutch::vmm::parseAccel(accel_text);
    if (!parsed) {
      spdlog::error("{}", parsed.error().describe());
      return 64;
    }
    accel_override = *parsed;
  }
  auto accel = hutch::vmm::decideAccel(hutch::vmm::probeHost(), accel_override);
  if (!accel) {
    spdlog::error("{}", accel.error().describe());
    return 69;
  }
  spdlog::info("acceleration: {} ({})", hutch::vmm::accelName(accel->accel), accel->reason);

  std::filesystem::path state(state_dir);
  std::error_code ec;
  // Made before the database: a state directory with a database but no uid-base file is an
  // earlier hutchd's, whose boxes have uids from the old default.
  const bool had_state = std::filesystem::exists(state / "hutch.db", ec);
  for (const char* sub : {"boxes", "templates", "images", "snapshots", "layers"}) {
    std::filesystem::create_directories(state / sub, ec);
    if (ec) {
      spdlog::error("Cannot create {}: {}", (state / sub).string(), ec.message());
      return 73;
    }
  }
  ::chmod(state.c_str(), 0700);
  // The boxes' uids: --uid-base, else the range this state directory took at its first start
  // (state/uid-base), else a free range of its own (jail::defaultIdBase, the next one while
  // another hutchd holds it or a stopped hutchd's boxes still run in it), kept from then on.
  // Held for hutchd's lifetime: two hutchd on one host never share uids, nor the network
  // namespaces named after them.
  hutch::Result<hutch::UniqueFd> range_lock = hutch::fail(hutch::Errc::kInternal, "not locked");
  const std::filesystem::path kept_base = state / "uid-base";
  auto kept_text = hutch::sys::readFile(kept_base);
  uint32_t kept = 0;
  const bool has_kept =
      kept_text &&
      std::from_chars(kept_text->data(), kept_text->data() + kept_text->size(), kept).ec ==
          std::errc();
  if (uid_base_option->count() > 0) {
    range_lock = hutch::jail::lockIdRange(uid_base);
    // The operator chose it: said, not refused.
    if (!range_lock) spdlog::warn("--uid-base {}: {}", uid_base, range_lock.error().describe());
  } else if (has_kept || had_state) {
    uid_base = has_kept ? kept : hutch::jail::kDefaultIdBase;
    range_lock = hutch::jail::lockIdRange(uid_base);
    if (!range_lock) {
      spdlog::error(
          "{}, which {} has used since its first start: stop the other hutchd, or "
          "give this one --uid-base",
          range_lock.error().describe(), state.string());
      return 75;
    }
  } else {
    uid_base = hutch::jail::defaultIdBase(std::filesystem::absolute(state));
    for (int tries = 0; tries < 64; ++tries) {
      range_lock = hutch::jail::lockUnusedIdRange(uid_base);
      if (range_lock || range_lock.error().code() != hutch::Errc::kFailedPrecondition) break;
      uid_base = hutch::jail::nextIdBase(uid_base);
    }
    if (!range_lock) {
      spdlog::error("No free uid range for the boxes: {}", range_lock.error().describe());
      return 75;
    }
  }
  if (!has_kept && range_lock) {
    if (auto written = hutch::sys::writeFileAtomic(kept_base, std::to_string(uid_base) + "\n");
        !written) {
      spdlog::error("{}", written.error().describe());
      return 73;
    }
  }
  auto store = hutch::storage::BoxStore::open((state / "hutch.db").string());
  if (!store) {
    spdlog::error("{}", store.error().describe());
    return 70;
  }
  hutch::storage::TemplateStore templates(state / "templates");

  hutch::vmm::qemu::QemuBackendOptions backend_options;
  if (no_jail) {
    spdlog::warn("--no-jail: QEMU runs as root with hutchd's view of the host");
  } else {
    // Each box's QEMU gets its own uid, namespaces, cgroup and seccomp filters (hutch-jail).
    if (::access(jail.c_str(), X_OK) != 0) {
      spdlog::error("Cannot run the jail helper {}: install hutch-jail or pass --jail PATH", jail);
      return 69;
    }
    auto cgroups = hutch::jail::CgroupHost::detect(cgroup_parent);
    if (!cgroups) {
      spdlog::error("{}", cgroups.error().describe());
      return cgroups.error().code() == hutch::Errc::kInvalidArgument ? 64 : 69;
    }
    auto warnings = cgroups->prepare();
    if (!warnings) {
      spdlog::error("{}", warnings.error().describe());
      return 69;
    }
    for (const std::string& warning : *warnings) spdlog::warn("cgroups: {}", warning);
    spdlog::info("jail: {} (uids from {}, cgroup v{}, boxes in {})", jail, uid_base,
                 static_cast<int>(cgroups->version()),
                 cgroups->boxesDirs().empty() ? std::string("?")
                                              : cgroups->boxesDirs().front().path.string());
    if (auto first = hutch::jail::boxIds(0, uid_base); !first) {
      spdlog::error("--uid-base: {}", first.error().describe());
      return 64;
    }
    backend_options.jail =
        hutch::vmm::qemu::QemuJailOptions{.helper = jail, .cgroups = *cgroups, .id_base = uid_base};
  }

  boost::asio::io_context loop(1);
  boost::asio::thread_pool pool(2);
  hutch::vmm::qemu::QemuBackend backend(loop.get_executor(), qemu, backend_options);
  hutch::box::ServiceConfig config{state / "boxes", *accel, hutch::vmm::hostTscKhz(),
                                   std::chrono::seconds(boot_timeout)};
  config.default_user = default_user;
  config.snapshots_dir = state / "snapshots";
  config.layers_dir = state / "layers";
  config.use_snapshots = !no_snapshots;
  config.pool_size = pool_size;
  config.pool_max = std::max(pool_max, pool_size);
  config.pool_idle = std::chrono::seconds(pool_idle);
  config.idle_pause = std::chrono::seconds(idle_pause);
  config.idle_suspend = std::chrono::seconds(idle_suspend);
  config.ready_timeout = std::chrono::seconds(ready_timeout);
  config.diff_helper = diff_helper;
  if (!no_jail) config.id_base = uid_base;
  auto qemu_version = hutch::vmm::qemu::qemuVersion(backend.binary());
  if (!qemu_version) {
    spdlog::error("{}", qemu_version.error().describe());
    return 69;
  }
  config.env = {*qemu_version, std::string(hutch::vmm::accelName(accel->accel)),
                hutch::box::hostCpuModel()};
  if (!no_network) config.env.network = hutch::box::NetworkService::snapshotNetwork();
  if (!tcg_cpu_model.empty()) {
    if (accel->accel != hutch::vmm::Accel::kTcg) {
      spdlog::warn("--tcg-cpu-model {}: boxes run under KVM here and see the host's CPU",
                   tcg_cpu_model);
    } else {
      // The text first (it becomes one argv element), then QEMU's own list of models.
      auto known = hutch::vmm::checkCpuModelText(tcg_cpu_model).and_then([&]() -> hutch::Result<> {
        HUTCH_TRY(std::string help,
                  hutch::sys::runCapture({backend.binary().string(), "-cpu", "help"}));
        return hutch::vmm::qemu::checkCpuModel(tcg_cpu_model, help);
      });
      if (!known) {
        spdlog::error("--tcg-cpu-model: {}", known.error().describe());
        return 64;
      }
      config.env.guest_cpu = tcg_cpu_model;
    }
  }
  config.image_cache = image_cache;
  if (!no_memory_return) config.env.balloon = hutch::box::SnapshotEnv::kFreePageReporting;
  spdlog::info("QEMU {}; snapshots {}", *qemu_version, no_snapshots ? "off" : "on");
  if (auto boot_id = hutch::sys::readFile("/proc/sys/kernel/random/boot_id"); boot_id) {
    config.boot_id = *boot_id;
    while (!config.boot_id.empty() && config.boot_id.back() == '\n') config.boot_id.pop_back();
  }
  hutch::box::BoxService service(loop.get_executor(), pool, *store, templates, backend, config);

  // Events, the audit log and metrics (docs/observability.md).
  hutch::storage::EventStore event_store(store->database(), event_retention);
  hutch::observe::EventBus events(loop.get_executor(), event_store);
  hutch::observe::Metrics metrics(events);
  std::unique_ptr<hutch::observe::AuditLog> audit_log;
  if (no_audit) {
    spdlog::warn("--no-audit: nothing done in boxes is recorded");
  } else {
    auto opened = hutch::observe::AuditLog::open(state / "audit" / "audit.log", store->database());
    if (!opened) {
      spdlog::error("{}", opened.error().describe());
      return 73;
    }
    audit_log = std::move(*opened);
    // Logged at every start: a copy of this log elsewhere pins the chain.
    spdlog::info("audit: {} (head: record {}, {})", audit_log->path().string(),
                 audit_log->headSeq(), audit_log->headHash().empty() ? "-" : audit_log->headHash());
  }
  if (no_events) spdlog::warn("--no-events: no events are published");
  const hutch::box::ActivitySinks activity{no_events ? nullptr : &events, audit_log.get()};
  service.setActivity(activity);
  metrics.addCollector([&service, boxes_dir = state / "boxes"] {
    return hutch::box::boxGauges(service, boxes_dir);
  });
  metrics.addCollector(hutch::observe::processMetrics);
  // How late the loop runs what is due (hutch_event_loop_lag_seconds): blocking work on it shows.
  // Started with the loop below (the setup before it is not the loop's lag).
  hutch::observe::LoopLagProbe lag_probe(loop.get_executor(), metrics.loopLag());

  // Networking: a walled namespace per VM, hutch-egress for every running box.
  auto secrets = hutch::net::SecretStore::open(state / "secrets");
  if (!secrets) {
    spdlog::error("{}", secrets.error().describe());
    return 73;
  }
  std::unique_ptr<hutch::box::NetworkService> network;
  if (no_network) {
    spdlog::warn("--no-network: boxes get no NIC");
  } else {
    if (std::filesystem::exists(default_policy)) {
      auto text = hutch::sys::readFile(default_policy);
      if (!text) {
        spdlog::error("--default-network-policy: {}", text.error().describe());
        return 66;
      }
      default_policy = *text;
    }
    if (auto checked = hutch::egress::parsePolicyText(default_policy); !checked) {
      spdlog::error("--default-network-policy: {}", checked.error().describe());
      return 64;
    }
    if (::access(egress.c_str(), X_OK) != 0) {
      spdlog::error("Cannot run {}: install hutch-egress, pass --egress PATH, or --no-network",
                    egress);
      return 69;
    }
    // A namespace name per uid, so that two hutchd with their own --uid-base never meet.
    auto networks =
        hutch::net::BoxNetworks::create(fmt::format("hutch-{:x}-", uid_base), state / "net");
    if (!networks) {
      spdlog::error("{}", networks.error().describe());
      return 73;
    }
    hutch::box::NetworkConfig net_config;
    net_config.egress_binary = egress;
    net_config.state_dir = state / "egress";
    net_config.upstream_ca = upstream_ca;
    net_config.resolv_conf = egress_resolv_conf;
    net_config.default_policy = default_policy;
    // hutch-egress runs as the uid just below the boxes' range: no box's, not root.
    net_config.egress_user = std::make_pair(uid_base - 1, uid_base - 1);
    net_config.make_ca = [](const std::string& box_id) -> hutch::Result<hutch::box::CaPem> {
      HUTCH_TRY(auto ca, hutch::egress::proxy::makeBoxCa(box_id));
      return hutch::box::CaPem{ca.cert, ca.key};
    };
    network = std::make_unique<hutch::box::NetworkService>(
        loop.get_executor(), std::move(*networks), *secrets, std::move(net_config));
    if (auto started = network->start(); !started) {
      spdlog::error("{}", started.error().describe());
      return 69;
    }
    service.setNetwork(network.get());
    network->setActivity(activity, &metrics);
    spdlog::info("network: walled namespace per box, egress through {} (default policy: {})",
                 egress, default_policy.size() > 40 ? "from a file" : default_policy);
  }
  hutch::api::ApiRouter router;
  hutch::api::ApiRouter ui_router;
  hutch::storage::KeyStore key_store(store->database());
  hutch::storage::SshKeyStore ssh_key_store(store->database());
  hutch::api::KeyService keys(key_store);
  keys.setActivity(activity.events, activity.audit);
  // Host secrets: every face lists, sets and removes them through this (docs/api.md "Owners").
  hutch::api::SecretService secret_service(*secrets, activity.events, activity.audit);
  service.setQuotas([&keys](const std::string& owner) { return keys.quotaOf(owner); });
  hutch::api::HttpServer server(loop.get_executor(), router, &keys);
  server.setScoper(hutch::api::boxScoper(service));
  hutch::api::DaemonInfo info{kVersion, *accel, backend.name(), state.string()};
  info.server = &server;

  // TLS for --listen: the given certificate, or one made once in <state>/tls and kept.
  std::optional<boost::asio::ssl::context> tls;
  if (!listen.empty()) {
    if (tls_cert.empty()) {
      std::vector<std::string> names;
      std::vector<std::string> ips;
      hutch::tls::hostNames(names, ips);
      auto made = hutch::tls::ensureSelfSigned(state / "tls", names, ips);
      if (!made) {
        spdlog::error("{}", made.error().describe());
        return 73;
      }
      if (made->made)
        spdlog::info("tls: made a self-signed certificate in {}", made->cert.string());
      tls_cert = made->cert.string();
      tls_key = made->key.string();
    }
    auto fingerprint = hutch::tls::checkCertFiles(tls_cert, tls_key);
    if (!fingerprint) {
      spdlog::error("{}", fingerprint.error().describe());
      return 66;
    }
    info.tls_fingerprint = *fingerprint;
    auto context = hutch::api::serverTlsContext(tls_cert, tls_key);
    if (!context) {
      spdlog::error("{}", context.error().describe());
      return 66;
    }
    tls.emplace(std::move(*context));
    spdlog::info("tls: certificate {} (SHA-256 {})", tls_cert, *fingerprint);
  }
  hutch::box::TemplateService template_service(
      pool, *store, templates,
      {.images_dir = std::filesystem::canonical(state / "images"),
       .recipes_dir = recipes,
       .builder = builder,
       .agent = agent,
       .cache_dir = image_cache,
       .image = {.oci_dir = state / "oci",
                 .certs_dir = registry_certs,
                 .authfile = state / "registries.json",
                 .insecure_registries = insecure_registries,
                 .allowed_registries = allowed_registries,
                 .kernel_template = kernel_template,
                 .apply_limits = {.max_total_bytes = image_max_unpacked_mib << 20},
                 .pull_timeout = std::chrono::seconds(image_pull_timeout),
                 .max_archive_bytes = image_max_archive_mib << 20}});
  template_service.removeLeftovers();
  hutch::box::TemplateBuilder template_builder(pool, service, template_service, state / "builds",
                                               {.max_total_bytes = image_max_archive_mib << 20});
  hutch::box::PortForwards ports(loop.get_executor(), *store, service);
  service.setObserver(&ports);
  hutch::api::registerRoutes(router, service, template_service, info);
  hutch::api::registerBuildRoutes(router, template_builder);
  hutch::api::registerExecRoutes(router, service);
  hutch::api::registerFileRoutes(router, service);
  hutch::api::registerBoxIoRoutes(router, service, ports);
  hutch::api::registerNetworkRoutes(router, service);
  hutch::api::registerSecretRoutes(router, secret_service);
  hutch::api::registerObserveRoutes(router, service, events, audit_log.get(), metrics);
  // SSH into boxes (docs/ssh.md): ended here with libssh, reached through the API's upgrade
  // (hutch ssh-proxy), with one host key kept in the state directory.
  auto ssh_host_key = hutch::ssh::HostKey::loadOrCreate(state / "ssh_host_ed25519_key");
  if (!ssh_host_key) {
    spdlog::error("{}", ssh_host_key.error().describe());
    return 73;
  }
  auto ssh_server =
      hutch::ssh::SshServer::make(loop.get_executor(), service, std::move(*ssh_host_key));
  if (!ssh_server) {
    spdlog::error("{}", ssh_server.error().describe());
    return 70;
  }
  hutch::ssh::registerSshRoutes(router, **ssh_server, service);
  hutch::api::registerKeyRoutes(router, keys,
                                [&server, &ssh_server, &ssh_key_store](const std::string& id) {
                                  server.closeSessionsOf(id);
                                  (*ssh_server)->closeSessionsOf(id);
                                  // Its SSH keys go with it (the gateway refuses them already:
                                  // their owner is gone).
                                  if (auto removed = ssh_key_store.removeAllOf(id); !removed) {
                                    spdlog::warn("ssh: the SSH keys of removed key {} stay: {}", id,
                                                 removed.error().describe());
                                  }
                                });
  // MCP (docs/mcp.md): /mcp on the unix socket and the TCP listeners, tools over the same
  // service, boxes resolved for the caller by the same scoper.
  hutch::mcp::BoxTools mcp_tools(service, ports, hutch::api::boxScoper(service));
  hutch::mcp::Server mcp_server(
      mcp_tools,
      {.name = "hutch",
       .version = kVersion,
       .instructions = "hutch gives you boxes: small Linux VMs (Debian), each with its own kernel, "
                       "disk and walled network. Make one with create_box, run commands in it with "
                       "run_command, move files with write_file, read_file and list_files; "
                       "checkpoint_box and rollback_box save and restore a state, fork_box copies "
                       "a running box. Remove boxes you no longer need with remove_box."});
  hutch::mcp::HttpEndpoint mcp_endpoint(mcp_server);
  mcp_endpoint.addRoutes(router);
  // The TCP gateway's keys (hutchd --listen-ssh): SSH public keys per API-key owner.
  hutch::ssh::SshKeys ssh_keys(ssh_key_store, key_store, service);
  hutch::api::FailureLimiter ssh_failures;
  (*ssh_server)->setGateway(&ssh_keys, &ssh_failures);
  hutch::ssh::registerSshKeyRoutes(router, ssh_keys);
  // The E2B façade on the TCP listeners (docs/e2b.md), and the lifetimes of its sandboxes.
  auto e2b_secret = hutch::e2b::loadSecret(state / "e2b-secret");
  if (!e2b_secret) {
    spdlog::error("{}", e2b_secret.error().describe());
    return 73;
  }
  e2b_options.secret = std::move(*e2b_secret);
  e2b_options.template_dir = state / "e2b";  // E2B's template builder (docs/e2b.md "Templates")
  hutch::e2b::Facade e2b(loop.get_executor(), service, std::move(e2b_options), &template_builder,
                         &template_service);
  server.addPlane(e2b.uploadPlane());
  server.addPlane(e2b.envdPlane());
  server.addPlane(e2b.controlPlane());
  // The web dashboard's static files at /ui/ (docs/dashboard.md), without a key.
  hutch::api::registerUiRoutes(ui_router, ui_dir);
  server.addPlane(hutch::api::uiPlane(ui_router));
  if (!listen.empty() || !listen_http.empty()) {
    if (std::filesystem::is_directory(ui_dir, ec)) {
      spdlog::info("ui: the dashboard from {} at /ui/", ui_dir);
    } else {
      spdlog::info("ui: no dashboard in {} (web/dashboard/build.sh builds it); /ui/ answers 404",
                   ui_dir);
    }
  }
  boost::asio::steady_timer expiry_timer(loop);
  std::function<void()> expire_tick = [&] {
    expiry_timer.expires_after(std::chrono::seconds(1));
    expiry_timer.async_wait([&](const boost::system::error_code& ec) {
      if (ec) return;
      boost::asio::co_spawn(loop, service.tick(),
                            [&](const std::exception_ptr&) { expire_tick(); });
    });
  };

  // The image cache's size limit: checked once boxes are adopted, then every hour.
  boost::asio::steady_timer prune_timer(loop);
  std::function<void()> prune_tick = [&] {
    if (image_cache_max_gib == 0) return;
    boost::asio::co_spawn(
        loop,
        [&]() -> boost::asio::awaitable<void> {
          hutch::storage::PruneOptions options{.limit_bytes = image_cache_max_gib << 30};
          auto pruned = co_await template_service.prune(options);
          if (!pruned) spdlog::warn("image cache: {}", pruned.error().describe());
        },
        [&](const std::exception_ptr&) {
          prune_timer.expires_after(std::chrono::hours(1));
          prune_timer.async_wait([&](const boost::system::error_code& ec) {
            if (!ec) prune_tick();
          });
        });
  };

  // Reattach to boxes an earlier hutchd left running, then serve the API. (The loop keeps
  // running from here on: adopted boxes have watchers on it.)
  int exit_code = 0;
  boost::asio::co_spawn(
      loop, service.recoverAfterRestart(),
      [&](const std::exception_ptr&, const hutch::Result<>& recovered) {
        if (!recovered) {
          spdlog::error("{}", recovered.error().describe());
          exit_code = 70;
          loop.stop();
          return;
        }
        ports.openRunning();  // published ports of adopted boxes
        if (auto listening = server.listen(socket_path, 0660); !listening) {
          spdlog::error("{}", listening.error().describe());
          exit_code = 69;
          loop.stop();
          return;
        }
        for (const std::string& address : listen) {
          auto bound = server.listenTcp(address, &*tls);
          if (!bound) {
            spdlog::error("--listen {}: {}", address, bound.error().describe());
            exit_code = 69;
            loop.stop();
            return;
          }
        }
        for (const std::string& address : listen_http) {
          auto bound = server.listenTcp(address, nullptr);
          if (!bound) {
            spdlog::error("--listen-http {}: {}", address, bound.error().describe());
            exit_code = 69;
            loop.stop();
            return;
          }
        }
        for (const std::string& address : listen_ssh) {
          auto bound = (*ssh_server)->listenTcp(address);
          if (!bound) {
            spdlog::error("--listen-ssh {}: {}", address, bound.error().describe());
            exit_code = 69;
            loop.stop();
            return;
          }
          spdlog::info("ssh: the gateway listens on {}", *bound);
        }
        expire_tick();
        prune_tick();
        spdlog::info("hutchd {} listening on {} (state in {})", kVersion,
                     fmt::format("{}", fmt::join(server.listeners(), ", ")), state_dir);
      });

  boost::asio::signal_set signals(loop, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code&, int sig) {
    spdlog::info("signal {}: shutting down (boxes keep running)", sig);
    server.stop();
    (*ssh_server)->stop();
    expiry_timer.cancel();
    prune_timer.cancel();
    lag_probe.stop();
    service.setObserver(nullptr);
    ports.closeAll();
    boost::asio::co_spawn(
        loop,
        [&]() -> boost::asio::awaitable<void> {
          co_await service.drainPool();
          co_await service.finishCleanups(std::chrono::seconds(30));
          service.detachAll();
          if (network) network->stop();
          loop.stop();
        },
        boost::asio::detached);
  });
  lag_probe.start();
  loop.run();
  pool.join();
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  return run(argc, argv);
}

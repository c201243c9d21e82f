// TemplateBuilder: a base and steps become a template, every step run inside a box
// (template_builder.h, docs/templates.md "Builds").
#include "box/template_builder.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <csignal>
#include <map>

#include "base/unique_fd.h"
#include "box/network_service.h"
#include "event/offload.h"
#include "guest/exec_session.h"
#include "guest/file_reader.h"
#include "guest/file_writer.h"
#include "image/digest.h"

namespace hutch::box {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

std::string_view kindName(BuildStep::Kind kind) {
  switch (kind) {
    case BuildStep::Kind::kRun: return "RUN";
    case BuildStep::Kind::kCopy: return "COPY";
    case BuildStep::Kind::kEnv: return "ENV";
    case BuildStep::Kind::kWorkdir: return "WORKDIR";
    case BuildStep::Kind::kUser: return "USER";
    case BuildStep::Kind::kConfig: return "CONFIG";
  }
  return "?";
}

// Steps that change the box's files; the cache keeps the box after each of them.
bool changesFiles(const BuildStep& step) {
  return step.kind == BuildStep::Kind::kRun || step.kind == BuildStep::Kind::kCopy;
}

std::string_view typeName(CopyItem::Type type) {
  switch (type) {
    case CopyItem::Type::kFile: return "file";
    case CopyItem::Type::kDirectory: return "dir";
    case CopyItem::Type::kSymlink: return "symlink";
    case CopyItem::Type::kArchive: return "archive";
  }
  return "?";
}

// The cache's saved box after the step whose key this is.
std::string snapshotName(std::string_view key) {
  return fmt::format("build-{}", key.substr(0, 40));
}

std::string hexOf(const std::string& digest) {
  return std::string(image::digestHex(digest));
}

Result<std::string> hashFile(const fs::path& path, image::Sha256& hash) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return fail(sysError("Cannot read " + path.string() + " of the build context", errno));
  std::array<char, 1 << 16> buffer{};
  for (;;) {
    ssize_t n = ::read(fd.get(), buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(sysError("Cannot read " + path.string(), errno));
    if (n == 0) break;
    hash.update(buffer.data(), static_cast<size_t>(n));
  }
  return std::string();
}

}  // namespace

Result<std::string> buildStepKey(const std::string& parent, const BuildStep& step) {
  json j{{"kind", kindName(step.kind)}, {"argv", step.argv},
         {"user", step.user},           {"env", step.env},
         {"path", step.path},           {"chown", step.chown},
         {"config", step.config}};
  image::Sha256 hash;
  hash.update(parent);
  hash.update("\n");
  hash.update(j.dump());
  for (const CopyItem& item : step.items) {
    hash.update(
        fmt::format("\n{} {} {:o} {}\n", typeName(item.type), item.target, item.mode, item.link));
    if (item.type == CopyItem::Type::kFile || item.type == CopyItem::Type::kArchive) {
      HUTCH_TRY_VOID(hashFile(item.source, hash));
    }
  }
  return hexOf(hash.finish());
}

std::string buildBaseKey(const storage::Template& base, const BuildPlan& plan) {
  image::Sha256 hash;
  hash.update(fmt::format("hutch-build-v1\n{}\n{}\n{}\n{}\n{}", base.dir.string(), base.image_key,
                          plan.cpus, plan.memory_mib, plan.disk_mib));
  return hexOf(hash.finish());
}

TemplateBuilder::TemplateBuilder(boost::asio::thread_pool& pool, BoxService& boxes,
                                 TemplateService& templates, std::filesystem::path work_dir,
                                 image::ApplyLimits context_limits)
    : pool_(pool),
      boxes_(boxes),
      templates_(templates),
      work_dir_(std::move(work_dir)),
      context_limits_(context_limits) {
  std::error_code ec;
  if (fs::exists(work_dir_, ec)) {
    for (const auto& entry : fs::directory_iterator(work_dir_, ec)) {
      spdlog::info("Removing {}: left by a build that did not finish", entry.path().string());
      fs::remove_all(entry.path(), ec);
    }
  }
}

TemplateBuilder::Workspace::~Workspace() {
  if (dir_.empty()) return;
  std::error_code ec;
  fs::remove_all(dir_, ec);
  if (ec) spdlog::warn("Cannot remove {}: {}", dir_.string(), ec.message());
}

Result<TemplateBuilder::Workspace> TemplateBuilder::newWorkspace() {
  std::error_code ec;
  fs::create_directories(work_dir_, ec);
  fs::permissions(work_dir_, fs::perms::owner_all, ec);
  Workspace ws(work_dir_ / randomId());
  fs::create_directories(ws.context(), ec);
  if (ec) return fail(Errc::kInternal, "Cannot create " + ws.dir().string() + ": " + ec.message());
  return ws;
}

Result<> unpackClientTar(const fs::path& tar, const fs::path& tree, const image::Descriptor& layer,
                         image::ApplyLimits limits, std::string_view what) {
  std::error_code ec;
  fs::create_directories(tree, ec);
  if (ec) return fail(Errc::kInternal, "Cannot create " + tree.string() + ": " + ec.message());
  UniqueFd in(::open(tar.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in) return fail(sysError("Cannot open " + tar.string(), errno));
  HUTCH_TRY(image::RootDir root, image::RootDir::open(tree));
  limits.keep_owners = false;
  limits.whiteouts = false;
  image::ApplyUsage usage;
  auto applied = image::applyLayer(root, in.get(), layer, limits, usage);
  if (!applied) {
    return fail(Error(Errc::kInvalidArgument, applied.error().message())
                    .withContext(fmt::format("{} is not a usable tar", what)));
  }
  return ok();
}

asio::awaitable<Result<>> TemplateBuilder::unpackContext(const Workspace& ws, std::string digest,
                                                         uint64_t size) {
  image::Descriptor layer;
  layer.media_type = "application/vnd.oci.image.layer.v1.tar";
  layer.digest = std::move(digest);
  layer.size = static_cast<int64_t>(size);
  auto work = [tar = ws.contextTar(), context = ws.context(), layer,
               limits = context_limits_]() -> Result<> {
    return unpackClientTar(tar, context, layer, limits, "The build context");
  };
  co_return co_await event::offload(pool_, std::move(work));
}

struct TemplateBuilder::State {
  std::vector<std::string> env;  // "K=V", in the order first set
  std::string user;              // "": root
  std::string workdir;           // "": /
  json defaults = json::object();
  // The build box's secret placeholders ("NAME=placeholder"): every RUN's environment (beneath
  // its own variables), never the template's.
  std::vector<std::string> secret_env;

  static State from(const storage::Template& base) {
    State s;
    const json d = base.manifest.is_object() ? base.manifest.value("defaults", json::object())
                                             : json::object();
    if (d.is_object()) {
      s.defaults = d;
      for (const json& e : d.value("env", json::array())) {
        if (e.is_string()) s.env.push_back(e.get<std::string>());
      }
      s.user = d.value("user", "");
      s.workdir = d.value("workdir", "");
    }
    // As BuildKit does for an image that sets none: the usual PATH, so that `ENV PATH=/x:$PATH`
    // and RUN find the base's programs.
    bool has_path = false;
    for (const std::string& e : s.env) has_path = has_path || e.starts_with("PATH=");
    if (!has_path) s.env.insert(s.env.begin(), std::string("PATH=") + kDefaultPath);
    return s;
  }
  void setEnv(const std::string& key, const std::string& value) {
    const std::string entry = key + "=" + value;
    for (std::string& e : env) {
      if (e.starts_with(key + "=")) {
        e = entry;
        return;
      }
    }
    env.push_back(entry);
  }
  std::string cwd() const { return workdir.empty() ? "/" : workdir; }
  // Paths a step names relative to WORKDIR, as Docker takes them.
  std::string absolute(const std::string& path) const {
    if (path.starts_with("/")) return path;
    return (fs::path(cwd()) / path).lexically_normal().string();
  }
  // The template's defaults: the image config's form (template_image.cc defaultsJson).
  json finalDefaults() const {
    json d = defaults;
    d["env"] = env;
    d["user"] = user;
    d["workdir"] = workdir;
    // Every key of an image's config, with its type, whatever the base had.
    for (const char* key : {"entrypoint", "cmd", "exposed_ports"}) {
      if (!d[key].is_array()) d[key] = json::array();
    }
    if (!d["labels"].is_object()) d["labels"] = json::object();
    if (!d["stop_signal"].is_string()) d["stop_signal"] = "";
    return d;
  }
  void apply(const BuildStep& step) {
    switch (step.kind) {
      case BuildStep::Kind::kEnv:
        for (const auto& [k, v] : step.env) setEnv(k, v);
        break;
      case BuildStep::Kind::kWorkdir: workdir = absolute(step.path); break;
      case BuildStep::Kind::kUser: user = step.user; break;
      case BuildStep::Kind::kConfig:
        for (const auto& [k, v] : step.config.items()) {
          if (k == "labels" && v.is_object()) {
            if (!defaults["labels"].is_object()) defaults["labels"] = json::object();
            for (const auto& [lk, lv] : v.items()) defaults["labels"][lk] = lv;
          } else if (k == "exposed_ports" && v.is_array()) {
            if (!defaults["exposed_ports"].is_array()) defaults["exposed_ports"] = json::array();
            for (const json& p : v) {
              bool have = false;
              for (const json& q : defaults["exposed_ports"]) have = have || q == p;
              if (!have) defaults["exposed_ports"].push_back(p);
            }
          } else {
            // Docker: a new ENTRYPOINT resets the CMD inherited from the base.
            if (k == "entrypoint" && !step.config.contains("cmd")) defaults["cmd"] = json::array();
            defaults[k] = v;
          }
        }
        break;
      case BuildStep::Kind::kRun:
      case BuildStep::Kind::kCopy: break;
    }
  }
};

asio::awaitable<Result<storage::Template>> TemplateBuilder::baseTemplate(const BuildPlan& plan,
                                                                         const BuildProgress& say) {
  if (!plan.base_template.empty()) {
    auto found = templates_.find(plan.base_template);
    // A Dockerfile's FROM NAME: the template of that name if there is one, else the image.
    if (!found && !plan.base_image.empty()) co_return co_await baseImage(plan, say);
    if (!found) {
      co_return fail(found.error().withContext(fmt::format(
          "The build's base template '{}' is not there (hutch template ls)", plan.base_template)));
    }
    say({.step = BuildLog::kBaseStep,
         .message = fmt::format("FROM template {}", plan.base_template)});
    co_return *found;
  }
  co_return co_await baseImage(plan, say);
}

asio::awaitable<Result<storage::Template>> TemplateBuilder::baseImage(const BuildPlan& plan,
                                                                      const BuildProgress& say) {
  // An image is pulled once into a base template named by its reference; later builds use it
  // (as Docker uses a local image unless told to pull: remove the template to pull again).
  image::Sha256 hash;
  hash.update(plan.base_image);
  if (plan.base_credentials) {
    hash.update(fmt::format("\n{}\n{}", plan.base_scope, plan.base_credentials->username));
  }
  const std::string name = "build-base-" + hexOf(hash.finish()).substr(0, 12);
  if (auto found = templates_.find(name); found) {
    say({.step = BuildLog::kBaseStep,
         .message = fmt::format("FROM {} (template {}, pulled before)", plan.base_image, name)});
    co_return *found;
  }
  say({.step = BuildLog::kBaseStep,
       .message = fmt::format("FROM {}: pulling it into template {}", plan.base_image, name)});
  auto progress = [say](std::string_view text) {
    // On a worker thread: the caller's progress must take that (the API posts it to its loop).
    std::string_view rest = text;
    while (!rest.empty()) {
      size_t nl = rest.find('\n');
      std::string line(rest.substr(0, nl));
      if (!line.empty()) say({.step = BuildLog::kBaseStep, .message = line});
      if (nl == std::string_view::npos) break;
      rest.remove_prefix(nl + 1);
    }
  };
  std::string ref = plan.base_image;
  Result<nlohmann::json> made = nlohmann::json();
  if (ref == "scratch") {
    made = co_await templates_.createScratch(name, progress, plan.cancel);
  } else {
    made = co_await templates_.createFromImage(name, ref, progress, plan.cancel,
                                               plan.base_credentials);
  }
  if (!made) {
    // Two builds of one image at once: the other made it.
    if (made.error().code() == Errc::kAlreadyExists) {
      if (auto found = templates_.find(name); found) co_return *found;
    }
    co_return fail(made.error());
  }
  co_return templates_.find(name);
}

namespace {

Error cancelledBuild() {
  return Error(Errc::kCancelled, "Stopped: whoever asked for the build went away");
}

Result<> checkCancelled(const sys::CancelFlag& cancel) {
  if (cancel && cancel->load()) return fail(cancelledBuild());
  return ok();
}

// Every stage of `plan` (and theirs) stops with it and may use its secrets.
void inheritFrom(BuildPlan& plan) {
  for (BuildPlan& stage : plan.stages) {
    stage.cancel = plan.cancel;
    stage.secrets = plan.secrets;
    stage.secrets_owner = plan.secrets_owner;
    inheritFrom(stage);
  }
}

// Watches `cancel` while the RUN of `session` runs: once set, the process group is killed and
// the step ends with kCancelled. Ends with the session.
asio::awaitable<void> abandonWhenCancelled(std::weak_ptr<guest::ExecSession> session,
                                           sys::CancelFlag cancel) {
  auto executor = co_await asio::this_coro::executor;
  asio::steady_timer tick(executor);
  for (;;) {
    tick.expires_after(std::chrono::milliseconds(250));
    boost::system::error_code ec;
    co_await tick.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    auto live = session.lock();
    if (!live || live->finished()) co_return;
    if (cancel->load()) {
      live->abandon(cancelledBuild());
      co_return;
    }
  }
}

}  // namespace

asio::awaitable<Result<>> TemplateBuilder::runStep(BoxAgent& agent, const BuildStep& step,
                                                   int index, State& state, const BuildPlan& plan,
                                                   const BuildProgress& say) {
  switch (step.kind) {
    case BuildStep::Kind::kRun: {
      proto::ExecRequest run;
      run.argv = step.argv;
      run.env = state.env;
      // This RUN's own variables (a Dockerfile's build arguments) beside the ENV.
      for (const auto& [k, v] : step.env) run.env.push_back(k + "=" + v);
      for (const std::string& secret : state.secret_env) {
        const std::string key = secret.substr(0, secret.find('=') + 1);
        if (std::none_of(run.env.begin(), run.env.end(),
                         [&key](const std::string& e) { return e.starts_with(key); })) {
          run.env.push_back(secret);
        }
      }
      run.cwd = state.cwd();
      run.user = step.user.empty() ? (state.user.empty() ? "root" : state.user) : step.user;
      ExecLimits limits{.timeout = plan.step_timeout};
      auto session = co_await agent.exec(run, limits);
      if (!session) {
        co_return fail(session.error().withContext(fmt::format("Cannot run {}", step.text)));
      }
      if (plan.cancel) {
        auto executor = co_await asio::this_coro::executor;
        asio::co_spawn(executor, abandonWhenCancelled(*session, plan.cancel), asio::detached);
      }
      // Output goes to the log line by line, each stream on its own.
      std::map<guest::ExecEvent::Kind, std::string> partial;
      auto emit = [&](guest::ExecEvent::Kind kind, bool all) {
        std::string& text = partial[kind];
        size_t nl;
        while ((nl = text.find('\n')) != std::string::npos) {
          say({.step = index, .message = text.substr(0, nl)});
          text.erase(0, nl + 1);
        }
        if (all && !text.empty()) {
          say({.step = index, .message = text});
          text.clear();
        }
        // A line without end is not kept without bound.
        if (text.size() > 64 * 1024) {
          say({.step = index, .message = text});
          text.clear();
        }
      };
      for (;;) {
        auto event = co_await (*session)->next();
        if (!event) {
          co_return fail(event.error().withContext(fmt::format("{} broke off", step.text)));
        }
        if (event->kind != guest::ExecEvent::Kind::kExit) {
          partial[event->kind] += event->data;
          emit(event->kind, false);
          continue;
        }
        emit(guest::ExecEvent::Kind::kStdout, true);
        emit(guest::ExecEvent::Kind::kStderr, true);
        const proto::ExitStatus& status = event->exit_status;
        if (status.code && *status.code == 0) co_return ok();
        if (status.code) {
          co_return fail(Errc::kFailedPrecondition,
                         fmt::format("{} failed: exit code {}", step.text, *status.code));
        }
        co_return fail(
            Errc::kFailedPrecondition,
            fmt::format("{} was killed by signal {}{}", step.text, status.signal.value_or(0),
                        status.signal == SIGKILL ? fmt::format(" (the step time limit is {} s)",
                                                               plan.step_timeout.count())
                                                 : ""));
      }
    }
    case BuildStep::Kind::kCopy: {
      const std::string cwd = state.cwd();
      co_return co_await copyItems(agent, step, cwd, index, say);
    }
    case BuildStep::Kind::kWorkdir: {
      state.apply(step);
      proto::FileMkdirRequest mkdir;
      mkdir.path = state.cwd();
      mkdir.user = "root";
      mkdir.parents = true;
      auto made = co_await agent.makeDir(mkdir);
      if (!made) co_return fail(made.error().withContext("Cannot make " + mkdir.path));
      co_return ok();
    }
    case BuildStep::Kind::kEnv:
    case BuildStep::Kind::kUser:
    case BuildStep::Kind::kConfig: state.apply(step); co_return ok();
  }
  co_return ok();
}

asio::awaitable<Result<>> TemplateBuilder::checkStart(const std::string& name) {
  BoxSpec spec;
  spec.name = "build-" + randomId().substr(0, 8);
  spec.config.template_name = name;
  spec.owner = Owner{.id = std::string(kOwnerId), .name = "template build " + name};
  spec.metadata["hutch.build"] = name;
  auto made = co_await boxes_.create(spec);
  Result<> checked = ok();
  if (!made) {
    checked = fail(made.error().withContext("Its first box did not start"));
  } else if (!made->boot.starts_with("restored from")) {
    // A create whose template snapshot failed boots cold instead; for the build that is the
    // failure (the start command or ready check), said as the box says it.
    checked = fail(
        Errc::kFailedPrecondition,
        fmt::format("Its snapshot with the start command running was not made: {}", made->boot));
  }
  // A box that failed stays (state failed) until removed, as every box does.
  auto found = boxes_.get(spec.name);
  if (found) {
    auto removed = co_await boxes_.remove(found->id, true);
    if (!removed)
      spdlog::warn("build {}: box {} not removed: {}", name, spec.name, removed.error().describe());
  }
  co_return checked;
}

asio::awaitable<Result<TemplateBuilder::Ran>> TemplateBuilder::runSteps(
    BuildPlan& plan, const storage::Template& base, const observe::Actor& actor,
    const BuildProgress& say, const std::string& name, const std::string& label) {
  // Every step's key, and the last one whose saved box is in the cache.
  std::vector<std::string> keys;
  std::string key = buildBaseKey(base, plan);
  for (const BuildStep& step : plan.steps) {
    auto next = buildStepKey(key, step);
    if (!next) co_return fail(next.error().withContext("Cannot read the build context"));
    key = *next;
    keys.push_back(key);
  }
  const std::optional<std::string> cache_owner{std::string(kOwnerId)};
  int resume = -1;
  std::optional<Snapshot> resume_from;
  // A saved box cannot carry host secrets: a build that uses them runs every step.
  const bool use_cache = !plan.no_cache && plan.secrets.empty();
  if (!plan.secrets.empty() && !plan.no_cache) {
    say({.step = BuildLog::kBaseStep,
         .message = fmt::format("{}The build uses host secrets ({}): every step runs, and none is "
                                "cached",
                                label, fmt::join(plan.secrets, ", "))});
  }
  if (use_cache) {
    int first_forced = static_cast<int>(plan.steps.size());
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      if (plan.steps[i].force) {
        first_forced = static_cast<int>(i);
        break;
      }
    }
    for (int i = first_forced - 1; i >= 0; --i) {
      if (!changesFiles(plan.steps[static_cast<size_t>(i)])) continue;
      auto found = boxes_.findSaved(cache_owner, snapshotName(keys[static_cast<size_t>(i)]));
      if (found) {
        resume = i;
        resume_from = *found;
        break;
      }
    }
  }

  auto state = std::make_shared<State>(State::from(base));
  for (int i = 0; i <= resume; ++i) {
    const BuildStep& step = plan.steps[static_cast<size_t>(i)];
    state->apply(step);
    say({.step = i,
         .message =
             fmt::format("{}Step {}/{}: CACHED {}", label, i + 1, plan.steps.size(), step.text)});
  }

  BoxSpec spec;
  spec.name = "build-" + randomId().substr(0, 8);
  spec.config.template_name = base.name;
  spec.config.cpus = plan.cpus;
  spec.config.memory_mib = plan.memory_mib;
  spec.config.disk_mib = plan.disk_mib;
  spec.config.idle_pause_ms = 0;  // a long RUN waiting on the network is not idle
  spec.network_policy = plan.network_policy.empty()
                            ? R"({"presets": ["debian-mirrors", "npm", "pypi"]})"
                            : plan.network_policy;
  spec.owner = Owner{.id = std::string(kOwnerId), .name = "template build " + name};
  spec.secrets = plan.secrets;
  spec.secrets_owner = plan.secrets_owner;
  spec.metadata["hutch.build"] = name;
  say({.step = BuildLog::kBaseStep,
       .message = resume_from ? fmt::format("{}Resuming from the cache after step {} (box {})",
                                            label, resume + 1, spec.name)
                              : fmt::format("{}Starting build box {} of template {}", label,
                                            spec.name, base.name)});
  // Not a conditional expression: GCC 12 destroys the result of a co_await in one twice.
  std::string box_id;
  if (resume_from) {
    auto made = co_await boxes_.createFromSaved(*resume_from, spec);
    if (!made) co_return fail(made.error().withContext("The build box did not start"));
    box_id = made->id;
  } else {
    auto made = co_await boxes_.create(spec);
    if (!made) co_return fail(made.error().withContext("The build box did not start"));
    box_id = made->id;
  }

  if (!plan.secrets.empty()) {
    if (auto made = boxes_.get(box_id)) state->secret_env = NetworkService::environment(*made);
  }
  auto steps = [&]() -> asio::awaitable<Result<>> {
    // After the last cached step (resume is -1 when none is).
    for (size_t i = static_cast<size_t>(resume) + 1; i < plan.steps.size(); ++i) {
      const BuildStep& step = plan.steps[i];
      const int index = static_cast<int>(i);
      say({.step = index,
           .message =
               fmt::format("{}Step {}/{}: {}", label, index + 1, plan.steps.size(), step.text)});
      HUTCH_CO_TRY_VOID(checkCancelled(plan.cancel));
      HUTCH_CO_TRY(std::shared_ptr<BoxAgent> agent, co_await boxes_.agentFor(box_id, actor));
      auto ran = co_await runStep(*agent, step, index, *state, plan, say);
      if (!ran) {
        Error error = ran.error();
        co_return fail(error.withContext(fmt::format("{}Step {}", label, index + 1)));
      }
      if (!changesFiles(step) || !use_cache) continue;
      const std::string snap = snapshotName(keys[i]);
      if (boxes_.findSaved(cache_owner, snap)) continue;
      auto saved = co_await boxes_.save(box_id, snap);
      // Another build of the same steps saved it first; the cache is only an optimisation.
      if (!saved && saved.error().code() != Errc::kAlreadyExists) {
        say({.step = index,
             .message = fmt::format("Not cached: {}", saved.error().describe()),
             .level = "warn"});
      }
    }
    co_return ok();
  };
  auto ran = co_await steps();
  if (!ran) {
    auto removed = co_await boxes_.remove(box_id, true);
    if (!removed) {
      spdlog::warn("build {}: box {} not removed: {}", name, box_id, removed.error().describe());
    }
    co_return fail(ran.error());
  }
  co_return Ran{.box_id = box_id, .state = state, .key = key, .cached = resume + 1};
}

asio::awaitable<Result<>> TemplateBuilder::resolveCopyFrom(BuildPlan& plan,
                                                           const observe::Actor& actor,
                                                           const BuildProgress& say,
                                                           const std::string& name,
                                                           const fs::path& into) {
  std::map<size_t, std::vector<BuildStep*>> wanted;
  for (BuildStep& step : plan.steps) {
    if (step.copy_from) wanted[step.copy_from->stage].push_back(&step);
  }
  size_t fetched = 0;
  for (auto& [index, steps] : wanted) {
    if (index >= plan.stages.size()) {
      co_return fail(Errc::kInternal, fmt::format("COPY --from stage {} is not planned", index));
    }
    BuildPlan& stage = plan.stages[index];
    const std::string label = fmt::format("stage {}: ", index + 1);
    HUTCH_CO_TRY(storage::Template base, co_await baseTemplate(stage, say));
    if (stage.steps_from_base) {
      auto made = stage.steps_from_base(State::from(base).env);
      if (!made) co_return fail(made.error());
      stage.steps = std::move(*made);
    }
    if (!stage.stages.empty()) {
      HUTCH_CO_TRY_VOID(
          co_await resolveCopyFrom(stage, actor, say, name, into / fmt::format("stage-{}", index)));
    }
    HUTCH_CO_TRY(Ran ran, co_await runSteps(stage, base, actor, say, name, label));
    Result<> done = ok();
    auto agent = co_await boxes_.agentFor(ran.box_id, actor);
    if (!agent) done = fail(agent.error());
    for (BuildStep* step : steps) {
      if (!done) break;
      say({.step = BuildLog::kBaseStep,
           .message = fmt::format("{}fetching {} for {}", label,
                                  fmt::join(step->copy_from->sources, " "), step->text)});
      auto items = co_await fetch(**agent, *step->copy_from, into / std::to_string(fetched++));
      if (!items) {
        done = fail(items.error().withContext(step->text));
      } else {
        step->items = std::move(*items);
      }
    }
    auto removed = co_await boxes_.remove(ran.box_id, true);
    if (!removed) {
      spdlog::warn("build {}: box {} not removed: {}", name, ran.box_id,
                   removed.error().describe());
    }
    if (!done) co_return done;
  }
  co_return ok();
}

asio::awaitable<Result<json>> TemplateBuilder::build(std::string name, BuildPlan plan,
                                                     observe::Actor actor, BuildProgress progress) {
  const auto started = std::chrono::steady_clock::now();
  BuildProgress say = [&progress](const BuildLog& log) {
    if (progress) progress(log);
  };
  if (plan.base_image.empty() && plan.base_template.empty()) {
    co_return fail(Errc::kInvalidArgument, "A build starts from a base: an image or a template");
  }
  HUTCH_CO_TRY_VOID(templates_.checkNewName(name));
  // Secrets the caller does not have fail the build now, not after its base is pulled.
  if (!plan.secrets.empty() && boxes_.network()) {
    HUTCH_CO_TRY_VOID(boxes_.network()->secretsFor(plan.secrets, plan.secrets_owner));
  }
  inheritFrom(plan);
  HUTCH_CO_TRY(storage::Template base, co_await baseTemplate(plan, say));
  if (plan.steps_from_base) {
    auto steps = plan.steps_from_base(State::from(base).env);
    if (!steps) co_return fail(steps.error());
    plan.steps = std::move(*steps);
  }
  // Files from other stages are fetched first: a COPY's cache key is its content.
  std::optional<Workspace> fetched;
  if (!plan.stages.empty()) {
    HUTCH_CO_TRY(Workspace ws, newWorkspace());
    fetched.emplace(std::move(ws));
    HUTCH_CO_TRY_VOID(co_await resolveCopyFrom(plan, actor, say, name, fetched->dir()));
  }
  HUTCH_CO_TRY(Ran ran, co_await runSteps(plan, base, actor, say, name, ""));
  const std::string box_id = ran.box_id;
  say({.step = BuildLog::kFinalizeStep, .message = "Stopping the build box"});
  Result<json> made = fail(Errc::kInternal, "not made");
  // The build box's CA (it had host secrets) does not become the template's.
  Result<> stopped = ok();
  if (!plan.secrets.empty()) stopped = co_await boxes_.removeCa(box_id);
  if (stopped) {
    auto down = co_await boxes_.stop(box_id);
    if (!down) stopped = fail(down.error());
  }
  if (!stopped) {
    made = fail(stopped.error().withContext("The build box did not stop"));
  } else {
    json extra{{"defaults", ran.state->finalDefaults()},
               {"build",
                {{"key", ran.key},
                 {"base_template", base.name},
                 {"base_image", plan.base_image},
                 {"steps", plan.steps.size()},
                 {"cached_steps", ran.cached}}}};
    if (!plan.start_cmd.empty() || !plan.ready_cmd.empty()) {
      extra["start"] = {{"cmd", plan.start_cmd}, {"ready", plan.ready_cmd}};
    }
    say({.step = BuildLog::kFinalizeStep, .message = "Freezing the disk into template " + name});
    made = co_await templates_.createFromBox(name, box_id, extra);
  }
  auto removed = co_await boxes_.remove(box_id, true);
  if (!removed) {
    spdlog::warn("build {}: box {} not removed: {}", name, box_id, removed.error().describe());
  }
  if (!made) co_return fail(made.error().withContext("Cannot build template " + name));
  if (!plan.start_cmd.empty() || !plan.ready_cmd.empty()) {
    // The start command and ready check run now, in the template's first snapshot (of the
    // default size), so that a check that never passes fails the build, not a user's create.
    say({.step = BuildLog::kFinalizeStep,
         .message = "Starting the start command and waiting for the ready check"});
    auto checked = co_await checkStart(name);
    if (!checked) {
      auto removed_template = templates_.remove(name);
      if (!removed_template) {
        spdlog::warn("build {}: template not removed: {}", name,
                     removed_template.error().describe());
      }
      Error error = checked.error();
      co_return fail(error.withContext("Cannot build template " + name));
    }
  }
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started);
  say({.step = BuildLog::kFinalizeStep,
       .message =
           fmt::format("Template {} built in {:.1f} s ({} of {} steps cached)", name,
                       static_cast<double>(took.count()) / 1000.0, ran.cached, plan.steps.size())});
  co_return made;
}

}  // namespace hutch::box

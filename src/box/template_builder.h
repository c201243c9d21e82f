// Template builds (docs/templates.md "Builds"): a base (an OCI image or another template) and a
// list of steps become a new template. Every step that changes files runs inside a box, never on
// the host: RUN is an exec in it, COPY writes the build context's files through its agent. After
// each such step the box is saved (memory and disk), named by the hash of everything up to that
// step, so a rebuild resumes from the last unchanged step as Docker's cache does. The finished
// box is stopped and frozen into the template, with the accumulated ENV, USER, WORKDIR, CMD,
// ENTRYPOINT, EXPOSE and LABEL as its defaults and an optional start command and ready check
// (BoxService's template snapshot runs them, so every box of it starts with the service up).
//
// Both faces that build reduce to a BuildPlan: a Dockerfile (dockerfile_plan.h) and E2B's
// template builder. The builder is a client of BoxService and TemplateService, nothing more.
#pragma once

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on
#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "box/box_service.h"
#include "box/template_service.h"
#include "image/layer_apply.h"
#include "observe/audit_log.h"

namespace hutch::box {

// One file, directory or symlink a COPY puts into the box.
struct CopyItem {
  // kArchive: an ADD of a local tar archive (plain, gzip, bzip2 or xz): copied into the box and
  // unpacked into `target` (a directory) by the box's own tar, as root, keeping the archive's
  // owners and modes. A hostile archive is unpacked inside the VM, never on the host.
  enum class Type { kFile, kDirectory, kSymlink, kArchive };
  Type type = Type::kFile;
  std::filesystem::path source;  // on the host, inside the build's context (kFile, kArchive)
  std::string target;            // absolute path in the box
  uint32_t mode = 0644;          // permission bits (a COPY --chmod already applied)
  std::string link;              // kSymlink: what it points to
  bool operator==(const CopyItem&) const = default;
};

struct BuildStep {
  enum class Kind {
    kRun,      // argv as `user` (empty: the current USER) in WORKDIR with ENV
    kCopy,     // items, owned by chown ("user[:group]"; empty: root)
    kEnv,      // env: set for the following steps and the template
    kWorkdir,  // path: made if missing, the cwd of what follows
    kUser,     // user: who the following RUNs and the template's execs run as
    kConfig,   // config: only the template's defaults ({"cmd": [..], "labels": {..}, ...})
  };
  Kind kind = Kind::kRun;
  // How the user wrote it (a Dockerfile line, an E2B step), for logs and errors.
  std::string text;
  std::vector<std::string> argv;
  std::string user;
  std::vector<CopyItem> items;
  std::string chown;
  std::vector<std::pair<std::string, std::string>> env;
  std::string path;
  nlohmann::json config;
  // Run again even when cached (E2B's per-step "force"); everything after it runs too.
  bool force = false;
  // A COPY --from another stage (BuildPlan::stages): before the build, that stage is built in
  // a box of its own and these paths are fetched from it; they become `items`.
  struct CopyFrom {
    size_t stage = 0;
    std::vector<std::string> sources;  // absolute paths in the stage's box (no wildcards)
    std::string dest;                  // as for a COPY: a trailing '/' makes it a directory
    std::optional<uint32_t> chmod;
  };
  std::optional<CopyFrom> copy_from;
};

struct BuildPlan {
  // An image reference (pulled as TemplateService::createFromImage does, once, into a base
  // template) or a template's name; with both, the template when there is one of that name.
  std::string base_image;
  std::string base_template;
  // Credentials for pulling base_image, for this build only (E2B's fromImageRegistry; see
  // TemplateService::createFromImage). The base pulled with them is kept under a name of its
  // own for `base_scope` (the caller's: who and which credentials may reuse that pull) and the
  // user name, so a build without them never gets that image from the cache.
  std::optional<TemplateService::PullCredentials> base_credentials;
  std::string base_scope;
  std::vector<BuildStep> steps;
  // When set, the steps are made once the base is known, from its ENV ("K=V": a Dockerfile's
  // words expand $PATH and the like with it); they replace `steps`.
  std::function<Result<std::vector<BuildStep>>(const std::vector<std::string>& base_env)>
      steps_from_base;
  // Stages that COPY --from steps take files from (a Dockerfile's multi-stage build): each is
  // built like a plan, in its own box, which is removed once its files are fetched.
  std::vector<BuildPlan> stages;
  // Started at boot of the template's snapshot, and polled until ready (docs/templates.md
  // "Start and ready commands"); both shell strings, run as the template's USER.
  std::string start_cmd;
  std::string ready_cmd;
  unsigned cpus = 2;
  uint64_t memory_mib = 1024;
  uint64_t disk_mib = 8192;
  // The build box's egress policy (a preset or JSON); empty: the registries the host uses.
  std::string network_policy;
  // Host secrets the build's RUN steps may use, as a box's (placeholders in their environment,
  // swapped by hutch-egress), of `secrets_owner` (the caller). Nothing of them reaches the
  // template: the build box's CA leaves its trust store before its disk is frozen. A build with
  // secrets neither takes steps from the step cache nor adds to it (a saved box cannot carry
  // secrets).
  std::vector<std::string> secrets;
  std::string secrets_owner;
  std::chrono::seconds step_timeout{3600};
  bool no_cache = false;
  // Once set (the client that asked went away), the build stops: a running RUN is killed, no
  // further step runs, a base image's pull stops, and the build fails kCancelled.
  sys::CancelFlag cancel;
};

// What the build reports as it goes: `step` is the index in plan.steps, or kBaseStep and
// kFinalizeStep; `cached` marks a step found in the cache.
struct BuildLog {
  static constexpr int kBaseStep = -1;
  static constexpr int kFinalizeStep = -2;
  int step = kBaseStep;
  std::string message;
  std::string level = "info";  // "info", "warn", "error"
};
using BuildProgress = std::function<void(const BuildLog&)>;

// The hash a step's cache entry is named by: everything before it (parent), the step itself
// and, for a COPY, the content of its files (not their times or owners on the host).
Result<std::string> buildStepKey(const std::string& parent, const BuildStep& step);
// The key of a build's start: its base template's build and the box's size.
std::string buildBaseKey(const storage::Template& base, const BuildPlan& plan);

// A tar a client sent (a build context, E2B's COPY files), unpacked into the directory `tree`
// (made if missing): hostile input, so only through an image::RootDir within `limits`, owners
// not kept (COPY sets them in the box), whiteouts off (a file named .wh.x is a file). `layer`
// says its digest, size and compression; errors say "`what` is not a usable tar". Blocking.
Result<> unpackClientTar(const std::filesystem::path& tar, const std::filesystem::path& tree,
                         const image::Descriptor& layer, image::ApplyLimits limits,
                         std::string_view what);

class TemplateBuilder {
 public:
  // The saved boxes of the build cache belong to this owner (no key has it), so they are in no
  // one's snapshot list; admins see the build boxes themselves while they run.
  static constexpr std::string_view kOwnerId = "hutch-build";

  // `work_dir` (<state>/builds) holds each build's context while it runs; what is there at
  // start is left over from a hutchd that stopped mid-build and is removed.
  TemplateBuilder(boost::asio::thread_pool& pool, BoxService& boxes, TemplateService& templates,
                  std::filesystem::path work_dir, image::ApplyLimits context_limits = {});

  // A build's own directory under work_dir, removed with this object.
  class Workspace {
   public:
    explicit Workspace(std::filesystem::path dir) : dir_(std::move(dir)) {}
    ~Workspace();
    Workspace(Workspace&& other) noexcept : dir_(std::exchange(other.dir_, {})) {}
    Workspace& operator=(Workspace&&) = delete;
    Workspace(const Workspace&) = delete;
    Workspace& operator=(const Workspace&) = delete;
    const std::filesystem::path& dir() const { return dir_; }
    // Where the uploaded context tar goes, and where it is unpacked.
    std::filesystem::path contextTar() const { return dir_ / "context.tar"; }
    std::filesystem::path context() const { return dir_ / "context"; }

   private:
    std::filesystem::path dir_;
  };
  Result<Workspace> newWorkspace();
  // Unpacks the uploaded context (a plain tar: hostile input, confined to the
  // workspace by RootDir, within the context limits) whose sha256 and size the upload measured.
  // On the worker pool.
  boost::asio::awaitable<Result<>> unpackContext(const Workspace& ws, std::string digest,
                                                 uint64_t size);
  // The most bytes an uploaded context may have.
  uint64_t contextLimit() const { return context_limits_.max_total_bytes; }
  // The worker pool its blocking work runs on, for its clients' own (E2B's uploads).
  boost::asio::thread_pool& pool() { return pool_; }

  // Builds template `name` from `plan`; `actor` is who asked (the audit records of its execs).
  // The build box is removed whatever happens; nothing half-made is left as a template. The
  // template's description (TemplateService::list's form).
  boost::asio::awaitable<Result<nlohmann::json>> build(std::string name, BuildPlan plan,
                                                       observe::Actor actor,
                                                       BuildProgress progress = {});

 private:
  struct State;  // ENV, USER, WORKDIR and the other defaults as the steps change them
  boost::asio::awaitable<Result<storage::Template>> baseTemplate(const BuildPlan& plan,
                                                                 const BuildProgress& say);
  boost::asio::awaitable<Result<storage::Template>> baseImage(const BuildPlan& plan,
                                                              const BuildProgress& say);
  boost::asio::awaitable<Result<>> runStep(BoxAgent& agent, const BuildStep& step, int index,
                                           State& state, const BuildPlan& plan,
                                           const BuildProgress& say);
  // Boots the new template's first box (making its snapshot, the start command running) and
  // removes it.
  boost::asio::awaitable<Result<>> checkStart(const std::string& name);
  // What runSteps leaves: a running box with every step done, and how it got there.
  struct Ran {
    std::string box_id;
    std::shared_ptr<State> state;
    std::string key;  // of the last step (the base's when there is none)
    int cached = 0;   // steps that came from the cache
  };
  // The steps of `plan` from its base: a box resumed from the cache or started, the rest run.
  // `label` prefixes its log ("stage 1: ").
  boost::asio::awaitable<Result<Ran>> runSteps(BuildPlan& plan, const storage::Template& base,
                                               const observe::Actor& actor,
                                               const BuildProgress& say, const std::string& name,
                                               const std::string& label);
  // Builds the stages COPY --from steps name and fetches their files into `into`.
  boost::asio::awaitable<Result<>> resolveCopyFrom(BuildPlan& plan, const observe::Actor& actor,
                                                   const BuildProgress& say,
                                                   const std::string& name,
                                                   const std::filesystem::path& into);
  boost::asio::awaitable<Result<std::vector<CopyItem>>> fetch(BoxAgent& agent,
                                                              const BuildStep::CopyFrom& from,
                                                              const std::filesystem::path& into);
  // A COPY or ADD step into the box (template_builder_copy.cc); `cwd` is the WORKDIR.
  boost::asio::awaitable<Result<>> copyItems(BoxAgent& agent, const BuildStep& step,
                                             const std::string& cwd, int index,
                                             const BuildProgress& say);

  boost::asio::thread_pool& pool_;
  BoxService& boxes_;
  TemplateService& templates_;
  std::filesystem::path work_dir_;
  image::ApplyLimits context_limits_;
};

}  // namespace hutch::box

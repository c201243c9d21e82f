// A Dockerfile into a BuildPlan (dockerfile_plan.h): hutch::build parses and expands, this maps
// each instruction of the stage to build onto the builder's steps.
#include "box/dockerfile_plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fstream>
#include <set>
#include <sstream>

#include "build/build_context.h"
#include "build/dockerfile.h"
#include "build/dockerignore.h"
#include "build/word_expansion.h"

namespace hutch::box {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

Error atLine(const build::Instruction& in, const Error& error) {
  return Error(error.code(), fmt::format("Dockerfile line {} ({}): {}", in.line,
                                         build::keywordName(in.keyword), error.message()));
}

// Variables in scope for one stage: ARGs declared in it (with the build's values), then ENV.
struct Scope {
  std::map<std::string, std::string> args;  // declared in this stage (or global, for FROM)
  std::map<std::string, std::string> env;   // the base's and the stage's ENV

  build::VariableLookup lookup() const {
    return [this](std::string_view name) -> std::optional<std::string> {
      // ENV wins over ARG of the same name, as in Docker.
      if (auto it = env.find(std::string(name)); it != env.end()) return it->second;
      if (auto it = args.find(std::string(name)); it != args.end()) return it->second;
      return std::nullopt;
    };
  }
};

Result<std::string> expand(const std::string& word, const Scope& scope, char escape) {
  return build::expandWord(word, scope.lookup(), escape);
}

std::vector<std::string> commandArgv(const build::CommandLine& line,
                                     const std::vector<std::string>& shell) {
  if (line.json_form) return line.argv;
  std::vector<std::string> argv = shell;
  argv.push_back(line.shell);
  return argv;
}

json commandJson(const build::CommandLine& line, const std::vector<std::string>& shell) {
  if (line.json_form && line.argv.empty()) return json::array();
  return commandArgv(line, shell);
}

// Octal --chmod ("755", "0644"); Docker's symbolic form is refused with what to write instead.
Result<std::optional<uint32_t>> parseChmod(const std::string& text) {
  if (text.empty()) return std::optional<uint32_t>();
  uint32_t mode = 0;
  for (char c : text) {
    if (c < '0' || c > '7' || mode > 07777) {
      return fail(Errc::kUnsupported,
                  fmt::format("--chmod={}: give the mode in octal (--chmod=755)", text));
    }
    mode = mode * 8 + static_cast<uint32_t>(c - '0');
  }
  if (mode > 07777) return fail(Errc::kInvalidArgument, "--chmod=" + text + " is not a mode");
  return std::optional<uint32_t>(mode);
}

// `rel` under the destination directory, or the destination itself (without a trailing '/').
// Runs $HUTCH_RUN_SCRIPT as an executable file (it starts with #!), removed afterwards.
constexpr const char* kRunScript = R"sh(set -e
f=$(mktemp /tmp/hutch-run.XXXXXX)
trap 'rm -f "$f"' EXIT
printf '%s' "$HUTCH_RUN_SCRIPT" > "$f"
unset HUTCH_RUN_SCRIPT
chmod 0755 "$f"
"$f"
)sh";

std::string joinTarget(const std::string& dest, const std::string& rel) {
  std::string d = dest;
  while (d.size() > 1 && d.ends_with('/')) d.pop_back();
  if (rel.empty()) return d;
  return d == "/" ? "/" + rel : d + "/" + rel;
}

struct Planner {
  const fs::path& context;
  const DockerfileOptions& options;
  const build::Dockerfile& file;
  const std::vector<build::ContextEntry>& listing;
  fs::path heredoc_dir;            // beside the context: COPY <<EOF bodies as files
  std::map<size_t, size_t> slots;  // a Dockerfile stage -> its place in BuildPlan::stages
  std::map<std::string, size_t> image_slots;  // a COPY --from image -> the same
  int heredocs = 0;

  Result<BuildStep> copyStep(const build::Instruction& in, const build::Copy& copy,
                             const Scope& scope) {
    if (copy.from_stage) {
      auto slot = slots.find(*copy.from_stage);
      if (slot == slots.end()) {
        return fail(Errc::kInternal, fmt::format("stage {} is not planned", *copy.from_stage));
      }
      return copyFromStage(in, copy, scope, slot->second);
    }
    if (!copy.from.empty()) {
      // An image: planned as a stage of its own with no steps (planStage).
      auto slot = image_slots.find(copy.from);
      if (slot == image_slots.end()) {
        return fail(Errc::kInternal, fmt::format("the image {} is not planned", copy.from));
      }
      return copyFromStage(in, copy, scope, slot->second);
    }
    std::vector<std::string> sources;
    for (const std::string& raw : copy.sources) {
      HUTCH_TRY(std::string s, expand(raw, scope, file.escape));
      sources.push_back(std::move(s));
    }
    HUTCH_TRY(std::string dest, expand(copy.dest, scope, file.escape));
    HUTCH_TRY(std::string chown, expand(copy.chown, scope, file.escape));
    HUTCH_TRY(std::string chmod_text, expand(copy.chmod, scope, file.escape));
    HUTCH_TRY(std::optional<uint32_t> chmod, parseChmod(chmod_text));
    build::CopyOptions copy_options{
        .is_add = copy.is_add, .unpack = copy.unpack, .inline_files = copy.inline_files.size()};
    HUTCH_TRY(build::CopyPlan plan,
              build::resolveCopySources(listing, sources, dest, copy_options));
    if (copy.is_add) {
      HUTCH_TRY_VOID(build::detectArchives(context, plan));
      for (const build::CopyItem& item : plan.items) {
        if (item.extract && (!chown.empty() || chmod)) {
          return fail(Errc::kUnsupported,
                      fmt::format("ADD --{} of a tar archive ({}) is not supported: the "
                                  "archive's owners and modes are kept; RUN {} after the ADD",
                                  chown.empty() ? "chmod" : "chown", item.source,
                                  chown.empty() ? "chmod -R" : "chown -R"));
        }
      }
    }
    BuildStep step;
    step.kind = BuildStep::Kind::kCopy;
    step.text = in.original;
    step.chown = chown;
    const bool dest_is_dir = plan.dest_is_dir || !copy.inline_files.empty();
    if (dest_is_dir) {
      // The destination itself is made 0755, as BuildKit does; --chmod is for what is copied.
      step.items.push_back(
          {.type = CopyItem::Type::kDirectory, .target = joinTarget(dest, ""), .mode = 0755});
    }
    for (const build::CopyItem& item : plan.items) {
      CopyItem out;
      if (item.extract) {
        // ADD of a local tar archive: unpacked into the destination, a directory.
        step.items.push_back({.type = CopyItem::Type::kArchive,
                              .source = context / item.entry.path,
                              .target = joinTarget(dest, "")});
        continue;
      }
      out.target = joinTarget(dest, dest_is_dir ? item.target : "");
      switch (item.entry.type) {
        case build::ContextEntry::Type::kFile:
          out.type = CopyItem::Type::kFile;
          out.source = context / item.entry.path;
          out.mode = chmod.value_or(item.entry.mode & 07777);
          break;
        case build::ContextEntry::Type::kDirectory:
          out.type = CopyItem::Type::kDirectory;
          out.mode = chmod.value_or(item.entry.mode & 07777);
          break;
        case build::ContextEntry::Type::kSymlink:
          out.type = CopyItem::Type::kSymlink;
          out.link = item.entry.target;
          break;
      }
      step.items.push_back(std::move(out));
    }
    for (const build::Heredoc& doc : copy.inline_files) {
      std::string body = doc.content;
      if (doc.expand) {
        HUTCH_TRY(body, build::expandHeredoc(doc.content, scope.lookup()));
      }
      std::error_code ec;
      fs::create_directories(heredoc_dir, ec);
      fs::path path = heredoc_dir / std::to_string(heredocs++);
      std::ofstream(path, std::ios::binary) << body;
      step.items.push_back({.type = CopyItem::Type::kFile,
                            .source = path,
                            .target = joinTarget(dest, doc.name),
                            .mode = chmod.value_or(0644)});
    }
    return step;
  }

  // COPY --from=STAGE or IMAGE: paths in the box of BuildPlan::stages[slot], fetched by the
  // builder before the build.
  Result<BuildStep> copyFromStage(const build::Instruction& in, const build::Copy& copy,
                                  const Scope& scope, size_t slot) {
    if (!copy.inline_files.empty()) {
      return fail(Errc::kInvalidArgument, "COPY --from takes no heredoc files");
    }
    BuildStep step;
    step.kind = BuildStep::Kind::kCopy;
    step.text = in.original;
    BuildStep::CopyFrom from;
    from.stage = slot;
    for (const std::string& raw : copy.sources) {
      HUTCH_TRY(std::string source, expand(raw, scope, file.escape));
      // Paths in the stage are absolute (relative ones are from its root, as Docker takes them).
      std::string clean = build::cleanPath("/" + source);
      from.sources.push_back(clean.empty() ? "/" : clean);
    }
    HUTCH_TRY(from.dest, expand(copy.dest, scope, file.escape));
    HUTCH_TRY(step.chown, expand(copy.chown, scope, file.escape));
    HUTCH_TRY(std::string chmod_text, expand(copy.chmod, scope, file.escape));
    HUTCH_TRY(from.chmod, parseChmod(chmod_text));
    step.copy_from = std::move(from);
    return step;
  }

  // The steps of stage `index` (and of the stages it is built FROM, first).
  Result<std::vector<BuildStep>> stageSteps(size_t index, const std::vector<std::string>& base_env,
                                            const std::map<std::string, std::string>& globals) {
    const build::Stage& stage = file.stages[index];
    std::vector<BuildStep> steps;
    Scope scope;
    for (const std::string& kv : base_env) {
      const size_t eq = kv.find('=');
      if (eq != std::string::npos) scope.env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    HUTCH_TRY(std::string from, expand(stage.base().image, Scope{.args = globals}, file.escape));
    if (auto parent = file.findStage(from, index)) {
      HUTCH_TRY(steps, stageSteps(*parent, base_env, globals));
      // The parent's ENV is in effect here too.
      for (const BuildStep& s : steps) {
        for (const auto& [k, v] : s.env) {
          if (s.kind == BuildStep::Kind::kEnv) scope.env[k] = v;
        }
      }
    }
    std::vector<std::string> shell = {"/bin/sh", "-c"};
    for (const build::Instruction& in : stage.instructions) {
      auto one = instruction(in, scope, shell, globals);
      if (!one) return fail(atLine(in, one.error()));
      if (one->has_value()) steps.push_back(std::move(**one));
    }
    return steps;
  }

  Result<std::optional<BuildStep>> instruction(const build::Instruction& in, Scope& scope,
                                               std::vector<std::string>& shell,
                                               const std::map<std::string, std::string>& globals) {
    BuildStep step;
    step.text = in.original;
    const char esc = file.escape;
    if (const auto* run = in.as<build::Run>()) {
      step.kind = BuildStep::Kind::kRun;
      if (run->executable_script) {
        // RUN <<EOF whose body starts with #!: as BuildKit runs it, the body is a file that is
        // executed, its #! line naming the interpreter.
        step.argv = {"/bin/sh", "-c", kRunScript};
        step.env.emplace_back("HUTCH_RUN_SCRIPT", run->command.shell);
      } else {
        step.argv = commandArgv(run->command, shell);
      }
      // Build arguments are in RUN's environment (not the template's), as in Docker.
      for (const auto& [k, v] : scope.args) {
        if (!scope.env.contains(k)) step.env.emplace_back(k, v);
      }
      return std::optional(step);
    }
    if (const auto* copy = in.as<build::Copy>()) {
      HUTCH_TRY(BuildStep made, copyStep(in, *copy, scope));
      return std::optional(std::move(made));
    }
    if (const auto* env = in.as<build::Env>()) {
      step.kind = BuildStep::Kind::kEnv;
      Scope before = scope;  // every value sees the variables as they were before this ENV
      for (const build::KeyValue& kv : env->pairs) {
        HUTCH_TRY(std::string k, expand(kv.key, before, esc));
        HUTCH_TRY(std::string v, expand(kv.value, before, esc));
        step.env.emplace_back(k, v);
        scope.env[k] = v;
      }
      return std::optional(step);
    }
    if (const auto* arg = in.as<build::Arg>()) {
      for (const build::ArgDecl& decl : arg->args) {
        HUTCH_TRY(std::string name, expand(decl.name, scope, esc));
        if (auto given = options.build_args.find(name); given != options.build_args.end()) {
          scope.args[name] = given->second;
        } else if (decl.default_value) {
          HUTCH_TRY(std::string value, expand(*decl.default_value, scope, esc));
          scope.args[name] = value;
        } else if (auto global = globals.find(name); global != globals.end()) {
          scope.args[name] = global->second;
        }
      }
      return std::optional<BuildStep>();
    }
    if (const auto* workdir = in.as<build::Workdir>()) {
      step.kind = BuildStep::Kind::kWorkdir;
      HUTCH_TRY(step.path, expand(workdir->path, scope, esc));
      return std::optional(step);
    }
    if (const auto* user = in.as<build::User>()) {
      step.kind = BuildStep::Kind::kUser;
      HUTCH_TRY(step.user, expand(user->user, scope, esc));
      return std::optional(step);
    }
    step.kind = BuildStep::Kind::kConfig;
    if (const auto* cmd = in.as<build::Cmd>()) {
      step.config["cmd"] = commandJson(cmd->command, shell);
    } else if (const auto* entry = in.as<build::Entrypoint>()) {
      step.config["entrypoint"] = commandJson(entry->command, shell);
    } else if (const auto* sh = in.as<build::Shell>()) {
      shell = sh->argv;
      return std::optional<BuildStep>();
    } else if (const auto* label = in.as<build::Label>()) {
      json labels = json::object();
      for (const build::KeyValue& kv : label->pairs) {
        HUTCH_TRY(std::string k, expand(kv.key, scope, esc));
        HUTCH_TRY(std::string v, expand(kv.value, scope, esc));
        labels[k] = v;
      }
      step.config["labels"] = labels;
    } else if (const auto* expose = in.as<build::Expose>()) {
      std::vector<std::string> words;
      for (const std::string& raw : expose->ports) {
        HUTCH_TRY(std::vector<std::string> some, build::expandWords(raw, scope.lookup(), esc));
        words.insert(words.end(), some.begin(), some.end());
      }
      HUTCH_TRY(std::vector<std::string> ports, build::normalizePorts(words));
      step.config["exposed_ports"] = ports;
    } else if (const auto* signal = in.as<build::StopSignal>()) {
      HUTCH_TRY(std::string s, expand(signal->signal, scope, esc));
      step.config["stop_signal"] = s;
    } else if (in.as<build::Volume>() || in.as<build::Healthcheck>()) {
      // A box's disk is all one volume; health checks are the template's ready check's job.
      return std::optional<BuildStep>();
    } else {
      return fail(Errc::kUnsupported, "not supported in hutch's builds");
    }
    return std::optional(step);
  }
};

// What every stage's plan shares.
struct Shared {
  fs::path context;
  DockerfileOptions options;
  std::shared_ptr<build::Dockerfile> file;
  std::shared_ptr<std::vector<build::ContextEntry>> listing;
  std::map<std::string, std::string> globals;
};

// The plan of stage `target`: its base (the FROM at the root of its chain of stages), its steps
// (made once the base's ENV is known), and the stages its COPY --from steps take files from.
Result<BuildPlan> planStage(const Shared& shared, size_t target, int depth) {
  const build::Dockerfile& file = *shared.file;
  if (depth > 32) return fail(Errc::kInvalidArgument, "Stages COPY --from each other too deeply");
  auto globals_lookup = [&shared](std::string_view n) -> std::optional<std::string> {
    auto it = shared.globals.find(std::string(n));
    if (it == shared.globals.end()) return std::nullopt;
    return it->second;
  };
  size_t root = target;
  std::string from;
  std::vector<size_t> chain = {target};
  for (;;) {
    auto expanded = build::expandWord(file.stages[root].base().image, globals_lookup, file.escape);
    if (!expanded) return fail(atLine(file.stages[root].from, expanded.error()));
    from = *expanded;
    auto parent = file.findStage(from, root);
    if (!parent) break;
    root = *parent;
    chain.push_back(root);
  }
  BuildPlan plan = shared.options.plan;
  plan.steps.clear();
  // A name that is a template here is that template (hutch template ls); otherwise an image.
  // `scratch` is always Docker's empty image.
  plan.base_image = from;
  if (from != "scratch" && from.find_first_of("/:@.") == std::string::npos) {
    plan.base_template = from;
  }
  // Only the final plan has the template's start command.
  if (depth > 0) {
    plan.start_cmd.clear();
    plan.ready_cmd.clear();
  }
  // The stages this one's chain copies from, each planned once; an image COPY --from names
  // is a stage FROM it with no steps, as BuildKit takes it.
  std::map<size_t, size_t> slots;
  std::map<std::string, size_t> image_slots;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    for (const build::Instruction& in : file.stages[*it].instructions) {
      const auto* copy = in.as<build::Copy>();
      if (!copy || copy->from.empty()) continue;
      if (!copy->from_stage) {
        if (image_slots.contains(copy->from)) continue;
        if (copy->from == "scratch") {
          return fail(atLine(in, Error(Errc::kInvalidArgument,
                                       "COPY --from=scratch: scratch has no files to copy")));
        }
        BuildPlan image = shared.options.plan;
        image.steps.clear();
        image.stages.clear();
        image.start_cmd.clear();
        image.ready_cmd.clear();
        image.base_image = copy->from;
        if (copy->from.find_first_of("/:@.") == std::string::npos) {
          image.base_template = copy->from;
        }
        image_slots[copy->from] = plan.stages.size();
        plan.stages.push_back(std::move(image));
        continue;
      }
      if (slots.contains(*copy->from_stage)) continue;
      auto sub = planStage(shared, *copy->from_stage, depth + 1);
      if (!sub) return fail(sub.error());
      slots[*copy->from_stage] = plan.stages.size();
      plan.stages.push_back(std::move(*sub));
    }
  }
  plan.steps_from_base =
      [shared, target, slots,
       image_slots](const std::vector<std::string>& base_env) -> Result<std::vector<BuildStep>> {
    Planner planner{
        .context = shared.context,
        .options = shared.options,
        .file = *shared.file,
        .listing = *shared.listing,
        .heredoc_dir = shared.context.parent_path() / fmt::format("heredocs-{}", target),
        .slots = slots,
        .image_slots = image_slots};
    return planner.stageSteps(target, base_env, shared.globals);
  };
  return plan;
}

}  // namespace

Result<BuildPlan> planFromDockerfile(const fs::path& context, const DockerfileOptions& options) {
  const std::string name = build::cleanPath(options.dockerfile);
  if (name.empty() || name == "." || name.starts_with("../") || name == "..") {
    return fail(
        Errc::kInvalidArgument,
        fmt::format("dockerfile '{}' must be a path inside the build context", options.dockerfile));
  }
  HUTCH_TRY(build::DockerIgnore none, build::DockerIgnore::parse(""));
  HUTCH_TRY(std::vector<build::ContextEntry> all, build::listContext(context, none));
  bool found = false;
  for (const build::ContextEntry& e : all) {
    found = found || (e.path == name && e.type == build::ContextEntry::Type::kFile);
  }
  if (!found) {
    return fail(Errc::kInvalidArgument,
                fmt::format("The build context has no Dockerfile at {}: send it with the context "
                            "(hutch template build -f FILE CONTEXT)",
                            name));
  }
  std::ifstream in(context / name, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  HUTCH_TRY(build::Dockerfile file, build::parseDockerfile(text.str()));

  // Global ARGs (for FROM lines): their defaults, or the build's values.
  std::map<std::string, std::string> globals;
  for (const build::Instruction& instruction : file.global_args) {
    const auto* arg = instruction.as<build::Arg>();
    if (!arg) continue;
    for (const build::ArgDecl& decl : arg->args) {
      auto given = options.build_args.find(decl.name);
      if (given != options.build_args.end()) {
        globals[decl.name] = given->second;
      } else if (decl.default_value) {
        auto value = build::expandWord(
            *decl.default_value,
            [&globals](std::string_view n) -> std::optional<std::string> {
              auto it = globals.find(std::string(n));
              if (it == globals.end()) return std::nullopt;
              return it->second;
            },
            file.escape);
        if (!value) return fail(atLine(instruction, value.error()));
        globals[decl.name] = *value;
      }
    }
  }
  size_t target = file.stages.size() - 1;
  if (!options.target.empty()) {
    auto stage = file.findStage(options.target, file.stages.size());
    if (!stage) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("The Dockerfile has no stage '{}' (--target)", options.target));
    }
    target = *stage;
  }
  auto listing = std::make_shared<std::vector<build::ContextEntry>>();
  HUTCH_TRY(build::DockerIgnore ignore, build::DockerIgnore::load(context));
  HUTCH_TRY(*listing, build::listContext(context, ignore));
  Shared shared{.context = context,
                .options = options,
                .file = std::make_shared<build::Dockerfile>(std::move(file)),
                .listing = listing,
                .globals = globals};
  return planStage(shared, target, 0);
}

}  // namespace hutch::box

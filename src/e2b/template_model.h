// E2B's template builder, its values (docs/e2b.md "Templates"): the names and tags of
// POST /v3/templates, TemplateBuildStartV2 made into hutch's BuildPlan (box/template_builder.h),
// the uploaded files of a COPY made into the plan's items, the upload URLs' own authorization,
// and the pages of build logs. Pure functions (COPY reads the uploaded tree it is given); the
// handlers are template_build.cc.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "box/template_builder.h"

namespace hutch::e2b {

using json = nlohmann::json;

// ---- names ----

// "name" or "name:tag" (Template.build's name, Sandbox.create's template): a tag of
// "default" when none is given, as E2B has it.
inline constexpr std::string_view kDefaultTag = "default";
struct TemplateRef {
  std::string name;
  std::string tag;
  bool operator==(const TemplateRef&) const = default;
};
// kInvalidArgument for a name or tag hutch cannot keep: a name is 1-63 of [a-z0-9._-]
// starting with a letter or digit (E2B lower-cases none: upper case is refused), a tag the same
// with upper case allowed.
Result<TemplateRef> parseTemplateRef(std::string_view text);
Result<> validateTag(std::string_view tag);

// POST /v3/templates (TemplateBuildRequestV3).
struct NewTemplate {
  TemplateRef ref;
  std::vector<std::string> tags;  // ref.tag first, then the request's tags, each once
  unsigned cpus = 2;
  uint64_t memory_mib = 1024;
};
Result<NewTemplate> parseNewTemplate(std::string_view body);

// ---- a build's plan ----

// One step of TemplateBuildStartV2.
struct E2bStep {
  std::string type;  // COPY ENV RUN WORKDIR USER
  std::vector<std::string> args;
  bool force = false;
  std::string files_hash;  // COPY
};
struct BuildStart {
  std::string from_image;
  std::string from_template;
  std::vector<E2bStep> steps;
  std::string start_cmd;
  std::string ready_cmd;
  bool force = false;
  // fromImageRegistry {type: "registry", username, password}: for this build's pull only.
  std::optional<box::TemplateService::PullCredentials> registry;
};
// kInvalidArgument for a body that is not TemplateBuildStartV2 (fromImageRegistry without
// fromImage, or without its username and password); kUnsupported for fromImageRegistry of type
// "aws" or "gcp" (hutchd has no cloud SDKs to turn those into a registry login).
Result<BuildStart> parseBuildStart(std::string_view body);

// The COPY's uploaded files, unpacked, by their hash: the directory, or nullopt when they were
// never uploaded.
using FilesLookup = std::function<std::optional<std::filesystem::path>(const std::string& hash)>;

// What the build runs: hutch's plan, and for each of its steps the E2B step it comes from
// (its index in the SDK's list, from 1: the SDK's stack traces are base, the steps, finalize).
struct E2bPlan {
  box::BuildPlan plan;
  std::vector<int> origin;  // plan.steps[i] comes from E2B step origin[i]
  // The last USER and WORKDIR of the steps (nullopt: none): its sandboxes' default user and
  // working directory, as E2B's finalize gives envd (when nullopt, the base's).
  std::optional<std::string> user;
  std::optional<std::string> workdir;
};
// `base_template` is the hutch template the build starts from when fromTemplate is set (the
// caller resolves E2B names). RUN runs `/bin/bash -l -c CMD` where the box has bash, else
// `/bin/sh -c CMD` (E2B's envd runs bash as a login shell); USER of a user the box lacks makes
// it first (adduser, else useradd), as E2B does, and USER NAME true (E2B's own form, which its
// builder gives the image's provisioned `user`) also gives it sudo without a password; COPY puts
// the uploaded files where E2B's copy script puts them (copyItems).
Result<E2bPlan> planBuild(const BuildStart& start, const std::string& base_template,
                          const FilesLookup& files);

// A RUN's argv: bash as a login shell where there is one, else sh.
std::vector<std::string> runArgv(const std::string& cmd);

// The items of COPY `src` (as the SDK sent it: a path or glob relative to the context) to
// `dest`, from the upload unpacked in `root`, as E2B's copy script places them: the glob's
// fixed part names one entry; a file (or symlink) goes to dest, or into dest when dest ends in
// '/'; a directory's contents are merged into dest. `mode` ("0755"; empty: the files' own) is
// every file's. kInvalidArgument when the entry is not in the upload, or escapes it.
Result<std::vector<box::CopyItem>> copyItems(const std::filesystem::path& root,
                                             const std::string& src, const std::string& dest,
                                             const std::string& mode);
// The fixed part of a glob (doublestar.SplitPattern after a '/' is added): "a/b" -> "a/b",
// "src/*.js" -> "src", "*.txt" -> ".".
std::string globBase(std::string_view src);

// ---- build status ----

// What the SDK's reason.step names: "base", "finalize", or the E2B step (from 1) of the plan
// step the engine reported (BuildLog::step).
std::string stepLabel(int engine_step, const std::vector<int>& origin);

struct LogLine {
  int64_t unix_ms = 0;
  std::string level;  // debug info warn error
  std::string message;
  std::string step;  // stepLabel; empty: none
};
json logEntryJson(const LogLine& line);
// At most this many entries per answer (E2B's limit, and its default).
inline constexpr size_t kLogPage = 100;
// Which log lines an answer holds: GET .../status?logsOffset=&limit=&level= and
// GET .../logs?cursor=&limit=&direction=&level=&source=. Lines below `level` (debug < info <
// warn < error) are left out first; then status skips `offset` of them, and logs starts at
// `cursor` (unix ms): forward, the lines at or after it, oldest first; backward, those at or
// before it (default: now), newest first. At most `limit` lines (0 to kLogPage).
struct LogsQuery {
  size_t offset = 0;
  std::optional<int64_t> cursor;
  size_t limit = kLogPage;
  bool backward = false;
  std::string level;  // empty: every level
};
// kInvalidArgument naming the parameter that is not a number, a level ("debug", "info",
// "warn", "error"), a direction ("forward", "backward") or a source ("temporary",
// "persistent": both are the lines hutchd keeps).
Result<LogsQuery> parseLogsQuery(const std::map<std::string, std::string, std::less<>>& query);
// TemplateBuildInfo: `status` one of waiting building ready error; the log lines `page` picks
// (offset and level); `reason` (the error's message and step) when there is one.
json buildInfoJson(const std::string& template_id, const std::string& build_id,
                   std::string_view status, const std::vector<LogLine>& lines,
                   const LogsQuery& page, const std::optional<LogLine>& reason);
// TemplateBuildLogsResponse: {"logs": [BuildLogEntry...]}, the lines `page` picks (cursor,
// direction, level).
json buildLogsJson(const std::vector<LogLine>& lines, const LogsQuery& page, int64_t now_ms);

// What a build's own registry credentials keep their pulled base under
// (BuildPlan::base_scope): HMAC-SHA256, hex, of the owner, the user name and the password under
// hutchd's secret. The same credentials of the same key share one pull; any other (another
// key's, a wrong or a changed password) pull again, so the registry checks them every time it
// matters; the password cannot be read back from it.
std::string credentialScope(std::string_view secret, std::string_view owner,
                            const box::TemplateService::PullCredentials& credentials);

// ---- uploads ----

// The upload URL's own authorization (it carries no API key): HMAC-SHA256, hex, of the owner,
// the files' hash and the expiry (unix seconds) under hutchd's secret.
std::string uploadToken(std::string_view secret, std::string_view owner, std::string_view hash,
                        int64_t expires);
// kUnauthenticated when the token is not that, or has expired at `now`.
Result<> checkUploadToken(std::string_view secret, std::string_view owner, std::string_view hash,
                          std::string_view expires, std::string_view token, int64_t now);
// A COPY's files hash: 64 lowercase hex digits.
bool validFilesHash(std::string_view hash);

}  // namespace hutch::e2b

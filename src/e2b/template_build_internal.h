// E2B's template builder inside (template_build.h is its face): the state its handlers share,
// and the handlers, one file per concept:
//   template_build.cc    builds: POST /v3/templates, POST /v2/.../builds/{id}, status and logs
//   template_upload.cc   COPY's files: the presence check, the upload URLs' own plane
//   template_catalog.cc  what was built: aliases, tags, listing, deletion
// All of it runs on the event loop, which owns this state; blocking work (unpacking an upload)
// goes to the builder's worker pool.
#pragma once

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "e2b/facade_internal.h"
#include "e2b/template_build.h"
#include "e2b/template_model.h"
#include "e2b/template_registry.h"

namespace hutch::e2b {

inline constexpr std::string_view kUploadPrefix = "/e2b-files/";
inline constexpr int64_t kUploadUrlSeconds = 3600;  // the SDKs' upload timeout
inline constexpr size_t kMaxLogLines = 20000;

int64_t nowMs();
// The path segment of an owner: the key's id, "host" for the host administrator.
std::string ownerSegment(const std::string& owner_id);

struct TemplateBuilds::Impl {
  // One build: what POST /v3/templates asked, then what the engine says as it runs. The loop's.
  struct Build {
    std::string id;
    std::string template_id;
    std::string owner_id;
    std::vector<std::string> tags;
    unsigned cpus = 2;
    uint64_t memory_mib = 1024;
    std::string status = "waiting";  // waiting building ready error
    std::vector<LogLine> lines;
    std::optional<LogLine> reason;
    std::vector<int> origin;
    int engine_step = box::BuildLog::kBaseStep;  // the step the engine said last
    std::string hutch_template;
    std::string from_image;  // the image it starts from, if any
    std::string user;        // its sandboxes' defaults (E2bTemplate::Tag)
    std::string workdir;
    int64_t created_at = 0;
    int64_t updated_at = 0;

    // Appends a log line (at most kMaxLogLines; then one line saying the rest is left out).
    void log(int step, std::string message, std::string level = "info");
  };

  asio::any_io_executor executor;
  box::BoxService& boxes;
  box::TemplateBuilder& builder;
  box::TemplateService& templates;
  std::filesystem::path dir;
  std::string secret;
  std::map<std::string, std::string> mapped;  // --e2b-template NAME=TEMPLATE
  TemplateRegistry registry;
  std::map<std::string, std::shared_ptr<Build>> builds;  // by build id
  std::vector<std::string> order;                        // build ids, oldest first

  Impl(asio::any_io_executor ex, box::BoxService& b, box::TemplateBuilder& tb,
       box::TemplateService& ts, std::filesystem::path d, const FacadeOptions& options,
       TemplateRegistry r)
      : executor(std::move(ex)),
        boxes(b),
        builder(tb),
        templates(ts),
        dir(std::move(d)),
        secret(options.secret),
        mapped(options.templates),
        registry(std::move(r)) {}

  // The caller's own (or an admin): may list, build, tag, publish and delete it.
  static bool visible(const api::Principal& p, const E2bTemplate& t) {
    return p.seesEverything() || t.owner_id == p.owner().id;
  }
  // May start sandboxes of it and build from it: the caller's own, or a published one.
  static bool usable(const api::Principal& p, const E2bTemplate& t) {
    return t.is_public || visible(p, t);
  }
  static Error notYours(const std::string& name) {
    return Error(Errc::kPermissionDenied,
                 fmt::format("The template '{}' belongs to another API key", name));
  }
  std::filesystem::path filesDir(const std::string& owner_id) const {
    return dir / "files" / ownerSegment(owner_id);
  }
  // A template the caller may use, by id or name.
  Result<E2bTemplate> mine(const api::Principal& p, const std::string& id) const;
  // A build of `template_id` the caller may see: kNotFound, or another key's (kPermissionDenied).
  Result<std::shared_ptr<Build>> findBuild(const api::Principal& p, const std::string& template_id,
                                           const std::string& build_id) const;
  // Room for one more build: the oldest one not under way goes.
  Result<> makeRoom();
  // Removes the hutch templates of E2B template `t` no tag names and no build under way
  // makes; those boxes still use stay (the next sweep removes them).
  void sweep(const std::string& template_id, const std::optional<E2bTemplate>& t);
  // The tag a sandbox or a build starts from ("name", "name:tag", a templateID) for this caller:
  // nullopt when no E2B-built template has that name, kPermissionDenied for another key's
  // unpublished one, kNotFound for a tag it lacks.
  Result<std::optional<E2bTemplate::Tag>> tagFor(const api::Principal& p,
                                                 const std::string& ref) const;
  // The status of the template's last build ("ready" when none is remembered).
  std::string lastStatus(const std::string& template_id) const;
};

using Impl = TemplateBuilds::Impl;

// template_upload.cc
asio::awaitable<Reply> filesLink(Impl& s, Ctx& ctx);  // GET /templates/{templateID}/files/{hash}
asio::awaitable<Reply> upload(Impl& s, Ctx& ctx);     // PUT /e2b-files/{owner}/{hash}

// template_catalog.cc
asio::awaitable<Reply> aliasInfo(Impl& s, Ctx& ctx);      // GET /templates/aliases/{alias}
asio::awaitable<Reply> assignTags(Impl& s, Ctx& ctx);     // POST /templates/tags
asio::awaitable<Reply> removeTags(Impl& s, Ctx& ctx);     // DELETE /templates/tags
asio::awaitable<Reply> listTags(Impl& s, Ctx& ctx);       // GET /templates/{templateID}/tags
asio::awaitable<Reply> listTemplates(Impl& s, Ctx& ctx);  // GET /templates, /v2/templates
asio::awaitable<Reply> getTemplate(Impl& s, Ctx& ctx);    // GET /templates/{templateID}
// PATCH /v2/templates/{templateID} (v2: answers its names), PATCH /templates/{templateID}.
asio::awaitable<Reply> updateTemplate(Impl& s, bool v2, Ctx& ctx);
// DELETE /templates/{templateID}; of no E2B-built template: `otherwise` (a snapshot).
asio::awaitable<Reply> deleteTemplate(Impl& s, const api::Route& otherwise, Ctx& ctx);

}  // namespace hutch::e2b

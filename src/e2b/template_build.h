// E2B's template builder served by hutchd (docs/e2b.md "Templates"): the endpoints the E2B
// SDKs' Template.build, buildInBackground, getBuildStatus and exists call, the tags, and
// template listing and deletion, over hutch's TemplateBuilder (box/template_builder.h).
//
//   POST /v3/templates                                 a template id (one per name) and a build id
//   GET  /templates/{templateID}/files/{hash}          whether a COPY's files are here; else an
//                                                      upload URL
//   PUT  /e2b-files/{owner}/{hash}?expires=&token=     that URL (its own plane: no API key; an
//                                                      HMAC under hutchd's secret, 1 hour)
//   POST /v2/templates/{templateID}/builds/{buildID}   the build starts, in the background
//   GET  /templates/{templateID}/builds/{buildID}/status?logsOffset=N
//   GET  /templates/aliases/{alias}                    404, 403 (another key's), 200
//   POST|DELETE /templates/tags, GET /templates/{templateID}/tags
//   GET  /templates, /v2/templates, /templates/{id};   DELETE /templates/{id}
//   PATCH /v2/templates/{id}, /templates/{id}          {public}: every key may use it
//
// A template belongs to the key that first built its name; another key's name is 403 (what
// E2B answers) unless it was published (then any key may start sandboxes of it and build from
// it), admins and the host see and use all. Each build that succeeds is a hutch
// template of its own ("e2b-<templateID>-<build>"), which the build's tags then name; a hutch
// template no tag names any more is removed once no box uses it. Builds (status and logs) are
// kept in memory, at most kMaxBuilds: a hutchd restart fails the builds in flight (the engine
// leaves nothing half-made) and forgets finished builds' logs; templates and tags are kept in
// <dir>/templates.json, uploaded files under <dir>/files/<owner>/<hash>/ (unpacked).
#pragma once

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "api/http_server.h"
#include "base/result.h"
#include "box/box_service.h"
#include "box/template_builder.h"
#include "box/template_service.h"
#include "e2b/facade.h"
#include "e2b/template_registry.h"

namespace hutch::e2b {

class TemplateBuilds {
 public:
  static constexpr size_t kMaxBuilds = 256;
  // Reads <dir>/templates.json; kInternal when it is unreadable.
  static Result<std::unique_ptr<TemplateBuilds>> open(
      boost::asio::any_io_executor executor, box::BoxService& boxes, box::TemplateBuilder& builder,
      box::TemplateService& templates, std::filesystem::path dir, const FacadeOptions& options);
  ~TemplateBuilds();
  TemplateBuilds(const TemplateBuilds&) = delete;
  TemplateBuilds& operator=(const TemplateBuilds&) = delete;

  // The control plane's template routes (before the façade's own: /templates/tags before
  // /templates/{id}). DELETE /templates/{id} of no E2B-built template goes to `otherwise`
  // (E2B deletes snapshots with it too).
  void addRoutes(api::ApiRouter& control, api::Route otherwise);
  // The upload URLs' plane (claims /e2b-files/...).
  api::Plane uploadPlane();
  // The tag a sandbox of `id` ("name", "name:tag", a templateID) is made from, for this caller
  // (its hutch template and its sandboxes' default user and working directory): nullopt when
  // no E2B-built template has that name (then it is hutch's own or --e2b-template's),
  // kPermissionDenied for another key's unpublished one, kNotFound for a tag it lacks.
  Result<std::optional<E2bTemplate::Tag>> resolve(const api::Principal& principal,
                                                  const std::string& id) const;

  struct Impl;

 private:
  explicit TemplateBuilds(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
  api::ApiRouter uploads_;
};

}  // namespace hutch::e2b

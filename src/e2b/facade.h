// The E2B façade (docs/e2b.md): E2B's control plane (/sandboxes, /v2/sandboxes) and its in-box
// API, envd (Connect RPCs for processes and the filesystem, /files, /health), served on hutchd's
// TCP listeners beside hutch's own API, so that the official E2B SDKs drive hutch boxes with
// E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY pointed at hutchd.
//
// The control plane takes hutch's API keys (X-API-Key) and owners; a sandbox is a box. envd
// requests carry no API key: each sandbox has an access token (an HMAC of its id under hutchd's
// secret, handed out by create and connect), checked on every request, and the request runs as
// the box's owner on that box only.
#pragma once

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "api/http_server.h"
#include "base/result.h"
#include "box/box_service.h"

namespace hutch::box {
class TemplateBuilder;
class TemplateService;
}  // namespace hutch::box

namespace hutch::e2b {

class TemplateBuilds;

struct FacadeOptions {
  std::string secret;                            // the access tokens' key (loadSecret)
  std::map<std::string, std::string> templates;  // E2B template id -> hutch template
  // The egress policy (a preset or JSON) of sandboxes that ask for nothing or only for internet
  // access (hutchd --e2b-network-policy): E2B's default is internet access on.
  std::string network_policy = "allow-all";
  // Where E2B's template builder keeps its templates and uploaded files (<state>/e2b); empty:
  // no template builds.
  std::filesystem::path template_dir;
};

// The secret in `path` (32 random bytes, made with mode 0600 on first use).
Result<std::string> loadSecret(const std::filesystem::path& path);

class Facade {
 public:
  // With `builder` and `templates` (and options.template_dir), E2B's template builder is served
  // too (template_build.h).
  Facade(boost::asio::any_io_executor executor, box::BoxService& service, FacadeOptions options,
         box::TemplateBuilder* builder = nullptr, box::TemplateService* templates = nullptr);
  ~Facade();
  Facade(const Facade&) = delete;
  Facade& operator=(const Facade&) = delete;

  // The two planes, for HttpServer::addPlane (envd first: it claims by header).
  api::Plane envdPlane();
  api::Plane controlPlane();
  // The upload URLs of E2B's template builder (they carry their own authorization); a plane
  // that claims nothing without the builder.
  api::Plane uploadPlane();

  struct State;  // processes and watchers by box (facade.cc)

 private:
  box::BoxService& service_;
  FacadeOptions options_;
  api::ApiRouter control_;
  api::ApiRouter envd_;
  std::shared_ptr<State> state_;
  std::unique_ptr<TemplateBuilds> builds_;
};

}  // namespace hutch::e2b

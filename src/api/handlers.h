// The API's routes (docs/api.md): thin handlers that decode, call BoxService and map errors.
#pragma once

#include <string>

#include "api/http_server.h"
#include "box/box_service.h"
#include "box/port_forwards.h"
#include "box/template_service.h"
#include "net/secrets.h"
#include "proto/messages.h"
#include "vmm/accel.h"

namespace hutch::api {

struct DaemonInfo {
  std::string version;
  vmm::AccelDecision accel;
  std::string backend;
  std::string state_dir;
};

// Registers every route on `router`. The service and info must outlive the router.
void registerRoutes(Router<Handler>& router, box::BoxService& service,
                    box::TemplateService& templates, const DaemonInfo& info);

// Published ports, detached processes and services (box_io_handlers.cc).
void registerBoxIoRoutes(Router<Handler>& router, box::BoxService& service,
                         box::PortForwards& ports);

// A box's egress policy and policy log, and the host's secrets (network_handlers.cc).
void registerNetworkRoutes(Router<Handler>& router, box::BoxService& service,
                           net::SecretStore& secrets);

// The box's own environment (its secrets' placeholders) under what the request sets itself.
void addBoxEnvironment(const box::Box& box, proto::ExecRequest& request);

}  // namespace hutch::api

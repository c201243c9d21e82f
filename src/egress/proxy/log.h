// The egress proxy's named logger ("egress"): a clone of spdlog's default logger (set it up
// before the first call), registered so spdlog::set_level() reaches it.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>

namespace hutch::egress::proxy {

inline spdlog::logger& egressLog() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    if (auto existing = spdlog::get("egress")) return existing;
    auto logger = spdlog::default_logger()->clone("egress");
    spdlog::register_logger(logger);
    return logger;
  }();
  return *logger;
}

}  // namespace hutch::egress::proxy

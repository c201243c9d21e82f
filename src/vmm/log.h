// The VMM component's named logger ("vmm"): a clone of spdlog's default logger (set it up
// before the first VMM call), registered so spdlog::set_level() reaches it.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>

namespace hutch::vmm {

inline spdlog::logger& vmmLog() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    if (auto existing = spdlog::get("vmm")) return existing;
    auto logger = spdlog::default_logger()->clone("vmm");
    spdlog::register_logger(logger);
    return logger;
  }();
  return *logger;
}

}  // namespace hutch::vmm

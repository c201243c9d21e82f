// Copy-on-write box disks: a qcow2 overlay over a template's read-only raw image.
#pragma once

#include <filesystem>

#include "base/result.h"

namespace hutch::storage {

// Blocking (runs qemu-img): call it from the worker pool.
Result<> createOverlay(const std::filesystem::path& base, const std::filesystem::path& overlay);

}  // namespace hutch::storage

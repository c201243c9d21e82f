// Copy-on-write box disks: a qcow2 overlay over a template's read-only raw image.
#pragma once

#include <filesystem>

#include "base/result.h"

namespace hutch::storage {

// Blocking (runs qemu-img): call it from the worker pool.
// size_mib 0 keeps the base's size; a larger size gives the guest room to grow into.
Result<> createOverlay(const std::filesystem::path& base, const std::filesystem::path& overlay,
                       uint64_t size_mib = 0);

// A qcow2 overlay over a frozen qcow2 layer, `size_bytes` large. The layer is not opened (-u):
// QEMU may still hold it open for writing until it switches to the new overlay.
Result<> createLayerOverlay(const std::filesystem::path& layer,
                            const std::filesystem::path& overlay, uint64_t size_bytes);

}  // namespace hutch::storage

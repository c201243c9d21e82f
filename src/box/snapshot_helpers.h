// Small helpers the files of BoxService's snapshot operations share (box_snapshots.cc,
// box_template_snapshot.cc, box_pool.cc). Internal to src/box.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "base/result.h"

namespace hutch::box {

// Allocated bytes of a file, or of everything under a directory.
uint64_t allocatedBytes(const std::filesystem::path& path);

// create_directories, with an error that names the directory.
Result<> makeDirectories(const std::filesystem::path& dir);

// remove_all that only logs a failure: for files whose loss nothing depends on.
void removeQuietly(const std::filesystem::path& path);

// Frozen files are never written again: root's and 0444, so that every box's uid can read them
// and none can change them (a box's QEMU wrote them as the box's uid). Not followed.
void freeze(const std::filesystem::path& path);

// /etc/machine-id of a box: 32 hex digits derived from its id.
std::string machineIdFor(const std::string& box_id);

}  // namespace hutch::box

// Grows the root ext4 filesystem online to fill its disk, so `hutch run --disk 20G` gives the box
// 20 GiB without resize2fs (a dynamically linked helper costs ~40 ms under TCG).
#pragma once

#include <cstdint>
#include <string>

#include "base/result.h"

namespace hutch::agent {

struct Ext4Geometry {
  uint64_t block_size = 0;
  uint64_t blocks = 0;
};

// Parses the ext4 superblock (the 1024 bytes at offset 1024 of the device).
Result<Ext4Geometry> parseExt4Superblock(const std::string& superblock);

struct RootGrowth {
  uint64_t block_size = 0;
  uint64_t blocks_before = 0;
  uint64_t blocks_after = 0;  // == blocks_before when the disk was not larger

  bool grew() const { return blocks_after > blocks_before; }
  uint64_t bytes() const { return blocks_after * block_size; }
};

// Resizes the filesystem mounted at `mount_point` on `device` to the device's size, if larger.
Result<RootGrowth> growRootFilesystem(const std::string& device = "/dev/vda",
                                      const std::string& mount_point = "/");

// The block device holding the filesystem mounted at `mount_point` ("/dev/vda"), found through
// /sys/dev/block/MAJOR:MINOR/uevent; `fallback` if that cannot be read.
std::string deviceOf(const std::string& mount_point = "/",
                     const std::string& fallback = "/dev/vda");

}  // namespace hutch::agent

#include "agent/init/grow_root.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "base/unique_fd.h"

// From the kernel's fs/ext4/ext4.h (not exported to user space headers).
#ifndef EXT4_IOC_RESIZE_FS
#define EXT4_IOC_RESIZE_FS _IOW('f', 16, uint64_t)
#endif

namespace hutch::agent {

namespace {
constexpr size_t kSuperblockOffset = 1024;
constexpr size_t kSuperblockSize = 1024;
constexpr uint16_t kExt4Magic = 0xEF53;

uint32_t le32(const std::string& b, size_t off) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[off + i]);
  return v;
}
}  // namespace

Result<Ext4Geometry> parseExt4Superblock(const std::string& sb) {
  if (sb.size() < kSuperblockSize) return fail(Errc::kInvalidArgument, "Short ext4 superblock");
  uint16_t magic = static_cast<uint16_t>(static_cast<unsigned char>(sb[0x38]) |
                                         (static_cast<unsigned char>(sb[0x39]) << 8));
  if (magic != kExt4Magic) return fail(Errc::kInvalidArgument, "Not an ext4 filesystem");
  uint32_t log_block = le32(sb, 0x18);
  if (log_block > 6) return fail(Errc::kInvalidArgument, "Bad ext4 block size");
  Ext4Geometry g;
  g.block_size = uint64_t{1024} << log_block;
  uint64_t hi = 0;
  constexpr uint32_t kFeature64Bit = 0x80;
  if ((le32(sb, 0x60) & kFeature64Bit) != 0) hi = le32(sb, 0x150);
  g.blocks = (hi << 32) | le32(sb, 0x04);
  return g;
}

Result<RootGrowth> growRootFilesystem(const std::string& device, const std::string& mount_point) {
  UniqueFd dev(::open(device.c_str(), O_RDONLY | O_CLOEXEC));
  if (!dev) return fail(sysError("Cannot open " + device, errno));
  uint64_t device_bytes = 0;
  if (::ioctl(dev.get(), BLKGETSIZE64, &device_bytes) != 0) {
    return fail(sysError("Cannot read the size of " + device, errno));
  }
  std::string sb(kSuperblockSize, '\0');
  if (::pread(dev.get(), sb.data(), sb.size(), kSuperblockOffset) !=
      static_cast<ssize_t>(sb.size())) {
    return fail(sysError("Cannot read the superblock of " + device, errno));
  }
  HUTCH_TRY(Ext4Geometry g, parseExt4Superblock(sb));
  RootGrowth growth{g.block_size, g.blocks, g.blocks};
  uint64_t target = device_bytes / g.block_size;
  if (target <= g.blocks) return growth;
  UniqueFd root(::open(mount_point.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root) return fail(sysError("Cannot open " + mount_point, errno));
  if (::ioctl(root.get(), EXT4_IOC_RESIZE_FS, &target) != 0) {
    return fail(sysError("Cannot grow the root filesystem", errno));
  }
  growth.blocks_after = target;
  return growth;
}

std::string deviceOf(const std::string& mount_point, const std::string& fallback) {
  struct stat st {};
  if (::stat(mount_point.c_str(), &st) != 0) return fallback;
  std::ifstream uevent("/sys/dev/block/" + std::to_string(major(st.st_dev)) + ":" +
                       std::to_string(minor(st.st_dev)) + "/uevent");
  std::string line;
  while (std::getline(uevent, line)) {
    if (line.rfind("DEVNAME=", 0) == 0 && line.size() > 8) return "/dev/" + line.substr(8);
  }
  return fallback;
}

}  // namespace hutch::agent

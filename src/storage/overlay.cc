#include "storage/overlay.h"

#include <string>
#include <vector>

#include "sys/run.h"

namespace hutch::storage {

Result<> createOverlay(const std::filesystem::path& base, const std::filesystem::path& overlay,
                       uint64_t size_mib) {
  std::vector<std::string> argv{"qemu-img", "create", "-q", "-f",          "qcow2",
                                "-F",       "raw",    "-b", base.string(), overlay.string()};
  if (size_mib != 0) argv.push_back(std::to_string(size_mib) + "M");
  HUTCH_TRY_VOID(sys::runCapture(std::move(argv)));
  return ok();
}

Result<> createLayerOverlay(const std::filesystem::path& layer,
                            const std::filesystem::path& overlay, uint64_t size_bytes) {
  HUTCH_TRY_VOID(
      sys::runCapture({"qemu-img", "create", "-q", "-f", "qcow2", "-u", "-F", "qcow2", "-b",
                       layer.string(), overlay.string(), std::to_string(size_bytes)}));
  return ok();
}

}  // namespace hutch::storage

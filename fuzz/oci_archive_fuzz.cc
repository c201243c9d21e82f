// `hutch image load`'s reader of image archives (oci_archive.cc): the archive (a tar, maybe
// compressed) is read for manifest.json or an OCI layout's index.json and image manifests; a
// layout is then written out as a docker-save archive.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>

#include "cli/oci_archive.h"

namespace {

int memoryFile(const char* name) {
  int fd = ::memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) std::abort();
  return fd;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const int in = memoryFile("oci-in");
  static const int out = memoryFile("oci-out");
  if (::ftruncate(in, 0) != 0 || ::lseek(in, 0, SEEK_SET) != 0) std::abort();
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::write(in, data + done, size - done);
    if (n <= 0) std::abort();
    done += static_cast<size_t>(n);
  }
  auto archive = hutch::cli::inspectImageArchive(in, "fuzz.tar");
  if (!archive) return 0;
  (void)hutch::cli::dockerManifestJson(archive->images);
  if (archive->format == hutch::cli::ImageArchive::Format::kOciLayout) {
    if (::ftruncate(out, 0) != 0 || ::lseek(out, 0, SEEK_SET) != 0) std::abort();
    (void)hutch::cli::writeDockerArchive(in, archive->images, out);
  }
  return 0;
}

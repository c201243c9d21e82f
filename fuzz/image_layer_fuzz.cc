// Layers applied onto an image tree (src/image/layer_apply.cc, root_dir.cc): arbitrary bytes as
// an uncompressed layer, applied into a fresh tree. After each input the sentinel directory beside
// the tree must be unchanged and nothing else may have appeared beside it: whatever a layer holds
// (../ names, symlinks out, hard links, whiteouts through links), nothing is written outside.
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "image/layer_apply.h"
#include "image/test_tar.h"

namespace {

namespace fs = std::filesystem;
using namespace hutch::image;

// Writable all the way down, so that a tree a layer made unreadable (0000 directories) can be
// removed when the fuzzer does not run as root.
void makeRemovable(const fs::path& p) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return;
  ::chmod(p.c_str(), 0700);
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(p, ec)) makeRemovable(entry.path());
}

struct Fixture {
  Fixture() {
    char tmpl[] = "/tmp/hutch-image-layer-fuzz-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) std::abort();
    base = tmpl;
    root = base / "root";
    sentinel = base / "sentinel";
    fs::create_directories(sentinel / "etc");
    std::ofstream(sentinel / "passwd") << "root:x:0:0\n";
    std::ofstream(sentinel / "etc" / "shadow") << "root:secret\n";
    before = testing::snapshot(sentinel);
    blob = ::memfd_create("layer", MFD_CLOEXEC);
    if (blob < 0) std::abort();
  }
  ~Fixture() {
    makeRemovable(base);
    std::error_code ec;
    fs::remove_all(base, ec);
  }
  fs::path base, root, sentinel;
  std::string before;
  int blob = -1;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture f;
  if (::ftruncate(f.blob, 0) != 0) std::abort();
  if (size > 0 && ::pwrite(f.blob, data, size, 0) != static_cast<ssize_t>(size)) std::abort();
  fs::create_directory(f.root);
  {
    auto root = RootDir::open(f.root);
    if (!root) std::abort();
    Descriptor layer;
    layer.media_type = media::kOciLayer;
    ApplyLimits limits;
    limits.verify_digest = false;
    limits.keep_owners = ::geteuid() == 0;
    limits.max_total_bytes = 64 << 20;
    limits.max_file_bytes = 16 << 20;
    limits.max_entries = 20000;
    ApplyUsage usage;
    auto stats = applyLayer(*root, f.blob, layer, limits, usage);
    if (stats && stats->uncompressed_bytes != size) std::abort();
  }
  makeRemovable(f.root);
  std::error_code ec;
  fs::remove_all(f.root, ec);
  if (ec || fs::exists(f.root)) std::abort();
  size_t beside = 0;
  for (const auto& entry : fs::directory_iterator(f.base))
    beside += entry.path() == f.sentinel ? 0 : 1;
  if (beside != 0 || testing::snapshot(f.sentinel) != f.before) {
    std::fprintf(stderr, "image_layer_fuzz: a layer changed what is beside the tree\n");
    std::abort();
  }
  return 0;
}

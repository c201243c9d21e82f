#include "storage/image_cache.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "base/unique_fd.h"

namespace hutch::storage {

namespace fs = std::filesystem;

namespace {

constexpr const char* kUsersDir = "users";

std::string canonicalText(const fs::path& path) {
  std::error_code ec;
  fs::path canonical = fs::weakly_canonical(path, ec);
  return ec ? path.lexically_normal().string() : canonical.string();
}

// Blocks actually allocated: a rootfs image is sparse.
uint64_t allocatedBytes(const fs::path& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec),
       end;
       !ec && it != end; it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) == 0) total += static_cast<uint64_t>(st.st_blocks) * 512;
  }
  return total;
}

fs::file_time_type mtimeOr(const fs::path& path, fs::file_time_type fallback) {
  std::error_code ec;
  auto t = fs::last_write_time(path, ec);
  return ec ? fallback : std::max(t, fallback);
}

std::string readAll(const fs::path& path) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

std::string ago(std::chrono::seconds age) {
  if (age < std::chrono::minutes(2)) return fmt::format("{} s", age.count());
  if (age < std::chrono::hours(2)) return fmt::format("{} min", age.count() / 60);
  return fmt::format("{} h", age.count() / 3600);
}

}  // namespace

std::vector<PruneDecision> planPrune(const std::vector<CachedImage>& images,
                                     const std::map<std::string, std::string>& in_use,
                                     const PruneOptions& options, fs::file_time_type now) {
  std::vector<PruneDecision> out;
  std::vector<size_t> removable;
  uint64_t total = 0;
  for (const CachedImage& image : images) {
    PruneDecision d{image.dir, image.bytes, false, ""};
    total += image.bytes;
    auto age = std::chrono::duration_cast<std::chrono::seconds>(now - image.last_used);
    if (auto use = in_use.find(canonicalText(image.dir)); use != in_use.end()) {
      d.reason = "used by " + use->second;
    } else if (!image.other_users.empty()) {
      d.reason = "used by the hutchd of " + image.other_users.front();
    } else if (age < options.keep) {
      d.reason = fmt::format("used {} ago (kept for {})", ago(age), ago(options.keep));
    } else {
      d.remove = true;
      d.reason = fmt::format("unused for {}", ago(age));
      removable.push_back(out.size());
    }
    out.push_back(std::move(d));
  }
  if (options.limit_bytes) {
    // Least recently used first, only while the cache is over the limit.
    std::sort(removable.begin(), removable.end(),
              [&](size_t a, size_t b) { return images[a].last_used < images[b].last_used; });
    for (size_t i : removable) {
      if (total <= *options.limit_bytes) {
        out[i].remove = false;
        out[i].reason = fmt::format("{}; the cache is within its limit", out[i].reason);
        continue;
      }
      total -= images[i].bytes;
    }
  }
  return out;
}

ImageCache::ImageCache(const fs::path& root, const fs::path& state_dir)
    : images_(root / "images"), state_dir_(canonicalText(state_dir)) {}

std::string ImageCache::userRecordName() const {
  // FNV-1a of the state directory: one record per hutchd, the same across its restarts.
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : state_dir_.string()) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return fmt::format("{:016x}", h);
}

void ImageCache::markUsed(const fs::path& image_dir) const {
  std::error_code ec;
  fs::path dir = fs::weakly_canonical(image_dir, ec);
  if (ec || dir.parent_path() != fs::weakly_canonical(images_, ec)) return;
  fs::create_directories(dir / kUsersDir, ec);
  fs::path record = dir / kUsersDir / userRecordName();
  UniqueFd fd(::open(record.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!fd) {
    spdlog::debug("image cache: cannot record the use of {}: {}", dir.string(),
                  std::strerror(errno));
    return;
  }
  std::string text = state_dir_.string() + "\n";
  if (::write(fd.get(), text.data(), text.size()) < 0) return;
  ::futimens(fd.get(), nullptr);  // the record's time is the build's last use
}

Result<std::vector<CachedImage>> ImageCache::scan(
    const std::map<std::string, std::string>& in_use) const {
  std::vector<CachedImage> out;
  std::error_code ec;
  if (!fs::is_directory(images_, ec)) return out;
  const std::string own = userRecordName();
  for (const auto& entry : fs::directory_iterator(images_, ec)) {
    const fs::path& dir = entry.path();
    if (!entry.is_directory() || dir.filename().string().starts_with(".") ||
        !fs::exists(dir / "manifest.json")) {
      continue;  // the builder's locks and temporary directories, incomplete builds
    }
    CachedImage image{
        dir, allocatedBytes(dir), mtimeOr(dir / "manifest.json", fs::file_time_type::min()), {}};
    const bool used_here = in_use.contains(canonicalText(dir));
    for (const auto& user : fs::directory_iterator(dir / kUsersDir, ec)) {
      image.last_used = mtimeOr(user.path(), image.last_used);
      if (user.path().filename() == own) {
        if (!used_here) fs::remove(user.path(), ec);
        continue;
      }
      std::string state = readAll(user.path());
      if (state.empty() || !fs::is_directory(state, ec)) {
        fs::remove(user.path(), ec);  // that hutchd's state is gone
        continue;
      }
      image.other_users.push_back(state);
    }
    ec.clear();
    out.push_back(std::move(image));
  }
  std::sort(out.begin(), out.end(),
            [](const CachedImage& a, const CachedImage& b) { return a.dir < b.dir; });
  return out;
}

Result<> ImageCache::remove(const fs::path& image_dir) const {
  const std::string name = image_dir.filename().string();
  // The builder (scripts/image/lib.sh lock_key) holds <images>/.locks/<name>.lock while it
  // writes a build: never remove one under it.
  fs::path lock_path = images_ / ".locks" / (name + ".lock");
  UniqueFd lock(::open(lock_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (lock && ::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) {
    return fail(Errc::kFailedPrecondition, fmt::format("{} is being built", image_dir.string()));
  }
  fs::path doomed = images_ / fmt::format(".pruned-{}-{}", name, ::getpid());
  std::error_code ec;
  fs::rename(image_dir, doomed, ec);
  if (ec) {
    return fail(Errc::kInternal,
                fmt::format("Cannot remove {}: {}", image_dir.string(), ec.message()));
  }
  fs::remove_all(doomed, ec);
  if (ec) spdlog::warn("image cache: {} left behind: {}", doomed.string(), ec.message());
  if (lock) fs::remove(lock_path, ec);
  return ok();
}

}  // namespace hutch::storage

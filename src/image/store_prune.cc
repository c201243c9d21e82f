#include "image/store_prune.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <set>

#include "base/unique_fd.h"
#include "image/digest.h"
#include "image/layout.h"

namespace hutch::image {

namespace fs = std::filesystem;

namespace {

bool isHex64(std::string_view s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

uint64_t treeBytes(const fs::path& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::none, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code size_ec;
    if (it->is_regular_file(size_ec)) total += it->file_size(size_ec);
  }
  return total;
}

// Whether `path` was last written before `options.keep` ago (an unreadable time counts as new).
bool older(const fs::path& path, const StorePruneOptions& options) {
  std::error_code ec;
  const fs::file_time_type written = fs::last_write_time(path, ec);
  return !ec && options.now - written >= options.keep;
}

// The layout's pull lock (box/template_image.cc takes it around the copy), taken without
// waiting: an empty fd when the file does not exist, kUnavailable when a pull holds it.
Result<UniqueFd> tryLock(const fs::path& lock) {
  UniqueFd fd(::open(lock.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) {
    if (errno == ENOENT) return UniqueFd();
    return fail(sysError("Cannot open " + lock.string(), errno));
  }
  while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK) return fail(Errc::kUnavailable, "being pulled");
    return fail(sysError("Cannot lock " + lock.string(), errno));
  }
  return fd;
}

// Removes `path` (not with dry_run); false, with the problem noted, when it cannot.
bool removeEntry(const fs::path& path, const StorePruneOptions& options, StorePrune& out) {
  if (options.dry_run) return true;
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) out.problems.push_back(fmt::format("Cannot remove {}: {}", path.string(), ec.message()));
  return !ec;
}

}  // namespace

Result<StorePrune> pruneStore(const fs::path& oci, const std::map<std::string, std::string>& in_use,
                              const StorePruneOptions& options, const Limits& limits) {
  StorePrune out;
  const fs::path layouts = oci / "layouts";
  const fs::path blobs = oci / "blobs";
  std::error_code ec;
  if (!fs::exists(layouts, ec) && !fs::exists(blobs, ec)) return out;  // nothing pulled yet
  std::error_code list_ec;

  // 1. Layouts: kept when a template names their image, a pull holds them, or they are new.
  std::vector<fs::path> kept;
  for (const auto& entry : fs::directory_iterator(layouts, list_ec)) {
    const std::string hex = entry.path().filename().string();
    if (!entry.is_directory() || !isHex64(hex)) continue;
    LayoutDecision d{.digest = "sha256:" + hex, .bytes = treeBytes(entry.path())};
    const fs::path lock_path = layouts / (hex + ".lock");
    Result<UniqueFd> lock = tryLock(lock_path);
    if (auto user = in_use.find(d.digest); user != in_use.end()) {
      d.reason = user->second;
    } else if (!lock) {
      d.reason = lock.error().message();
    } else if (const fs::path index = entry.path() / "index.json";
               !older(fs::exists(index, ec) ? index : entry.path(), options)) {
      d.reason = "pulled within --keep";
    } else {
      d.remove = true;
      d.reason = "unused";
    }
    if (d.remove && !options.dry_run) {
      fs::remove_all(entry.path(), ec);
      if (ec) {
        d.remove = false;
        d.reason = fmt::format("cannot remove it: {}", ec.message());
        ec.clear();
      } else {
        ::unlink(lock_path.c_str());  // under the lock: no pull of it is waiting (see above)
      }
    }
    if (d.remove) {
      out.freed_bytes += d.bytes;
    } else {
      kept.push_back(entry.path());
    }
    out.layouts.push_back(std::move(d));
  }
  if (list_ec && list_ec != std::errc::no_such_file_or_directory) {
    return fail(Errc::kInternal,
                fmt::format("Cannot list {}: {}", layouts.string(), list_ec.message()));
  }
  list_ec.clear();

  // 2. Blobs: those the kept layouts reach stay; so does every blob when one of them cannot be
  // read (which blobs it needs is then unknown).
  std::set<std::string> reached;
  for (const fs::path& layout : kept) {
    Result<std::set<std::string>> named = layoutBlobs(layout, blobs, limits);
    if (!named) {
      if (named.error().code() == Errc::kNotFound && !fs::exists(layout / "index.json", ec)) {
        continue;  // a pull that has not written its index yet: new, so its blobs are too
      }
      out.blobs_kept_because = fmt::format(
          "the layout {} cannot be read ({}); remove it and "
          "prune again",
          layout.string(), named.error().message());
      break;
    }
    reached.merge(*named);
  }
  const fs::path sha = blobs / "sha256";
  for (const auto& entry : fs::directory_iterator(sha, list_ec)) {
    const std::string name = entry.path().filename().string();
    std::error_code size_ec;
    const uint64_t bytes = entry.is_regular_file(size_ec) ? entry.file_size(size_ec) : 0;
    const bool remove = out.blobs_kept_because.empty() && !reached.contains("sha256:" + name) &&
                        older(entry.path(), options);
    if (remove && removeEntry(entry.path(), options, out)) {
      ++out.blobs_removed;
      out.freed_bytes += bytes;
    } else {
      ++out.blobs_kept;
    }
  }
  if (list_ec && list_ec != std::errc::no_such_file_or_directory) {
    return fail(Errc::kInternal,
                fmt::format("Cannot list {}: {}", sha.string(), list_ec.message()));
  }
  list_ec.clear();

  // 3. Root disks: a template's rootfs.img is a hard link of its image's; one link left means
  // no template has it. A staging directory a create left goes too.
  const fs::path roots = oci / "roots";
  for (const auto& entry : fs::directory_iterator(roots, list_ec)) {
    const fs::path disk = entry.path() / "rootfs.img";
    struct stat st {};
    const bool staging = entry.path().filename().string().find(".tmp-") != std::string::npos;
    const bool present = ::stat(disk.c_str(), &st) == 0;
    const bool unused = staging || !present || st.st_nlink <= 1;
    if (unused && older(entry.path(), options) && removeEntry(entry.path(), options, out)) {
      ++out.roots_removed;
      out.freed_bytes += present ? static_cast<uint64_t>(st.st_blocks) * 512 : 0;
    } else {
      ++out.roots_kept;
    }
  }
  if (list_ec && list_ec != std::errc::no_such_file_or_directory) {
    return fail(Errc::kInternal,
                fmt::format("Cannot list {}: {}", roots.string(), list_ec.message()));
  }
  return out;
}

}  // namespace hutch::image

#include "image/store_prune.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <utility>

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

// When `path` was last written; an unreadable time counts as now (new).
fs::file_time_type writtenAt(const fs::path& path) {
  std::error_code ec;
  const fs::file_time_type written = fs::last_write_time(path, ec);
  return ec ? fs::file_time_type::max() : written;
}

// Whether that was before `options.keep` ago.
bool older(fs::file_time_type written, const StorePruneOptions& options) {
  return written != fs::file_time_type::max() && options.now - written >= options.keep;
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

  // 1. Layouts: kept when a template names their image, a pull holds them, or they are new;
  // the others may go (out.layouts[i].remove), their pull locks held until the end.
  struct Layout {
    fs::path dir;
    UniqueFd lock;
    std::set<std::string> blobs;
    fs::file_time_type written;
  };
  std::vector<Layout> found;  // beside out.layouts
  for (const auto& entry : fs::directory_iterator(layouts, list_ec)) {
    const std::string hex = entry.path().filename().string();
    if (!entry.is_directory() || !isHex64(hex)) continue;
    LayoutDecision d{.digest = "sha256:" + hex, .bytes = treeBytes(entry.path())};
    Result<UniqueFd> lock = tryLock(layouts / (hex + ".lock"));
    const fs::path index = entry.path() / "index.json";
    Layout l{.dir = entry.path(),
             .written = writtenAt(fs::exists(index, ec) ? index : entry.path())};
    if (auto user = in_use.find(d.digest); user != in_use.end()) {
      d.reason = user->second;
    } else if (!lock) {
      d.reason = lock.error().message();
    } else if (!older(l.written, options)) {
      d.reason = "pulled within --keep";
    } else {
      d.remove = true;
      d.reason = "unused";
      l.lock = std::move(*lock);
    }
    found.push_back(std::move(l));
    out.layouts.push_back(std::move(d));
  }
  if (list_ec && list_ec != std::errc::no_such_file_or_directory) {
    return fail(Errc::kInternal,
                fmt::format("Cannot list {}: {}", layouts.string(), list_ec.message()));
  }
  list_ec.clear();

  // 2. The blobs each layout reaches. When a kept one cannot be read, every blob stays (which
  // ones it needs is then unknown).
  std::map<std::string, int> refs;  // blob -> the layouts not removed that reach it
  for (size_t i = 0; i < found.size(); ++i) {
    Result<std::set<std::string>> named = layoutBlobs(found[i].dir, blobs, limits);
    if (!named) {
      const bool unwritten =
          named.error().code() == Errc::kNotFound && !fs::exists(found[i].dir / "index.json", ec);
      // A pull that has not written its index yet is new, and so are its blobs.
      if (!unwritten && !out.layouts[i].remove && out.blobs_kept_because.empty()) {
        out.blobs_kept_because =
            fmt::format("the layout {} cannot be read ({}); remove it and prune again",
                        found[i].dir.string(), named.error().message());
      }
      continue;
    }
    for (const std::string& b : *named) ++refs[b];
    found[i].blobs = std::move(*named);
  }

  // 3. The blobs on disk.
  struct Blob {
    fs::path path;
    uint64_t bytes = 0;
    bool old = false;
  };
  std::map<std::string, Blob> on_disk;  // by digest
  const fs::path sha = blobs / "sha256";
  for (const auto& entry : fs::directory_iterator(sha, list_ec)) {
    std::error_code size_ec;
    on_disk["sha256:" + entry.path().filename().string()] =
        Blob{entry.path(), entry.is_regular_file(size_ec) ? entry.file_size(size_ec) : 0,
             older(writtenAt(entry.path()), options)};
  }
  if (list_ec && list_ec != std::errc::no_such_file_or_directory) {
    return fail(Errc::kInternal,
                fmt::format("Cannot list {}: {}", sha.string(), list_ec.message()));
  }
  list_ec.clear();

  // 4. Root disks: a template's rootfs.img is a hard link of its image's; one link left means
  // no template has it. A staging directory a create left may go too.
  struct Root {
    fs::path dir;
    uint64_t bytes = 0;  // when no template links it (else the templates' space)
    fs::file_time_type written;
    bool unused = false;
  };
  std::vector<Root> roots;
  const fs::path roots_dir = oci / "roots";
  for (const auto& entry : fs::directory_iterator(roots_dir, list_ec)) {
    const fs::path disk = entry.path() / "rootfs.img";
    struct stat st {};
    const bool staging = entry.path().filename().string().find(".tmp-") != std::string::npos;
    const bool present = ::stat(disk.c_str(), &st) == 0;
    Root r{.dir = entry.path(), .written = writtenAt(entry.path())};
    r.unused = staging || !present || st.st_nlink <= 1;
    if (r.unused && present) r.bytes = static_cast<uint64_t>(st.st_blocks) * 512;
    roots.push_back(std::move(r));
  }
  if (list_ec && list_ec != std::errc::no_such_file_or_directory) {
    return fail(Errc::kInternal,
                fmt::format("Cannot list {}: {}", roots_dir.string(), list_ec.message()));
  }

  // 5. What goes: with no limit, everything that may; with one, the blobs no image uses, then
  // the least recently written images and root disks until the store is within it.
  uint64_t size = 0;
  for (const LayoutDecision& d : out.layouts) size += d.bytes;
  for (const auto& [digest, blob] : on_disk) size += blob.bytes;
  for (const Root& r : roots) size += r.bytes;
  const auto within = [&] { return options.limit_bytes && size <= *options.limit_bytes; };
  const auto free = [&](uint64_t bytes) {
    out.freed_bytes += bytes;
    size -= std::min(size, bytes);
  };
  const auto dropBlobs = [&](const std::set<std::string>& digests) {
    if (!out.blobs_kept_because.empty()) return;
    for (const std::string& digest : digests) {
      auto blob = on_disk.find(digest);
      if (blob == on_disk.end() || !blob->second.old || refs[digest] > 0) continue;
      if (removeEntry(blob->second.path, options, out)) {
        ++out.blobs_removed;
        free(blob->second.bytes);
      }
      on_disk.erase(blob);
    }
  };
  std::set<std::string> orphans;
  for (const auto& [digest, blob] : on_disk) orphans.insert(digest);
  dropBlobs(orphans);  // those no layout reaches (refs 0): a pull that died, a stray file

  // The candidates, oldest first: layouts (by index) and root disks (by index + found.size()).
  std::vector<std::pair<fs::file_time_type, size_t>> candidates;
  for (size_t i = 0; i < found.size(); ++i) {
    if (out.layouts[i].remove) candidates.emplace_back(found[i].written, i);
  }
  for (size_t i = 0; i < roots.size(); ++i) {
    if (roots[i].unused && older(roots[i].written, options)) {
      candidates.emplace_back(roots[i].written, found.size() + i);
    }
  }
  std::sort(candidates.begin(), candidates.end());
  std::set<size_t> removed_roots;
  for (const auto& [written, n] : candidates) {
    if (n >= found.size()) {
      const Root& r = roots[n - found.size()];
      if (!within() && removeEntry(r.dir, options, out)) {
        removed_roots.insert(n - found.size());
        free(r.bytes);
      }
      continue;
    }
    LayoutDecision& d = out.layouts[n];
    if (within()) {
      d.remove = false;
      d.reason = "unused, within --image-cache-max-gib";
      continue;
    }
    if (!options.dry_run) {
      fs::remove_all(found[n].dir, ec);
      if (ec) {
        d.remove = false;
        d.reason = fmt::format("cannot remove it: {}", ec.message());
        ec.clear();
        continue;
      }
      // Under the lock: no pull of it is waiting (box/template_image.cc takes it first).
      ::unlink((layouts / (found[n].dir.filename().string() + ".lock")).c_str());
    }
    free(d.bytes);
    for (const std::string& b : found[n].blobs) --refs[b];
    dropBlobs(found[n].blobs);
  }
  out.blobs_kept = on_disk.size();
  out.roots_removed = removed_roots.size();
  out.roots_kept = roots.size() - removed_roots.size();
  return out;
}

}  // namespace hutch::image

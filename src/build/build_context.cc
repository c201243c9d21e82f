#include "build/build_context.h"

#include <archive.h>
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <memory>
#include <unordered_map>

#include "base/path_text.h"
#include "base/unique_fd.h"
#include "image/digest.h"

namespace hutch::build {

namespace {

constexpr uint64_t kBeneath = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
// Entries looked at (listed or not) before the walk gives up: excluded trees with exception
// patterns are walked too.
constexpr size_t kMaxVisited = 4 * kMaxContextEntries;
constexpr int kMaxSymlinkHops = 40;

// openat2 below `root` without following any symlink (glibc 2.36 has no wrapper).
int openBeneath(int root, const std::string& path, uint64_t flags) {
  open_how how{};
  how.flags = flags | O_CLOEXEC;
  how.resolve = kBeneath;
  for (int attempt = 0; attempt < 64; ++attempt) {
    const long fd =
        ::syscall(SYS_openat2, root, path.empty() ? "." : path.c_str(), &how, sizeof how);
    if (fd >= 0) return static_cast<int>(fd);
    if (errno != EAGAIN && errno != EINTR) return -1;
  }
  return -1;
}

Result<UniqueFd> openRoot(const std::filesystem::path& dir) {
  UniqueFd fd(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!fd) {
    const int err = errno;
    if (err == ENOENT) {
      return fail(Errc::kNotFound, fmt::format("The build context {} does not exist: give the "
                                               "directory the build copies files from",
                                               dir.string()));
    }
    if (err == ENOTDIR) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("The build context {} is not a directory", dir.string()));
    }
    return fail(sysError(fmt::format("Cannot open the build context {}", dir.string()), err));
  }
  return fd;
}

// An entry of `dir` opened for reading; a file that vanished or turned into a symlink since the
// listing is kFailedPrecondition.
Result<UniqueFd> openListed(int root, const std::string& path, const std::filesystem::path& dir) {
  UniqueFd fd(openBeneath(root, path, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK));
  if (!fd) {
    const int err = errno;
    if (err == ENOENT || err == ELOOP || err == EXDEV || err == ENOTDIR) {
      return fail(Errc::kFailedPrecondition,
                  fmt::format("{} in the build context {} changed while the build read it (it "
                              "is gone or became a symlink): run the build again",
                              path, dir.string()));
    }
    return fail(sysError(fmt::format("Cannot open {} in the build context", path), err));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return fail(Errc::kFailedPrecondition,
                fmt::format("{} in the build context {} is no longer a regular file: run the "
                            "build again",
                            path, dir.string()));
  }
  return fd;
}

// The entries of one directory, sorted by name, stat'ed without following links.
Result<std::vector<ContextEntry>> readDirectory(int root, const std::string& rel,
                                                const std::filesystem::path& dir, size_t& visited) {
  const int fd = openBeneath(root, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT || err == ELOOP || err == EXDEV || err == ENOTDIR) {
      return fail(Errc::kFailedPrecondition,
                  fmt::format("{} in the build context {} changed while the build listed it: "
                              "run the build again",
                              rel, dir.string()));
    }
    return fail(sysError(fmt::format("Cannot list {} in the build context {}",
                                     rel.empty() ? "." : rel, dir.string()),
                         err));
  }
  std::unique_ptr<DIR, int (*)(DIR*)> d(::fdopendir(fd), ::closedir);
  if (!d) {
    const int err = errno;
    ::close(fd);
    return fail(sysError("Cannot list the build context", err));
  }
  std::vector<std::string> names;
  errno = 0;
  while (dirent* de = ::readdir(d.get())) {
    const std::string_view name = de->d_name;
    if (name == "." || name == "..") continue;
    if (++visited > kMaxVisited) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("The build context {} holds more than {} entries: add a "
                              ".dockerignore that leaves out what the build does not need "
                              "(.git, node_modules, build outputs)",
                              dir.string(), kMaxVisited));
    }
    names.emplace_back(name);
  }
  if (errno != 0) return fail(sysError("Cannot list the build context", errno));
  std::sort(names.begin(), names.end());
  std::vector<ContextEntry> out;
  out.reserve(names.size());
  for (const std::string& name : names) {
    struct stat st {};
    if (::fstatat(::dirfd(d.get()), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;  // removed meanwhile
      return fail(sysError(fmt::format("Cannot stat {} in the build context", name), errno));
    }
    ContextEntry e;
    e.path = rel.empty() ? name : rel + "/" + name;
    e.mode = st.st_mode & 07777;
    if (S_ISREG(st.st_mode)) {
      e.type = ContextEntry::Type::kFile;
      e.size = static_cast<uint64_t>(st.st_size);
    } else if (S_ISDIR(st.st_mode)) {
      e.type = ContextEntry::Type::kDirectory;
    } else if (S_ISLNK(st.st_mode)) {
      e.type = ContextEntry::Type::kSymlink;
      std::string target(static_cast<size_t>(std::max<off_t>(st.st_size, 0)) + 1, '\0');
      for (;;) {
        const ssize_t n =
            ::readlinkat(::dirfd(d.get()), name.c_str(), target.data(), target.size());
        if (n < 0) {
          return fail(sysError(fmt::format("Cannot read the symlink {}", e.path), errno));
        }
        if (static_cast<size_t>(n) < target.size()) {
          target.resize(static_cast<size_t>(n));
          break;
        }
        target.resize(target.size() * 2);
      }
      e.target = std::move(target);
    } else {
      continue;  // sockets, FIFOs, devices: nothing a COPY can carry
    }
    out.push_back(std::move(e));
  }
  return out;
}

void putU64(image::Sha256& h, uint64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
  h.update(b, sizeof b);
}
void putString(image::Sha256& h, std::string_view s) {
  putU64(h, s.size());
  h.update(s);
}

// Lexical cleaning of a source path: components without "" and ".", ".." taking one back;
// false when ".." climbs above the root.
bool cleanSource(std::string_view path, std::string& out) {
  bool climbed = false;
  const std::vector<std::string_view> parts = base::lexicalParts(path, &climbed);
  if (climbed) return false;
  out = base::joinParts(parts, "");
  return true;
}

std::string baseName(std::string_view path) {
  const size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

bool isUrl(std::string_view s) {
  std::string l(s.substr(0, 10));
  for (char& c : l) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return l.starts_with("http://") || l.starts_with("https://") || l.starts_with("git://") ||
         l.starts_with("ssh://") || l.starts_with("git@");
}

std::string shown(std::string_view s) {
  if (s.size() <= 200) return std::string(s);
  return std::string(s.substr(0, 200)) + "...";
}

tl::unexpected<Error> outside(const std::string& source, const std::string& origin) {
  return fail(Errc::kInvalidArgument,
              fmt::format("COPY source '{}' is outside {}: sources are paths inside it, and '..' "
                          "cannot climb out",
                          shown(source), origin.empty() ? "the build context" : origin));
}

class Resolver {
 public:
  Resolver(const std::vector<ContextEntry>& listing, std::string origin)
      : listing_(listing), origin_(std::move(origin)) {
    index_.reserve(listing.size());
    for (size_t i = 0; i < listing.size(); ++i) index_.emplace(listing[i].path, i);
  }

  static constexpr size_t kRoot = static_cast<size_t>(-1);

  // The entry `path` leads to, symlinks followed inside the listing; kRoot for the root.
  Result<size_t> resolve(const std::string& source, const std::string& path) const {
    std::deque<std::string> rest;
    split(path, rest);
    std::string cur;
    size_t cur_index = kRoot;
    int hops = 0;
    while (!rest.empty()) {
      const std::string c = std::move(rest.front());
      rest.pop_front();
      if (c.empty() || c == ".") continue;
      if (c == "..") {
        if (cur.empty()) return escape(source, "", origin_);
        const size_t slash = cur.rfind('/');
        cur = slash == std::string::npos ? std::string() : cur.substr(0, slash);
        cur_index = cur.empty() ? kRoot : index_.at(cur);
        continue;
      }
      const std::string candidate = cur.empty() ? c : cur + "/" + c;
      auto it = index_.find(candidate);
      if (it == index_.end()) return missing(source, hops == 0 ? source : candidate, origin_);
      const ContextEntry& e = listing_[it->second];
      if (e.type == ContextEntry::Type::kSymlink) {
        if (++hops > kMaxSymlinkHops) {
          return fail(Errc::kInvalidArgument,
                      fmt::format("COPY source '{}' goes through more than {} symlinks (a loop?)",
                                  shown(source), kMaxSymlinkHops));
        }
        if (e.target.empty() || e.target.front() == '/') return escape(source, candidate, origin_);
        // The link's parent is `cur`; its target's components come next.
        std::deque<std::string> target;
        split(e.target, target);
        // Check that the target does not climb above the root from `cur`.
        if (!staysInside(cur, e.target)) return escape(source, candidate, origin_);
        rest.insert(rest.begin(), target.begin(), target.end());
        continue;
      }
      if (e.type == ContextEntry::Type::kFile && !rest.empty()) {
        // Only "." and ".." could follow a file lexically; treat any component as missing.
        return missing(source, hops == 0 ? source : candidate + "/" + rest.front(), origin_);
      }
      cur = candidate;
      cur_index = it->second;
    }
    return cur_index;
  }

  // The entries below a directory (kRoot: everything), in listing order.
  std::pair<size_t, size_t> childrenOf(size_t dir) const {
    if (dir == kRoot) return {0, listing_.size()};
    const std::string& prefix = listing_[dir].path;
    size_t end = dir + 1;
    while (end < listing_.size() && listing_[end].path.size() > prefix.size() &&
           listing_[end].path.compare(0, prefix.size(), prefix) == 0 &&
           listing_[end].path[prefix.size()] == '/') {
      ++end;
    }
    return {dir + 1, end};
  }

 private:
  static void split(std::string_view path, std::deque<std::string>& out) {
    size_t i = 0;
    while (i <= path.size()) {
      size_t slash = path.find('/', i);
      if (slash == std::string_view::npos) slash = path.size();
      if (slash > i) out.emplace_back(path.substr(i, slash - i));
      i = slash + 1;
    }
  }
  static bool staysInside(const std::string& cur, std::string_view target) {
    int depth = 0;
    for (char c : cur) depth += c == '/' ? 1 : 0;
    if (!cur.empty()) ++depth;
    size_t i = 0;
    while (i <= target.size()) {
      size_t slash = target.find('/', i);
      if (slash == std::string_view::npos) slash = target.size();
      const std::string_view part = target.substr(i, slash - i);
      i = slash + 1;
      if (part.empty() || part == ".") continue;
      if (part == "..") {
        if (--depth < 0) return false;
      } else {
        ++depth;
      }
    }
    return true;
  }
  static tl::unexpected<Error> escape(const std::string& source, const std::string& link,
                                      const std::string& origin) {
    const std::string where = origin.empty() ? "the build context" : origin;
    if (link.empty()) return outside(source, origin);
    return fail(Errc::kInvalidArgument,
                fmt::format("COPY source '{}' goes through the symlink '{}', which points outside "
                            "{}: replace it with a relative link inside it, or copy what it "
                            "points to",
                            shown(source), shown(link), where));
  }
  static tl::unexpected<Error> missing(const std::string& source, const std::string& path,
                                       const std::string& origin) {
    const std::string where = origin.empty() ? "the build context" : origin;
    const std::string ignored =
        origin.empty() ? " and that .dockerignore does not leave it out" : "";
    if (source == path) {
      return fail(
          Errc::kNotFound,
          fmt::format("COPY source '{}' is not in {}: check the path{}{}", shown(source), where,
                      origin.empty() ? " (relative to the context directory)" : "", ignored));
    }
    return fail(Errc::kNotFound,
                fmt::format("COPY source '{}' leads to '{}', which is not in {}: check the path "
                            "and its symlinks{}",
                            shown(source), shown(path), where, ignored));
  }

  const std::vector<ContextEntry>& listing_;
  std::string origin_;
  std::unordered_map<std::string_view, size_t> index_;
};

}  // namespace

Result<std::vector<ContextEntry>> listContext(const std::filesystem::path& dir,
                                              const DockerIgnore& ignore) {
  HUTCH_TRY(UniqueFd root, openRoot(dir));
  struct Frame {
    std::vector<ContextEntry> children;
    size_t next = 0;
    DockerIgnore::MatchState state;    // of this directory, for its children
    std::optional<ContextEntry> self;  // this directory's entry while not yet listed
  };
  std::vector<ContextEntry> out;
  size_t visited = 0;
  std::vector<Frame> stack;
  {
    HUTCH_TRY(auto children, readDirectory(root.get(), "", dir, visited));
    stack.push_back(Frame{std::move(children), 0, {}, std::nullopt});
  }
  auto emit = [&](ContextEntry e) -> Result<> {
    for (Frame& f : stack) {
      if (f.self) {
        out.push_back(std::move(*f.self));
        f.self.reset();
      }
    }
    if (out.size() >= kMaxContextEntries) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("The build context {} has more than {} entries: add a "
                              ".dockerignore that leaves out what the build does not need "
                              "(.git, node_modules, build outputs)",
                              dir.string(), kMaxContextEntries));
    }
    out.push_back(std::move(e));
    return ok();
  };
  while (!stack.empty()) {
    Frame& top = stack.back();
    if (top.next >= top.children.size()) {
      stack.pop_back();
      continue;
    }
    ContextEntry e = std::move(top.children[top.next++]);
    DockerIgnore::MatchState state;
    const bool excluded = ignore.excludes(e.path, top.state, &state);
    if (e.type != ContextEntry::Type::kDirectory) {
      if (!excluded) HUTCH_TRY_VOID(emit(std::move(e)));
      continue;
    }
    if (excluded && !ignore.hasExceptions()) continue;
    HUTCH_TRY(auto children, readDirectory(root.get(), e.path, dir, visited));
    Frame frame{std::move(children), 0, std::move(state), std::nullopt};
    if (excluded) {
      frame.self = std::move(e);  // listed only if something inside is included
      stack.push_back(std::move(frame));
    } else {
      HUTCH_TRY_VOID(emit(std::move(e)));
      stack.push_back(std::move(frame));
    }
  }
  return out;
}

Result<std::string> hashSources(const std::filesystem::path& dir,
                                const std::vector<ContextEntry>& entries) {
  HUTCH_TRY(UniqueFd root, openRoot(dir));
  image::Sha256 h;
  h.update(std::string_view("hutch-build-sources-v1\0", 23));
  putU64(h, entries.size());
  std::vector<char> buf(size_t{1} << 16);
  for (const ContextEntry& e : entries) {
    switch (e.type) {
      case ContextEntry::Type::kFile: h.update("f"); break;
      case ContextEntry::Type::kDirectory: h.update("d"); break;
      case ContextEntry::Type::kSymlink: h.update("l"); break;
    }
    putString(h, e.path);
    putU64(h, e.mode & 07777);
    if (e.type == ContextEntry::Type::kSymlink) putString(h, e.target);
    if (e.type != ContextEntry::Type::kFile) continue;
    HUTCH_TRY(UniqueFd fd, openListed(root.get(), e.path, dir));
    image::Sha256 content;
    uint64_t size = 0;
    for (;;) {
      const ssize_t n = ::read(fd.get(), buf.data(), buf.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return fail(sysError(fmt::format("Cannot read {} in the build context", e.path), errno));
      }
      if (n == 0) break;
      content.update(buf.data(), static_cast<size_t>(n));
      size += static_cast<uint64_t>(n);
    }
    putU64(h, size);
    h.update(content.finish());
  }
  return h.finish();
}

std::vector<ContextEntry> CopyPlan::entries() const {
  std::vector<ContextEntry> out;
  out.reserve(items.size());
  for (const CopyItem& item : items) out.push_back(item.entry);
  return out;
}

Result<CopyPlan> resolveCopySources(const std::vector<ContextEntry>& listing,
                                    const std::vector<std::string>& sources, std::string_view dest,
                                    const CopyOptions& options) {
  const Resolver resolver(listing, options.origin);
  CopyPlan plan;
  plan.dest_is_dir = dest.ends_with('/') || dest.ends_with("/.") || dest.ends_with("/..") ||
                     dest == "." || dest == ".." || dest.empty() ||
                     sources.size() + options.inline_files > 1;
  size_t selected = 0;
  std::vector<CopyItem> items;
  auto addSelected = [&](const std::string& source, const std::string& path) -> Result<> {
    HUTCH_TRY(size_t index, resolver.resolve(source, path));
    ++selected;
    if (index == Resolver::kRoot || listing[index].type == ContextEntry::Type::kDirectory) {
      plan.dest_is_dir = true;
      const auto [begin, end] = resolver.childrenOf(index);
      const size_t prefix = index == Resolver::kRoot ? 0 : listing[index].path.size() + 1;
      for (size_t k = begin; k < end; ++k) {
        CopyItem item;
        item.entry = listing[k];
        item.source = listing[k].path;
        item.target = listing[k].path.substr(prefix);
        items.push_back(std::move(item));
      }
      return ok();
    }
    CopyItem item;
    item.entry = listing[index];
    item.source = path;
    item.archive_candidate = options.is_add && options.unpack.value_or(true) &&
                             item.entry.type == ContextEntry::Type::kFile;
    items.push_back(std::move(item));
    return ok();
  };

  for (const std::string& source : sources) {
    if (isUrl(source)) {
      return fail(Errc::kUnsupported,
                  fmt::format("'{}' is a URL or Git source, which hutch builds do not download: "
                              "download it in a RUN step (curl, wget or git clone)",
                              shown(source)));
    }
    std::string clean;
    if (!cleanSource(source, clean)) return outside(source, options.origin);
    if (!Glob::hasWildcards(source)) {
      HUTCH_TRY_VOID(addSelected(clean, clean));
      continue;
    }
    auto glob = Glob::compile(clean, Glob::Syntax::kFilepath);
    if (!glob) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("COPY source '{}': {}", shown(source), glob.error().message()));
    }
    for (const ContextEntry& e : listing) {
      if (glob->matches(e.path)) HUTCH_TRY_VOID(addSelected(e.path, e.path));
    }
  }
  if (selected > 1) plan.dest_is_dir = true;

  std::unordered_map<std::string, size_t> by_target;
  for (CopyItem& item : items) {
    if (item.entry.type != ContextEntry::Type::kDirectory && item.target.empty()) {
      item.target = plan.dest_is_dir ? baseName(item.source) : std::string();
    }
    auto [it, inserted] = by_target.emplace(item.target, plan.items.size());
    if (inserted) {
      plan.items.push_back(std::move(item));
    } else {
      plan.items[it->second] = std::move(item);
    }
  }
  return plan;
}

Result<> detectArchives(const std::filesystem::path& dir, CopyPlan& plan) {
  HUTCH_TRY(UniqueFd root, openRoot(dir));
  for (CopyItem& item : plan.items) {
    if (!item.archive_candidate || item.entry.type != ContextEntry::Type::kFile) continue;
    HUTCH_TRY(UniqueFd fd, openListed(root.get(), item.entry.path, dir));
    std::unique_ptr<archive, int (*)(archive*)> a(archive_read_new(), archive_read_free);
    if (!a) return fail(Errc::kInternal, "Cannot allocate an archive reader");
    archive_read_support_filter_gzip(a.get());
    archive_read_support_filter_bzip2(a.get());
    archive_read_support_filter_xz(a.get());
    archive_read_support_format_tar(a.get());
    bool is_archive = false;
    if (archive_read_open_fd(a.get(), fd.get(), 10240) == ARCHIVE_OK) {
      archive_entry* entry = nullptr;
      const int r = archive_read_next_header(a.get(), &entry);
      is_archive = r == ARCHIVE_OK || r == ARCHIVE_WARN;
    }
    item.extract = is_archive;
  }
  return ok();
}

}  // namespace hutch::build

// hutch-diff: what changed on a box's disk, read without the box (docs/diff.md).
//
//   hutch-diff --uid U --gid G --before F... --after F... --before-raw F --after-raw F
//              [--all] [--ignore P]... [--limit N] (list | patch PATH | export)
//
// --before and --after name each view's qcow2 chain, top first, down to the template's raw disk
// (as hutchd checked it: the chain is passed explicitly, never read from the images' headers);
// --before-raw and --after-raw are empty files the views are written into. hutchd passes them
// all as open descriptors (/dev/fd/N): the helper needs no path into hutchd's state directory.
// hutchd starts it as root; it drops to the box's ids at once (sandbox.h), converts both views
// to raw images with qemu-img, replays their ext4 journals there with e2fsck, opens them,
// confines itself with seccomp, and then walks and compares the trees:
//   list    JSON on stdout: {"changes":[...],"hidden":{rule:n},"notes":[...],"truncated":b}
//   patch   the two versions of PATH (up to 1 MiB each) on fds 3 (before) and 4 (after), and
//           JSON on stdout: {"before":{...}|null,"after":{...}|null,"truncated":b}
//   export  a pax tar of the added and changed entries (files, dirs, symlinks) on stdout
//
//   hutch-diff --udiff UID GID LABEL_A LABEL_B
//
// runs `diff -u` as UID:GID on fds 3 and 4 (what patch wrote), labelled LABEL_A and LABEL_B,
// output on stdout ("differ" is success here too).
// Exit status 0, or 10 + the error's code (base/error.h Errc) with its message on stderr.
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "diff/changes.h"
#include "diff/sandbox.h"
#include "diff/tree.h"
#include "sys/pidfd.h"
#include "sys/spawn.h"

using namespace hutch;

namespace {

constexpr size_t kPatchMax = 1 << 20;

// qemu-img's json: description of a chain, top first: each qcow2's backing is the next element,
// never what its header names.
Result<nlohmann::json> chainSpec(const std::vector<std::string>& chain, size_t i = 0) {
  const std::string& file = chain[i];
  char magic[4] = {};
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return fail(sysError("Cannot open " + file, errno));
  bool qcow2 = ::pread(fd.get(), magic, sizeof magic, 0) == sizeof magic &&
               std::string_view(magic, 4) == std::string_view("QFI\xfb", 4);
  nlohmann::json node{{"file", {{"driver", "file"}, {"filename", file}}}};
  if (!qcow2) {
    if (i + 1 != chain.size()) {
      return fail(Errc::kInvalidArgument, file + " is not qcow2 but has a layer below it");
    }
    node["driver"] = "raw";
    return node;
  }
  node["driver"] = "qcow2";
  if (i + 1 == chain.size()) {
    node["backing"] = nullptr;
  } else {
    HUTCH_TRY(node["backing"], chainSpec(chain, i + 1));
  }
  return node;
}

// The descriptors named /dev/fd/N among `paths`, for a child's keep-list.
std::vector<sys::FdMapping> passedFds(const std::vector<std::string>& paths) {
  std::vector<sys::FdMapping> fds;
  for (const auto& p : paths) {
    if (!p.starts_with("/dev/fd/")) continue;
    int fd = -1;
    std::string_view digits = std::string_view(p).substr(8);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), fd);
    if (ec == std::errc() && end == digits.data() + digits.size() && fd > 2) {
      fds.push_back({fd, fd});
    }
  }
  return fds;
}

// The disk's size as the top of the chain says (a qcow2 header's size field, a raw file's size).
Result<uint64_t> virtualSize(const std::string& top) {
  UniqueFd fd(::open(top.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return fail(sysError("Cannot open " + top, errno));
  unsigned char header[32] = {};
  if (::pread(fd.get(), header, sizeof header, 0) == sizeof header &&
      std::string_view(reinterpret_cast<char*>(header), 4) == std::string_view("QFI\xfb", 4)) {
    uint64_t size = 0;
    for (int i = 24; i < 32; ++i) size = (size << 8) | header[i];
    return size;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return fail(sysError("fstat " + top, errno));
  return static_cast<uint64_t>(st.st_size);
}

Result<> runTool(std::vector<std::string> argv, const std::vector<std::string>& paths,
                 bool (*ok_status)(int)) {
  // Its messages are kept, for the error (its last line) and hutchd's log (all of them).
  UniqueFd messages(::memfd_create("hutch-diff-tool", MFD_CLOEXEC));
  if (!messages) return fail(sysError("memfd_create", errno));
  sys::SpawnOptions options;
  options.argv = std::move(argv);
  options.fds = passedFds(paths);
  options.fds.push_back({messages.get(), STDERR_FILENO});
  HUTCH_TRY(pid_t pid, sys::spawn(options));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::string text(4096, '\0');
  off_t size = ::lseek(messages.get(), 0, SEEK_END);
  off_t from = std::max<off_t>(0, size - static_cast<off_t>(text.size()));
  ssize_t got = ::pread(messages.get(), text.data(), text.size(), from);
  text.resize(got > 0 ? static_cast<size_t>(got) : 0);
  std::fprintf(stderr, "%s", text.c_str());
  if (WIFEXITED(status) && ok_status(WEXITSTATUS(status))) return ok();
  while (!text.empty() && text.back() == '\n') text.pop_back();
  std::string last = text.substr(text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1);
  // The host's disk (the state directory's) is what ran out, not anything about the box.
  Errc code = text.find("No space left on device") != std::string::npos ? Errc::kResourceExhausted
                                                                        : Errc::kInvalidArgument;
  return fail(code, fmt::format("{} failed ({}){}{}", options.argv[0],
                                sys::ExitStatus::fromWaitStatus(status).describe(),
                                last.empty() ? "" : ": ", last));
}

// The view `chain` written into the empty raw image `raw`, its journal replayed there.
Result<> materialize(const std::vector<std::string>& chain, const std::string& raw) {
  HUTCH_TRY(nlohmann::json spec, chainSpec(chain));
  HUTCH_TRY(uint64_t size, virtualSize(chain.front()));
  {
    UniqueFd out(::open(raw.c_str(), O_RDWR | O_CLOEXEC));
    if (!out || ::ftruncate(out.get(), static_cast<off_t>(size)) != 0) {
      return fail(sysError("Cannot size the scratch image " + raw, errno));
    }
  }
  std::vector<std::string> paths = chain;
  paths.push_back(raw);
  auto converted = runTool({"qemu-img", "convert", "-q", "-n", "--target-is-zero", "-O", "raw",
                            "json:" + spec.dump(), raw},
                           paths, [](int status) { return status == 0; });
  if (!converted) return fail(converted.error().withContext("Cannot read the box's disk chain"));
  // A layer frozen while the guest had it mounted has committed metadata still in its journal.
  // e2fsck replays it into our copy only. Exit 0: nothing to do; 1, 2: replayed; 4 and up: an
  // error, which it printed on stderr (hutchd's log gets it).
  auto replayed = runTool({"e2fsck", "-y", "-E", "journal_only", raw}, {raw},
                          [](int status) { return status < 4; });
  if (!replayed) {
    return fail(replayed.error().withContext("Cannot replay the journal of the box's filesystem"));
  }
  return ok();
}

Result<bool> sameBytes(const diff::Image& a, const diff::Image& b, const diff::Entry& ea,
                       const diff::Entry& eb) {
  constexpr size_t kWindow = 1 << 20;
  for (uint64_t offset = 0;; offset += kWindow) {
    HUTCH_TRY(std::string left, a.read(ea.ino, kWindow, offset));
    HUTCH_TRY(std::string right, b.read(eb.ino, kWindow, offset));
    if (left != right) return false;
    if (left.size() < kWindow) return true;
  }
}

int failWith(const Error& error) {
  std::fprintf(stderr, "%s\n", error.describe().c_str());
  return 10 + static_cast<int>(error.code());
}

nlohmann::json sideJson(const diff::Entry* e) {
  if (e == nullptr) return nullptr;
  return {{"type", diff::kindName(e->kind)}, {"size", e->size}, {"mode", e->mode}};
}

Result<> writeAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(sysError("write", errno));
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return ok();
}

Result<> exportTar(const diff::Image& after, const std::vector<diff::Change>& changes) {
  struct Free {
    void operator()(archive* a) const { archive_write_free(a); }
  };
  std::unique_ptr<archive, Free> out(archive_write_new());
  // Names are a box's bytes, not always UTF-8 and never converted: pax with hdrcharset=BINARY
  // writes them as they are (as `hutch cp` does).
  if (archive_write_set_format_pax(out.get()) != ARCHIVE_OK ||
      archive_write_set_options(out.get(), "hdrcharset=BINARY") != ARCHIVE_OK ||
      archive_write_open_fd(out.get(), STDOUT_FILENO) != ARCHIVE_OK) {
    return fail(Errc::kInternal, archive_error_string(out.get()));
  }
  for (const auto& change : changes) {
    if (change.change == diff::ChangeKind::kDeleted) continue;
    const diff::Entry& e = change.entry;
    if (e.kind != diff::Kind::kFile && e.kind != diff::Kind::kDir &&
        e.kind != diff::Kind::kSymlink) {
      std::fprintf(stderr, "hutch-diff: %s: a %s, not exported\n", e.path.c_str(),
                   std::string(diff::kindName(e.kind)).c_str());
      continue;
    }
    std::unique_ptr<archive_entry, decltype(&archive_entry_free)> entry(archive_entry_new(),
                                                                        archive_entry_free);
    archive_entry_set_pathname(entry.get(), e.path.c_str() + 1);  // relative: no leading '/'
    archive_entry_set_perm(entry.get(), e.mode);
    archive_entry_set_uid(entry.get(), e.uid);
    archive_entry_set_gid(entry.get(), e.gid);
    archive_entry_set_mtime(entry.get(), e.mtime_ns / 1'000'000'000, e.mtime_ns % 1'000'000'000);
    if (e.kind == diff::Kind::kDir) {
      archive_entry_set_filetype(entry.get(), AE_IFDIR);
    } else if (e.kind == diff::Kind::kSymlink) {
      archive_entry_set_filetype(entry.get(), AE_IFLNK);
      archive_entry_set_symlink(entry.get(), e.target.c_str());
    } else {
      archive_entry_set_filetype(entry.get(), AE_IFREG);
      archive_entry_set_size(entry.get(), static_cast<la_int64_t>(e.size));
    }
    if (archive_write_header(out.get(), entry.get()) != ARCHIVE_OK) {
      return fail(Errc::kInternal, std::string("tar: ") + archive_error_string(out.get()));
    }
    if (e.kind == diff::Kind::kFile) {
      uint64_t left = e.size;
      auto streamed = after.stream(e.ino, [&](std::string_view piece) -> Result<> {
        piece = piece.substr(0, left);
        if (archive_write_data(out.get(), piece.data(), piece.size()) < 0) {
          return fail(Errc::kInternal, std::string("tar: ") + archive_error_string(out.get()));
        }
        left -= piece.size();
        return ok();
      });
      if (!streamed) return fail(streamed.error());
      // A file shorter than its size says (a hostile inode): pad, as tar must.
      std::string zeros(64 << 10, '\0');
      while (left > 0) {
        size_t n = std::min<uint64_t>(left, zeros.size());
        archive_write_data(out.get(), zeros.data(), n);
        left -= n;
      }
    }
  }
  if (archive_write_close(out.get()) != ARCHIVE_OK) {
    return fail(Errc::kInternal, std::string("tar: ") + archive_error_string(out.get()));
  }
  return ok();
}

// --udiff: GNU diff on what patch wrote, unprivileged like the rest.
int unifiedDiff(int argc, char** argv) {
  if (argc != 6) return failWith(Error(Errc::kInvalidArgument, "--udiff UID GID LABEL_A LABEL_B"));
  uid_t uid = 0;
  gid_t gid = 0;
  std::string_view u(argv[2]);
  std::string_view g(argv[3]);
  if (std::from_chars(u.data(), u.data() + u.size(), uid).ec != std::errc() ||
      std::from_chars(g.data(), g.data() + g.size(), gid).ec != std::errc()) {
    return failWith(Error(Errc::kInvalidArgument, "--udiff wants numeric ids"));
  }
  if (auto dropped = diff::dropPrivileges(uid, gid); !dropped) return failWith(dropped.error());
  sys::SpawnOptions options;
  // /dev/fd/N: diff opens them again, which an exec'd program of our own ids may.
  options.argv = {"diff", "-u", "--label", argv[4], "--label", argv[5], "/dev/fd/3", "/dev/fd/4"};
  options.fds = {{STDOUT_FILENO, STDOUT_FILENO}, {STDERR_FILENO, STDERR_FILENO}, {3, 3}, {4, 4}};
  auto pid = sys::spawn(options);
  if (!pid) return failWith(pid.error());
  int status = 0;
  while (::waitpid(*pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) <= 1) return 0;  // same, or different
  return failWith(Error(Errc::kInternal, "diff failed (status " + std::to_string(status) + ")"));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "--udiff") return unifiedDiff(argc, argv);
  CLI::App app{"hutch-diff: what changed on a box's disk (run by hutchd)"};
  uid_t uid = 0;
  gid_t gid = 0;
  std::string before_raw;
  std::string after_raw;
  std::vector<std::string> before_chain;
  std::vector<std::string> after_chain;
  std::vector<std::string> ignore;
  bool all = false;
  size_t limit = 100000;
  std::string mode;
  std::string path;
  app.add_option("--uid", uid)->required();
  app.add_option("--gid", gid)->required();
  app.add_option("--before-raw", before_raw, "An empty file for the baseline's raw image")
      ->required();
  app.add_option("--after-raw", after_raw, "An empty file for the box's raw image")->required();
  app.add_option("--before", before_chain, "The baseline's chain, top first")
      ->required()
      ->allow_extra_args(false);
  app.add_option("--after", after_chain, "The box's chain now, top first")
      ->required()
      ->allow_extra_args(false);
  app.add_option("--ignore", ignore, "Hide paths matching this pattern")->allow_extra_args(false);
  app.add_flag("--all", all, "No built-in noise rules");
  app.add_option("--limit", limit, "At most this many changes listed");
  app.add_option("mode", mode)->required()->check(CLI::IsMember({"list", "patch", "export"}));
  app.add_option("path", path);
  CLI11_PARSE(app, argc, argv);
  if (mode == "patch" && (path.empty() || path.front() != '/')) {
    return failWith(Error(Errc::kInvalidArgument, "patch needs an absolute path"));
  }
  for (const auto& pattern : ignore) {
    if (auto valid = diff::validatePattern(pattern); !valid) return failWith(valid.error());
  }

  if (auto dropped = diff::dropPrivileges(uid, gid); !dropped) return failWith(dropped.error());
  if (auto made = materialize(before_chain, before_raw); !made) return failWith(made.error());
  if (auto made = materialize(after_chain, after_raw); !made) return failWith(made.error());
  auto before = diff::Image::open(before_raw);
  if (!before) return failWith(before.error());
  auto after = diff::Image::open(after_raw);
  if (!after) return failWith(after.error());
  // From here on the box's filesystem is parsed: nothing can be opened or run any more.
  if (auto confined = diff::confine(); !confined) return failWith(confined.error());
  auto before_tree = before->walk();
  if (!before_tree) return failWith(before_tree.error().withContext("The baseline's filesystem"));
  auto after_tree = after->walk();
  if (!after_tree) return failWith(after_tree.error().withContext("The box's filesystem"));

  if (mode == "patch") {
    const diff::Entry* b = before_tree->find(path);
    const diff::Entry* a = after_tree->find(path);
    bool truncated = false;
    for (auto [e, fd, image] : {std::tuple{b, 3, &*before}, std::tuple{a, 4, &*after}}) {
      if (e == nullptr || e->kind != diff::Kind::kFile) continue;
      auto bytes = image->read(e->ino, kPatchMax);
      if (!bytes) return failWith(bytes.error());
      truncated = truncated || e->size > kPatchMax;
      if (auto written = writeAll(fd, *bytes); !written) return failWith(written.error());
    }
    nlohmann::json out{{"before", sideJson(b)}, {"after", sideJson(a)}, {"truncated", truncated}};
    std::string text = out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    if (auto written = writeAll(STDOUT_FILENO, text); !written) return failWith(written.error());
    return 0;
  }

  auto changes =
      diff::compare(*before_tree, *after_tree, [&](const diff::Entry& eb, const diff::Entry& ea) {
        return sameBytes(*before, *after, eb, ea);
      });
  if (!changes) return failWith(changes.error());
  diff::Filtered filtered = diff::applyFilter(std::move(*changes), diff::Filter(all, ignore));

  if (mode == "export") {
    if (auto written = exportTar(*after, filtered.changes); !written) {
      return failWith(written.error());
    }
    return 0;
  }
  nlohmann::json list = nlohmann::json::array();
  bool truncated = filtered.changes.size() > limit;
  for (size_t i = 0; i < filtered.changes.size() && i < limit; ++i) {
    list.push_back(diff::toJson(filtered.changes[i]));
  }
  std::vector<std::string> notes = before_tree->notes;
  notes.insert(notes.end(), after_tree->notes.begin(), after_tree->notes.end());
  if (notes.size() > 100) notes.resize(100);
  nlohmann::json out{{"changes", std::move(list)},
                     {"hidden", filtered.hidden},
                     {"notes", notes},
                     {"total", filtered.changes.size()},
                     {"truncated", truncated}};
  std::string text = out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  if (auto written = writeAll(STDOUT_FILENO, text); !written) return failWith(written.error());
  return 0;
}

// hutch diff and export (docs/diff.md): what changed on a box's disk since its template or a
// checkpoint, read by the sandboxed hutch-diff helper from copies of the box's disk chain. hutchd
// itself never parses the box's filesystem: it picks and checks the chains, takes a consistent
// copy of the box's top layer (the guest synced and paused for the copy when it runs), and runs
// the helper as the box's own uid.
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "box/box_service.h"
#include "diff/changes.h"
#include "event/offload.h"
#include "jail/box_ids.h"
#include "sys/pidfd.h"
#include "sys/spawn.h"

namespace hutch::box {

namespace fs = std::filesystem;

namespace {

// A diff of a big disk under TCG takes seconds; one that takes this long is stuck or hostile.
constexpr auto kDiffLimit = std::chrono::minutes(5);
constexpr size_t kMaxListing = 256 << 20;  // the helper's JSON answer
constexpr uid_t kNobody = 65534;

bool under(const fs::path& path, const fs::path& root) {
  if (root.empty()) return false;
  auto p = path.lexically_normal();
  auto r = root.lexically_normal();
  auto [rit, pit] = std::mismatch(r.begin(), r.end(), p.begin(), p.end());
  return rit == r.end() || (rit->empty() && std::next(rit) == r.end());
}

// Copies `from` (never through a symlink: the box's uid owns its directory) to a new `to`.
Result<> copyTop(const fs::path& from, const fs::path& to, jail::BoxIds ids) {
  UniqueFd in(::open(from.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!in) return fail(sysError("Cannot open the box's disk " + from.string(), errno));
  struct stat st {};
  if (::fstat(in.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return fail(Errc::kFailedPrecondition, "The box's disk " + from.string() + " is not a file");
  }
  UniqueFd out(::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!out) return fail(sysError("Cannot create " + to.string(), errno));
  off_t left = st.st_size;
  while (left > 0) {
    ssize_t n = ::copy_file_range(in.get(), nullptr, out.get(), nullptr,
                                  static_cast<size_t>(std::min<off_t>(left, 1 << 30)), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Error error = sysError("Cannot copy the box's disk", errno);
      if (errno == ENOSPC) return fail(Errc::kResourceExhausted, error.describe());
      return fail(error);
    }
    if (n == 0) break;
    left -= n;
  }
  if (::fchown(out.get(), ids.uid, ids.gid) != 0) return fail(sysError("fchown", errno));
  return ok();
}

// Every element of `chain` must be a file hutch made: the box's own top, a frozen layer, a
// template snapshot's layer or the template build's disk. A header naming anything else (a
// QEMU that went wrong) is refused rather than read.
Result<> checkChain(const std::vector<fs::path>& chain, const std::vector<fs::path>& roots) {
  for (const auto& element : chain) {
    bool known = std::any_of(roots.begin(), roots.end(),
                             [&](const fs::path& root) { return under(element, root); });
    if (!known) {
      return fail(Errc::kFailedPrecondition,
                  fmt::format("The box's disk chain names {}, which is not one of hutch's files: "
                              "refusing to read it",
                              element.string()));
    }
  }
  return ok();
}

// Where the helper finds what hutchd opened for it: patch's two outputs, the two scratch images,
// then every chain file.
constexpr int kPatchBeforeFd = 3;
constexpr int kPatchAfterFd = 4;
constexpr int kBeforeRawFd = 5;
constexpr int kAfterRawFd = 6;
constexpr int kFirstChainFd = 10;

std::string fdPath(int fd) {
  return "/dev/fd/" + std::to_string(fd);
}

Result<UniqueFd> openReadOnly(const fs::path& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return fail(sysError("Cannot open " + path.string(), errno));
  return fd;
}

// A new file in the scratch directory, owned by the helper's ids (it reopens it through
// /dev/fd/N, which checks the file's own permissions).
Result<UniqueFd> scratchFile(const fs::path& path, std::optional<jail::BoxIds> owner = {}) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return fail(sysError("Cannot create " + path.string(), errno));
  if (owner && ::fchown(fd.get(), owner->uid, owner->gid) != 0) {
    return fail(sysError("Cannot hand " + path.string() + " to the helper", errno));
  }
  return fd;
}

// Runs `helper` with `args` (after the program), stdout into `out_fd`, stderr kept in memory,
// `fds` mapped as given; kills it past kDiffLimit. Blocking: the pool runs it.
Result<> runHelper(const fs::path& helper, const std::vector<std::string>& args, int out_fd,
                   const std::vector<sys::FdMapping>& fds) {
  // In memory: the scratch directory's filesystem may be what is full.
  UniqueFd err(::memfd_create("hutch-diff-stderr", MFD_CLOEXEC));
  if (!err) return fail(sysError("memfd_create", errno));
  sys::SpawnOptions options;
  options.argv = {helper.string()};
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  options.fds = {{out_fd, STDOUT_FILENO}, {err.get(), STDERR_FILENO}};
  options.fds.insert(options.fds.end(), fds.begin(), fds.end());
  options.env = std::vector<std::string>{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"};
  HUTCH_TRY(pid_t pid, sys::spawn(options));
  HUTCH_TRY(UniqueFd pidfd, sys::pidfdOpen(pid));
  pollfd p{pidfd.get(), POLLIN, 0};
  int waited = ::poll(&p, 1, static_cast<int>(std::chrono::milliseconds(kDiffLimit).count()));
  bool late = waited == 0;
  if (late) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::string messages(4096, '\0');
  off_t size = ::lseek(err.get(), 0, SEEK_END);
  ssize_t got = ::pread(err.get(), messages.data(), messages.size(),
                        std::max<off_t>(0, size - static_cast<off_t>(messages.size())));
  messages.resize(got > 0 ? static_cast<size_t>(got) : 0);
  std::string last = messages;
  while (!last.empty() && last.back() == '\n') last.pop_back();
  if (auto nl = last.rfind('\n'); nl != std::string::npos) last = last.substr(nl + 1);
  if (late) {
    return fail(Errc::kTimeout, fmt::format("hutch-diff took longer than {} minutes and was killed",
                                            std::chrono::minutes(kDiffLimit).count()));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return ok();
  if (WIFEXITED(status) && WEXITSTATUS(status) >= 10 &&
      WEXITSTATUS(status) < 10 + static_cast<int>(std::size(kAllErrcs))) {
    return fail(kAllErrcs[WEXITSTATUS(status) - 10], last);
  }
  spdlog::warn("hutch-diff: {}", messages);
  return fail(Errc::kInternal, fmt::format("hutch-diff failed ({}){}{}",
                                           sys::ExitStatus::fromWaitStatus(status).describe(),
                                           last.empty() ? "" : ": ", last));
}

// One run of hutch-diff over `work`'s two views: the chain files and two scratch images opened
// here and passed as descriptors; `tail` after the common arguments (filters, the mode).
Result<> runDiff(const fs::path& helper, const BoxService::DiffWork& work,
                 const std::vector<std::string>& tail, int out_fd,
                 std::vector<sys::FdMapping> fds = {}) {
  std::vector<std::string> args = {"--uid", std::to_string(work.ids.uid), "--gid",
                                   std::to_string(work.ids.gid)};
  std::vector<UniqueFd> held;
  int next = kFirstChainFd;
  for (const auto& [flag, chain] :
       {std::pair{"--before", &work.before}, {"--after", &work.after}}) {
    for (const auto& file : *chain) {
      HUTCH_TRY(UniqueFd fd, openReadOnly(file));
      fds.push_back({fd.get(), next});
      args.push_back(flag);
      args.push_back(fdPath(next++));
      held.push_back(std::move(fd));
    }
  }
  HUTCH_TRY(UniqueFd before_raw, scratchFile(work.dir / "before.raw", work.ids));
  HUTCH_TRY(UniqueFd after_raw, scratchFile(work.dir / "after.raw", work.ids));
  // Their names go at once: the descriptors keep the space until the helper is done.
  ::unlink((work.dir / "before.raw").c_str());
  ::unlink((work.dir / "after.raw").c_str());
  fds.push_back({before_raw.get(), kBeforeRawFd});
  fds.push_back({after_raw.get(), kAfterRawFd});
  args.insert(args.end(),
              {"--before-raw", fdPath(kBeforeRawFd), "--after-raw", fdPath(kAfterRawFd)});
  args.insert(args.end(), tail.begin(), tail.end());
  return runHelper(helper, args, out_fd, fds);
}

Result<std::string> readAll(int fd, size_t max) {
  if (::lseek(fd, 0, SEEK_SET) < 0) return fail(sysError("lseek", errno));
  std::string text;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(sysError("read", errno));
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > max) return fail(Errc::kResourceExhausted, "hutch-diff's answer is too big");
  }
  return text;
}

std::vector<std::string> filterArgs(const BoxService::DiffRequest& request) {
  std::vector<std::string> args;
  for (const auto& pattern : request.ignore) args.insert(args.end(), {"--ignore", pattern});
  if (request.all) args.push_back("--all");
  return args;
}

}  // namespace

void BoxService::auditDiff(const Box& box, const observe::Actor& actor, const std::string& type,
                           nlohmann::json data, const Result<>& outcome) {
  activity_.record(type, actor, observe::subjectOf(box), std::move(data), outcome);
}

BoxService::DiffWork::~DiffWork() {
  if (dir.empty()) return;
  std::error_code ec;
  fs::remove_all(dir, ec);  // symlinks in it are removed, not followed
}

asio::awaitable<Result<std::unique_ptr<BoxService::DiffWork>>> BoxService::prepareDiff(
    const std::string& key, const std::string& from) {
  HUTCH_CO_TRY(Box box, store_.find(key));
  if (box.state == BoxState::kCreating || box.state == BoxState::kStopping) {
    co_return fail(Errc::kFailedPrecondition,
                   fmt::format("Box {} is {}: diff it once it is running, stopped or suspended",
                               box.name, stateName(box.state)));
  }
  if (config_.diff_helper.empty()) {
    co_return fail(Errc::kUnsupported, "hutchd runs without the hutch-diff helper (--diff-helper)");
  }
  fs::path top = boxDir(box.id) / box.disk;
  const std::vector<fs::path> roots = {config_.layers_dir, config_.snapshots_dir,
                                       fs::path(box.image_dir)};
  HUTCH_CO_TRY(std::vector<fs::path> chain, backingChain(top));
  {
    std::vector<fs::path> below(chain.begin() + 1, chain.end());
    HUTCH_CO_TRY_VOID(checkChain(below, roots));
  }
  auto work = std::make_unique<DiffWork>();
  std::vector<fs::path> before;
  if (from.empty() || from == "template") {
    // The template snapshot's layer when the box was restored from one (what every box of the
    // template starts with), else the template build's own disk (a cold-booted box).
    auto snap = std::find_if(chain.begin() + 1, chain.end(),
                             [&](const fs::path& p) { return under(p, config_.snapshots_dir); });
    before.assign(snap == chain.end() ? chain.end() - 1 : snap, chain.end());
    work->from = {{"kind", "template"},
                  {"name", box.config.template_name},
                  {"layer", before.front().filename().string()}};
  } else if (from == "image") {
    before = {chain.back()};
    work->from = {{"kind", "image"}, {"name", box.config.template_name}};
  } else {
    auto snap = store_.findCheckpoint(box.id, from);
    if (!snap) {
      co_return fail(
          Errc::kNotFound,
          fmt::format("Box {} has no checkpoint {}: `hutch checkpoint ls {}` lists them; "
                      "--from also takes 'template' or 'image'",
                      box.name, from, box.name));
    }
    HUTCH_CO_TRY(before, backingChain(snap->layer));
    HUTCH_CO_TRY_VOID(checkChain(before, roots));
    work->from = {{"kind", "checkpoint"}, {"name", snap->name}, {"id", snap->id}};
  }

  work->ids = {kNobody, kNobody};
  if (config_.id_base && box.uid_index >= 0) {
    HUTCH_CO_TRY(work->ids, jail::boxIds(static_cast<uint32_t>(box.uid_index), *config_.id_base));
  }
  work->dir = config_.boxes_dir.parent_path() / "diff" / randomId();
  {
    std::error_code ec;
    fs::create_directories(work->dir.parent_path(), ec);
    if (::mkdir(work->dir.c_str(), 0700) != 0) {
      Error error = sysError("Cannot make " + work->dir.string(), errno);
      work->dir.clear();
      co_return fail(error);
    }
  }
  fs::path copy = work->dir / "top.qcow2";
  auto copy_top = [top, copy, ids = work->ids] { return copyTop(top, copy, ids); };
  if (box.state == BoxState::kPaused) HUTCH_CO_TRY_VOID(co_await wake(box.id));
  HUTCH_CO_TRY(box, store_.find(box.id));
  auto it = runtimes_.find(box.id);
  if (box.state == BoxState::kRunning && it != runtimes_.end() && it->second->vm) {
    // A consistent instant: the guest's page cache written out, the vCPUs stopped (QEMU flushes
    // its qcow2 metadata on stop) for as long as the copy of the top layer takes.
    std::shared_ptr<Runtime> runtime = it->second;
    HUTCH_CO_TRY_VOID(checkNotBusy(box, *runtime, "try again"));
    Busy busy(*runtime);
    co_await flushGuest(runtime->agent, box.name);
    HUTCH_CO_TRY_VOID(co_await runtime->vm->pause());
    Result<> copied = co_await event::offload(pool_, copy_top);
    auto resumed = co_await runtime->vm->resume();
    if (!resumed) spdlog::error("box={} cannot resume: {}", box.id, resumed.error().describe());
    HUTCH_CO_TRY_VOID(copied);
  } else if (box.state == BoxState::kStopped || box.state == BoxState::kSuspended ||
             box.state == BoxState::kFailed) {
    HUTCH_CO_TRY_VOID(co_await event::offload(pool_, copy_top));
  } else {
    co_return fail(Errc::kFailedPrecondition, fmt::format("Box {} is {}: try again in a moment",
                                                          box.name, stateName(box.state)));
  }
  work->before = std::move(before);
  work->after = chain;
  work->after.front() = copy;
  work->box = std::move(box);
  co_return work;
}

asio::awaitable<Result<nlohmann::json>> BoxService::diff(const std::string& key,
                                                         DiffRequest request) {
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& pattern : request.ignore) HUTCH_CO_TRY_VOID(diff::validatePattern(pattern));
  HUTCH_CO_TRY(std::unique_ptr<DiffWork> work, co_await prepareDiff(key, request.from));
  std::vector<std::string> args = filterArgs(request);
  args.insert(args.end(), {"--limit", std::to_string(request.limit), "list"});
  auto run = [helper = config_.diff_helper, args, &work = *work]() -> Result<std::string> {
    HUTCH_TRY(UniqueFd out, scratchFile(work.dir / "out.json"));
    HUTCH_TRY_VOID(runDiff(helper, work, args, out.get()));
    return readAll(out.get(), kMaxListing);
  };
  auto ran = co_await event::offload(pool_, std::move(run));
  if (!ran) {
    publishFailure("diff", observe::subjectOf(work->box), ran.error());
    Result<> outcome = fail(ran.error());
    auditDiff(work->box, request.actor, "box.diff", {{"from", work->from}}, outcome);
    co_return fail(ran.error().withContext("Cannot diff box " + work->box.name));
  }
  nlohmann::json body = nlohmann::json::parse(*ran, nullptr, false);
  if (!body.is_object() || !body.contains("changes")) {
    co_return fail(Errc::kInternal, "hutch-diff answered something that is not its listing");
  }
  const int64_t took = msSince(t0);
  body["from"] = work->from;
  body["box"] = {
      {"id", work->box.id}, {"name", work->box.name}, {"state", stateName(work->box.state)}};
  body["took_ms"] = took;
  uint64_t hidden = 0;
  for (const auto& [rule, n] : body["hidden"].items()) hidden += n.get<uint64_t>();
  publish("box.diffed", work->box,
          {{"from", work->from},
           {"changes", body.value("total", 0)},
           {"hidden", hidden},
           {"duration_ms", took}});
  auditDiff(work->box, request.actor, "box.diff",
            {{"from", work->from}, {"changes", body.value("total", 0)}}, ok());
  co_return body;
}

asio::awaitable<Result<BoxService::DiffPatch>> BoxService::diffPatch(const std::string& key,
                                                                     std::string path,
                                                                     std::string from,
                                                                     observe::Actor actor) {
  if (path.empty() || path.front() != '/' || path.find('\0') != std::string::npos ||
      path.size() > 4096) {
    co_return fail(Errc::kInvalidArgument,
                   "--patch takes an absolute path in the box, like /etc/motd");
  }
  HUTCH_CO_TRY(std::unique_ptr<DiffWork> work, co_await prepareDiff(key, from));
  std::vector<std::string> args = {"patch", path};
  std::vector<std::string> udiff = {"--udiff", std::to_string(work->ids.uid),
                                    std::to_string(work->ids.gid), "a" + path, "b" + path};
  auto run = [helper = config_.diff_helper, args, udiff, &work = *work]() -> Result<DiffPatch> {
    const fs::path& dir = work.dir;
    HUTCH_TRY(UniqueFd out, scratchFile(dir / "out.json"));
    // Both versions, reopened through /dev/fd by diff as the box's ids.
    HUTCH_TRY(UniqueFd before, scratchFile(dir / "before", work.ids));
    HUTCH_TRY(UniqueFd after, scratchFile(dir / "after", work.ids));
    HUTCH_TRY_VOID(runDiff(helper, work, args, out.get(),
                           {{before.get(), kPatchBeforeFd}, {after.get(), kPatchAfterFd}}));
    HUTCH_TRY(std::string meta_text, readAll(out.get(), 1 << 20));
    DiffPatch patch;
    patch.meta = nlohmann::json::parse(meta_text, nullptr, false);
    if (!patch.meta.is_object()) {
      return fail(Errc::kInternal, "hutch-diff answered something that is not JSON");
    }
    const auto& b = patch.meta["before"];
    const auto& a = patch.meta["after"];
    if (b.is_null() && a.is_null()) {
      return fail(Errc::kNotFound, "Nothing at that path, then or now");
    }
    for (const auto* side : {&b, &a}) {
      if (!side->is_null() && side->value("type", "") != "file") {
        return fail(Errc::kInvalidArgument,
                    fmt::format("That path is a {} {}: --patch shows regular files",
                                side->value("type", "?"), side == &b ? "before" : "now"));
      }
    }
    HUTCH_TRY(UniqueFd text, scratchFile(dir / "patch"));
    if (::lseek(before.get(), 0, SEEK_SET) < 0 || ::lseek(after.get(), 0, SEEK_SET) < 0) {
      return fail(sysError("lseek", errno));
    }
    std::vector<std::string> labelled = udiff;
    if (b.is_null()) labelled[3] = "/dev/null";
    if (a.is_null()) labelled[4] = "/dev/null";
    // diff exits 1 when the files differ: that is this helper's 0 as well (main.cc).
    HUTCH_TRY_VOID(runHelper(helper, labelled, text.get(),
                             {{before.get(), kPatchBeforeFd}, {after.get(), kPatchAfterFd}}));
    HUTCH_TRY(patch.text, readAll(text.get(), 16 << 20));
    return patch;
  };
  auto ran = co_await event::offload(pool_, std::move(run));
  Result<> outcome = ok();
  if (!ran) outcome = fail(ran.error());
  auditDiff(work->box, actor, "box.diff_patch", {{"from", work->from}, {"path", path}}, outcome);
  if (!ran) {
    co_return fail(ran.error().withContext("Cannot diff " + path + " in " + work->box.name));
  }
  ran->meta["from"] = work->from;
  co_return std::move(*ran);
}

asio::awaitable<Result<UniqueFd>> BoxService::diffExport(const std::string& key,
                                                         DiffRequest request) {
  for (const auto& pattern : request.ignore) HUTCH_CO_TRY_VOID(diff::validatePattern(pattern));
  HUTCH_CO_TRY(std::unique_ptr<DiffWork> work, co_await prepareDiff(key, request.from));
  std::vector<std::string> args = filterArgs(request);
  args.push_back("export");
  auto run = [helper = config_.diff_helper, args, &work = *work]() -> Result<UniqueFd> {
    HUTCH_TRY(UniqueFd out, scratchFile(work.dir / "export.tar"));
    HUTCH_TRY_VOID(runDiff(helper, work, args, out.get()));
    if (::lseek(out.get(), 0, SEEK_SET) < 0) return fail(sysError("lseek", errno));
    return out;  // its name goes with the work directory; the descriptor keeps the file
  };
  auto ran = co_await event::offload(pool_, std::move(run));
  Result<> outcome = ok();
  if (!ran) outcome = fail(ran.error());
  auditDiff(work->box, request.actor, "box.export", {{"from", work->from}}, outcome);
  if (!ran) co_return fail(ran.error().withContext("Cannot export box " + work->box.name));
  co_return std::move(*ran);
}

}  // namespace hutch::box

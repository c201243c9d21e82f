#include "cli/commands/cp.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <thread>
#include <vector>

#include "api/json_model.h"
#include "cli/commands/commands.h"
#include "cli/copy_plan.h"
#include "cli/exec_io.h"
#include "cli/progress.h"
#include "cli/tar_stream.h"

namespace hutch::cli {

namespace {

using boost::beast::http::verb;

// tar and stat run as root in the box: cp reads and writes anywhere, like docker cp, and sets
// owners explicitly.
constexpr const char* kRoot = "root";
// 256 KiB records: tar in the box reads and writes the stream in large pieces, each one exec
// frame, instead of 10 KiB ones (every frame costs a guest wakeup, dear under TCG).
constexpr const char* kBlocking = "--blocking-factor=512";

// Prints lstat and stat (followed) of each argument, one line each: "<mode-hex> <uid> <gid>"
// twice, "- - -" for a missing path. Paths are arguments, never part of the script.
constexpr const char* kProbeScript =
    "for p; do "
    "l=$(stat -c '%f %u %g' -- \"$p\" 2>/dev/null) || l='- - -'; "
    "f=$(stat -L -c '%f %u %g' -- \"$p\" 2>/dev/null) || f='- - -'; "
    "echo \"$l $f\"; "
    "done";

// An anonymous file that collects a command's stderr.
Result<UniqueFd> captureFile() {
  UniqueFd fd(::memfd_create("hutch-cp", MFD_CLOEXEC));
  if (!fd) return fail(sysError("Cannot create a memfd", errno));
  return fd;
}

std::string readCapture(int fd) {
  constexpr size_t kMax = 64 * 1024;
  std::string text(kMax, '\0');
  ssize_t n = ::pread(fd, text.data(), text.size(), 0);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

// A pipe between the archive and the exec stream, as large as an unprivileged process may make
// it (1 MiB by default): reads of it then fill whole 256 KiB frames.
Result<std::pair<UniqueFd, UniqueFd>> makePipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return fail(sysError("Cannot create a pipe", errno));
  ::fcntl(fds[1], F_SETPIPE_SZ, 1 << 20);  // best effort: a smaller pipe is only slower
  return std::pair<UniqueFd, UniqueFd>(UniqueFd(fds[0]), UniqueFd(fds[1]));
}

// The box exists and runs; otherwise the API's not_found, or failed_precondition for cp.
Result<> checkBox(const ApiClient& client, const std::string& box) {
  HUTCH_TRY(nlohmann::json answer, client.call(verb::get, "/v1/boxes/" + box));
  HUTCH_TRY(box::Box b, api::boxFromJson(answer));
  // A paused box is woken by the copy's exec.
  if (b.state != box::BoxState::kRunning && b.state != box::BoxState::kPaused) {
    return fail(Errc::kFailedPrecondition,
                fmt::format("Box {} is {}; cp needs a running box", box, box::stateName(b.state)));
  }
  return ok();
}

Result<std::vector<RemoteStat>> probeBox(const ApiClient& client, const std::string& box,
                                         const std::vector<std::string>& paths) {
  std::vector<std::string> argv{"sh", "-c", kProbeScript, "sh"};
  argv.insert(argv.end(), paths.begin(), paths.end());
  HUTCH_TRY(UniqueFd out, captureFile());
  HUTCH_TRY(UniqueFd err, captureFile());
  HUTCH_TRY(int code, runExecFds(client, box, argv, kRoot, {-1, out.get(), err.get()}));
  if (code != 0) {
    return fail(Errc::kInternal, fmt::format("Cannot look at the paths in box {} (exit {}): {}",
                                             box, code, readCapture(err.get())));
  }
  std::string text = readCapture(out.get());
  std::vector<RemoteStat> stats;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    HUTCH_TRY(RemoteStat st, parseRemoteStat(std::string_view(text).substr(start, end - start)));
    stats.push_back(st);
    start = end + 1;
  }
  if (stats.size() != paths.size()) {
    return fail(Errc::kProtocol,
                fmt::format("Unexpected answer from stat in box {}: '{}'", box, text));
  }
  return stats;
}

// A relative path in the box is relative to where `hutch exec BOX` runs commands: the working
// directory of the box's default user (asked for only when needed).
Result<std::string> absoluteBoxPath(const ApiClient& client, const std::string& box,
                                    const std::string& path) {
  if (!path.empty() && path.front() == '/') return path;
  HUTCH_TRY(UniqueFd out, captureFile());
  HUTCH_TRY(UniqueFd err, captureFile());
  HUTCH_TRY(int code, runExecFds(client, box, {"pwd"}, "", {-1, out.get(), err.get()}));
  std::string cwd = readCapture(out.get());
  if (code != 0 || cwd.empty() || cwd.front() != '/') {
    return fail(Errc::kInternal, fmt::format("Cannot find the working directory in box {}: {}", box,
                                             readCapture(err.get())));
  }
  return cwd == "/" ? "/" + path : cwd + "/" + path;
}

// stat() or lstat() of a local path as a FileKind; a missing path (or one under a file) is
// kMissing, other failures are errors.
Result<FileKind> localKind(const std::string& path, bool follow) {
  struct stat st {};
  if ((follow ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st)) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return FileKind::kMissing;
    return fail(sysError(fmt::format("Cannot look at {}", path), errno));
  }
  return S_ISDIR(st.st_mode) ? FileKind::kDirectory : FileKind::kOther;
}

Error tarFailed(const std::string& box, int code, const std::string& output) {
  return Error(Errc::kInternal, fmt::format("tar in box {} failed (exit {}){}{}", box, code,
                                            output.empty() ? "" : ":\n", output));
}

void noteOutput(Progress& progress, const std::string& box, const std::string& output) {
  if (!output.empty()) progress.note(fmt::format("hutch: tar in box {}: {}", box, output));
}

TarCallbacks callbacksFor(Progress& progress) {
  return {[&progress](size_t n) { progress.add(n); },
          [&progress](const std::string& m) { progress.note("hutch: warning: " + m); }};
}

Result<> copyToBox(const ApiClient& client, const std::string& box, const std::string& src,
                   const std::string& box_dst, const CopyOptions& options, Progress& progress) {
  HUTCH_TRY(FileKind source_kind, localKind(src, false));
  if (source_kind == FileKind::kMissing) {
    return fail(Errc::kNotFound, fmt::format("{}: no such file or directory", src));
  }
  HUTCH_TRY(std::string dst, absoluteBoxPath(client, box, box_dst));
  HUTCH_TRY(std::vector<RemoteStat> stats, probeBox(client, box, {dst, parentPath(dst)}));
  CopyRequest request{src,
                      source_kind,
                      dst,
                      kindOfMode(stats[0].mode),
                      kindOfMode(stats[1].mode),
                      "",
                      fmt::format(" in box {}", box)};
  HUTCH_TRY(CopyPlan plan, planCopy(request));
  TarOwner owner;
  if (!options.archive) {
    // The directory that receives the copy: the destination itself, or its parent.
    const RemoteStat& dir = request.destination_kind == FileKind::kDirectory ? stats[0] : stats[1];
    owner = {dir.uid, dir.gid};
  }

  HUTCH_TRY(auto pipe, makePipe());
  HUTCH_TRY(UniqueFd output, captureFile());
  TarCallbacks callbacks = callbacksFor(progress);
  Result<> produced = ok();
  std::thread producer([&, wr = std::move(pipe.second)]() mutable {
    produced = writeTar(plan, wr.get(), owner, callbacks);
    wr.reset();  // EOF for the box's tar
  });
  std::vector<std::string> argv{"tar",
                                "-x",
                                "-f",
                                "-",
                                kBlocking,
                                "--numeric-owner",
                                "--same-owner",
                                "--same-permissions",
                                "--warning=no-unknown-keyword",
                                "--warning=no-timestamp",
                                "--directory=" + plan.target_dir};
  Result<int> code =
      runExecFds(client, box, argv, kRoot, {pipe.first.get(), output.get(), output.get()});
  pipe.first.reset();  // a producer still writing gets EPIPE instead of waiting forever
  producer.join();

  std::string tar_output = readCapture(output.get());
  // A local failure is the cause unless it only saw the box's side go away.
  if (!produced && produced.error().sysErrno() != EPIPE) return fail(produced.error());
  if (!code) return fail(code.error());
  if (*code != 0) return fail(tarFailed(box, *code, tar_output));
  if (!produced) return fail(produced.error());
  noteOutput(progress, box, tar_output);
  return ok();
}

Result<> copyFromBox(const ApiClient& client, const std::string& box, const std::string& box_src,
                     const std::string& dst, const CopyOptions& options, Progress& progress) {
  HUTCH_TRY(FileKind destination_kind, localKind(dst, true));
  HUTCH_TRY(FileKind parent_kind, localKind(parentPath(dst), true));
  HUTCH_TRY(std::string src, absoluteBoxPath(client, box, box_src));
  HUTCH_TRY(std::vector<RemoteStat> stats, probeBox(client, box, {src}));
  CopyRequest request{src,         kindOfMode(stats[0].lmode),     dst, destination_kind,
                      parent_kind, fmt::format(" in box {}", box), ""};
  HUTCH_TRY(CopyPlan plan, planCopy(request));

  HUTCH_TRY(auto pipe, makePipe());
  HUTCH_TRY(UniqueFd output, captureFile());
  TarCallbacks callbacks = callbacksFor(progress);
  Result<> extracted = ok();
  std::thread extractor([&, rd = std::move(pipe.first)]() mutable {
    extracted = extractTar(plan, rd.get(), options.archive, callbacks);
    rd.reset();  // the box's output now fails with EPIPE instead of filling the pipe
  });
  std::vector<std::string> argv{"tar",
                                "-c",
                                "-f",
                                "-",
                                kBlocking,
                                "--numeric-owner",
                                "--format=posix",
                                "--pax-option=delete=atime,delete=ctime",
                                "--directory=" + plan.source_dir,
                                "--",
                                plan.source_name};
  Result<int> code = runExecFds(client, box, argv, kRoot, {-1, pipe.second.get(), output.get()});
  pipe.second.reset();  // EOF for the extractor
  extractor.join();

  std::string tar_output = readCapture(output.get());
  if (code && *code != 0) return fail(tarFailed(box, *code, tar_output));
  if (!extracted) {
    // A broken pipe only says the extractor stopped; its own error says why.
    if (!code && code.error().sysErrno() != EPIPE) return fail(code.error());
    return fail(extracted.error());
  }
  if (!code) return fail(code.error());
  noteOutput(progress, box, tar_output);
  return ok();
}

}  // namespace

int cmdCp(const ApiClient& client, const Output& out, const CopyOptions& options) {
  // Archives go through pipes: a reader that stops is an EPIPE handled where it happens.
  std::signal(SIGPIPE, SIG_IGN);
  auto src = parseCopyEndpoint(options.source);
  if (!src) return reportError(out, src.error());
  auto dst = parseCopyEndpoint(options.destination);
  if (!dst) return reportError(out, dst.error());
  if (src->box.empty() == dst->box.empty()) {
    return reportError(out, Error(Errc::kInvalidArgument,
                                  fmt::format("{}: give BOX:PATH on exactly one side, e.g. 'hutch "
                                              "cp notes.txt dev:/tmp/' or 'hutch cp "
                                              "dev:/etc/hosts .'",
                                              src->box.empty() ? "Neither SRC nor DST names a box"
                                                               : "Both SRC and DST name a box")));
  }
  bool to_box = !dst->box.empty();
  const std::string& box = to_box ? dst->box : src->box;
  if (auto checked = checkBox(client, box); !checked) return reportError(out, checked.error());

  bool show = !options.quiet && (options.progress || ::isatty(STDERR_FILENO) == 1);
  Progress progress(show ? stderr : nullptr,
                    to_box ? fmt::format("Copying to {}:{}", box, dst->path)
                           : fmt::format("Copying from {}:{}", box, src->path));
  Result<> copied = to_box ? copyToBox(client, box, src->path, dst->path, options, progress)
                           : copyFromBox(client, box, src->path, dst->path, options, progress);
  if (!copied) {
    progress.clear();  // the error goes on a line of its own
    return reportError(out, copied.error());
  }
  progress.finish();
  if (out.json) {
    printJson(nlohmann::json{{"source", options.source},
                             {"destination", options.destination},
                             {"bytes", progress.bytes()},
                             {"seconds", progress.seconds()}});
  }
  return 0;
}

}  // namespace hutch::cli

// TemplateBuilder::copyItems: a COPY or ADD step's files, directories, symlinks and archives put
// into the build box through its agent (template_builder.h).
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <optional>
#include <utility>

#include "base/unique_fd.h"
#include "box/template_builder.h"
#include "guest/exec_session.h"
#include "guest/file_writer.h"

namespace hutch::box {

namespace asio = boost::asio;
namespace fs = std::filesystem;

namespace {

// "user[:group]" of a COPY --chown, as the agent takes owner and group.
std::pair<std::string, std::string> splitChown(const std::string& chown) {
  const size_t colon = chown.find(':');
  if (colon == std::string::npos) return {chown, ""};
  return {chown.substr(0, colon), chown.substr(colon + 1)};
}

// Runs `argv` as root in the box and waits for it: what it wrote to stdout and stderr when it
// fails (or could not start), nullopt when it exits 0.
asio::awaitable<std::optional<std::string>> failureOf(BoxAgent& agent,
                                                      std::vector<std::string> argv) {
  proto::ExecRequest request;
  request.argv = std::move(argv);
  request.user = "root";
  auto session = co_await agent.exec(request);
  if (!session) co_return session.error().message();
  std::string said;
  for (;;) {
    auto event = co_await (*session)->next();
    if (!event) co_return said.empty() ? event.error().message() : said;
    if (event->kind == guest::ExecEvent::Kind::kExit) {
      if (event->exit_status.code == 0) co_return std::nullopt;
      if (!said.empty()) co_return said;
      const proto::ExitStatus& status = event->exit_status;
      co_return status.code ? fmt::format("exit status {}", *status.code)
                            : fmt::format("killed by signal {}", status.signal.value_or(0));
    }
    if (said.size() < 4096) said += event->data;
  }
}

// Writes the host file `source` to `target` in the box; its bytes.
asio::awaitable<Result<uint64_t>> sendFile(BoxAgent& agent, const fs::path& source,
                                           proto::FileWriteRequest write) {
  UniqueFd fd(::open(source.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) co_return fail(sysError("Cannot read " + source.string(), errno));
  const std::string target = write.path;
  auto writer = co_await agent.openWrite(write);
  if (!writer) co_return fail(writer.error().withContext("Cannot write " + target));
  std::vector<char> buffer(1 << 16);
  uint64_t bytes = 0;
  for (;;) {
    ssize_t n = ::read(fd.get(), buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      (*writer)->abort();
      co_return fail(sysError("Cannot read " + source.string(), errno));
    }
    if (n == 0) break;
    auto sent = co_await (*writer)->write(std::string_view(buffer.data(), static_cast<size_t>(n)));
    if (!sent) co_return fail(sent.error().withContext("Cannot write " + target));
    bytes += static_cast<uint64_t>(n);
  }
  auto done = co_await (*writer)->finish();
  if (!done) co_return fail(done.error().withContext("Cannot write " + target));
  co_return bytes;
}

}  // namespace

asio::awaitable<Result<>> TemplateBuilder::copyItems(BoxAgent& agent, const BuildStep& step,
                                                     const std::string& cwd, int index,
                                                     const BuildProgress& say) {
  auto [owner, group] = splitChown(step.chown);
  std::vector<std::string> chown_dirs;
  uint64_t bytes = 0;
  size_t files = 0;
  size_t archives = 0;
  for (const CopyItem& item : step.items) {
    // Relative targets are from WORKDIR, as Docker takes them.
    const std::string target = item.target.starts_with("/")
                                   ? item.target
                                   : (fs::path(cwd) / item.target).lexically_normal().string();
    switch (item.type) {
      case CopyItem::Type::kDirectory: {
        proto::FileMkdirRequest mkdir;
        mkdir.path = target;
        mkdir.user = "root";
        mkdir.mode = item.mode & 07777;
        mkdir.parents = true;
        auto made = co_await agent.makeDir(mkdir);
        if (!made) co_return fail(made.error().withContext("Cannot make " + target));
        if (!owner.empty()) chown_dirs.push_back(target);
        break;
      }
      case CopyItem::Type::kFile: {
        proto::FileWriteRequest write;
        write.path = target;
        write.user = "root";
        write.mode = item.mode & 07777;
        // Docker's default owner is 0:0 by number: an image may have no /etc/group (scratch).
        write.owner = owner.empty() ? "0" : owner;
        write.group = group.empty() ? (owner.empty() ? "0" : "") : group;
        write.parents = true;
        HUTCH_CO_TRY(uint64_t sent, co_await sendFile(agent, item.source, write));
        bytes += sent;
        ++files;
        break;
      }
      case CopyItem::Type::kSymlink: {
        // The agent makes no symlinks: ln does, where the image has it.
        std::vector<std::string> ln = {"ln", "-sfn", item.link, target};
        auto failed = co_await failureOf(agent, std::move(ln));
        if (failed) {
          co_return fail(Errc::kFailedPrecondition,
                         fmt::format("Cannot make the symlink {} -> {}: the image needs ln for "
                                     "a COPY of symlinks: {}",
                                     target, item.link, *failed));
        }
        if (!owner.empty()) chown_dirs.push_back(target);
        break;
      }
      case CopyItem::Type::kArchive: {
        // Into the box first, then unpacked there by its tar (which reads gzip, bzip2 and xz
        // where the image has them), the archive removed whatever happens.
        const std::string staged = fmt::format("/tmp/.hutch-add-{}-{}", index, archives++);
        proto::FileWriteRequest write;
        write.path = staged;
        write.user = "root";
        write.mode = 0600;
        write.owner = "0";
        write.group = "0";
        write.parents = true;
        HUTCH_CO_TRY(uint64_t sent, co_await sendFile(agent, item.source, write));
        bytes += sent;
        proto::FileMkdirRequest mkdir;
        mkdir.path = target;
        mkdir.user = "root";
        mkdir.mode = 0755;
        mkdir.parents = true;
        auto made = co_await agent.makeDir(mkdir);
        if (!made) co_return fail(made.error().withContext("Cannot make " + target));
        std::vector<std::string> tar = {"tar", "-xf", staged, "-C", target};
        auto failed = co_await failureOf(agent, std::move(tar));
        std::vector<std::string> rm = {"rm", "-f", staged};
        co_await failureOf(agent, std::move(rm));
        if (failed) {
          co_return fail(Errc::kFailedPrecondition,
                         fmt::format("Cannot unpack {} into {}: the image needs tar (and the "
                                     "archive's decompressor) for an ADD of an archive: {}",
                                     item.source.filename().string(), target, *failed));
        }
        ++files;
        break;
      }
    }
  }
  if (!chown_dirs.empty()) {
    std::vector<std::string> argv = {"chown", "-h", step.chown};
    argv.insert(argv.end(), chown_dirs.begin(), chown_dirs.end());
    auto failed = co_await failureOf(agent, std::move(argv));
    if (failed) {
      co_return fail(Errc::kFailedPrecondition,
                     fmt::format("COPY --chown={} of directories needs chown in the image: {}",
                                 step.chown, *failed));
    }
  }
  say({.step = index, .message = fmt::format("{} files, {} bytes", files, bytes)});
  co_return ok();
}

}  // namespace hutch::box

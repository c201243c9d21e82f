// TemplateBuilder::fetch: the files a COPY --from takes out of a stage's box, through its agent,
// into the build's workspace on the host (template_builder.h).
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include "base/unique_fd.h"
#include "box/template_builder.h"
#include "guest/file_reader.h"

namespace hutch::box {

namespace asio = boost::asio;
namespace fs = std::filesystem;

asio::awaitable<Result<std::vector<CopyItem>>> TemplateBuilder::fetch(
    BoxAgent& agent, const BuildStep::CopyFrom& from, const fs::path& into) {
  std::vector<CopyItem> items;
  std::error_code ec;
  fs::create_directories(into, ec);
  if (ec) co_return fail(Errc::kInternal, "Cannot create " + into.string() + ": " + ec.message());
  size_t files = 0;
  const bool dest_is_dir = from.dest.ends_with('/') || from.sources.size() > 1;
  auto join = [](std::string dir, const std::string& rel) {
    while (dir.size() > 1 && dir.ends_with('/')) dir.pop_back();
    if (rel.empty()) return dir;
    return dir == "/" ? "/" + rel : dir + "/" + rel;
  };
  // One regular file of the stage to the host, for the copy.
  auto pull = [&](const std::string& path) -> asio::awaitable<Result<fs::path>> {
    fs::path host = into / std::to_string(files++);
    proto::FileReadRequest read;
    read.path = path;
    read.user = "root";
    auto reader = co_await agent.openRead(read);
    if (!reader) co_return fail(reader.error().withContext("Cannot read " + path));
    UniqueFd out(::open(host.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!out) co_return fail(sysError("Cannot create " + host.string(), errno));
    for (;;) {
      auto chunk = co_await (*reader)->next();
      if (!chunk) co_return fail(chunk.error().withContext("Cannot read " + path));
      if (!*chunk) break;
      std::string_view rest = **chunk;
      while (!rest.empty()) {
        ssize_t n = ::write(out.get(), rest.data(), rest.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) co_return fail(sysError("Cannot write " + host.string(), errno));
        rest.remove_prefix(static_cast<size_t>(n));
      }
    }
    co_return host;
  };
  for (const std::string& source : from.sources) {
    if (source.find_first_of("*?[") != std::string::npos) {
      co_return fail(Errc::kUnsupported,
                     fmt::format("COPY --from with a wildcard ({}) is not supported: name the "
                                 "file or directory",
                                 source));
    }
    proto::FileStatRequest stat;
    stat.path = source;
    stat.user = "root";
    stat.follow = true;  // as Docker, a symlink named as the source is followed
    auto info = co_await agent.stat(stat);
    if (!info) {
      co_return fail(info.error().withContext(fmt::format("The stage has no {}", source)));
    }
    if (info->type == proto::FileType::kFile) {
      HUTCH_CO_TRY(fs::path host, co_await pull(info->path));
      const std::string name = fs::path(info->path).filename().string();
      items.push_back({.type = CopyItem::Type::kFile,
                       .source = host,
                       .target = dest_is_dir ? join(from.dest, name) : join(from.dest, ""),
                       .mode = from.chmod.value_or(info->mode)});
      continue;
    }
    if (info->type != proto::FileType::kDir) {
      co_return fail(Errc::kInvalidArgument,
                     fmt::format("{} in the stage is neither a file nor a directory", source));
    }
    // A directory: its contents, into the destination directory.
    items.push_back(
        {.type = CopyItem::Type::kDirectory, .target = join(from.dest, ""), .mode = 0755});
    proto::FileListRequest list;
    list.path = info->path;
    list.user = "root";
    list.depth = 32;
    list.max_entries = 100000;
    auto listed = co_await agent.listDir(list);
    if (!listed) co_return fail(listed.error().withContext("Cannot list " + source));
    if (listed->truncated) {
      co_return fail(Errc::kResourceExhausted,
                     fmt::format("{} in the stage holds more than {} entries or is deeper than "
                                 "{} levels; copy less",
                                 source, list.max_entries, list.depth));
    }
    const std::string prefix = info->path == "/" ? "/" : info->path + "/";
    for (const proto::FileInfo& entry : listed->entries) {
      if (!entry.path.starts_with(prefix)) continue;
      const std::string rel = entry.path.substr(prefix.size());
      const std::string target = join(from.dest, rel);
      switch (entry.type) {
        case proto::FileType::kDir:
          items.push_back({.type = CopyItem::Type::kDirectory,
                           .target = target,
                           .mode = from.chmod.value_or(entry.mode)});
          break;
        case proto::FileType::kFile: {
          HUTCH_CO_TRY(fs::path host, co_await pull(entry.path));
          items.push_back({.type = CopyItem::Type::kFile,
                           .source = host,
                           .target = target,
                           .mode = from.chmod.value_or(entry.mode)});
          break;
        }
        case proto::FileType::kSymlink:
          items.push_back(
              {.type = CopyItem::Type::kSymlink, .target = target, .link = entry.symlink_target});
          break;
        case proto::FileType::kOther: break;  // sockets, FIFOs, devices: a COPY carries none
      }
    }
  }
  co_return items;
}

}  // namespace hutch::box

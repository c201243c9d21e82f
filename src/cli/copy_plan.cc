#include "cli/copy_plan.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <charconv>
#include <vector>

namespace hutch::cli {

namespace {

std::string_view stripTrailingSlashes(std::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  return path;
}

bool endsWithSlash(std::string_view path) {
  return !path.empty() && path.back() == '/';
}

std::vector<std::string_view> splitComponents(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view part = path.substr(start, end - start);
    if (!part.empty() && part != ".") parts.push_back(part);
    start = end + 1;
  }
  return parts;
}

std::string joinComponents(const std::vector<std::string_view>& parts, size_t from) {
  std::string out;
  for (size_t i = from; i < parts.size(); ++i) {
    if (!out.empty()) out += '/';
    out += parts[i];
  }
  return out;
}

}  // namespace

Result<CopyEndpoint> parseCopyEndpoint(std::string_view text) {
  if (text.empty()) return fail(Errc::kInvalidArgument, "Empty path: name a file or directory");
  size_t colon = text.find(':');
  size_t slash = text.find('/');
  if (colon == std::string_view::npos || colon == 0 ||
      (slash != std::string_view::npos && slash < colon)) {
    return CopyEndpoint{"", std::string(text)};
  }
  CopyEndpoint endpoint{std::string(text.substr(0, colon)), std::string(text.substr(colon + 1))};
  if (endpoint.path.empty()) {
    return fail(Errc::kInvalidArgument,
                fmt::format("Give a path in box {0} after '{0}:', e.g. {0}:/root", endpoint.box));
  }
  return endpoint;
}

std::string parentPath(std::string_view path) {
  path = stripTrailingSlashes(path);
  size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return ".";
  std::string_view parent = path.substr(0, slash);
  while (!parent.empty() && parent.back() == '/') parent.remove_suffix(1);
  return parent.empty() ? "/" : std::string(parent);
}

std::string baseName(std::string_view path) {
  path = stripTrailingSlashes(path);
  if (path == "/") return "";
  size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

Result<CopyPlan> planCopy(const CopyRequest& r) {
  const std::string& src = r.source;
  const std::string& dst = r.destination;
  std::string src_base = baseName(src);
  // "dir/." (and "." or "/") name a directory's contents rather than the directory.
  bool contents = src_base == "." || src_base.empty();
  if (src_base == "..") {
    return fail(Errc::kInvalidArgument,
                fmt::format("{}{}: name the directory itself instead of ending in '..'", src,
                            r.source_where));
  }
  if (r.source_kind == FileKind::kMissing) {
    return fail(Errc::kNotFound,
                fmt::format("{}: no such file or directory{}", src, r.source_where));
  }
  if ((contents || endsWithSlash(src)) && r.source_kind != FileKind::kDirectory) {
    return fail(Errc::kInvalidArgument, fmt::format("{}: not a directory{}", src, r.source_where));
  }

  // A directory is archived from inside ("."), which also follows a symlink named "link/".
  bool directory = r.source_kind == FileKind::kDirectory;
  CopyPlan plan{directory ? src : parentPath(src), directory ? std::string(".") : src_base, "", ""};

  switch (r.destination_kind) {
    case FileKind::kDirectory:
      plan.target_dir = dst;
      plan.target_name = contents ? "." : src_base;
      return plan;
    case FileKind::kOther:
      if (endsWithSlash(dst)) {
        return fail(Errc::kInvalidArgument,
                    fmt::format("{}: not a directory{}", dst, r.destination_where));
      }
      if (r.source_kind == FileKind::kDirectory) {
        return fail(Errc::kInvalidArgument,
                    fmt::format("Cannot copy the directory {}{} onto the file {}{}", src,
                                r.source_where, dst, r.destination_where));
      }
      break;
    case FileKind::kMissing:
      if (endsWithSlash(dst) && r.source_kind != FileKind::kDirectory) {
        return fail(Errc::kNotFound,
                    fmt::format("{}: no such directory{}", dst, r.destination_where));
      }
      if (r.destination_parent == FileKind::kMissing) {
        return fail(Errc::kNotFound,
                    fmt::format("{}: no such directory{}", parentPath(dst), r.destination_where));
      }
      if (r.destination_parent != FileKind::kDirectory) {
        return fail(Errc::kInvalidArgument,
                    fmt::format("{}: not a directory{}", parentPath(dst), r.destination_where));
      }
      break;
  }
  plan.target_dir = parentPath(dst);
  plan.target_name = baseName(dst);
  if (plan.target_name.empty() || plan.target_name == "." || plan.target_name == "..") {
    return fail(Errc::kInvalidArgument,
                fmt::format("{}{}: not a name to copy to", dst, r.destination_where));
  }
  return plan;
}

Result<std::optional<std::string>> renameEntry(std::string_view entry, const CopyPlan& plan) {
  auto refuse = [&](std::string_view why) {
    return fail(Errc::kProtocol, fmt::format("Refusing archive entry '{}': {}", entry, why));
  };
  if (!entry.empty() && entry.front() == '/') return refuse("absolute name");
  std::vector<std::string_view> parts = splitComponents(entry);
  for (std::string_view part : parts) {
    if (part == "..") return refuse("'..' in the name");
  }
  size_t skip = 0;
  if (plan.source_name != ".") {
    if (parts.empty() || parts[0] != plan.source_name) {
      return refuse(fmt::format("outside '{}'", plan.source_name));
    }
    skip = 1;
  }
  std::string rest = joinComponents(parts, skip);
  if (rest.empty()) {
    if (plan.target_name == ".") return std::optional<std::string>();
    return std::optional<std::string>(plan.target_name);
  }
  if (plan.target_name == ".") return std::optional<std::string>(rest);
  return std::optional<std::string>(plan.target_name + "/" + rest);
}

FileKind kindOfMode(std::optional<uint32_t> mode) {
  if (!mode) return FileKind::kMissing;
  return S_ISDIR(*mode) ? FileKind::kDirectory : FileKind::kOther;
}

Result<RemoteStat> parseRemoteStat(std::string_view line) {
  auto bad = [&] {
    return fail(Errc::kProtocol, fmt::format("Unexpected answer from stat in the box: '{}'", line));
  };
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (start < line.size()) {
    size_t end = line.find(' ', start);
    if (end == std::string_view::npos) end = line.size();
    if (end > start) fields.push_back(line.substr(start, end - start));
    start = end + 1;
  }
  if (fields.size() != 6) return bad();
  auto number = [](std::string_view text, int base) -> std::optional<uint32_t> {
    uint32_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, base);
    if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return value;
  };
  RemoteStat st;
  if (fields[0] != "-") {
    st.lmode = number(fields[0], 16);
    if (!st.lmode) return bad();
  }
  if (fields[3] != "-") {
    st.mode = number(fields[3], 16);
    auto uid = number(fields[4], 10);
    auto gid = number(fields[5], 10);
    if (!st.mode || !uid || !gid) return bad();
    st.uid = *uid;
    st.gid = *gid;
  }
  return st;
}

}  // namespace hutch::cli

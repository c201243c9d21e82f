#include "build/dockerignore.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "base/unique_fd.h"

namespace hutch::build {

namespace {

constexpr size_t kMaxIgnoreLineBytes = size_t{64} << 10;

bool isSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}
std::string_view trim(std::string_view s) {
  while (!s.empty() && isSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && isSpace(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string cleanPath(std::string_view path) {
  const bool rooted = !path.empty() && path.front() == '/';
  std::vector<std::string_view> parts;
  size_t i = 0;
  while (i <= path.size()) {
    size_t slash = path.find('/', i);
    if (slash == std::string_view::npos) slash = path.size();
    const std::string_view part = path.substr(i, slash - i);
    i = slash + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (!parts.empty() && parts.back() != "..") {
        parts.pop_back();
      } else if (!rooted) {
        parts.push_back(part);
      }
      continue;
    }
    parts.push_back(part);
  }
  std::string out = rooted ? "/" : "";
  for (size_t k = 0; k < parts.size(); ++k) {
    if (k > 0) out.push_back('/');
    out.append(parts[k]);
  }
  if (out.empty()) return ".";
  return out;
}

Result<DockerIgnore> DockerIgnore::parse(std::string_view text) {
  if (text.size() > kMaxDockerignoreBytes) {
    return fail(Errc::kInvalidArgument,
                fmt::format(".dockerignore is {} bytes, more than the {} a build accepts",
                            text.size(), kMaxDockerignoreBytes));
  }
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
  DockerIgnore out;
  int line_no = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(start, nl - start);
    start = nl + 1;
    ++line_no;
    if (line.size() > kMaxIgnoreLineBytes) {
      return fail(Errc::kInvalidArgument,
                  fmt::format(".dockerignore line {} is longer than {} bytes", line_no,
                              kMaxIgnoreLineBytes));
    }
    if (line.starts_with('#')) continue;
    std::string_view p = trim(line);
    if (p.empty()) continue;
    Pattern pattern;
    pattern.line = line_no;
    if (p.front() == '!') {
      pattern.exception = true;
      p = trim(p.substr(1));
      if (p.empty()) {
        return fail(Errc::kInvalidArgument,
                    fmt::format(".dockerignore line {}: '!' needs a pattern after it (!keep.txt "
                                "includes keep.txt again)",
                                line_no));
      }
    }
    std::string cleaned = cleanPath(p);
    if (cleaned.size() > 1 && cleaned.front() == '/') cleaned.erase(0, 1);
    auto glob = Glob::compile(cleaned, Glob::Syntax::kDockerignore);
    if (!glob) {
      return fail(Errc::kInvalidArgument,
                  fmt::format(".dockerignore line {}: {}", line_no, glob.error().message()));
    }
    if (out.patterns_.size() >= kMaxDockerignorePatterns) {
      return fail(Errc::kInvalidArgument,
                  fmt::format(".dockerignore has more than {} patterns; use wildcards",
                              kMaxDockerignorePatterns));
    }
    pattern.text = std::move(cleaned);
    out.has_exceptions_ = out.has_exceptions_ || pattern.exception;
    out.patterns_.push_back(std::move(pattern));
    out.globs_.push_back(std::move(*glob));
  }
  return out;
}

Result<DockerIgnore> DockerIgnore::load(const std::filesystem::path& context_dir) {
  const std::filesystem::path path = context_dir / ".dockerignore";
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) {
    if (errno == ENOENT) return DockerIgnore();
    return fail(sysError(fmt::format("Cannot read {}", path.string()), errno));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return fail(sysError(fmt::format("Cannot read {}", path.string()), errno));
  }
  if (!S_ISREG(st.st_mode)) {
    return fail(Errc::kInvalidArgument,
                fmt::format("{} is not a regular file: make it one, or remove it", path.string()));
  }
  if (static_cast<size_t>(st.st_size) > kMaxDockerignoreBytes) {
    return fail(Errc::kInvalidArgument,
                fmt::format(".dockerignore is {} bytes, more than the {} a build accepts",
                            st.st_size, kMaxDockerignoreBytes));
  }
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(sysError(fmt::format("Cannot read {}", path.string()), errno));
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxDockerignoreBytes) break;  // parse() reports it
  }
  return parse(text);
}

bool DockerIgnore::excludes(std::string_view path, const MatchState& parent,
                            MatchState* state) const {
  bool excluded = false;
  if (state != nullptr) state->matched.assign(globs_.size(), false);
  for (size_t i = 0; i < globs_.size(); ++i) {
    const bool matched =
        (i < parent.matched.size() && parent.matched[i]) || globs_[i].matches(path);
    if (state != nullptr) state->matched[i] = matched;
    if (matched) excluded = !patterns_[i].exception;
  }
  return excluded;
}

bool DockerIgnore::excludes(std::string_view path) const {
  if (globs_.empty()) return false;
  MatchState state;
  size_t slash = path.find('/');
  while (slash != std::string_view::npos) {
    MatchState next;
    excludes(path.substr(0, slash), state, &next);
    state = std::move(next);
    slash = path.find('/', slash + 1);
  }
  return excludes(path, state, nullptr);
}

}  // namespace hutch::build

#include "diff/changes.h"

#include <fnmatch.h>

#include <utility>

namespace hutch::diff {

std::string_view changeName(ChangeKind kind) {
  switch (kind) {
    case ChangeKind::kAdded: return "added";
    case ChangeKind::kChanged: return "changed";
    case ChangeKind::kDeleted: return "deleted";
  }
  return "changed";
}

namespace {

bool untouched(const Entry& a, const Entry& b) {
  return a.ino == b.ino && a.size == b.size && a.mtime_ns == b.mtime_ns &&
         a.ctime_ns == b.ctime_ns && a.blocks == b.blocks && a.flags == b.flags;
}

Result<std::vector<std::string>> differences(const Entry& a, const Entry& b,
                                             const SameContent& same_content) {
  std::vector<std::string> what;
  if (a.kind != b.kind) {
    what.emplace_back("type");
    return what;
  }
  if (a.kind == Kind::kFile && !untouched(a, b)) {
    bool same = a.size == b.size;
    if (same) {
      auto compared = same_content(a, b);
      if (!compared) return fail(compared.error());
      same = *compared;
    }
    if (!same) what.emplace_back("content");
  }
  if (a.mode != b.mode) what.emplace_back("mode");
  if (a.uid != b.uid || a.gid != b.gid) what.emplace_back("owner");
  if (a.kind == Kind::kSymlink && a.target != b.target) what.emplace_back("target");
  return what;
}

}  // namespace

Result<std::vector<Change>> compare(const Tree& before, const Tree& after,
                                    const SameContent& same_content) {
  std::vector<Change> out;
  auto b = before.entries.begin();
  auto a = after.entries.begin();
  while (b != before.entries.end() || a != after.entries.end()) {
    if (a == after.entries.end() || (b != before.entries.end() && b->path < a->path)) {
      out.push_back(Change{ChangeKind::kDeleted, *b, std::nullopt, {}});
      ++b;
    } else if (b == before.entries.end() || a->path < b->path) {
      out.push_back(Change{ChangeKind::kAdded, *a, std::nullopt, {}});
      ++a;
    } else {
      HUTCH_TRY(std::vector<std::string> what, differences(*b, *a, same_content));
      if (!what.empty()) out.push_back(Change{ChangeKind::kChanged, *a, *b, std::move(what)});
      ++a;
      ++b;
    }
  }
  return out;
}

const std::vector<Filter::Rule>& Filter::defaults() {
  static const std::vector<Rule> rules = {
      // What hutch itself writes into every box it starts or restores.
      {"hutch",
       {"/etc/hostname", "/etc/hosts", "/etc/machine-id", "/etc/resolv.conf", "/var/log/hutch",
        "/usr/local/share/ca-certificates/hutch-box-ca.crt", "/etc/ssl/certs/ca-certificates.crt",
        "/etc/ssl/certs/hutch-box-ca.pem"}},
      {"apt",
       {"/var/lib/apt/lists", "/var/cache/apt", "/var/cache/debconf/*-old", "/var/lib/dpkg/*-old"}},
      {"system-caches",
       {"/var/cache/man", "/var/cache/ldconfig", "/etc/ld.so.cache", "/var/log/journal",
        "/var/lib/systemd/random-seed"}},
      {"python-caches", {"__pycache__", "*.pyc"}},
      {"user-caches",
       {"/root/.cache", "/home/*/.cache", "/root/.npm/_cacache", "/home/*/.npm/_cacache"}},
  };
  return rules;
}

namespace {

std::string normalized(std::string pattern) {
  for (std::string_view tail : {"/**", "/"}) {
    while (pattern.size() > tail.size() && pattern.ends_with(tail)) {
      pattern.resize(pattern.size() - tail.size());
    }
  }
  return pattern;
}

bool matches(const std::string& pattern, std::string_view path) {
  std::string p(path);
  if (pattern.find('/') != std::string::npos) {
    // The path, then each parent: "/a/b/c", "/a/b", "/a".
    for (;;) {
      if (::fnmatch(pattern.c_str(), p.c_str(), FNM_PATHNAME) == 0) return true;
      size_t slash = p.rfind('/');
      if (slash == 0 || slash == std::string::npos) return false;
      p.resize(slash);
    }
  }
  size_t start = 0;
  while (start < p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string::npos) end = p.size();
    if (end > start && ::fnmatch(pattern.c_str(), p.substr(start, end - start).c_str(), 0) == 0) {
      return true;
    }
    start = end + 1;
  }
  return false;
}

}  // namespace

Filter::Filter(bool all, const std::vector<std::string>& ignore) {
  if (!all) rules_ = defaults();
  if (!ignore.empty()) {
    Rule mine{"ignored", {}};
    for (const auto& pattern : ignore) mine.patterns.push_back(normalized(pattern));
    rules_.insert(rules_.begin(), std::move(mine));
  }
}

std::optional<std::string> Filter::hiddenBy(std::string_view path) const {
  for (const auto& rule : rules_) {
    for (const auto& pattern : rule.patterns) {
      if (matches(pattern, path)) return rule.name;
    }
  }
  return std::nullopt;
}

Result<> validatePattern(std::string_view pattern) {
  if (pattern.empty() || pattern.size() > 1024 ||
      pattern.find_first_of(std::string_view("\0\n", 2)) != std::string_view::npos) {
    return fail(Errc::kInvalidArgument,
                "An ignore pattern is 1 to 1024 bytes with no NUL or newline, like "
                "'/home/hutch/.cache' or '*.log'");
  }
  return ok();
}

Filtered applyFilter(std::vector<Change> changes, const Filter& filter) {
  Filtered out;
  for (auto& change : changes) {
    if (auto rule = filter.hiddenBy(change.entry.path)) {
      ++out.hidden[*rule];
    } else {
      out.changes.push_back(std::move(change));
    }
  }
  return out;
}

nlohmann::json toJson(const Change& change) {
  const Entry& e = change.entry;
  nlohmann::json j{{"path", e.path},
                   {"change", changeName(change.change)},
                   {"type", kindName(e.kind)},
                   {"size", e.size},
                   {"mode", e.mode},
                   {"uid", e.uid},
                   {"gid", e.gid},
                   {"mtime_ns", e.mtime_ns}};
  if (e.kind == Kind::kSymlink) j["symlink_target"] = e.target;
  if (change.change == ChangeKind::kChanged) {
    j["what"] = change.what;
    if (change.before) {
      const Entry& b = *change.before;
      nlohmann::json before{{"type", kindName(b.kind)},
                            {"size", b.size},
                            {"mode", b.mode},
                            {"uid", b.uid},
                            {"gid", b.gid},
                            {"mtime_ns", b.mtime_ns}};
      if (b.kind == Kind::kSymlink) before["symlink_target"] = b.target;
      j["before"] = std::move(before);
    }
  }
  return j;
}

}  // namespace hutch::diff

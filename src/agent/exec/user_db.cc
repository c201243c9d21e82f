#include "agent/exec/user_db.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <optional>
#include <sstream>

namespace hutch::agent {
namespace {

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t pos = s.find(sep, start);
    if (pos == std::string_view::npos) {
      parts.push_back(s.substr(start));
      return parts;
    }
    parts.push_back(s.substr(start, pos - start));
    start = pos + 1;
  }
}

std::optional<uint32_t> parseId(std::string_view s) {
  uint32_t value = 0;
  if (s.empty()) return std::nullopt;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return value;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

UserDb UserDb::load(const std::string& passwd_path, const std::string& group_path) {
  return parse(readFile(passwd_path), readFile(group_path));
}

UserDb UserDb::parse(std::string_view passwd, std::string_view group) {
  UserDb db;
  for (std::string_view line : split(passwd, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    auto f = split(line, ':');
    if (f.size() < 7 || f[0].empty()) continue;  // name:pw:uid:gid:gecos:home:shell
    auto uid = parseId(f[2]);
    auto gid = parseId(f[3]);
    if (!uid || !gid) continue;
    db.users_.push_back(PasswdEntry{std::string(f[0]), *uid, *gid, std::string(f[5])});
  }
  for (std::string_view line : split(group, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    auto f = split(line, ':');
    if (f.size() < 4 || f[0].empty()) continue;  // name:pw:gid:members
    auto gid = parseId(f[2]);
    if (!gid) continue;
    GroupEntry entry{std::string(f[0]), *gid, {}};
    if (!f[3].empty()) {
      for (std::string_view member : split(f[3], ',')) {
        if (!member.empty()) entry.members.emplace_back(member);
      }
    }
    db.groups_.push_back(std::move(entry));
  }
  return db;
}

UserInfo UserDb::complete(const PasswdEntry& entry) const {
  UserInfo info{entry.name, entry.uid, entry.gid, entry.home.empty() ? "/" : entry.home, {}};
  info.groups.push_back(entry.gid);
  for (const auto& group : groups_) {
    if (std::find(group.members.begin(), group.members.end(), entry.name) != group.members.end() &&
        std::find(info.groups.begin(), info.groups.end(), group.gid) == info.groups.end()) {
      info.groups.push_back(group.gid);
    }
  }
  return info;
}

Result<UserInfo> UserDb::lookup(std::string_view user) const {
  if (size_t colon = user.find(':'); colon != std::string_view::npos) {
    HUTCH_TRY(UserInfo info, lookup(user.substr(0, colon)));
    HUTCH_TRY(gid_t gid, lookupGroup(user.substr(colon + 1)));
    info.gid = gid;
    info.groups = {gid};
    return info;
  }
  if (user.empty()) {
    for (const auto& entry : users_) {
      if (entry.uid == 0) return complete(entry);
    }
    return UserInfo{"root", 0, 0, "/root", {0}};
  }
  if (auto uid = parseId(user)) {
    for (const auto& entry : users_) {
      if (entry.uid == *uid) return complete(entry);
    }
    return UserInfo{"", *uid, 0, "/", {0}};
  }
  for (const auto& entry : users_) {
    if (entry.name == user) return complete(entry);
  }
  if (user == "root") return lookup("");
  return fail(Errc::kNotFound,
              "User \"" + std::string(user) + "\" does not exist in the box's /etc/passwd");
}

std::string UserDb::userName(uid_t uid) const {
  for (const auto& entry : users_) {
    if (entry.uid == uid) return entry.name;
  }
  return std::to_string(uid);
}

std::string UserDb::groupName(gid_t gid) const {
  for (const auto& entry : groups_) {
    if (entry.gid == gid) return entry.name;
  }
  return std::to_string(gid);
}

Result<gid_t> UserDb::lookupGroup(std::string_view group) const {
  if (auto gid = parseId(group)) return *gid;
  for (const auto& entry : groups_) {
    if (entry.name == group) return entry.gid;
  }
  return fail(Errc::kNotFound,
              "Group \"" + std::string(group) + "\" does not exist in the box's /etc/group");
}

}  // namespace hutch::agent

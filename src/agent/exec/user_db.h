// Users and groups from /etc/passwd and /etc/group, parsed by hand: the agent is linked
// statically, where glibc's getpwnam would need NSS modules that are not there.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace hutch::agent {

struct UserInfo {
  std::string name;  // empty for a numeric uid without a passwd entry
  uid_t uid = 0;
  gid_t gid = 0;
  std::string home;
  std::vector<gid_t> groups;  // supplementary groups, including gid

  bool operator==(const UserInfo&) const = default;
};

class UserDb {
 public:
  // Missing or unreadable files give an empty database (root still resolves).
  static UserDb load(const std::string& passwd_path = "/etc/passwd",
                     const std::string& group_path = "/etc/group");
  static UserDb parse(std::string_view passwd, std::string_view group);

  // user: a name, a numeric uid, or empty for root; or USER:GROUP (either by name or number), as
  // an image's USER may say. A numeric uid without an entry resolves to that uid with gid 0 and
  // home "/" (as Docker does), and so does "root" in a box with no passwd entry for it (an image
  // need have no /etc/passwd); another unknown name is kNotFound.
  Result<UserInfo> lookup(std::string_view user) const;

  // For describing files: the name of uid / gid, or the number as text without an entry.
  std::string userName(uid_t uid) const;
  std::string groupName(gid_t gid) const;
  // A group named by name or number (a number needs no entry); kNotFound for an unknown name.
  Result<gid_t> lookupGroup(std::string_view group) const;

 private:
  struct PasswdEntry {
    std::string name;
    uid_t uid;
    gid_t gid;
    std::string home;
  };
  struct GroupEntry {
    std::string name;
    gid_t gid;
    std::vector<std::string> members;
  };

  UserInfo complete(const PasswdEntry& entry) const;

  std::vector<PasswdEntry> users_;
  std::vector<GroupEntry> groups_;
};

}  // namespace hutch::agent

// FileInfo from a stat result, and the errors of file operations from errno.
#pragma once

#include <sys/stat.h>

#include <string>

#include "agent/exec/user_db.h"
#include "base/error.h"
#include "proto/files.h"

namespace hutch::agent {

// "drwxr-xr-x", "-rwsr-x--T", "lrwxrwxrwx": as ls -l shows st_mode.
std::string permissionsString(mode_t mode);

proto::FileInfo describeFile(const std::string& path, const struct stat& st,
                             std::string symlink_target, const UserDb& users);

// The error of a failed file operation on path, done as user: ENOENT not found, EACCES/EPERM
// permission denied, EISDIR/ENOTDIR invalid argument, EEXIST already exists, ENOSPC/EDQUOT a
// full disk, ... The message names the path and says what to do.
Error fileError(int err, const std::string& path, const std::string& user);

// "Permission denied: WHAT (as user U)" and what to do (hint, or a general one).
Error permissionDenied(const std::string& what, const std::string& user,
                       const std::string& hint = "");

// A full disk or quota while writing path.
Error diskFullError(const std::string& path, int err);

}  // namespace hutch::agent

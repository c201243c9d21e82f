#include "agent/files/file_info.h"

#include <cerrno>

#include "agent/files/paths.h"

namespace hutch::agent {
namespace {

proto::FileType typeOf(mode_t mode) {
  if (S_ISREG(mode)) return proto::FileType::kFile;
  if (S_ISDIR(mode)) return proto::FileType::kDir;
  if (S_ISLNK(mode)) return proto::FileType::kSymlink;
  return proto::FileType::kOther;
}

char typeChar(mode_t mode) {
  if (S_ISREG(mode)) return '-';
  if (S_ISDIR(mode)) return 'd';
  if (S_ISLNK(mode)) return 'l';
  if (S_ISCHR(mode)) return 'c';
  if (S_ISBLK(mode)) return 'b';
  if (S_ISFIFO(mode)) return 'p';
  if (S_ISSOCK(mode)) return 's';
  return '?';
}

}  // namespace

std::string permissionsString(mode_t mode) {
  std::string s(10, '-');
  s[0] = typeChar(mode);
  const char* rwx = "rwxrwxrwx";
  for (int i = 0; i < 9; ++i) {
    if (mode & (1u << (8 - i))) s[1 + i] = rwx[i];
  }
  if (mode & S_ISUID) s[3] = (mode & S_IXUSR) ? 's' : 'S';
  if (mode & S_ISGID) s[6] = (mode & S_IXGRP) ? 's' : 'S';
  if (mode & S_ISVTX) s[9] = (mode & S_IXOTH) ? 't' : 'T';
  return s;
}

proto::FileInfo describeFile(const std::string& path, const struct stat& st,
                             std::string symlink_target, const UserDb& users) {
  proto::FileInfo info;
  info.name = baseName(path);
  info.path = path;
  info.type = typeOf(st.st_mode);
  info.size = st.st_size < 0 ? 0 : static_cast<uint64_t>(st.st_size);
  info.mode = st.st_mode & 07777;
  info.permissions = permissionsString(st.st_mode);
  info.uid = st.st_uid;
  info.gid = st.st_gid;
  info.owner = users.userName(st.st_uid);
  info.group = users.groupName(st.st_gid);
  info.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  if (info.type == proto::FileType::kSymlink) info.symlink_target = std::move(symlink_target);
  return info;
}

Error permissionDenied(const std::string& what, const std::string& user, const std::string& hint) {
  return Error(Errc::kPermissionDenied,
               "Permission denied: " + what + " (as user " + user + "); " +
                   (hint.empty() ? "act as a user who may, or change the permissions" : hint));
}

Error diskFullError(const std::string& path, int err) {
  return Error(Errc::kResourceExhausted,
               std::string(err == EDQUOT ? "The disk quota is used up" : "The disk is full") +
                   ": cannot write " + path + " (free space in the box or give it a larger disk)");
}

Error fileError(int err, const std::string& path, const std::string& user) {
  switch (err) {
    case ENOENT: return Error(Errc::kNotFound, "No such file or directory: " + path);
    case EACCES:
    case EPERM: return permissionDenied(path, user);
    case EISDIR: return Error(Errc::kInvalidArgument, "The path " + path + " is a directory");
    case ENOTDIR:
      return Error(Errc::kInvalidArgument, "A component of " + path + " is not a directory");
    case EEXIST: return Error(Errc::kAlreadyExists, "The path " + path + " already exists");
    case ENOTEMPTY: return Error(Errc::kFailedPrecondition, "Directory " + path + " is not empty");
    case ENOSPC:
    case EDQUOT: return diskFullError(path, err);
    case ELOOP:
      return Error(Errc::kInvalidArgument, "Too many levels of symbolic links in " + path);
    case ENAMETOOLONG: return Error(Errc::kInvalidArgument, "The path " + path + " is too long");
    case EROFS:
      return Error(Errc::kFailedPrecondition, "The path " + path + " is on a read-only filesystem");
    case EXDEV:
      return Error(
          Errc::kFailedPrecondition,
          "The path " + path + " is on another filesystem; copy the file and remove the original");
    case EBUSY:
      return Error(Errc::kFailedPrecondition, "The path " + path + " is in use (a mount point?)");
    case ETXTBSY:
      return Error(Errc::kFailedPrecondition, "The file " + path + " is a running program");
    case EFBIG: return Error(Errc::kInvalidArgument, "The file " + path + " would be too large");
    case EMFILE:
    case ENFILE:
      return Error(Errc::kInternal, "The agent has too many files open to use " + path, err);
    default: return Error(Errc::kInternal, "Cannot use " + path, err);
  }
}

}  // namespace hutch::agent

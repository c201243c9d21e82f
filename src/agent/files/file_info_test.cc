#include "agent/files/file_info.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace hutch::agent {
namespace {

TEST(FileInfoTest, PermissionsAsLsShowsThem) {
  EXPECT_EQ(permissionsString(S_IFREG | 0644), "-rw-r--r--");
  EXPECT_EQ(permissionsString(S_IFDIR | 0755), "drwxr-xr-x");
  EXPECT_EQ(permissionsString(S_IFLNK | 0777), "lrwxrwxrwx");
  EXPECT_EQ(permissionsString(S_IFREG | 04755), "-rwsr-xr-x");
  EXPECT_EQ(permissionsString(S_IFREG | 04644), "-rwSr--r--");
  EXPECT_EQ(permissionsString(S_IFDIR | 02775), "drwxrwsr-x");
  EXPECT_EQ(permissionsString(S_IFDIR | 02765), "drwxrwSr-x");
  EXPECT_EQ(permissionsString(S_IFDIR | 01777), "drwxrwxrwt");
  EXPECT_EQ(permissionsString(S_IFDIR | 01776), "drwxrwxrwT");
  EXPECT_EQ(permissionsString(S_IFCHR | 0620), "crw--w----");
  EXPECT_EQ(permissionsString(S_IFBLK | 0660), "brw-rw----");
  EXPECT_EQ(permissionsString(S_IFIFO | 0600), "prw-------");
  EXPECT_EQ(permissionsString(S_IFSOCK | 0777), "srwxrwxrwx");
}

TEST(FileInfoTest, DescribesAStat) {
  struct stat st {};
  st.st_mode = S_IFREG | 0640;
  st.st_size = 13;
  st.st_uid = 1000;
  st.st_gid = 4242;
  st.st_mtim.tv_sec = 1764400000;
  st.st_mtim.tv_nsec = 123456789;
  const UserDb users = UserDb::parse("alice:x:1000:1000::/home/alice:/bin/sh\n", "");
  const proto::FileInfo info = describeFile("/home/alice/a.txt", st, "ignored", users);
  EXPECT_EQ(info.name, "a.txt");
  EXPECT_EQ(info.path, "/home/alice/a.txt");
  EXPECT_EQ(info.type, proto::FileType::kFile);
  EXPECT_EQ(info.size, 13u);
  EXPECT_EQ(info.mode, 0640u);
  EXPECT_EQ(info.permissions, "-rw-r-----");
  EXPECT_EQ(info.owner, "alice");
  EXPECT_EQ(info.group, "4242");  // no such group: the number
  EXPECT_EQ(info.mtime_ns, 1764400000123456789);
  EXPECT_EQ(info.symlink_target, "");  // only for symlinks
  st.st_mode = S_IFLNK | 0777;
  EXPECT_EQ(describeFile("/l", st, "target", users).symlink_target, "target");
  st.st_mode = S_IFIFO | 0600;
  EXPECT_EQ(describeFile("/p", st, "", users).type, proto::FileType::kOther);
}

TEST(FileInfoTest, ErrnoMapsToCodesAndMessagesNameThePath) {
  EXPECT_EQ(fileError(ENOENT, "/x", "u").code(), Errc::kNotFound);
  const Error denied = fileError(EACCES, "/root/x", "hutch");
  EXPECT_EQ(denied.code(), Errc::kPermissionDenied);
  EXPECT_EQ(denied.message().rfind("Permission denied: /root/x (as user hutch)", 0), 0u)
      << denied.message();
  EXPECT_EQ(fileError(EPERM, "/x", "u").code(), Errc::kPermissionDenied);
  EXPECT_EQ(fileError(EISDIR, "/d", "u").code(), Errc::kInvalidArgument);
  EXPECT_NE(fileError(EISDIR, "/d", "u").message().find("/d"), std::string::npos);
  EXPECT_EQ(fileError(ENOTDIR, "/f/x", "u").code(), Errc::kInvalidArgument);
  EXPECT_EQ(fileError(EEXIST, "/x", "u").code(), Errc::kAlreadyExists);
  const Error full = fileError(ENOSPC, "/big", "u");
  EXPECT_EQ(full.code(), Errc::kResourceExhausted);
  EXPECT_EQ(full.message().rfind("The disk is full", 0), 0u) << full.message();
  EXPECT_EQ(fileError(EDQUOT, "/big", "u").code(), Errc::kResourceExhausted);
  EXPECT_EQ(fileError(EIO, "/x", "u").sysErrno(), EIO);
}

}  // namespace
}  // namespace hutch::agent

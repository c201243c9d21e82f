// Protocol values the proto tests share: a regular file's FileInfo as the agent reports it.
#pragma once

#include "proto/files.h"

namespace hutch::proto::testing {

inline FileInfo regularFile() {
  FileInfo info;
  info.name = "a.txt";
  info.path = "/home/hutch/a.txt";
  info.type = FileType::kFile;
  info.size = 13;
  info.mode = 0644;
  info.permissions = "-rw-r--r--";
  info.uid = 1000;
  info.gid = 1000;
  info.owner = "hutch";
  info.group = "hutch";
  info.mtime_ns = 1764400000123456789;
  return info;
}

}  // namespace hutch::proto::testing

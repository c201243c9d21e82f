#include "agent/init/mounts.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "agent/log.h"

namespace hutch::agent {
namespace {

struct MountSpec {
  const char* source;
  const char* target;
  const char* fstype;
  unsigned long flags;
  const char* data;
};

std::string decodeOctalEscapes(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      const std::string_view digits = s.substr(i + 1, 3);
      if (digits.find_first_not_of("01234567") == std::string_view::npos) {
        out +=
            static_cast<char>((digits[0] - '0') * 64 + (digits[1] - '0') * 8 + (digits[2] - '0'));
        i += 3;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

std::set<std::string> currentMountPoints() {
  std::ifstream in("/proc/self/mountinfo");
  std::ostringstream text;
  text << in.rdbuf();
  return parseMountPoints(text.str());
}

void makeDirs(const std::string& path) {
  for (size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos == path.size() || path[pos] == '/') ::mkdir(path.substr(0, pos).c_str(), 0755);
  }
}

void mountOne(const MountSpec& m, std::set<std::string>& mounted) {
  if (mounted.contains(m.target)) return;
  makeDirs(m.target);
  if (::mount(m.source, m.target, m.fstype, m.flags, m.data) != 0 && errno != EBUSY) {
    logWarning(std::string("Cannot mount ") + m.fstype + " on " + m.target + ": " +
               std::strerror(errno));
    return;
  }
  mounted.insert(m.target);
}

bool rootIsReadOnly() {
  struct statvfs st {};
  return ::statvfs("/", &st) == 0 && (st.f_flag & ST_RDONLY) != 0;
}

}  // namespace

std::set<std::string> parseMountPoints(std::string_view mountinfo) {
  // "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw": field 5 is the mount point.
  std::set<std::string> points;
  size_t start = 0;
  while (start < mountinfo.size()) {
    size_t end = mountinfo.find('\n', start);
    if (end == std::string_view::npos) end = mountinfo.size();
    std::istringstream line{std::string(mountinfo.substr(start, end - start))};
    std::string field;
    for (int i = 0; i < 5 && line >> field; ++i) {
      if (i == 4) points.insert(decodeOctalEscapes(field));
    }
    start = end + 1;
  }
  return points;
}

void mountSystemFilesystems() {
  constexpr unsigned long kNoSuid = MS_NOSUID;
  constexpr unsigned long kNoDevExec = MS_NOSUID | MS_NODEV | MS_NOEXEC;

  std::set<std::string> mounted;
  if (::access("/proc/self/mountinfo", R_OK) != 0) {
    mountOne({"proc", "/proc", "proc", kNoDevExec, nullptr}, mounted);
  }
  mounted = currentMountPoints();

  const std::vector<MountSpec> mounts = {
      {"proc", "/proc", "proc", kNoDevExec, nullptr},
      {"sysfs", "/sys", "sysfs", kNoDevExec, nullptr},
      {"devtmpfs", "/dev", "devtmpfs", kNoSuid, "mode=0755"},
      {"devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "gid=5,mode=0620,ptmxmode=0666"},
      {"tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777"},
      {"tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755"},
      {"cgroup2", "/sys/fs/cgroup", "cgroup2", kNoDevExec, nullptr},
  };
  for (const auto& m : mounts) mountOne(m, mounted);
  if (!mounted.contains("/tmp") && rootIsReadOnly()) {
    mountOne({"tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777"}, mounted);
  }

  // devtmpfs has no /dev/fd or /dev/std*; shells (process substitution) rely on them.
  const char* links[][2] = {{"/proc/self/fd", "/dev/fd"},
                            {"/proc/self/fd/0", "/dev/stdin"},
                            {"/proc/self/fd/1", "/dev/stdout"},
                            {"/proc/self/fd/2", "/dev/stderr"}};
  for (const auto& link : links) {
    if (::symlink(link[0], link[1]) != 0 && errno != EEXIST) {
      logWarning(std::string("Cannot create ") + link[1] + ": " + std::strerror(errno));
    }
  }
}

}  // namespace hutch::agent

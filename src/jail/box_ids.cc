#include "jail/box_ids.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "sys/files.h"

namespace hutch::jail {

Result<BoxIds> boxIds(uint32_t index, uint32_t base) {
  if (index > kMaxBoxIndex) {
    return fail(Errc::kInvalidArgument, "Box index " + std::to_string(index) +
                                            " is out of range: use 0.." +
                                            std::to_string(kMaxBoxIndex));
  }
  if (base < 65536 || uint64_t{base} + kMaxBoxIndex >= (uint64_t{1} << 31)) {
    return fail(Errc::kInvalidArgument,
                "Box id base " + std::to_string(base) + " must be in 65536..2^31-65536");
  }
  return BoxIds{static_cast<uid_t>(base + index), static_cast<gid_t>(base + index)};
}

Result<uint32_t> firstFreeIndex(const std::vector<uint32_t>& used) {
  std::vector<uint32_t> sorted = used;
  std::sort(sorted.begin(), sorted.end());
  uint32_t candidate = 0;
  for (uint32_t index : sorted) {
    if (index == candidate) ++candidate;
    if (index > candidate) break;
  }
  if (candidate > kMaxBoxIndex) {
    return fail(Errc::kFailedPrecondition,
                "All " + std::to_string(kMaxBoxIndex + 1) + " box ids are in use: remove a box");
  }
  return candidate;
}

bool inOwnUserNamespace(pid_t pid) {
  struct stat theirs {};
  struct stat ours {};
  std::string path = "/proc/" + std::to_string(pid) + "/ns/user";
  if (::stat(path.c_str(), &theirs) != 0 || ::stat("/proc/self/ns/user", &ours) != 0) {
    return false;
  }
  return theirs.st_ino == ours.st_ino && theirs.st_dev == ours.st_dev;
}

Result<std::vector<pid_t>> processesWithUid(uid_t uid) {
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return fail(sysError("Cannot list /proc", errno));
  std::vector<pid_t> found;
  while (const dirent* entry = ::readdir(dir)) {
    pid_t pid = 0;
    std::string_view name = entry->d_name;
    auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), pid);
    if (ec != std::errc() || ptr != name.data() + name.size()) continue;
    auto status = sys::readFile("/proc/" + std::string(name) + "/status", 1 << 16);
    if (!status) continue;  // exited meanwhile
    // A zombie runs nothing and cannot be signalled or traced: it shares nothing. (An adopted
    // QEMU that exited lingers as one until whoever inherited it reaps it.)
    if (size_t state = status->find("\nState:"); state != std::string::npos) {
      size_t letter = status->find_first_not_of(" \t", state + 7);
      if (letter != std::string::npos && (status->at(letter) == 'Z' || status->at(letter) == 'X')) {
        continue;
      }
    }
    size_t at = status->find("\nUid:");
    if (at == std::string::npos) continue;
    const char* p = status->c_str() + at + 5;
    for (int i = 0; i < 3; ++i) {  // real, effective, saved
      char* end = nullptr;
      unsigned long value = std::strtoul(p, &end, 10);
      if (end == p) break;
      if (value == uid) {
        found.push_back(pid);
        break;
      }
      p = end;
    }
  }
  ::closedir(dir);
  return found;
}

namespace {

// How a lock file's lock is owned.
enum class LockOwner {
  // flock(2): owned by the open file, so inherited by children until they exec; hutch-jail's
  // uid lock is meant to pass to the program it runs.
  kOpenFile,
  // A POSIX record lock (fcntl F_SETLK): owned by the process, never inherited by a child and
  // released the moment the process dies. (It is also released when the process closes any
  // descriptor of that file: take each such lock once.)
  kProcess,
};

// An exclusive, non-blocking lock on <dir>/<name>, in a directory only root may write.
// Held by another: "<held> (<file> is locked)<then>".
Result<UniqueFd> lockIn(const std::filesystem::path& dir, const std::string& name,
                        const std::string& held, const std::string& then, LockOwner owner) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return fail(sysError("Cannot create the lock directory " + dir.string(), errno));
  }
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return fail(sysError("Cannot check " + dir.string(), errno));
  if (!S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022) != 0) {
    return fail(
        Errc::kFailedPrecondition,
        dir.string() + " must be a directory of root's that only root can write: remove it");
  }
  std::filesystem::path file = dir / name;
  // A record write lock needs the file open for writing; flock does not.
  const int mode = owner == LockOwner::kProcess ? O_RDWR : O_RDONLY;
  UniqueFd fd(::open(file.c_str(), mode | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) return fail(sysError("Cannot open the lock " + file.string(), errno));
  int locked = 0;
  if (owner == LockOwner::kProcess) {
    struct flock whole {};
    whole.l_type = F_WRLCK;
    whole.l_whence = SEEK_SET;  // l_start 0, l_len 0: the whole file
    locked = ::fcntl(fd.get(), F_SETLK, &whole);
  } else {
    locked = ::flock(fd.get(), LOCK_EX | LOCK_NB);
  }
  if (locked != 0) {
    if (errno == EWOULDBLOCK || errno == EACCES || errno == EAGAIN) {
      return fail(Errc::kFailedPrecondition, held + " (" + file.string() + " is locked)" + then);
    }
    return fail(sysError("Cannot lock " + file.string(), errno));
  }
  return fd;
}

}  // namespace

Result<UniqueFd> lockUid(uid_t uid, const std::filesystem::path& dir) {
  return lockIn(dir, "uid-" + std::to_string(uid) + ".lock",
                "uid " + std::to_string(uid) + " is held by another jail",
                ": refusing to share it with a new box", LockOwner::kOpenFile);
}

namespace {

constexpr uint32_t kFirstSlot = 513;
constexpr uint32_t kSlots = 500;
constexpr uint32_t kSlotSize = 65536;

}  // namespace

uint32_t defaultIdBase(const std::filesystem::path& state_dir) {
  const std::string path = state_dir.lexically_normal().string();
  if (path == "/var/lib/hutch" || path == "/var/lib/hutch/") return kDefaultIdBase;
  // FNV-1a: stable across builds and hosts (std::hash is not).
  uint64_t hash = 1469598103934665603ULL;
  for (unsigned char c : path) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  return kDefaultIdBase + (kFirstSlot + static_cast<uint32_t>(hash % kSlots)) * kSlotSize;
}

uint32_t nextIdBase(uint32_t base) {
  const uint32_t slot = base >= kDefaultIdBase ? (base - kDefaultIdBase) / kSlotSize : 0;
  const uint32_t next = slot < kFirstSlot ? 0 : (slot - kFirstSlot + 1) % kSlots;
  return kDefaultIdBase + (kFirstSlot + next) * kSlotSize;
}

Result<UniqueFd> lockIdRange(uint32_t base, const std::filesystem::path& dir) {
  char hex[16];
  std::snprintf(hex, sizeof hex, "%x", base);
  return lockIn(dir, std::string("range-") + hex + ".lock",
                "uids from " + std::to_string(base) + " are another hutchd's", "",
                LockOwner::kProcess);
}

Result<UniqueFd> lockUnusedIdRange(uint32_t base, const std::filesystem::path& dir) {
  HUTCH_TRY(UniqueFd range, lockIdRange(base, dir));
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    constexpr std::string_view kPrefix = "uid-";
    constexpr std::string_view kSuffix = ".lock";
    if (!name.starts_with(kPrefix) || !name.ends_with(kSuffix)) continue;
    uint64_t uid = 0;
    const char* first = name.data() + kPrefix.size();
    const char* last = name.data() + name.size() - kSuffix.size();
    if (std::from_chars(first, last, uid).ptr != last) continue;
    if (uid < base || uid > uint64_t{base} + kMaxBoxIndex) continue;
    // A try and a release: a jail's lock is an flock on its own open file, which ours never
    // touches.
    UniqueFd probe(::open(entry.path().c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (!probe) continue;
    if (::flock(probe.get(), LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
      return fail(Errc::kFailedPrecondition,
                  "uids from " + std::to_string(base) +
                      " are still used by a box of a hutchd that is not running (" +
                      entry.path().string() + " is locked by its jail)");
    }
  }
  return range;
}

}  // namespace hutch::jail

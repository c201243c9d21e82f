// hutch-ram-preload.so: preloaded into a jailed QEMU that maps a template snapshot's RAM.
//
// A box restored from a template snapshot maps the snapshot's memory file copy-on-write
// (memory-backend-file,share=off): every box shares the unchanged pages. The file is frozen
// (root's, 0444) and bound read-only into the jail, and a private mapping of a read-only
// descriptor is all QEMU needs, but QEMU 7.2 opens mem-path O_RDWR whatever `share` says (its
// `readonly=on` maps the RAM read-only and the guest crashes; QEMU 8.2's `rom=off` fixes that).
// As root that open worked; as the box's uid it fails (EACCES, EROFS).
//
// This library turns exactly that open into O_RDONLY: an O_RDWR open, without O_CREAT, of the
// path in HUTCH_READONLY_RAM. Everything else passes through unchanged. It is no security
// boundary (QEMU could unset it); the file's mode and the read-only bind are.
//
// Free page reporting (the virtio balloon) makes QEMU 7.2 discard a freed range of file-backed
// RAM with fallocate(PUNCH_HOLE) on the file and then madvise(MADV_DONTNEED) on the mapping; on
// the read-only descriptor the first fails (EBADF) and QEMU gives up before the second. Punching
// holes into a snapshot every box maps would be wrong anyway (QEMU 8.2 no longer does it for a
// private mapping): a PUNCH_HOLE on the descriptor opened above succeeds without touching the
// file, and the madvise then drops the box's private copies of those pages.
//
// Plain C ABI, no C++ runtime: it is loaded into QEMU before anything else.
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace {

// The descriptor of the downgraded open, -1 before it. Written once, before QEMU's vCPU and
// I/O threads exist (the memory backend is opened while the machine is made).
int g_readonly_ram_fd = -1;

int openDowngraded(int dirfd, const char* path, int flags, mode_t mode) {
  bool downgraded = false;
  if ((flags & O_ACCMODE) == O_RDWR && (flags & O_CREAT) == 0 && path != nullptr) {
    const char* target = ::getenv("HUTCH_READONLY_RAM");
    if (target != nullptr && ::strcmp(path, target) == 0) {
      flags = (flags & ~O_ACCMODE) | O_RDONLY;
      downgraded = true;
    }
  }
  int fd = static_cast<int>(::syscall(SYS_openat, dirfd, path, flags, mode));
  if (downgraded && fd >= 0) g_readonly_ram_fd = fd;
  return fd;
}

int fallocateFiltered(int fd, int mode, off_t offset, off_t length) {
  if (fd >= 0 && fd == g_readonly_ram_fd && (mode & FALLOC_FL_PUNCH_HOLE) != 0) return 0;
  return static_cast<int>(::syscall(SYS_fallocate, fd, mode, offset, length));
}

mode_t modeArg(int flags, va_list args) {
  bool needs_mode = (flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE;
  return needs_mode ? static_cast<mode_t>(va_arg(args, int)) : 0;
}

}  // namespace

// NOLINTBEGIN(cert-dcl50-cpp): these are libc's variadic interfaces.
extern "C" {

__attribute__((visibility("default"))) int open(const char* path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  mode_t mode = modeArg(flags, args);
  va_end(args);
  return openDowngraded(AT_FDCWD, path, flags, mode);
}

__attribute__((visibility("default"))) int open64(const char* path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  mode_t mode = modeArg(flags, args);
  va_end(args);
  return openDowngraded(AT_FDCWD, path, flags, mode);
}

__attribute__((visibility("default"))) int openat(int dirfd, const char* path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  mode_t mode = modeArg(flags, args);
  va_end(args);
  return openDowngraded(dirfd, path, flags, mode);
}

__attribute__((visibility("default"))) int openat64(int dirfd, const char* path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  mode_t mode = modeArg(flags, args);
  va_end(args);
  return openDowngraded(dirfd, path, flags, mode);
}

// _FORTIFY_SOURCE's versions, for flags not known at compile time (QEMU's mem-path open).
// NOLINTNEXTLINE(bugprone-reserved-identifier): glibc's name, which QEMU calls.
__attribute__((visibility("default"))) int __open_2(const char* path, int flags) {
  return openDowngraded(AT_FDCWD, path, flags, 0);
}

// NOLINTNEXTLINE(bugprone-reserved-identifier): glibc's name, which QEMU calls.
__attribute__((visibility("default"))) int __open64_2(const char* path, int flags) {
  return openDowngraded(AT_FDCWD, path, flags, 0);
}

__attribute__((visibility("default"))) int fallocate(int fd, int mode, off_t offset, off_t len) {
  return fallocateFiltered(fd, mode, offset, len);
}

__attribute__((visibility("default"))) int fallocate64(int fd, int mode, off_t offset, off_t len) {
  return fallocateFiltered(fd, mode, offset, len);
}

}  // extern "C"
// NOLINTEND(cert-dcl50-cpp)

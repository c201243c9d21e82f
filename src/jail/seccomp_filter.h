// hutch's own seccomp filter, installed by hutch-jail just before exec, under QEMU's own
// `-sandbox on,...` (which the filter does not replace: QEMU adds its own on top).
//
// It is a deny list, like QEMU's: QEMU's allowed set differs between versions and accelerators,
// and an allow list that misses one syscall kills a box at a random moment. What it denies is
// kernel attack surface an unprivileged process can still reach and QEMU never needs: other
// processes' memory (ptrace, process_vm_*), new namespaces (unshare, setns, clone with CLONE_NEW*;
// clone3 answers ENOSYS so libc falls back to clone, whose flags can be checked), mounts,
// bpf, perf_event_open, userfaultfd, io_uring (QEMU falls back to epoll), the keyring, module and
// kexec loading, and sockets other than the allowed families. Other architectures' syscall ABIs
// (i386, x32) kill the process.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"

namespace hutch::jail {

// The syscalls that fail with EPERM, for docs and tests.
const std::vector<std::string>& deniedSyscalls();

// Loads the filter into the calling thread (no_new_privs must be set). `socket_families`: the
// address families socket() and socketpair() may use ("unix", "inet", "inet6", "netlink"); the
// rest fail with EAFNOSUPPORT.
Result<> installSeccompFilter(const std::vector<std::string>& socket_families);

}  // namespace hutch::jail

// hutch-jail: runs a program (QEMU) jailed, in its own process.
//
//   hutch-jail --spec-fd N -- PROGRAM [ARGS...]
//   hutch-jail --spec FILE -- PROGRAM [ARGS...]
//   hutch-jail --share --name BOX --dir DIR --box-ids UID:GID [--read-only] -- virtiofsd ...
//
// Started by hutchd through sys::spawn with CLONE_NEWPID, so that it is PID 1 of a new PID
// namespace; it sets up the jail (jail/enter.h) and execs PROGRAM in place: the pid hutchd holds
// a pidfd on and waits for is QEMU's. Exit status 125: the jail could not be built (the reason is
// on stderr); 126/127: PROGRAM cannot be executed / does not exist in the jail.
//
// --share runs the sharing process of a host directory (jail/share.h) instead, and exits 0 once
// it runs: the box's QEMU is its only client, and it ends when QEMU does.
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "jail/enter.h"
#include "jail/jail_spec.h"
#include "jail/share.h"
#include "sys/files.h"

namespace {

using hutch::Result;

void usage() {
  std::fprintf(stderr,
               "usage: hutch-jail (--spec-fd N | --spec FILE) -- PROGRAM [ARGS...]\n"
               "       hutch-jail --share --name BOX --dir DIR --box-ids UID:GID [--read-only] "
               "-- PROGRAM [ARGS...]\n"
               "Runs PROGRAM in the jail the JSON spec describes (see src/jail/jail_spec.h).\n");
}

Result<std::string> readSpecFd(int fd) {
  std::string text;
  char buf[8192];
  off_t offset = 0;
  for (;;) {
    // pread: the descriptor's offset is shared with whoever passed it.
    ssize_t n = ::pread(fd, buf, sizeof buf, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return hutch::fail(hutch::sysError("Cannot read the spec from fd", errno));
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    offset += n;
    if (text.size() > (1 << 20)) return hutch::fail(hutch::Errc::kInvalidArgument, "Spec too big");
  }
  ::close(fd);
  return text;
}

int shareMain(int argc, char** argv) {
  std::vector<std::string> args;
  int i = 2;
  for (; i < argc && std::string_view(argv[i]) != "--"; ++i) args.emplace_back(argv[i]);
  if (i + 1 >= argc) {
    usage();
    return hutch::jail::kExitJailFailed;
  }
  std::vector<std::string> program(argv + i + 1, argv + argc);
  auto spec = hutch::jail::parseShareArgs(args);
  if (!spec) {
    std::fprintf(stderr, "hutch-jail: %s\n", spec.error().describe().c_str());
    return hutch::jail::kExitJailFailed;
  }
  bool exec_failed = false;
  auto entered = hutch::jail::enterShareAndExec(*spec, program, &exec_failed);
  if (entered) return 0;
  std::fprintf(stderr, "hutch-jail: box %s: share %s: %s\n", spec->name.c_str(), spec->dir.c_str(),
               entered.error().describe().c_str());
  return exec_failed ? hutch::jail::kExitCannotExec : hutch::jail::kExitJailFailed;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "--share") return shareMain(argc, argv);
  std::string spec_file;
  int spec_fd = -1;
  int i = 1;
  for (; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if ((arg == "--spec" || arg == "--spec-fd") && i + 1 < argc) {
      std::string_view value = argv[++i];
      if (arg == "--spec") {
        spec_file = value;
        continue;
      }
      auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), spec_fd);
      if (ec != std::errc() || ptr != value.data() + value.size() || spec_fd < 0) {
        std::fprintf(stderr, "hutch-jail: --spec-fd needs a descriptor number\n");
        return hutch::jail::kExitJailFailed;
      }
      continue;
    }
    usage();
    return hutch::jail::kExitJailFailed;
  }
  if (i >= argc || (spec_file.empty() == (spec_fd < 0))) {
    usage();
    return hutch::jail::kExitJailFailed;
  }
  std::vector<std::string> program(argv + i, argv + argc);

  auto text = spec_fd >= 0 ? readSpecFd(spec_fd) : hutch::sys::readFile(spec_file, 1 << 20);
  if (!text) {
    std::fprintf(stderr, "hutch-jail: %s\n", text.error().describe().c_str());
    return hutch::jail::kExitJailFailed;
  }
  auto spec = hutch::jail::parseJailSpec(*text);
  if (!spec) {
    std::fprintf(stderr, "hutch-jail: %s\n", spec.error().describe().c_str());
    return hutch::jail::kExitJailFailed;
  }
  bool exec_failed = false;
  auto entered = hutch::jail::enterJailAndExec(*spec, program, &exec_failed);
  std::fprintf(stderr, "hutch-jail: box %s: %s\n", spec->name.c_str(),
               entered.error().describe().c_str());
  if (!exec_failed) return hutch::jail::kExitJailFailed;
  return entered.error().sysErrno() == ENOENT ? hutch::jail::kExitNotFound
                                              : hutch::jail::kExitCannotExec;
}

#include "sys/proc_fs.h"

#include <charconv>
#include <filesystem>
#include <system_error>

#include "sys/files.h"

namespace hutch::sys {

std::vector<std::string> splitCmdline(std::string_view block) {
  std::vector<std::string> args;
  while (!block.empty()) {
    size_t nul = block.find('\0');
    if (nul == std::string_view::npos) {
      args.emplace_back(block);
      break;
    }
    args.emplace_back(block.substr(0, nul));
    block.remove_prefix(nul + 1);
  }
  return args;
}

Result<std::vector<std::string>> readCmdline(pid_t pid) {
  auto block = readFile("/proc/" + std::to_string(pid) + "/cmdline", 1 << 20);
  if (!block) {
    return fail(Errc::kNotFound, "Process " + std::to_string(pid) + " is gone",
                block.error().sysErrno());
  }
  return splitCmdline(*block);
}

Result<std::vector<int>> listOpenFds() {
  std::error_code ec;
  std::vector<int> fds;
  std::filesystem::directory_iterator it("/proc/self/fd", ec);
  if (ec) return fail(sysError("Cannot list /proc/self/fd", ec.value()));
  for (const auto& entry : it) {
    std::string name = entry.path().filename().string();
    int fd = -1;
    auto [ptr, err] = std::from_chars(name.data(), name.data() + name.size(), fd);
    if (err == std::errc()) fds.push_back(fd);
  }
  return fds;
}

}  // namespace hutch::sys

#include "image/systemd_init.h"

#include <fmt/format.h>
#include <sys/stat.h>

namespace hutch::image {

namespace {

constexpr std::string_view kSystemDir = "etc/systemd/system";

// The systemd binary: usr/lib first (merged /usr, where lib is a link to it), then lib.
Result<std::string> findSystemd(const RootDir& root) {
  for (std::string_view candidate : {"usr/lib/systemd/systemd", "lib/systemd/systemd"}) {
    HUTCH_TRY(std::optional<struct stat> st, root.lstat(candidate));
    if (st && S_ISREG(st->st_mode) && (st->st_mode & 0111) != 0) {
      return "/" + std::string(candidate);
    }
  }
  return fail(Errc::kFailedPrecondition,
              "The image has no systemd (no executable /usr/lib/systemd/systemd or "
              "/lib/systemd/systemd): install systemd in it, or make the template without "
              "--systemd (hutch-agent is then PID 1)");
}

// A link at `path` to `target`, replacing a link or nothing there; a file of the image's own
// at `path` is kept (an image that ships its own unit of that name means it).
Result<> linkUnlessFile(RootDir& root, const std::string& path, std::string_view target) {
  HUTCH_TRY(std::optional<struct stat> st, root.lstat(path));
  if (st && !S_ISLNK(st->st_mode)) return ok();
  if (st) HUTCH_TRY_VOID(root.remove(path));
  return root.symlink(target, path);
}

}  // namespace

Result<std::string> addSystemdInit(RootDir& root) {
  HUTCH_TRY(std::string systemd, findSystemd(root));
  HUTCH_TRY_VOID(root.mkdirAll("etc/hutch", 0755));
  HUTCH_TRY_VOID(root.writeFile("etc/hutch/init", systemd + "\n", 0644));
  HUTCH_TRY_VOID(root.writeFile("etc/hutch/ready", systemdReadyCheck(), 0755));
  const std::string dir(kSystemDir);
  HUTCH_TRY_VOID(root.mkdirAll(dir + "/basic.target.wants", 0755));
  const std::string unit = dir + "/hutch-agent.service";
  HUTCH_TRY_VOID(root.writeFile(unit, systemdAgentUnit(), 0644));
  // What `systemctl enable` and `systemctl mask` would make.
  HUTCH_TRY_VOID(linkUnlessFile(root, dir + "/basic.target.wants/hutch-agent.service", "/" + unit));
  for (std::string_view masked : kMaskedUnits) {
    HUTCH_TRY_VOID(linkUnlessFile(root, dir + "/" + std::string(masked), "/dev/null"));
  }
  return systemd;
}

}  // namespace hutch::image

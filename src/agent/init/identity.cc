#include "agent/init/identity.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "agent/init/kernel_cmdline.h"
#include "base/unique_fd.h"

namespace hutch::agent {
namespace {

Result<> writeAll(int fd, std::string_view content) {
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(sysError("write", errno));
    done += static_cast<size_t>(n);
  }
  return ok();
}

Result<std::string> readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return std::string();
    return fail(sysError("Cannot read " + path, errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// "Cannot X: a; Cannot Y: b" with the code of the first failure.
void collect(std::optional<Error>& first, const Result<>& step) {
  if (step) return;
  if (!first) {
    first = step.error();
  } else {
    first = Error(first->code(), first->describe() + "; " + step.error().describe());
  }
}

}  // namespace

IdentityFiles IdentityFiles::under(const std::string& root) {
  IdentityFiles files;
  files.hostname = root + files.hostname;
  files.hosts = root + files.hosts;
  files.machine_id = root + files.machine_id;
  files.dbus_machine_id = root + files.dbus_machine_id;
  return files;
}

Result<> replaceFile(const std::string& path, std::string_view content, mode_t mode) {
  const std::string temp = path + ".hutch-new";
  {
    UniqueFd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode));
    if (!fd) return fail(sysError("Cannot write " + temp, errno));
    ::fchmod(fd.get(), mode);  // not narrowed by the umask
    if (auto written = writeAll(fd.get(), content); !written) {
      ::unlink(temp.c_str());
      return fail(written.error().withContext("Cannot write " + temp));
    }
  }
  if (::rename(temp.c_str(), path.c_str()) == 0) return ok();
  const int err = errno;
  ::unlink(temp.c_str());
  if (err != EBUSY && err != EXDEV) return fail(sysError("Cannot replace " + path, err));
  // A bind-mounted file cannot be renamed over: rewrite it in place.
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC));
  if (!fd) return fail(sysError("Cannot write " + path, errno));
  if (auto written = writeAll(fd.get(), content); !written) {
    return fail(written.error().withContext("Cannot write " + path));
  }
  return ok();
}

std::string withHostsEntry(std::string_view hosts, std::string_view name) {
  const std::string entry = "127.0.1.1\t" + std::string(name);
  std::string out;
  bool replaced = false;
  bool named = false;
  size_t pos = 0;
  while (pos < hosts.size()) {
    size_t end = hosts.find('\n', pos);
    const bool has_newline = end != std::string_view::npos;
    if (!has_newline) end = hosts.size();
    const std::string line(hosts.substr(pos, end - pos));
    pos = has_newline ? end + 1 : end;

    std::istringstream words(line);
    std::string address;
    words >> address;
    if (address == "127.0.1.1") {
      if (!replaced) out += entry + "\n";
      replaced = true;
      continue;
    }
    if (!address.empty() && address[0] != '#') {
      std::string word;
      while (words >> word) named = named || word == name;
    }
    out += line;
    out += '\n';
  }
  // sudo and many tools resolve the own hostname; without this they wait for DNS and warn.
  if (!replaced && !named) out += entry + "\n";
  return out;
}

Result<> setHostsEntry(const std::string& hosts_path, std::string_view name) {
  HUTCH_TRY(std::string hosts, readFile(hosts_path));
  const std::string updated = withHostsEntry(hosts, name);
  if (updated == hosts) return ok();
  return replaceFile(hosts_path, updated, 0644);
}

Result<> updateFile(const std::string& path, std::string_view content, mode_t mode) {
  if (auto current = readFile(path); current && *current == content) return ok();
  return replaceFile(path, content, mode);
}

Result<> setHostname(std::string_view name, SystemControl& system, const IdentityFiles& files) {
  if (!isValidHostname(name)) {
    return fail(Errc::kInvalidArgument, "\"" + std::string(name) + "\" is not a valid hostname");
  }
  std::optional<Error> first;
  collect(first, system.setHostname(name));
  collect(first, updateFile(files.hostname, std::string(name) + "\n", 0644));
  collect(first, setHostsEntry(files.hosts, name));
  if (first) return fail(*first);
  return ok();
}

Result<> applyHostname(std::string_view cmdline, SystemControl& system,
                       const IdentityFiles& files) {
  auto name = kernelParam(cmdline, kHostnameParam);
  if (!name) return ok();
  if (!isValidHostname(*name)) {
    return fail(Errc::kInvalidArgument, "Hostname \"" + *name +
                                            "\" from the kernel command line "
                                            "is not a valid hostname");
  }
  return setHostname(*name, system, files);
}

Result<> applyIdentity(const proto::Identity& identity, SystemControl& system,
                       const IdentityFiles& files) {
  std::optional<Error> first;
  if (identity.time_ns) collect(first, system.setRealtime(*identity.time_ns));
  if (!identity.seed.empty()) {
    auto seed = proto::decodeHex(identity.seed);
    collect(first, seed ? system.seedRandom(*seed) : Result<>(fail(seed.error())));
  }
  if (!identity.machine_id.empty()) {
    const std::string content = identity.machine_id + "\n";
    auto before = readFile(files.machine_id);
    const bool changed = !before || *before != content;
    auto written = updateFile(files.machine_id, content, 0444);
    collect(first, written);
    struct stat st {};
    if (::lstat(files.dbus_machine_id.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      collect(first, updateFile(files.dbus_machine_id, content, 0444));
    }
    if (written && changed) collect(first, system.machineIdChanged());
  }
  if (!identity.hostname.empty()) collect(first, setHostname(identity.hostname, system, files));
  if (first) return fail(*first);
  return ok();
}

}  // namespace hutch::agent

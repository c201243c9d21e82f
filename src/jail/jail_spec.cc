#include "jail/jail_spec.h"

#include <fcntl.h>
#include <linux/memfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

namespace hutch::jail {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr int kSpecVersion = 1;
constexpr std::string_view kFamilies[] = {"unix", "inet", "inet6", "netlink"};

const char* accessName(BindPath::Access access) {
  return access == BindPath::Access::kReadWrite ? "rw" : "ro";
}

json cgroupToJson(const BoxCgroup& cgroup) {
  json dirs = json::array();
  for (const CgroupDir& dir : cgroup.dirs) {
    dirs.push_back({{"controllers", dir.controllers}, {"path", dir.path.string()}});
  }
  return {{"version", static_cast<int>(cgroup.version)}, {"dirs", dirs}};
}

json limitsToJson(const CgroupLimits& limits) {
  return {{"memory_max", limits.memory_max},
          {"cpu_quota_us", limits.cpu_quota_us},
          {"cpu_period_us", limits.cpu_period_us},
          {"pids_max", limits.pids_max},
          {"io_weight", limits.io_weight}};
}

// Reads one JSON object strictly: typed fields, and unknown keys are errors.
class Fields {
 public:
  Fields(const json& object, std::string where) : object_(object), where_(std::move(where)) {}

  Result<> checkObject() const {
    if (!object_.is_object()) return fail(Errc::kInvalidArgument, where_ + " must be an object");
    return ok();
  }
  bool has(const std::string& key) {
    seen_.insert(key);
    return object_.contains(key);
  }
  Error typeError(const std::string& key, std::string_view what) const {
    return Error(Errc::kInvalidArgument, name(key) + " must be " + std::string(what));
  }
  std::string name(const std::string& key) const { return where_ + "." + key; }

  template <class Int>
  Result<> integer(const std::string& key, Int& out) {
    if (!has(key)) return ok();
    const json& value = object_.at(key);
    if (!value.is_number_integer() || (!value.is_number_unsigned() && value.get<int64_t>() < 0)) {
      return fail(typeError(key, "a non-negative integer"));
    }
    uint64_t number = value.get<uint64_t>();
    if (number > static_cast<uint64_t>(std::numeric_limits<Int>::max())) {
      return fail(typeError(key, "at most " + std::to_string(std::numeric_limits<Int>::max())));
    }
    out = static_cast<Int>(number);
    return ok();
  }
  Result<> string(const std::string& key, std::string& out) {
    if (!has(key)) return ok();
    if (!object_.at(key).is_string()) return fail(typeError(key, "a string"));
    out = object_.at(key).get<std::string>();
    return ok();
  }
  Result<> path(const std::string& key, fs::path& out) {
    std::string text;
    HUTCH_TRY_VOID(string(key, text));
    if (has(key)) out = text;
    return ok();
  }
  Result<> boolean(const std::string& key, bool& out) {
    if (!has(key)) return ok();
    if (!object_.at(key).is_boolean()) return fail(typeError(key, "true or false"));
    out = object_.at(key).get<bool>();
    return ok();
  }
  Result<> strings(const std::string& key, std::vector<std::string>& out) {
    if (!has(key)) return ok();
    const json& value = object_.at(key);
    if (!value.is_array()) return fail(typeError(key, "an array of strings"));
    out.clear();
    for (const json& item : value) {
      if (!item.is_string()) return fail(typeError(key, "an array of strings"));
      out.push_back(item.get<std::string>());
    }
    return ok();
  }
  const json* array(const std::string& key, Result<>& status) {
    if (!has(key)) return nullptr;
    const json& value = object_.at(key);
    if (!value.is_array()) {
      status = fail(typeError(key, "an array"));
      return nullptr;
    }
    return &value;
  }
  const json* object(const std::string& key, Result<>& status) {
    if (!has(key)) return nullptr;
    const json& value = object_.at(key);
    if (!value.is_object()) {
      status = fail(typeError(key, "an object"));
      return nullptr;
    }
    return &value;
  }
  Result<> finish() const {
    for (const auto& [key, value] : object_.items()) {
      if (seen_.count(key) == 0) {
        return fail(Errc::kInvalidArgument, "Unknown key " + name(key) + " in the jail spec");
      }
    }
    return ok();
  }

 private:
  const json& object_;
  std::string where_;
  std::set<std::string> seen_;
};

Result<BindPath> parseBindPath(const json& item, const std::string& where) {
  Fields f(item, where);
  HUTCH_TRY_VOID(f.checkObject());
  BindPath bind;
  std::string access = "ro";
  if (!f.has("path")) return fail(Errc::kInvalidArgument, f.name("path") + " is missing");
  HUTCH_TRY_VOID(f.path("path", bind.path));
  HUTCH_TRY_VOID(f.string("access", access));
  if (access == "rw") {
    bind.access = BindPath::Access::kReadWrite;
  } else if (access != "ro") {
    return fail(f.typeError("access", "\"ro\" or \"rw\""));
  }
  HUTCH_TRY_VOID(f.boolean("exec", bind.exec));
  HUTCH_TRY_VOID(f.finish());
  return bind;
}

Result<BoxCgroup> parseCgroup(const json& item) {
  Fields f(item, "cgroup");
  HUTCH_TRY_VOID(f.checkObject());
  BoxCgroup cgroup;
  int version = 0;
  if (!f.has("version")) return fail(Errc::kInvalidArgument, "cgroup.version is missing");
  HUTCH_TRY_VOID(f.integer("version", version));
  if (version != 1 && version != 2) return fail(f.typeError("version", "1 or 2"));
  cgroup.version = static_cast<CgroupVersion>(version);
  Result<> status = ok();
  const json* dirs = f.array("dirs", status);
  HUTCH_TRY_VOID(status);
  if (dirs == nullptr || dirs->empty()) {
    return fail(Errc::kInvalidArgument, "cgroup.dirs must list at least one directory");
  }
  for (size_t i = 0; i < dirs->size(); ++i) {
    Fields d((*dirs)[i], "cgroup.dirs[" + std::to_string(i) + "]");
    HUTCH_TRY_VOID(d.checkObject());
    CgroupDir dir;
    HUTCH_TRY_VOID(d.string("controllers", dir.controllers));
    HUTCH_TRY_VOID(d.path("path", dir.path));
    HUTCH_TRY_VOID(d.finish());
    if (!dir.path.is_absolute()) {
      return fail(Errc::kInvalidArgument, d.name("path") + " must be an absolute path");
    }
    cgroup.dirs.push_back(std::move(dir));
  }
  HUTCH_TRY_VOID(f.finish());
  return cgroup;
}

Result<CgroupLimits> parseLimits(const json& item) {
  Fields f(item, "limits");
  HUTCH_TRY_VOID(f.checkObject());
  CgroupLimits limits;
  HUTCH_TRY_VOID(f.integer("memory_max", limits.memory_max));
  HUTCH_TRY_VOID(f.integer("cpu_quota_us", limits.cpu_quota_us));
  HUTCH_TRY_VOID(f.integer("cpu_period_us", limits.cpu_period_us));
  HUTCH_TRY_VOID(f.integer("pids_max", limits.pids_max));
  HUTCH_TRY_VOID(f.integer("io_weight", limits.io_weight));
  HUTCH_TRY_VOID(f.finish());
  return limits;
}

Result<JailSpec> parseTop(const json& doc) {
  Fields f(doc, "spec");
  HUTCH_TRY_VOID(f.checkObject());
  int version = 0;
  HUTCH_TRY_VOID(f.integer("version", version));
  if (version != kSpecVersion) {
    return fail(Errc::kInvalidArgument, "spec.version must be " + std::to_string(kSpecVersion) +
                                            ": this hutch-jail does not match hutchd");
  }
  JailSpec spec;
  if (!f.has("uid") || !f.has("gid")) {
    return fail(Errc::kInvalidArgument, "spec.uid and spec.gid are required");
  }
  HUTCH_TRY_VOID(f.string("name", spec.name));
  HUTCH_TRY_VOID(f.integer("uid", spec.uid));
  HUTCH_TRY_VOID(f.integer("gid", spec.gid));
  HUTCH_TRY_VOID(f.string("hostname", spec.hostname));
  HUTCH_TRY_VOID(f.path("cwd", spec.cwd));
  Result<> status = ok();
  if (const json* paths = f.array("paths", status)) {
    for (size_t i = 0; i < paths->size(); ++i) {
      HUTCH_TRY(BindPath bind, parseBindPath((*paths)[i], "spec.paths[" + std::to_string(i) + "]"));
      spec.paths.push_back(std::move(bind));
    }
  }
  HUTCH_TRY_VOID(status);
  std::vector<std::string> devices;
  HUTCH_TRY_VOID(f.strings("devices", devices));
  for (const std::string& device : devices) spec.devices.emplace_back(device);
  if (f.has("netns")) {
    fs::path netns;
    HUTCH_TRY_VOID(f.path("netns", netns));
    spec.netns = netns;
  }
  if (const json* cgroup = f.object("cgroup", status)) {
    HUTCH_TRY(BoxCgroup parsed, parseCgroup(*cgroup));
    spec.cgroup = std::move(parsed);
  }
  HUTCH_TRY_VOID(status);
  HUTCH_TRY_VOID(f.boolean("allow_no_cgroup", spec.allow_no_cgroup));
  if (const json* limits = f.object("limits", status)) {
    HUTCH_TRY(spec.limits, parseLimits(*limits));
  }
  HUTCH_TRY_VOID(status);
  HUTCH_TRY_VOID(f.integer("max_open_files", spec.max_open_files));
  HUTCH_TRY_VOID(f.integer("max_processes", spec.max_processes));
  HUTCH_TRY_VOID(f.boolean("seccomp", spec.seccomp));
  HUTCH_TRY_VOID(f.strings("socket_families", spec.socket_families));
  HUTCH_TRY_VOID(f.boolean("legacy_proc", spec.legacy_proc));
  HUTCH_TRY_VOID(f.strings("env", spec.env));
  if (f.has("keep_fds")) {
    const json& fds = doc.at("keep_fds");
    if (!fds.is_array()) return fail(f.typeError("keep_fds", "an array of descriptors"));
    for (const json& fd : fds) {
      if (!fd.is_number_integer() || fd.get<int64_t>() < 0 || fd.get<int64_t>() > 65535) {
        return fail(f.typeError("keep_fds", "an array of descriptors (0..65535)"));
      }
      spec.keep_fds.push_back(fd.get<int>());
    }
  }
  HUTCH_TRY_VOID(f.finish());
  HUTCH_TRY_VOID(spec.validate());
  return spec;
}

Result<> checkAbsolute(const fs::path& path, std::string_view what) {
  if (path.empty() || !path.is_absolute()) {
    return fail(Errc::kInvalidArgument,
                std::string(what) + " '" + path.string() + "' must be an absolute path");
  }
  for (const auto& part : path) {
    if (part == "..") {
      return fail(Errc::kInvalidArgument,
                  std::string(what) + " '" + path.string() + "' must not contain '..'");
    }
  }
  return ok();
}

}  // namespace

const std::vector<fs::path>& defaultDevices() {
  static const std::vector<fs::path> devices = {"/dev/null", "/dev/zero", "/dev/full",
                                                "/dev/random", "/dev/urandom"};
  return devices;
}

Result<> JailSpec::validate() const {
  if (uid == 0 || gid == 0) {
    return fail(Errc::kInvalidArgument, "The jail's uid and gid must not be 0 (root)");
  }
  if (uid == static_cast<uid_t>(-1) || gid == static_cast<gid_t>(-1)) {
    return fail(Errc::kInvalidArgument, "The jail's uid and gid must not be -1");
  }
  if (!cwd.empty()) HUTCH_TRY_VOID(checkAbsolute(cwd, "cwd"));
  for (const BindPath& bind : paths) {
    HUTCH_TRY_VOID(checkAbsolute(bind.path, "Path"));
    if (bind.path == "/") return fail(Errc::kInvalidArgument, "The jail cannot show all of /");
    std::string top = (*std::next(bind.path.begin())).string();
    if (top == "dev" || top == "proc") {
      return fail(Errc::kInvalidArgument, "Path '" + bind.path.string() +
                                              "': the jail makes its own /" + top +
                                              " (list devices under devices)");
    }
  }
  for (const fs::path& device : devices) {
    HUTCH_TRY_VOID(checkAbsolute(device, "Device"));
    if (device.parent_path() != "/dev" && device.parent_path() != "/dev/net") {
      return fail(Errc::kInvalidArgument,
                  "Device '" + device.string() + "' must be a node in /dev or /dev/net");
    }
  }
  if (netns) HUTCH_TRY_VOID(checkAbsolute(*netns, "netns"));
  if (cgroup) {
    if (cgroup->dirs.empty()) {
      return fail(Errc::kInvalidArgument, "The jail's cgroup has no directories");
    }
    for (const CgroupDir& dir : cgroup->dirs) HUTCH_TRY_VOID(checkAbsolute(dir.path, "Cgroup"));
  }
  if (limits.cpu_quota_us != 0 && limits.cpu_period_us < 1000) {
    return fail(Errc::kInvalidArgument, "limits.cpu_period_us must be at least 1000");
  }
  if (limits.io_weight > 10000) {
    return fail(Errc::kInvalidArgument, "limits.io_weight must be 1..10000 (0: leave)");
  }
  if (max_open_files < 64) {
    return fail(Errc::kInvalidArgument, "max_open_files must be at least 64");
  }
  for (const std::string& family : socket_families) {
    if (std::find(std::begin(kFamilies), std::end(kFamilies), family) == std::end(kFamilies)) {
      return fail(Errc::kInvalidArgument,
                  "Unknown socket family '" + family + "': use unix, inet, inet6 or netlink");
    }
  }
  for (const std::string& var : env) {
    if (var.find('=') == std::string::npos || var.front() == '=') {
      return fail(Errc::kInvalidArgument, "Environment entry '" + var + "' is not KEY=VALUE");
    }
  }
  for (int fd : keep_fds) {
    if (fd <= 2) {
      return fail(Errc::kInvalidArgument,
                  "keep_fds lists " + std::to_string(fd) + ": 0, 1 and 2 are always kept");
    }
  }
  // Last, so that a test spec without one still hears about its other mistakes.
  if (!cgroup && !allow_no_cgroup) {
    return fail(Errc::kInvalidArgument,
                "The jail spec has no cgroup: give the box one (CgroupHost::boxCgroup); only "
                "tests may set allow_no_cgroup");
  }
  return ok();
}

std::string toJson(const JailSpec& spec) {
  json paths = json::array();
  for (const BindPath& bind : spec.paths) {
    paths.push_back(
        {{"path", bind.path.string()}, {"access", accessName(bind.access)}, {"exec", bind.exec}});
  }
  json devices = json::array();
  for (const fs::path& device : spec.devices) devices.push_back(device.string());
  json doc = {
      {"version", kSpecVersion},
      {"name", spec.name},
      {"uid", spec.uid},
      {"gid", spec.gid},
      {"hostname", spec.hostname},
      {"cwd", spec.cwd.string()},
      {"paths", paths},
      {"devices", devices},
      {"limits", limitsToJson(spec.limits)},
      {"max_open_files", spec.max_open_files},
      {"max_processes", spec.max_processes},
      {"seccomp", spec.seccomp},
      {"socket_families", spec.socket_families},
      {"legacy_proc", spec.legacy_proc},
      {"env", spec.env},
      {"keep_fds", spec.keep_fds},
  };
  if (spec.netns) doc["netns"] = spec.netns->string();
  if (spec.cgroup) doc["cgroup"] = cgroupToJson(*spec.cgroup);
  if (spec.allow_no_cgroup) doc["allow_no_cgroup"] = true;
  return doc.dump(2);
}

Result<JailSpec> parseJailSpec(std::string_view text) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return fail(Errc::kInvalidArgument, "The jail spec is not valid JSON");
  }
  try {
    auto spec = parseTop(doc);
    if (!spec) return fail(spec.error().withContext("Bad jail spec"));
    return spec;
  } catch (const json::exception& e) {
    return fail(Errc::kInvalidArgument, std::string("Bad jail spec: ") + e.what());
  }
}

Result<UniqueFd> specMemfd(const JailSpec& spec) {
  std::string text = toJson(spec);
  UniqueFd fd(::memfd_create("hutch-jail-spec", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd) return fail(sysError("Cannot create a memfd for the jail spec", errno));
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(sysError("Cannot write the jail spec", errno));
    }
    done += static_cast<size_t>(n);
  }
  if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) !=
      0) {
    return fail(sysError("Cannot seal the jail spec memfd", errno));
  }
  if (::lseek(fd.get(), 0, SEEK_SET) != 0) {
    return fail(sysError("Cannot rewind the jail spec memfd", errno));
  }
  return fd;
}

std::vector<std::string> jailCommand(const fs::path& jail_binary, int spec_fd,
                                     const std::vector<std::string>& program) {
  std::vector<std::string> argv = {jail_binary.string(), "--spec-fd", std::to_string(spec_fd),
                                   "--"};
  argv.insert(argv.end(), program.begin(), program.end());
  return argv;
}

}  // namespace hutch::jail

#include "jail/cgroup.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <thread>

#include "base/unique_fd.h"
#include "sys/files.h"

namespace hutch::jail {

namespace {

namespace fs = std::filesystem;

// The controllers a box cgroup uses on v1, each possibly in its own hierarchy.
constexpr std::string_view kV1Controllers[] = {"memory", "cpu", "cpuacct", "pids", "blkio"};
constexpr std::string_view kV2Controllers[] = {"memory", "pids", "cpu", "io"};

std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(sep, start);
    if (end == std::string_view::npos) end = text.size();
    out.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::vector<std::string> splitWords(std::string_view text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t')) ++i;
    size_t start = i;
    while (i < text.size() && text[i] != ' ' && text[i] != '\n' && text[i] != '\t') ++i;
    if (i > start) out.emplace_back(text.substr(start, i - start));
  }
  return out;
}

bool contains(const std::vector<std::string>& list, std::string_view item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

std::string join(const std::vector<std::string>& list, std::string_view sep) {
  std::string out;
  for (const std::string& item : list) {
    if (!out.empty()) out += sep;
    out += item;
  }
  return out;
}

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescapeMountinfo(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 3 < text.size()) {
      int value = 0;
      bool octal = true;
      for (size_t k = 1; k <= 3; ++k) {
        char c = text[i + k];
        if (c < '0' || c > '7') octal = false;
        value = value * 8 + (c - '0');
      }
      if (octal) {
        out.push_back(static_cast<char>(value));
        i += 3;
        continue;
      }
    }
    out.push_back(text[i]);
  }
  return out;
}

std::optional<uint64_t> parseU64(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return value;
}

// The value of `key` in a "key value" per line file (memory.events, cpu.stat, oom_control).
std::optional<uint64_t> keyedValue(std::string_view text, std::string_view key) {
  for (const std::string& line : split(text, '\n')) {
    std::vector<std::string> words = splitWords(line);
    if (words.size() == 2 && words[0] == key) return parseU64(words[1]);
  }
  return std::nullopt;
}

// The hierarchy path `path` as seen through `mount`, or nullopt if the mount does not show it.
std::optional<fs::path> resolveIn(const CgroupMount& mount, const std::string& path) {
  const std::string& root = mount.root;
  std::string rest;
  if (root == "/") {
    rest = path;
  } else if (path == root) {
    rest = "/";
  } else if (path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
             path[root.size()] == '/') {
    rest = path.substr(root.size());
  } else {
    return std::nullopt;
  }
  fs::path dir = mount.mount_point;
  for (const std::string& part : split(rest, '/')) {
    if (!part.empty()) dir /= part;
  }
  return dir;
}

Result<> writeFile(const fs::path& file, std::string_view value) {
  UniqueFd fd(::open(file.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC));
  if (!fd) return fail(sysError("Cannot open " + file.string(), errno));
  if (::write(fd.get(), value.data(), value.size()) != static_cast<ssize_t>(value.size())) {
    return fail(sysError("Cannot write '" + std::string(value) + "' to " + file.string(), errno));
  }
  return ok();
}

bool fileExists(const fs::path& file) {
  struct stat st {};
  return ::stat(file.c_str(), &st) == 0;
}

Result<std::string> readText(const fs::path& file) {
  return sys::readFile(file, 1 << 20);
}

Result<uint64_t> readU64(const fs::path& file) {
  HUTCH_TRY(std::string text, readText(file));
  auto value = parseU64(text);
  if (!value) return fail(Errc::kInternal, file.string() + " does not hold a number: " + text);
  return *value;
}

// A limit file holding a number or "max" (v2) or a huge number (v1 "unlimited").
uint64_t readLimit(const fs::path& file) {
  auto text = readText(file);
  if (!text) return 0;
  auto value = parseU64(*text);
  if (!value || *value >= (uint64_t{1} << 62)) return 0;
  return *value;
}

// The weight in each io weight file of `dir`: "100", or "default 100" followed by per-device
// lines ("8:0 200"), which are not ours.
std::map<std::string, uint64_t> readIoWeights(const fs::path& dir, CgroupVersion version) {
  std::map<std::string, uint64_t> weights;
  for (const std::string& file : ioWeightFiles(version)) {
    auto text = readText(dir / file);
    if (!text) continue;
    std::vector<std::string> words = splitWords(text->substr(0, text->find('\n')));
    if (words.size() == 2 && words[0] == "default") words.erase(words.begin());
    if (words.size() != 1) continue;
    if (auto value = parseU64(words[0])) weights[file] = *value;
  }
  return weights;
}

Error missingController(std::string_view controller, const fs::path& dir) {
  return Error(Errc::kUnsupported,
               "The " + std::string(controller) + " controller is not available in " +
                   dir.string() +
                   ": hutchd's cgroup must have it (cgroup v2: enable it in the parent's "
                   "cgroup.subtree_control, or run hutchd as a systemd service with Delegate=yes)");
}

Result<> mkdirIfMissing(const fs::path& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return fail(sysError("Cannot create cgroup " + dir.string(), errno));
  }
  return ok();
}

}  // namespace

const std::vector<std::string>& ioWeightFiles(CgroupVersion version) {
  static const std::vector<std::string> v1 = {"blkio.weight", "blkio.bfq.weight"};
  static const std::vector<std::string> v2 = {"io.weight", "io.bfq.weight"};
  return version == CgroupVersion::kV1 ? v1 : v2;
}

CgroupLimits CgroupLimits::forVm(unsigned cpus, uint64_t guest_memory_mib,
                                 uint64_t vmm_overhead_mib) {
  CgroupLimits limits;
  limits.memory_max = (guest_memory_mib + vmm_overhead_mib) << 20;
  limits.cpu_period_us = 100000;
  limits.cpu_quota_us = uint64_t{std::max(cpus, 1U)} * limits.cpu_period_us;
  limits.pids_max = 128 + cpus;
  limits.io_weight = 100;
  return limits;
}

std::optional<std::string> oomKillReason(const CgroupUsage& usage, std::string_view program) {
  if (usage.oom_kills == 0) return std::nullopt;
  std::string reason = std::string(program) + " was killed by the OOM killer";
  if (usage.memory_max != 0) {
    reason += " (memory.max " + std::to_string(usage.memory_max >> 20) + " MiB)";
  }
  return reason;
}

std::optional<fs::path> BoxCgroup::dirFor(std::string_view controller) const {
  if (version == CgroupVersion::kV2) {
    if (dirs.empty()) return std::nullopt;
    return dirs.front().path;
  }
  if (controller == "io") controller = "blkio";
  for (const CgroupDir& dir : dirs) {
    if (contains(split(dir.controllers, ','), controller)) return dir.path;
  }
  return std::nullopt;
}

Result<> BoxCgroup::create() const {
  if (dirs.empty()) return fail(Errc::kInvalidArgument, "The box cgroup has no directories");
  for (const CgroupDir& dir : dirs) {
    if (!fileExists(dir.path.parent_path())) {
      return fail(Errc::kFailedPrecondition,
                  "The cgroup parent " + dir.path.parent_path().string() +
                      " does not exist: hutchd makes it at start (CgroupHost::prepare)");
    }
    if (::rmdir(dir.path.c_str()) != 0 && errno != ENOENT) {
      int err = errno;
      if (err == EBUSY) {
        return fail(Errc::kFailedPrecondition,
                    "The cgroup " + dir.path.string() +
                        " still has processes: an earlier run of this box still lives; stop it "
                        "first",
                    err);
      }
      return fail(sysError("Cannot remove the stale cgroup " + dir.path.string(), err));
    }
    if (::mkdir(dir.path.c_str(), 0755) != 0) {
      return fail(sysError("Cannot create cgroup " + dir.path.string(), errno));
    }
  }
  return ok();
}

Result<AppliedLimits> BoxCgroup::applyLimits(const CgroupLimits& limits) const {
  AppliedLimits applied;
  auto required = [&](std::string_view controller) -> Result<fs::path> {
    auto dir = dirFor(controller);
    if (!dir) {
      return fail(missingController(controller, dirs.empty() ? fs::path() : dirs.front().path));
    }
    return *dir;
  };
  auto record = [&](std::string_view file, const std::string& value) {
    applied.written.push_back(std::string(file) + "=" + value);
  };
  // A write to a control file the kernel does not have means the controller is missing.
  auto put = [&](const fs::path& dir, std::string_view file, std::string_view controller,
                 const std::string& value) -> Result<> {
    auto written = writeFile(dir / file, value);
    if (!written && written.error().sysErrno() == ENOENT) {
      return fail(missingController(controller, dir));
    }
    if (written) record(file, value);
    return written;
  };
  // A control file that only some kernels have: written where it exists.
  auto optional = [&](const fs::path& dir, std::string_view file,
                      const std::string& value) -> Result<> {
    if (!fileExists(dir / file)) return ok();
    HUTCH_TRY_VOID(writeFile(dir / file, value));
    record(file, value);
    return ok();
  };

  if (version == CgroupVersion::kV2) {
    if (limits.memory_max != 0) {
      HUTCH_TRY(fs::path dir, required("memory"));
      HUTCH_TRY_VOID(put(dir, "memory.max", "memory", std::to_string(limits.memory_max)));
      // Swap would let the box use more than memory.max of the host's memory.
      HUTCH_TRY_VOID(optional(dir, "memory.swap.max", "0"));
      HUTCH_TRY_VOID(optional(dir, "memory.oom.group", "1"));
    }
    if (limits.cpu_quota_us != 0) {
      HUTCH_TRY(fs::path dir, required("cpu"));
      HUTCH_TRY_VOID(
          put(dir, "cpu.max", "cpu",
              std::to_string(limits.cpu_quota_us) + " " + std::to_string(limits.cpu_period_us)));
    }
    if (limits.pids_max != 0) {
      HUTCH_TRY(fs::path dir, required("pids"));
      HUTCH_TRY_VOID(put(dir, "pids.max", "pids", std::to_string(limits.pids_max)));
    }
  } else {
    if (limits.memory_max != 0) {
      HUTCH_TRY(fs::path dir, required("memory"));
      std::string value = std::to_string(limits.memory_max);
      HUTCH_TRY_VOID(put(dir, "memory.limit_in_bytes", "memory", value));
      // memory+swap: without it the box could use swap beyond its limit. Needs swap accounting.
      HUTCH_TRY_VOID(optional(dir, "memory.memsw.limit_in_bytes", value));
    }
    if (limits.cpu_quota_us != 0) {
      HUTCH_TRY(fs::path dir, required("cpu"));
      HUTCH_TRY_VOID(put(dir, "cpu.cfs_period_us", "cpu", std::to_string(limits.cpu_period_us)));
      HUTCH_TRY_VOID(put(dir, "cpu.cfs_quota_us", "cpu", std::to_string(limits.cpu_quota_us)));
    }
    if (limits.pids_max != 0) {
      HUTCH_TRY(fs::path dir, required("pids"));
      HUTCH_TRY_VOID(put(dir, "pids.max", "pids", std::to_string(limits.pids_max)));
    }
  }

  if (limits.io_weight != 0) {
    uint32_t weight = std::clamp<uint32_t>(limits.io_weight, 1, 10000);
    // Each mechanism's scale, from the v2 one (1..10000, default 100).
    auto valueFor = [&](const std::string& file) {
      if (file == "io.weight") return "default " + std::to_string(weight);
      if (file == "blkio.weight") return std::to_string(std::clamp<uint32_t>(weight * 5, 10, 1000));
      return std::to_string(std::min<uint32_t>(weight, 1000));  // the bfq files
    };
    auto dir = dirFor("io");
    const std::vector<std::string>& files = ioWeightFiles(version);
    bool offered = false;
    for (const std::string& file : files) {
      if (!dir || !fileExists(*dir / file)) continue;
      offered = true;
      std::string value = valueFor(file);
      if (auto written = writeFile(*dir / file, value)) {
        record(file, value);
      } else {
        applied.warnings.push_back("No io weight in " + file + ": " + written.error().describe());
      }
    }
    if (!dir) {
      applied.warnings.push_back(
          "No io weight: there is no blkio hierarchy for the box's cgroup (mount the blkio "
          "controller to give boxes I/O weights)");
    } else if (!offered) {
      applied.warnings.push_back("No io weight: " + dir->string() + " has none of " +
                                 jail::join(files, ", ") +
                                 " (the io controller is not enabled there, or the disks' I/O "
                                 "scheduler has no weights: bfq has)");
    }
  }
  return applied;
}

Result<> BoxCgroup::join() const {
  if (dirs.empty()) return fail(Errc::kInvalidArgument, "The box cgroup has no directories");
  for (const CgroupDir& dir : dirs) {
    // "0" is the writing process itself, whatever PID namespace it is in.
    auto joined = writeFile(dir.path / "cgroup.procs", "0");
    if (!joined) return fail(joined.error().withContext("Cannot join the box cgroup"));
  }
  return ok();
}

Result<CgroupUsage> BoxCgroup::usage() const {
  CgroupUsage usage;
  auto memory = dirFor("memory");
  if (!memory) return fail(missingController("memory", dirs.empty() ? fs::path() : dirs[0].path));
  if (version == CgroupVersion::kV2) {
    HUTCH_TRY(usage.memory_current, readU64(*memory / "memory.current"));
    usage.memory_peak = readLimit(*memory / "memory.peak");
    usage.memory_max = readLimit(*memory / "memory.max");
    if (auto events = readText(*memory / "memory.events")) {
      usage.oom_kills = keyedValue(*events, "oom_kill").value_or(0);
    }
    if (auto stat = readText(*memory / "cpu.stat")) {
      usage.cpu_usage_ns = keyedValue(*stat, "usage_usec").value_or(0) * 1000;
    }
    if (auto pids = readU64(*memory / "pids.current")) usage.pids_current = *pids;
    usage.pids_max = readLimit(*memory / "pids.max");
    usage.io_weights = readIoWeights(*memory, version);
    return usage;
  }
  HUTCH_TRY(usage.memory_current, readU64(*memory / "memory.usage_in_bytes"));
  usage.memory_peak = readLimit(*memory / "memory.max_usage_in_bytes");
  usage.memory_max = readLimit(*memory / "memory.limit_in_bytes");
  if (auto oom = readText(*memory / "memory.oom_control")) {
    usage.oom_kills = keyedValue(*oom, "oom_kill").value_or(0);
  }
  if (auto cpuacct = dirFor("cpuacct")) {
    if (auto ns = readU64(*cpuacct / "cpuacct.usage")) usage.cpu_usage_ns = *ns;
  }
  if (auto pids = dirFor("pids")) {
    if (auto current = readU64(*pids / "pids.current")) usage.pids_current = *current;
    usage.pids_max = readLimit(*pids / "pids.max");
  }
  if (auto blkio = dirFor("blkio")) usage.io_weights = readIoWeights(*blkio, version);
  return usage;
}

Result<std::vector<pid_t>> BoxCgroup::pids() const {
  std::vector<pid_t> out;
  for (const CgroupDir& dir : dirs) {
    auto text = readText(dir.path / "cgroup.procs");
    if (!text) {
      if (text.error().sysErrno() == ENOENT) continue;
      return fail(text.error());
    }
    for (const std::string& word : splitWords(*text)) {
      auto pid = parseU64(word);
      if (pid && std::find(out.begin(), out.end(), static_cast<pid_t>(*pid)) == out.end()) {
        out.push_back(static_cast<pid_t>(*pid));
      }
    }
  }
  return out;
}

Result<bool> BoxCgroup::holds(pid_t pid) const {
  if (dirs.empty()) return false;
  for (const CgroupDir& dir : dirs) {
    auto text = readText(dir.path / "cgroup.procs");
    if (!text) {
      if (text.error().sysErrno() == ENOENT) return false;
      return fail(text.error());
    }
    std::vector<std::string> words = splitWords(*text);
    bool found = std::any_of(words.begin(), words.end(), [&](const std::string& word) {
      return parseU64(word) == static_cast<uint64_t>(pid);
    });
    if (!found) return false;
  }
  return true;
}

Result<> BoxCgroup::remove() const {
  using namespace std::chrono_literals;
  for (const CgroupDir& dir : dirs) {
    auto deadline = std::chrono::steady_clock::now() + 1s;
    while (::rmdir(dir.path.c_str()) != 0) {
      int err = errno;
      if (err == ENOENT) break;
      if (err != EBUSY || std::chrono::steady_clock::now() > deadline) {
        std::string held;
        if (auto left = pids(); left && !left->empty()) {
          held = " (processes still in it:";
          for (pid_t pid : *left) held += " " + std::to_string(pid);
          held += ")";
        }
        return fail(sysError("Cannot remove cgroup " + dir.path.string() + held, err));
      }
      std::this_thread::sleep_for(10ms);
    }
  }
  return ok();
}

std::vector<CgroupMount> parseCgroupMounts(std::string_view mountinfo) {
  std::vector<CgroupMount> mounts;
  for (const std::string& line : split(mountinfo, '\n')) {
    std::vector<std::string> fields = splitWords(line);
    auto dash = std::find(fields.begin(), fields.end(), "-");
    if (fields.size() < 7 || dash == fields.end() || fields.end() - dash < 4) continue;
    const std::string& fstype = *(dash + 1);
    CgroupMount mount;
    if (fstype == "cgroup2") {
      mount.version = CgroupVersion::kV2;
    } else if (fstype == "cgroup") {
      mount.version = CgroupVersion::kV1;
      for (const std::string& option : split(*(dash + 3), ',')) {
        if (option != "rw" && option != "ro" && option.find('=') == std::string::npos &&
            option != "clone_children" && option != "noprefix" && option != "xattr") {
          mount.controllers.push_back(option);
        }
      }
    } else {
      continue;
    }
    mount.root = unescapeMountinfo(fields[3]);
    mount.mount_point = unescapeMountinfo(fields[4]);
    mounts.push_back(std::move(mount));
  }
  return mounts;
}

Result<std::vector<ProcCgroup>> parseProcCgroup(std::string_view text) {
  std::vector<ProcCgroup> out;
  for (const std::string& line : split(text, '\n')) {
    if (line.empty()) continue;
    size_t first = line.find(':');
    size_t second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) {
      return fail(Errc::kInternal, "Unexpected line in /proc/self/cgroup: " + line);
    }
    ProcCgroup entry;
    auto id = parseU64(std::string_view(line).substr(0, first));
    if (!id) return fail(Errc::kInternal, "Unexpected line in /proc/self/cgroup: " + line);
    entry.hierarchy = static_cast<int>(*id);
    std::string list = line.substr(first + 1, second - first - 1);
    if (!list.empty()) {
      for (const std::string& name : split(list, ',')) {
        if (name.rfind("name=", 0) != 0) entry.controllers.push_back(name);
      }
    }
    entry.path = line.substr(second + 1);
    if (entry.path.empty() || entry.path.front() != '/') {
      return fail(Errc::kInternal, "Unexpected cgroup path in /proc/self/cgroup: " + line);
    }
    out.push_back(std::move(entry));
  }
  return out;
}

Result<CgroupHost> CgroupHost::detect(std::string_view parent) {
  HUTCH_TRY(std::string cgroup, readText("/proc/self/cgroup"));
  HUTCH_TRY(std::string mountinfo, readText("/proc/self/mountinfo"));
  return fromText(cgroup, mountinfo, parent);
}

namespace {

// A cgroup directory name hutch makes: [A-Za-z0-9._-], not empty, not . or ..
bool isCgroupName(std::string_view name) {
  return !name.empty() && name != "." && name != ".." &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-';
         });
}

// The components of a --cgroup-parent: "/hutch" or "/a/b", each [A-Za-z0-9._-], no . or ..
Result<std::vector<std::string>> parentParts(std::string_view parent) {
  auto bad = [&](std::string_view why) {
    return fail(Errc::kInvalidArgument, "--cgroup-parent '" + std::string(parent) + "' " +
                                            std::string(why) +
                                            ": give an absolute cgroup path such as /hutch");
  };
  if (parent.empty() || parent.front() != '/') return bad("is not absolute");
  std::vector<std::string> parts;
  for (const std::string& part : split(parent.substr(1), '/')) {
    if (part.empty()) continue;
    if (!isCgroupName(part)) return bad("has a component that is not letters, digits, . _ -");
    parts.push_back(part);
  }
  if (parts.empty()) return bad("is the root");
  return parts;
}

}  // namespace

Result<CgroupHost> CgroupHost::fromText(std::string_view proc_self_cgroup,
                                        std::string_view mountinfo, std::string_view parent) {
  HUTCH_TRY(std::vector<ProcCgroup> entries, parseProcCgroup(proc_self_cgroup));
  std::vector<CgroupMount> mounts = parseCgroupMounts(mountinfo);
  std::vector<std::string> parts;
  if (!parent.empty()) {
    auto parsed = parentParts(parent);
    if (!parsed) return fail(parsed.error());
    parts = std::move(*parsed);
  }
  std::string parent_path;
  for (const std::string& part : parts) parent_path += "/" + part;
  CgroupHost host;
  // Where boxes go in one hierarchy: below the daemon's cgroup `base`, or the parent.
  auto place = [&](const CgroupMount& mount, const CgroupDir& base) -> Result<> {
    if (parts.empty()) {
      host.boxes_.push_back({base.controllers, base.path / kBoxesCgroup});
      return ok();
    }
    auto dir = resolveIn(mount, parent_path);
    if (!dir) {
      return fail(Errc::kUnsupported, "--cgroup-parent " + parent_path + " is not visible under " +
                                          mount.mount_point.string() + " (mounted from " +
                                          mount.root + ")");
    }
    host.boxes_.push_back({base.controllers, *dir});
    return ok();
  };
  bool v1_memory = std::any_of(mounts.begin(), mounts.end(), [](const CgroupMount& m) {
    return m.version == CgroupVersion::kV1 && contains(m.controllers, "memory");
  });
  if (v1_memory) {
    host.version_ = CgroupVersion::kV1;
    for (std::string_view controller : kV1Controllers) {
      auto mount = std::find_if(mounts.begin(), mounts.end(), [&](const CgroupMount& m) {
        return m.version == CgroupVersion::kV1 && contains(m.controllers, controller);
      });
      auto entry = std::find_if(entries.begin(), entries.end(), [&](const ProcCgroup& e) {
        return contains(e.controllers, controller);
      });
      if (mount == mounts.end() || entry == entries.end()) continue;
      auto dir = resolveIn(*mount, entry->path);
      if (!dir) continue;
      bool seen = std::any_of(host.base_.begin(), host.base_.end(),
                              [&](const CgroupDir& d) { return d.path == *dir; });
      if (seen) continue;
      host.base_.push_back({join(mount->controllers, ","), *dir});
      HUTCH_TRY_VOID(place(*mount, host.base_.back()));
    }
    if (host.base_.empty()) {
      return fail(Errc::kUnsupported,
                  "cgroup v1 is mounted but this process's memory cgroup is not visible there");
    }
    return host;
  }
  auto mount = std::find_if(mounts.begin(), mounts.end(),
                            [](const CgroupMount& m) { return m.version == CgroupVersion::kV2; });
  auto entry = std::find_if(entries.begin(), entries.end(),
                            [](const ProcCgroup& e) { return e.hierarchy == 0; });
  if (mount == mounts.end() || entry == entries.end()) {
    return fail(Errc::kUnsupported,
                "No cgroup hierarchy with a memory controller is mounted: mount cgroup2 on "
                "/sys/fs/cgroup");
  }
  std::string path = entry->path;
  std::string leaf = "/" + std::string(kDaemonLeafCgroup);
  if (path.size() > leaf.size() &&
      path.compare(path.size() - leaf.size(), leaf.size(), leaf) == 0) {
    path.erase(path.size() - leaf.size());
  }
  auto dir = resolveIn(*mount, path);
  if (!dir) {
    return fail(Errc::kUnsupported, "This process's cgroup " + path + " is not visible under " +
                                        mount->mount_point.string());
  }
  host.version_ = CgroupVersion::kV2;
  host.base_.push_back({"", *dir});
  HUTCH_TRY_VOID(place(*mount, host.base_.back()));
  if (!parts.empty()) host.v2_root_ = mount->mount_point;
  return host;
}

namespace {

// Writes +CONTROLLER to DIR's cgroup.subtree_control for each; EBUSY (v2's "no internal
// processes": DIR holds processes) is reported through `busy` when given, else as a warning.
Result<> enableControllers(const fs::path& dir, const std::vector<std::string>& controllers,
                           bool* busy, std::vector<std::string>& warnings) {
  for (const std::string& controller : controllers) {
    auto written = writeFile(dir / "cgroup.subtree_control", "+" + controller);
    if (written) continue;
    if (written.error().sysErrno() == EBUSY && busy != nullptr) {
      *busy = true;
      return ok();
    }
    warnings.push_back(written.error().describe());
  }
  return ok();
}

}  // namespace

Result<std::vector<std::string>> CgroupHost::prepare() const {
  std::vector<std::string> warnings;
  if (version_ == CgroupVersion::kV1) {
    for (const CgroupDir& dir : boxes_) {
      // A parent may be several levels deep; below the daemon it is one.
      fs::path made;
      for (const fs::path& part : dir.path) {
        made /= part;
        if (!made.has_relative_path() || fs::is_directory(made)) continue;
        HUTCH_TRY_VOID(mkdirIfMissing(made));
      }
    }
    return warnings;
  }
  const fs::path& base = base_.front().path;
  const fs::path& top = v2_root_.empty() ? base : v2_root_;
  HUTCH_TRY(std::string available_text, readText(top / "cgroup.controllers"));
  std::vector<std::string> available = splitWords(available_text);
  std::vector<std::string> enable;
  for (std::string_view controller : kV2Controllers) {
    if (contains(available, controller)) {
      enable.emplace_back(controller);
    } else {
      warnings.push_back("The " + std::string(controller) + " controller is not delegated to " +
                         top.string());
    }
  }
  if (!v2_root_.empty()) {
    HUTCH_TRY(auto more, prepareV2Parent(enable));
    warnings.insert(warnings.end(), more.begin(), more.end());
    return warnings;
  }
  bool busy = false;
  HUTCH_TRY_VOID(enableControllers(base, enable, &busy, warnings));
  if (busy) {
    // v2's "no internal processes" rule: move everything in base into a leaf, then retry.
    fs::path leaf = base / kDaemonLeafCgroup;
    HUTCH_TRY_VOID(mkdirIfMissing(leaf));
    HUTCH_TRY(std::string procs, readText(base / "cgroup.procs"));
    for (const std::string& pid : splitWords(procs)) {
      auto moved = writeFile(leaf / "cgroup.procs", pid);
      if (!moved && moved.error().sysErrno() != ESRCH) {
        return fail(moved.error().withContext("Cannot move hutchd into its leaf cgroup"));
      }
    }
    HUTCH_TRY_VOID(enableControllers(base, enable, nullptr, warnings));
  }
  const fs::path& boxes = boxes_.front().path;
  HUTCH_TRY_VOID(mkdirIfMissing(boxes));
  HUTCH_TRY_VOID(enableControllers(boxes, enable, nullptr, warnings));
  return warnings;
}

Result<std::vector<std::string>> CgroupHost::prepareV2Parent(
    const std::vector<std::string>& enable) const {
  // From the hierarchy's root down to the parent, each level passes the controllers on. The
  // root may hold processes; a level below it that does cannot pass them on (v2's "no internal
  // processes"): an error that names it, never a box without its limits.
  std::vector<std::string> warnings;
  fs::path dir = v2_root_;
  const fs::path& boxes = boxes_.front().path;
  std::vector<fs::path> levels{dir};
  for (const fs::path& part : boxes.lexically_relative(v2_root_)) {
    dir /= part;
    levels.push_back(dir);
  }
  for (size_t i = 0; i < levels.size(); ++i) {
    if (i > 0) HUTCH_TRY_VOID(mkdirIfMissing(levels[i]));
    bool busy = false;
    HUTCH_TRY_VOID(enableControllers(levels[i], enable, i == 0 ? nullptr : &busy, warnings));
    if (busy) {
      return fail(Errc::kFailedPrecondition,
                  "Cannot enable controllers in " + levels[i].string() +
                      ": it holds processes (cgroup v2 lets a cgroup either hold processes or "
                      "pass controllers on): give --cgroup-parent a path none of whose cgroups "
                      "hold processes");
    }
  }
  return warnings;
}

Result<BoxCgroup> CgroupHost::boxCgroup(std::string_view name) const {
  if (!isCgroupName(name)) {
    return fail(Errc::kInvalidArgument,
                "Box cgroup name '" + std::string(name) + "' must be letters, digits, . _ -");
  }
  BoxCgroup cgroup;
  cgroup.version = version_;
  for (const CgroupDir& dir : boxes_) {
    cgroup.dirs.push_back({dir.controllers, dir.path / std::string(name)});
  }
  return cgroup;
}

std::optional<BoxCgroup> CgroupHost::legacyBoxCgroup(std::string_view name) const {
  auto placed = boxCgroup(name);
  if (!placed) return std::nullopt;
  BoxCgroup legacy;
  legacy.version = version_;
  for (const CgroupDir& dir : base_) {
    legacy.dirs.push_back({dir.controllers, dir.path / kBoxesCgroup / std::string(name)});
  }
  if (legacy == *placed) return std::nullopt;
  return legacy;
}

}  // namespace hutch::jail

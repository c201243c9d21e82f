#include "box/box.h"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <random>
#include <set>

namespace hutch::box {

namespace {
constexpr std::array<std::pair<BoxState, std::string_view>, 7> kStateNames{{
    {BoxState::kCreating, "creating"},
    {BoxState::kRunning, "running"},
    {BoxState::kStopping, "stopping"},
    {BoxState::kStopped, "stopped"},
    {BoxState::kFailed, "failed"},
    {BoxState::kPaused, "paused"},
    {BoxState::kSuspended, "suspended"},
}};
}  // namespace

std::string randomId() {
  std::random_device rd;  // getrandom(2) on Linux
  std::uniform_int_distribution<int> digit(0, 15);
  std::string id(12, '0');
  for (char& c : id) c = "0123456789abcdef"[digit(rd)];
  return id;
}

int64_t msSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               t0)
      .count();
}

int64_t unixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string_view stateName(BoxState state) {
  for (const auto& [s, n] : kStateNames) {
    if (s == state) return n;
  }
  return "failed";
}

Result<BoxState> parseState(std::string_view text) {
  for (const auto& [s, n] : kStateNames) {
    if (n == text) return s;
  }
  return fail(Errc::kInvalidArgument, fmt::format("Unknown box state '{}'", text));
}

std::string_view expiryName(Expiry expiry) {
  switch (expiry) {
    case Expiry::kNone: return "";
    case Expiry::kRemove: return "remove";
    case Expiry::kStop: return "stop";
    case Expiry::kSuspend: return "suspend";
  }
  return "";
}

Result<Expiry> parseExpiry(std::string_view text) {
  for (Expiry e : {Expiry::kNone, Expiry::kRemove, Expiry::kStop, Expiry::kSuspend}) {
    if (expiryName(e) == text) return e;
  }
  return fail(Errc::kInvalidArgument,
              fmt::format("Unknown expiry action '{}' (use stop, suspend or remove)", text));
}

Result<> checkTransition(BoxState from, BoxState to) {
  bool legal = false;
  switch (to) {
    case BoxState::kCreating:
      legal =
          from == BoxState::kStopped || from == BoxState::kFailed || from == BoxState::kSuspended;
      break;
    case BoxState::kRunning:
      legal = from == BoxState::kCreating || from == BoxState::kPaused;
      break;
    case BoxState::kStopping:
      legal = from == BoxState::kRunning || from == BoxState::kPaused;
      break;
    case BoxState::kStopped:
      legal = from == BoxState::kStopping || from == BoxState::kCreating ||
              from == BoxState::kSuspended;  // a suspended box shut down: its memory dropped
      break;
    case BoxState::kPaused: legal = from == BoxState::kRunning; break;
    case BoxState::kSuspended: legal = from == BoxState::kStopping; break;
    case BoxState::kFailed:
      legal = from != BoxState::kStopped && from != BoxState::kSuspended;
      break;
  }
  if (legal) return ok();
  return fail(Errc::kFailedPrecondition,
              fmt::format("Box is {} and cannot become {}", stateName(from), stateName(to)));
}

Result<> BoxConfig::validate() const {
  if (cpus < 1 || cpus > 64) {
    return fail(Errc::kInvalidArgument, fmt::format("cpus must be 1 to 64, got {}", cpus));
  }
  if (memory_mib < 128 || memory_mib > 65536) {
    return fail(Errc::kInvalidArgument,
                fmt::format("memory must be 128 to 65536 MiB, got {}", memory_mib));
  }
  if (disk_mib != 0 && (disk_mib < 512 || disk_mib > 16u * 1024 * 1024)) {
    return fail(Errc::kInvalidArgument,
                fmt::format("disk must be 512 MiB to 16 TiB, got {} MiB", disk_mib));
  }
  if (max_exec_ms > uint64_t{366} * 24 * 3600 * 1000) {
    return fail(Errc::kInvalidArgument, "max exec time must be at most a year (or 0: no limit)");
  }
  if (template_name.empty()) return fail(Errc::kInvalidArgument, "template must not be empty");
  return validateName(template_name);
}

Result<> validateEnv(const BoxEnv& env) {
  if (env.size() > 256) {
    return fail(Errc::kInvalidArgument, "A box takes at most 256 environment variables");
  }
  for (const auto& [name, value] : env) {
    bool ok_name = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0]));
    for (char c : name) {
      ok_name = ok_name && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
    }
    if (!ok_name) {
      return fail(Errc::kInvalidArgument,
                  "Environment variable name '" + name +
                      "' is not valid: use letters, digits and '_', not starting with a digit");
    }
    if (value.find('\0') != std::string::npos) {
      return fail(Errc::kInvalidArgument,
                  "The value of environment variable " + name + " contains a NUL byte");
    }
  }
  return ok();
}

Result<> validateName(std::string_view name) {
  auto bad = [&] {
    return fail(Errc::kInvalidArgument,
                fmt::format("Invalid name '{}': use 1 to 63 letters, digits, '_', '.' or '-', "
                            "starting with a letter or digit",
                            name));
  };
  if (name.empty() || name.size() > 63) return bad();
  if (!std::isalnum(static_cast<unsigned char>(name[0]))) return bad();
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') {
      return bad();
    }
  }
  return ok();
}

namespace {

Result<> checkSharePath(std::string_view path, std::string_view which) {
  auto bad = [&](std::string_view why) {
    return fail(Errc::kInvalidArgument, fmt::format("Shared folder {} '{}' {}", which, path, why));
  };
  if (path.empty() || path[0] != '/') return bad("must be an absolute path");
  if (path.size() > 1024) return bad("is longer than 1024 bytes");
  for (char c : path) {
    if (c == ',' || static_cast<unsigned char>(c) < 0x20) {
      return bad("contains a comma or a control character; rename or link it");
    }
  }
  for (const auto& part : std::filesystem::path(path)) {
    if (part == "..") return bad("must not contain '..'");
  }
  return ok();
}

}  // namespace

Result<> validateShares(const std::vector<BoxShare>& shares) {
  if (shares.size() > kMaxShares) {
    return fail(Errc::kInvalidArgument,
                fmt::format("A box takes at most {} shared folders", kMaxShares));
  }
  std::set<std::string> seen;
  for (const auto& share : shares) {
    HUTCH_TRY_VOID(checkSharePath(share.host_dir, "host directory"));
    HUTCH_TRY_VOID(checkSharePath(share.box_dir, "box directory"));
    std::string where = std::filesystem::path(share.box_dir).lexically_normal().string();
    while (where.size() > 1 && where.back() == '/') where.pop_back();
    if (where == "/") {
      return fail(Errc::kInvalidArgument,
                  "A shared folder cannot be mounted on the box's '/'; choose a directory");
    }
    if (!seen.insert(where).second) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("Two shared folders are mounted on {}; choose one", where));
    }
  }
  return ok();
}

Result<BoxShare> parseShare(std::string_view text) {
  BoxShare share;
  std::string_view rest = text;
  if (rest.ends_with(":ro")) {
    share.read_only = true;
    rest.remove_suffix(3);
  } else if (rest.ends_with(":rw")) {
    rest.remove_suffix(3);
  }
  size_t colon = rest.find(':');
  if (colon == std::string_view::npos || rest.find(':', colon + 1) != std::string_view::npos) {
    return fail(Errc::kInvalidArgument,
                fmt::format("Cannot read shared folder '{}': write HOSTDIR:BOXDIR or "
                            "HOSTDIR:BOXDIR:ro",
                            text));
  }
  share.host_dir = std::string(rest.substr(0, colon));
  share.box_dir = std::string(rest.substr(colon + 1));
  HUTCH_TRY_VOID(validateShares({share}));
  return share;
}

std::string shareText(const BoxShare& share) {
  return share.host_dir + ":" + share.box_dir + (share.read_only ? ":ro" : "");
}

}  // namespace hutch::box

#include "e2b/template_model.h"

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <ctime>
#include <limits>

#include "api/encoding.h"
#include "box/box.h"
#include "e2b/model.h"

namespace hutch::e2b {

namespace fs = std::filesystem;

namespace {

bool nameChar(char c, bool upper) {
  const auto u = static_cast<unsigned char>(c);
  if (std::isdigit(u) || std::islower(u) || c == '_' || c == '.' || c == '-') return true;
  return upper && std::isupper(u);
}

Result<> checkName(std::string_view text, bool upper, std::string_view what) {
  bool good =
      !text.empty() && text.size() <= 63 && std::isalnum(static_cast<unsigned char>(text[0]));
  for (char c : text) good = good && nameChar(c, upper);
  if (good) return ok();
  return fail(Errc::kInvalidArgument,
              fmt::format("Invalid template {} '{}': use 1 to 63 {}letters, digits, '_', '.' or "
                          "'-', starting with a letter or digit",
                          what, text, upper ? "" : "lowercase "));
}

Result<std::string> stringField(const json& j, const char* key, bool required) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) return fail(Errc::kInvalidArgument, fmt::format("{} is required", key));
    return std::string();
  }
  if (!it->is_string())
    return fail(Errc::kInvalidArgument, fmt::format("{} must be a string", key));
  return it->get<std::string>();
}

Result<bool> boolField(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return false;
  if (!it->is_boolean())
    return fail(Errc::kInvalidArgument, fmt::format("{} must be a boolean", key));
  return it->get<bool>();
}

// A file mode as E2B's SDKs send it ("0755"), or nullopt for "".
Result<std::optional<uint32_t>> parseMode(const std::string& text) {
  if (text.empty()) return std::optional<uint32_t>();
  uint32_t mode = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), mode, 8);
  if (ec != std::errc() || end != text.data() + text.size() || mode > 07777) {
    return fail(
        Errc::kInvalidArgument,
        fmt::format("COPY's mode must be octal permission bits (\"0755\"), not '{}'", text));
  }
  return std::optional<uint32_t>(mode);
}

std::string shellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

// fromImageRegistry (E2B's FromImageRegistry): only {type: "registry", username, password}.
// The password is never part of an error.
Result<std::optional<box::TemplateService::PullCredentials>> parseRegistry(
    const json& j, const std::string& from_image) {
  if (!j.is_object()) return fail(Errc::kInvalidArgument, "fromImageRegistry must be an object");
  if (from_image.empty()) {
    return fail(Errc::kInvalidArgument,
                "fromImageRegistry goes with fromImage: it is the credentials of that image's "
                "registry");
  }
  HUTCH_TRY(std::string type, stringField(j, "type", true));
  if (type == "aws" || type == "gcp") {
    return fail(Errc::kUnsupported,
                fmt::format("Registry credentials of type '{}' (from{}Registry) are not "
                            "supported by hutchd; give the registry's user name and password "
                            "(fromImage(image, {{username, password}})), or log the host in "
                            "(hutch registry login HOST)",
                            type, type == "aws" ? "AWS" : "GCP"));
  }
  if (type != "registry") {
    return fail(Errc::kInvalidArgument,
                fmt::format("fromImageRegistry's type must be 'registry', 'aws' or 'gcp', not "
                            "'{}'",
                            type));
  }
  HUTCH_TRY(std::string username, stringField(j, "username", true));
  HUTCH_TRY(std::string password, stringField(j, "password", true));
  if (username.empty() || username.find(':') != std::string::npos) {
    return fail(Errc::kInvalidArgument,
                "fromImageRegistry's username must be a user name, not empty, without ':'");
  }
  if (password.empty()) {
    return fail(Errc::kInvalidArgument, "fromImageRegistry's password must not be empty");
  }
  return std::optional<box::TemplateService::PullCredentials>(
      box::TemplateService::PullCredentials{std::move(username), std::move(password)});
}

// A RUN as root that makes `user` when the box has none of that name: Debian's adduser, else
// useradd, else busybox's adduser; an image with none of them (Debian's busybox-static has no
// adduser) gets the lines in /etc/passwd and /etc/group and a home, written by the shell.
// Makes `user` when the box has none of that name (adduser, else useradd, else by hand) and,
// with `sudo`, lets it sudo without a password as E2B's builder does: the sudo or wheel group,
// no password, and a NOPASSWD line in /etc/sudoers.d/e2b-USER (which Debian's, Ubuntu's,
// Fedora's and Alpine's sudoers include), there already for a sudo installed later; an image
// without those groups is not an error.
box::BuildStep makeUserStep(const std::string& user, std::string text, bool sudo = false) {
  box::BuildStep make;
  make.kind = box::BuildStep::Kind::kRun;
  make.text = std::move(text);
  const std::string q = shellQuote(user);
  std::string script = fmt::format(
      "mkuser() {{\n"
      "id -u {0} >/dev/null 2>&1 && return 0\n"
      "adduser --disabled-password --gecos '' {0} >/dev/null 2>&1 && return 0\n"
      "useradd -m {0} >/dev/null 2>&1 && return 0\n"
      "adduser -D {0} >/dev/null 2>&1 && return 0\n"
      "u=1000\n"
      "while grep -q \"^[^:]*:[^:]*:$u:\" /etc/passwd /etc/group 2>/dev/null; do "
      "u=$((u+1)); done\n"
      "echo {0}:x:$u:$u::/home/{1}:/bin/sh >> /etc/passwd && "
      "echo {0}:x:$u: >> /etc/group && mkdir -p /home/{1} && "
      "chown $u:$u /home/{1} && return 0\n"
      "echo \"Cannot make the user {0}: no adduser or useradd, and /etc/passwd is "
      "not writable\" >&2; return 1\n"
      "}}\n"
      "mkuser || exit 1\n",
      q, user);
  if (sudo) {
    std::string file = "e2b-" + user;  // sudo skips a name with a '.' in /etc/sudoers.d
    std::replace(file.begin(), file.end(), '.', '_');
    script += fmt::format(
        "for g in sudo wheel; do\n"
        "  grep -q \"^$g:\" /etc/group 2>/dev/null || continue\n"
        "  usermod -aG $g {0} 2>/dev/null || adduser {0} $g >/dev/null 2>&1 || "
        "addgroup {0} $g 2>/dev/null\n"
        "  break\n"
        "done\n"
        "passwd -d {0} >/dev/null 2>&1\n"
        "mkdir -p /etc/sudoers.d && printf '%s\\n' {1} > /etc/sudoers.d/{2} && "
        "chmod 0440 /etc/sudoers.d/{2}\n"
        "exit 0",
        q, shellQuote(user + " ALL=(ALL:ALL) NOPASSWD: ALL"), shellQuote(file));
  }
  make.argv = {"/bin/sh", "-c", std::move(script)};
  make.user = "root";
  return make;
}

}  // namespace

Result<> validateTag(std::string_view tag) {
  return checkName(tag, true, "tag");
}

Result<TemplateRef> parseTemplateRef(std::string_view text) {
  TemplateRef ref;
  const size_t colon = text.find(':');
  ref.name = std::string(text.substr(0, colon));
  ref.tag = colon == std::string_view::npos ? std::string(kDefaultTag)
                                            : std::string(text.substr(colon + 1));
  HUTCH_TRY_VOID(checkName(ref.name, false, "name"));
  HUTCH_TRY_VOID(validateTag(ref.tag));
  return ref;
}

Result<NewTemplate> parseNewTemplate(std::string_view body) {
  HUTCH_TRY(json j, parseMessage(body));
  NewTemplate out;
  HUTCH_TRY(std::string name, stringField(j, "name", true));
  HUTCH_TRY(out.ref, parseTemplateRef(name));
  out.tags.push_back(out.ref.tag);
  if (auto it = j.find("tags"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) return fail(Errc::kInvalidArgument, "tags must be a list of strings");
    for (const json& t : *it) {
      if (!t.is_string()) return fail(Errc::kInvalidArgument, "tags must be a list of strings");
      const std::string tag = t.get<std::string>();
      HUTCH_TRY_VOID(validateTag(tag));
      if (std::find(out.tags.begin(), out.tags.end(), tag) == out.tags.end()) {
        out.tags.push_back(tag);
      }
    }
  }
  auto number = [&](const char* key, uint64_t max, uint64_t& into) -> Result<> {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return ok();
    if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<uint64_t>() > max) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("{} must be a whole number from 1 to {}", key, max));
    }
    into = it->get<uint64_t>();
    return ok();
  };
  uint64_t cpus = out.cpus;
  HUTCH_TRY_VOID(number("cpuCount", 64, cpus));
  out.cpus = static_cast<unsigned>(cpus);
  HUTCH_TRY_VOID(number("memoryMB", uint64_t{1} << 20, out.memory_mib));
  return out;
}

Result<BuildStart> parseBuildStart(std::string_view body) {
  HUTCH_TRY(json j, parseMessage(body));
  BuildStart out;
  HUTCH_TRY(out.from_image, stringField(j, "fromImage", false));
  HUTCH_TRY(out.from_template, stringField(j, "fromTemplate", false));
  HUTCH_TRY(out.start_cmd, stringField(j, "startCmd", false));
  HUTCH_TRY(out.ready_cmd, stringField(j, "readyCmd", false));
  HUTCH_TRY(out.force, boolField(j, "force"));
  if (out.from_image.empty() && out.from_template.empty()) {
    return fail(Errc::kInvalidArgument, "A build needs fromImage or fromTemplate");
  }
  if (auto it = j.find("fromImageRegistry"); it != j.end() && !it->is_null()) {
    HUTCH_TRY(out.registry, parseRegistry(*it, out.from_image));
  }
  if (auto it = j.find("steps"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) return fail(Errc::kInvalidArgument, "steps must be a list");
    for (const json& s : *it) {
      if (!s.is_object()) return fail(Errc::kInvalidArgument, "Each step must be an object");
      E2bStep step;
      HUTCH_TRY(step.type, stringField(s, "type", true));
      HUTCH_TRY(step.force, boolField(s, "force"));
      HUTCH_TRY(step.files_hash, stringField(s, "filesHash", false));
      if (auto a = s.find("args"); a != s.end() && !a->is_null()) {
        if (!a->is_array()) return fail(Errc::kInvalidArgument, "A step's args must be a list");
        for (const json& arg : *a) {
          if (!arg.is_string()) {
            return fail(Errc::kInvalidArgument, "A step's args must be strings");
          }
          step.args.push_back(arg.get<std::string>());
        }
      }
      out.steps.push_back(std::move(step));
    }
  }
  return out;
}

std::vector<std::string> runArgv(const std::string& cmd) {
  return {"/bin/sh", "-c",
          "if [ -x /bin/bash ]; then exec /bin/bash -l -c \"$1\"; fi; exec /bin/sh -c \"$1\"", "sh",
          cmd};
}

std::string globBase(std::string_view src) {
  // doublestar.SplitPattern(src + "/"): up to the last '/' before the first meta character.
  std::string p(src);
  if (p.empty() || p.back() != '/') p += '/';
  size_t meta = p.find_first_of("*?[{");
  size_t slash = p.rfind('/', meta == std::string::npos ? std::string::npos : meta);
  if (slash == std::string::npos) return ".";
  std::string base = p.substr(0, slash);
  return base.empty() ? "/" : base;
}

Result<std::vector<box::CopyItem>> copyItems(const fs::path& root, const std::string& src,
                                             const std::string& dest, const std::string& mode) {
  HUTCH_TRY(std::optional<uint32_t> chmod, parseMode(mode));
  if (dest.empty()) return fail(Errc::kInvalidArgument, "COPY needs a destination");
  // The entry the glob's fixed part names, inside the upload: never outside it.
  fs::path rel = fs::path(globBase(src)).lexically_normal();
  if (rel.is_absolute() || *rel.begin() == "..") {
    return fail(Errc::kInvalidArgument,
                fmt::format("COPY's source '{}' is not inside the build's context", src));
  }
  const fs::path entry = (root / rel).lexically_normal();
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(entry, ec);
  if (ec || st.type() == fs::file_type::not_found) {
    return fail(Errc::kInvalidArgument,
                fmt::format("COPY's source '{}' is not in the uploaded files", src));
  }
  // Nothing on the way to the entry may be a symlink (the upload's tree is hostile).
  for (fs::path p = entry.parent_path(); p.string().size() > root.string().size();
       p = p.parent_path()) {
    if (fs::is_symlink(fs::symlink_status(p, ec))) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("COPY's source '{}' goes through a symlink", src));
    }
  }
  auto fileItem = [&](const fs::path& host, const std::string& target,
                      fs::file_type type) -> Result<box::CopyItem> {
    box::CopyItem item;
    item.target = target;
    struct stat sb {};
    if (::lstat(host.c_str(), &sb) != 0) {
      return fail(Errc::kInternal, fmt::format("Cannot read {}", host.string()));
    }
    item.mode = chmod ? *chmod : (sb.st_mode & 07777);
    if (type == fs::file_type::symlink) {
      item.type = box::CopyItem::Type::kSymlink;
      item.link = fs::read_symlink(host, ec).string();
      if (ec) return fail(Errc::kInternal, fmt::format("Cannot read {}", host.string()));
    } else if (type == fs::file_type::directory) {
      item.type = box::CopyItem::Type::kDirectory;
      if (!chmod) item.mode = sb.st_mode & 07777;
    } else {
      item.type = box::CopyItem::Type::kFile;
      item.source = host;
    }
    return item;
  };
  std::vector<box::CopyItem> items;
  const bool into = dest.back() == '/';
  if (st.type() == fs::file_type::regular || st.type() == fs::file_type::symlink) {
    std::string target = dest;
    if (into) target += entry.filename().string();
    HUTCH_TRY(box::CopyItem item, fileItem(entry, target, st.type()));
    items.push_back(std::move(item));
    return items;
  }
  if (st.type() != fs::file_type::directory) {
    return fail(
        Errc::kInvalidArgument,
        fmt::format("COPY's source '{}' is neither a file, a directory nor a symlink", src));
  }
  // A directory: its contents merged into dest (made if missing).
  std::string base = dest;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  std::vector<fs::directory_entry> entries;
  for (auto it = fs::recursive_directory_iterator(entry, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    entries.push_back(*it);
  }
  if (ec)
    return fail(Errc::kInternal, fmt::format("Cannot read {}: {}", entry.string(), ec.message()));
  // Parents before children, in a stable order.
  std::sort(entries.begin(), entries.end(),
            [](const auto& a, const auto& b) { return a.path() < b.path(); });
  if (entries.empty() && base != "/") {
    // An empty directory still makes dest.
    box::CopyItem top;
    top.type = box::CopyItem::Type::kDirectory;
    top.target = base;
    top.mode = chmod ? *chmod : 0755;
    items.push_back(top);
  }
  for (const auto& e : entries) {
    const fs::file_type type = e.symlink_status().type();
    if (type != fs::file_type::regular && type != fs::file_type::directory &&
        type != fs::file_type::symlink) {
      continue;  // the upload's reader makes no devices or fifos; nothing else to copy
    }
    const std::string r = e.path().lexically_relative(entry).generic_string();
    std::string target = base == "/" ? "/" + r : base + "/" + r;
    HUTCH_TRY(box::CopyItem item, fileItem(e.path(), target, type));
    items.push_back(std::move(item));
  }
  return items;
}

Result<E2bPlan> planBuild(const BuildStart& start, const std::string& base_template,
                          const FilesLookup& files) {
  E2bPlan out;
  box::BuildPlan& plan = out.plan;
  if (!start.from_template.empty()) {
    plan.base_template = base_template;
  } else {
    plan.base_image = start.from_image;
    plan.base_credentials = start.registry;
  }
  plan.start_cmd = start.start_cmd;
  plan.ready_cmd = start.ready_cmd;
  std::string user;  // the USER so far ("": the base's)
  int index = 0;
  auto add = [&](box::BuildStep step) {
    out.origin.push_back(index);
    plan.steps.push_back(std::move(step));
  };
  if (!start.from_image.empty()) {
    // E2B's provisioning gives every image the user its SDKs run commands as by default.
    box::BuildStep provision = makeUserStep(
        std::string(kDefaultUser),
        fmt::format("USER {} (made if missing, with sudo, as E2B provisions every image)",
                    kDefaultUser),
        true);
    provision.force = start.force;  // the whole build's force: its first step, so all of it
    add(std::move(provision));
  }
  const bool forced = start.force && plan.steps.empty();
  for (const E2bStep& s : start.steps) {
    ++index;
    auto need = [&](size_t n, const char* what) -> Result<> {
      if (s.args.size() >= n) return ok();
      return fail(Errc::kInvalidArgument, fmt::format("Step {}: {} needs {}", index, s.type, what));
    };
    box::BuildStep step;
    step.force = s.force || (forced && index == 1);
    if (s.type == "RUN") {
      HUTCH_TRY_VOID(need(1, "a command"));
      step.kind = box::BuildStep::Kind::kRun;
      step.text = "RUN " + s.args[0];
      step.argv = runArgv(s.args[0]);
      if (s.args.size() > 1) step.user = s.args[1];
    } else if (s.type == "COPY") {
      HUTCH_TRY_VOID(need(2, "a source and a destination"));
      if (!validFilesHash(s.files_hash)) {
        return fail(Errc::kInvalidArgument,
                    fmt::format("Step {}: COPY needs filesHash (64 hex digits)", index));
      }
      auto dir = files(s.files_hash);
      if (!dir) {
        return fail(Errc::kFailedPrecondition,
                    fmt::format("Step {}: the files of COPY {} were not uploaded (hash {})", index,
                                s.args[0], s.files_hash));
      }
      const std::string owner = s.args.size() > 2 && !s.args[2].empty() ? s.args[2] : user;
      const std::string mode = s.args.size() > 3 ? s.args[3] : "";
      auto items = copyItems(*dir, s.args[0], s.args[1], mode);
      if (!items) return fail(items.error().withContext(fmt::format("Step {}", index)));
      step.kind = box::BuildStep::Kind::kCopy;
      step.text = fmt::format("COPY {} {}", s.args[0], s.args[1]);
      step.items = std::move(*items);
      step.chown = owner == "root" ? "" : owner;
    } else if (s.type == "ENV") {
      if (s.args.size() % 2 != 0) {
        return fail(Errc::kInvalidArgument,
                    fmt::format("Step {}: ENV takes names and values in pairs", index));
      }
      step.kind = box::BuildStep::Kind::kEnv;
      step.text = "ENV";
      for (size_t i = 0; i < s.args.size(); i += 2) {
        if (s.args[i].empty() || s.args[i].find('=') != std::string::npos) {
          return fail(Errc::kInvalidArgument,
                      fmt::format("Step {}: '{}' is not a variable name", index, s.args[i]));
        }
        step.env.emplace_back(s.args[i], s.args[i + 1]);
        step.text += fmt::format(" {}={}", s.args[i], s.args[i + 1]);
      }
    } else if (s.type == "WORKDIR") {
      HUTCH_TRY_VOID(need(1, "a path"));
      step.kind = box::BuildStep::Kind::kWorkdir;
      step.text = "WORKDIR " + s.args[0];
      step.path = s.args[0];
      out.workdir = s.args[0];
    } else if (s.type == "USER") {
      HUTCH_TRY_VOID(need(1, "a user"));
      HUTCH_TRY_VOID(checkName(s.args[0], false, "user"));
      user = s.args[0];
      out.user = user;
      const bool sudo = s.args.size() > 1 && s.args[1] == "true";
      if (user != "root") {
        // E2B makes the user when the box has none of that name.
        box::BuildStep make = makeUserStep(
            user, "USER " + user + (sudo ? " (made if missing, with sudo)" : " (made if missing)"),
            sudo);
        make.force = step.force;
        step.force = false;
        add(std::move(make));
      }
      step.kind = box::BuildStep::Kind::kUser;
      step.text = "USER " + user;
      step.user = user;
    } else {
      return fail(Errc::kInvalidArgument,
                  fmt::format("Step {}: unknown step type '{}' (COPY, ENV, RUN, WORKDIR, USER)",
                              index, s.type));
    }
    add(std::move(step));
  }
  return out;
}

std::string stepLabel(int engine_step, const std::vector<int>& origin) {
  if (engine_step == box::BuildLog::kFinalizeStep) return "finalize";
  if (engine_step < 0 || static_cast<size_t>(engine_step) >= origin.size()) return "base";
  const int step = origin[static_cast<size_t>(engine_step)];
  return step == 0 ? "base" : std::to_string(step);
}

json logEntryJson(const LogLine& line) {
  const int64_t seconds = line.unix_ms / 1000;
  std::string stamp = rfc3339(seconds);
  stamp.insert(stamp.size() - 1, fmt::format(".{:03}", line.unix_ms % 1000));
  json j{{"timestamp", stamp}, {"level", line.level}, {"message", line.message}};
  if (!line.step.empty()) j["step"] = line.step;
  return j;
}

namespace {

// debug < info < warn < error; -1 for none of them.
int levelRank(std::string_view level) {
  constexpr std::string_view kLevels[] = {"debug", "info", "warn", "error"};
  for (size_t i = 0; i < std::size(kLevels); ++i) {
    if (kLevels[i] == level) return static_cast<int>(i);
  }
  return -1;
}

bool wanted(const LogLine& line, const LogsQuery& page) {
  return page.level.empty() || levelRank(line.level) >= levelRank(page.level);
}

}  // namespace

Result<LogsQuery> parseLogsQuery(const std::map<std::string, std::string, std::less<>>& query) {
  constexpr int64_t kMaxNumber = std::numeric_limits<int64_t>::max();
  LogsQuery out;
  auto get = [&](std::string_view key) -> std::optional<std::string> {
    auto it = query.find(key);
    if (it == query.end() || it->second.empty()) return std::nullopt;
    return it->second;
  };
  auto number = [&](std::string_view key, int64_t min,
                    int64_t max) -> Result<std::optional<int64_t>> {
    auto text = get(key);
    if (!text) return std::optional<int64_t>();
    int64_t n = 0;
    auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), n);
    if (ec != std::errc() || end != text->data() + text->size() || n < min || n > max) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("{} must be a whole number from {} to {}", key, min, max));
    }
    return std::optional<int64_t>(n);
  };
  HUTCH_TRY(std::optional<int64_t> offset, number("logsOffset", 0, kMaxNumber));
  if (offset) out.offset = static_cast<size_t>(*offset);
  HUTCH_TRY(out.cursor, number("cursor", 0, kMaxNumber));
  HUTCH_TRY(std::optional<int64_t> limit, number("limit", 0, static_cast<int64_t>(kLogPage)));
  if (limit) out.limit = static_cast<size_t>(*limit);
  if (auto level = get("level")) {
    if (levelRank(*level) < 0) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("level must be debug, info, warn or error, not '{}'", *level));
    }
    out.level = *level;
  }
  if (auto direction = get("direction")) {
    if (*direction != "forward" && *direction != "backward") {
      return fail(Errc::kInvalidArgument,
                  fmt::format("direction must be forward or backward, not '{}'", *direction));
    }
    out.backward = *direction == "backward";
  }
  if (auto source = get("source"); source && *source != "temporary" && *source != "persistent") {
    return fail(Errc::kInvalidArgument,
                fmt::format("source must be temporary or persistent, not '{}'", *source));
  }
  return out;
}

json buildInfoJson(const std::string& template_id, const std::string& build_id,
                   std::string_view status, const std::vector<LogLine>& lines,
                   const LogsQuery& page, const std::optional<LogLine>& reason) {
  json entries = json::array();
  json logs = json::array();
  size_t skipped = 0;
  for (const LogLine& line : lines) {
    if (entries.size() >= page.limit) break;
    if (!wanted(line, page)) continue;
    if (skipped < page.offset) {
      ++skipped;
      continue;
    }
    entries.push_back(logEntryJson(line));
    logs.push_back(line.message);
  }
  json j{{"templateID", template_id},
         {"buildID", build_id},
         {"status", status},
         {"logEntries", entries},
         {"logs", logs}};
  if (reason) {
    json r{{"message", reason->message}, {"logEntries", json::array()}};
    if (!reason->step.empty()) r["step"] = reason->step;
    j["reason"] = r;
  }
  return j;
}

json buildLogsJson(const std::vector<LogLine>& lines, const LogsQuery& page, int64_t now_ms) {
  json logs = json::array();
  auto take = [&](const LogLine& line) {
    if (logs.size() < page.limit && wanted(line, page)) logs.push_back(logEntryJson(line));
  };
  if (page.backward) {
    const int64_t cursor = page.cursor.value_or(now_ms);
    for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
      if (it->unix_ms <= cursor) take(*it);
    }
  } else {
    const int64_t cursor = page.cursor.value_or(0);
    for (const LogLine& line : lines) {
      if (line.unix_ms >= cursor) take(line);
    }
  }
  return json{{"logs", logs}};
}

std::string credentialScope(std::string_view secret, std::string_view owner,
                            const box::TemplateService::PullCredentials& credentials) {
  // Lengths first: no two (owner, user name, password) triples give one message.
  const std::string message =
      fmt::format("hutch-e2b-registry:{}:{}:{}:{}{}{}", owner.size(), credentials.username.size(),
                  credentials.password.size(), owner, credentials.username, credentials.password);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &n);
  return api::hexEncode(mac, n);
}

std::string uploadToken(std::string_view secret, std::string_view owner, std::string_view hash,
                        int64_t expires) {
  const std::string message = fmt::format("hutch-e2b-upload:{}:{}:{}", owner, hash, expires);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &n);
  return api::hexEncode(mac, n);
}

Result<> checkUploadToken(std::string_view secret, std::string_view owner, std::string_view hash,
                          std::string_view expires, std::string_view token, int64_t now) {
  int64_t when = 0;
  auto [end, ec] = std::from_chars(expires.data(), expires.data() + expires.size(), when);
  if (ec != std::errc() || end != expires.data() + expires.size() || token.empty()) {
    return fail(Errc::kUnauthenticated,
                "This upload URL is not one hutchd gave out: ask for a new one "
                "(GET /templates/{id}/files/{hash})");
  }
  const std::string want = uploadToken(secret, owner, hash, when);
  if (want.size() != token.size() || CRYPTO_memcmp(want.data(), token.data(), want.size()) != 0) {
    return fail(Errc::kUnauthenticated,
                "This upload URL's token is wrong: ask for a new one "
                "(GET /templates/{id}/files/{hash})");
  }
  if (now > when) {
    return fail(
        Errc::kUnauthenticated,
        "This upload URL has expired: ask for a new one (GET /templates/{id}/files/{hash})");
  }
  return ok();
}

bool validFilesHash(std::string_view hash) {
  if (hash.size() != 64) return false;
  return std::all_of(hash.begin(), hash.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f');
  });
}

}  // namespace hutch::e2b

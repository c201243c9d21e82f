#include "e2b/model.h"

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <cctype>
#include <charconv>
#include <csignal>
#include <cstring>
#include <ctime>

#include "api/encoding.h"
#include "api/error_mapping.h"
#include "base/path_text.h"

namespace hutch::e2b {

namespace {

Result<std::string> stringField(const json& j, const char* name, std::string_view what) {
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return std::string();
  if (!it->is_string()) {
    return fail(Errc::kInvalidArgument, fmt::format("{}: '{}' must be a string", what, name));
  }
  return it->get<std::string>();
}

Result<std::map<std::string, std::string>> stringMap(const json& j, const char* name,
                                                     std::string_view what) {
  std::map<std::string, std::string> out;
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return out;
  if (!it->is_object()) {
    return fail(Errc::kInvalidArgument,
                fmt::format("{}: '{}' must be an object of strings", what, name));
  }
  for (const auto& [k, v] : it->items()) {
    if (!v.is_string()) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("{}: '{}.{}' must be a string", what, name, k));
    }
    out[k] = v.get<std::string>();
  }
  return out;
}

Result<std::vector<std::string>> stringList(const json& j, const char* name,
                                            std::string_view what) {
  std::vector<std::string> out;
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return out;
  if (!it->is_array()) {
    return fail(Errc::kInvalidArgument,
                fmt::format("{}: '{}' must be a list of strings", what, name));
  }
  for (const auto& v : *it) {
    if (!v.is_string()) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("{}: '{}' must be a list of strings", what, name));
    }
    out.push_back(v.get<std::string>());
  }
  return out;
}

// proto3 JSON numbers: a number or a decimal string.
Result<std::optional<int64_t>> integerField(const json& j, const char* name,
                                            std::string_view what) {
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return std::optional<int64_t>();
  if (it->is_number_integer()) return std::optional<int64_t>(it->get<int64_t>());
  if (it->is_number_float()) {
    double d = it->get<double>();
    if (d == static_cast<double>(static_cast<int64_t>(d))) {
      return std::optional<int64_t>(static_cast<int64_t>(d));
    }
  }
  if (it->is_string()) {
    const std::string& s = it->get_ref<const std::string&>();
    try {
      size_t used = 0;
      int64_t v = std::stoll(s, &used);
      if (used == s.size()) return std::optional<int64_t>(v);
    } catch (const std::exception&) {
    }
  }
  return fail(Errc::kInvalidArgument, fmt::format("{}: '{}' must be an integer", what, name));
}

}  // namespace

std::string envelope(std::string_view message, uint8_t flags) {
  std::string out;
  out.reserve(5 + message.size());
  const auto n = static_cast<uint32_t>(message.size());
  out += static_cast<char>(flags);
  out += static_cast<char>((n >> 24) & 0xff);
  out += static_cast<char>((n >> 16) & 0xff);
  out += static_cast<char>((n >> 8) & 0xff);
  out += static_cast<char>(n & 0xff);
  out.append(message);
  return out;
}

Result<std::string> singleEnvelope(std::string_view body) {
  if (body.size() < 5) {
    return fail(Errc::kInvalidArgument,
                "A streaming request's body must be one Connect envelope (5-byte header, then "
                "the JSON message)");
  }
  const auto flags = static_cast<uint8_t>(body[0]);
  if (flags != 0) {
    return fail(Errc::kInvalidArgument,
                fmt::format("The request envelope has flags {:#x}; compressed messages are not "
                            "accepted (send the JSON codec uncompressed)",
                            flags));
  }
  uint32_t n = 0;
  for (int i = 1; i <= 4; ++i) n = (n << 8) | static_cast<uint8_t>(body[i]);
  if (n != body.size() - 5) {
    return fail(Errc::kInvalidArgument,
                fmt::format("The request envelope says {} bytes and {} follow; send exactly one "
                            "message",
                            n, body.size() - 5));
  }
  return std::string(body.substr(5));
}

std::string_view connectCode(Errc code) {
  switch (code) {
    case Errc::kInvalidArgument: return "invalid_argument";
    case Errc::kNotFound: return "not_found";
    case Errc::kAlreadyExists: return "already_exists";
    case Errc::kFailedPrecondition: return "failed_precondition";
    case Errc::kUnavailable: return "unavailable";
    case Errc::kTimeout: return "deadline_exceeded";
    case Errc::kUnsupported: return "unimplemented";
    case Errc::kCancelled: return "canceled";
    case Errc::kUnauthenticated: return "unauthenticated";
    case Errc::kPermissionDenied: return "permission_denied";
    case Errc::kResourceExhausted: return "resource_exhausted";
    case Errc::kProtocol:
    case Errc::kInternal: return "internal";
  }
  return "unknown";
}

int connectStatus(std::string_view code) {
  static const std::map<std::string_view, int> kStatus = {{"canceled", 499},
                                                          {"unknown", 500},
                                                          {"invalid_argument", 400},
                                                          {"deadline_exceeded", 504},
                                                          {"not_found", 404},
                                                          {"already_exists", 409},
                                                          {"permission_denied", 403},
                                                          {"resource_exhausted", 429},
                                                          {"failed_precondition", 400},
                                                          {"aborted", 409},
                                                          {"out_of_range", 400},
                                                          {"unimplemented", 501},
                                                          {"internal", 500},
                                                          {"unavailable", 503},
                                                          {"data_loss", 500},
                                                          {"unauthenticated", 401}};
  auto it = kStatus.find(code);
  return it == kStatus.end() ? 500 : it->second;
}

json connectError(const Error& error) {
  return json{{"code", std::string(connectCode(error.code()))}, {"message", error.message()}};
}

json apiError(const Error& error, int status) {
  return json{{"code", status}, {"message", error.message()}};
}

Result<NewSandbox> parseNewSandbox(std::string_view body) {
  constexpr std::string_view kWhat = "The sandbox request";
  NewSandbox out;
  if (body.empty()) return out;
  json j = json::parse(body, nullptr, false);
  if (!j.is_object()) {
    return fail(Errc::kInvalidArgument, "The sandbox request must be a JSON object");
  }
  HUTCH_TRY(std::string tmpl, stringField(j, "templateID", kWhat));
  if (!tmpl.empty()) out.template_id = tmpl;
  HUTCH_TRY(auto timeout, integerField(j, "timeout", kWhat));
  if (timeout) {
    if (*timeout < 0 || *timeout > 30 * 24 * 3600) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("timeout {} s is out of range (0 to 30 days in seconds)", *timeout));
    }
    out.timeout_s = *timeout;
  }
  HUTCH_TRY(out.metadata, stringMap(j, "metadata", kWhat));
  HUTCH_TRY(out.env, stringMap(j, "envVars", kWhat));
  if (auto it = j.find("autoPause"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) {
      return fail(Errc::kInvalidArgument, "The sandbox request: 'autoPause' must be a boolean");
    }
    out.auto_pause = it->get<bool>();
  }
  if (auto it = j.find("allow_internet_access"); it != j.end() && it->is_boolean()) {
    out.network.allow_internet_access = it->get<bool>();
  }
  if (auto it = j.find("network"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) {
      return fail(Errc::kInvalidArgument, "The sandbox request: 'network' must be an object");
    }
    HUTCH_TRY(out.network.allow_out, stringList(*it, "allowOut", "The sandbox request's network"));
    HUTCH_TRY(out.network.deny_out, stringList(*it, "denyOut", "The sandbox request's network"));
  }
  return out;
}

Result<NetworkRequest> parseNetworkUpdate(std::string_view body) {
  constexpr std::string_view kWhat = "The network update";
  json j = body.empty() ? json::object() : json::parse(body, nullptr, false);
  if (!j.is_object()) {
    return fail(Errc::kInvalidArgument, "The network update must be a JSON object");
  }
  NetworkRequest out;
  HUTCH_TRY(out.allow_out, stringList(j, "allowOut", kWhat));
  HUTCH_TRY(out.deny_out, stringList(j, "denyOut", kWhat));
  if (auto it = j.find("allow_internet_access"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) {
      return fail(Errc::kInvalidArgument,
                  "The network update: 'allow_internet_access' must be a boolean");
    }
    out.allow_internet_access = it->get<bool>();
  }
  return out;
}

Result<std::optional<int64_t>> parseTimeoutBody(std::string_view body, bool required) {
  json j = body.empty() ? json::object() : json::parse(body, nullptr, false);
  if (!j.is_object()) return fail(Errc::kInvalidArgument, "The request must be a JSON object");
  HUTCH_TRY(auto timeout, integerField(j, "timeout", "The request"));
  if (!timeout && required) {
    return fail(Errc::kInvalidArgument, "The request needs 'timeout' (seconds)");
  }
  if (timeout && (*timeout < 0 || *timeout > 30 * 24 * 3600)) {
    return fail(Errc::kInvalidArgument,
                fmt::format("timeout {} s is out of range (0 to 30 days in seconds)", *timeout));
  }
  return timeout;
}

std::string mapTemplate(const std::map<std::string, std::string>& map, const std::string& id) {
  auto it = map.find(id);
  return it == map.end() ? id : it->second;
}

std::string rfc3339(int64_t unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string rfc3339Nanos(int64_t unix_nanos) {
  int64_t seconds = unix_nanos / 1000000000;
  int64_t nanos = unix_nanos % 1000000000;
  if (nanos < 0) {
    nanos += 1000000000;
    seconds -= 1;
  }
  std::string s = rfc3339(seconds);
  if (nanos == 0) return s;
  s.pop_back();  // 'Z'
  return fmt::format("{}.{:09d}Z", s, nanos);
}

std::string sandboxState(const box::Box& b) {
  // An idle-paused box is running as far as E2B is concerned: the next call wakes it.
  return b.state == box::BoxState::kRunning || b.state == box::BoxState::kCreating ||
                 b.state == box::BoxState::kPaused
             ? "running"
             : "paused";
}

std::string defaultUserOf(const box::Box& b) {
  auto it = b.metadata.find(std::string(kUserMetadataKey));
  return it == b.metadata.end() || it->second.empty() ? std::string(kDefaultUser) : it->second;
}

std::string defaultWorkdirOf(const box::Box& b) {
  auto it = b.metadata.find(std::string(kWorkdirMetadataKey));
  return it == b.metadata.end() ? std::string() : it->second;
}

std::string templateIdOf(const box::Box& b) {
  auto it = b.metadata.find(std::string(kTemplateMetadataKey));
  return it == b.metadata.end() ? b.config.template_name : it->second;
}

namespace {
json userMetadata(const box::Box& b) {
  json m = json::object();
  for (const auto& [k, v] : b.metadata) {
    if (!std::string_view(k).starts_with(kInternalMetadataPrefix)) m[k] = v;
  }
  return m;
}
}  // namespace

json sandboxJson(const box::Box& b, const std::string& template_id, const std::string& token) {
  return json{{"sandboxID", b.id},
              {"templateID", template_id},
              {"alias", template_id},
              {"clientID", "hutch"},
              {"envdVersion", std::string(kEnvdVersion)},
              {"envdAccessToken", token}};
}

json sandboxDetailJson(const box::Box& b, const std::string& template_id, uint64_t disk_mib) {
  const int64_t end = b.expires_at != 0 ? b.expires_at : b.created_at + 100LL * 365 * 24 * 3600;
  return json{{"sandboxID", b.id},
              {"templateID", template_id},
              {"alias", template_id},
              {"clientID", "hutch"},
              {"startedAt", rfc3339(b.created_at)},
              {"endAt", rfc3339(end)},
              {"cpuCount", b.config.cpus},
              {"memoryMB", b.config.memory_mib},
              {"diskSizeMB", disk_mib},
              {"state", sandboxState(b)},
              {"envdVersion", std::string(kEnvdVersion)},
              {"metadata", userMetadata(b)}};
}

std::string accessToken(std::string_view secret, std::string_view box_id) {
  std::string message = "hutch-e2b-envd-access-token:";
  message.append(box_id);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &n);
  return api::hexEncode(mac, n);
}

bool sameToken(std::string_view a, std::string_view b) {
  return a.size() == b.size() && !a.empty() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string fileSignature(std::string_view path, std::string_view operation, std::string_view user,
                          std::string_view token, std::optional<int64_t> expiration) {
  std::string raw = fmt::format("{}:{}:{}:{}", path, operation, user, token);
  if (expiration) raw += fmt::format(":{}", *expiration);
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(raw.data()), raw.size(), digest);
  std::string b64 =
      api::base64Encode(std::string_view(reinterpret_cast<const char*>(digest), sizeof digest));
  while (!b64.empty() && b64.back() == '=') b64.pop_back();
  return "v1_" + b64;
}

SignatureCheck checkFileSignature(const std::map<std::string, std::string, std::less<>>& query,
                                  std::string_view operation, std::string_view token, int64_t now) {
  auto sig = query.find("signature");
  if (sig == query.end() || sig->second.empty()) return SignatureCheck::kMissing;
  auto path = query.find("path");
  if (path == query.end()) return SignatureCheck::kInvalid;
  std::optional<int64_t> expiration;
  if (auto exp = query.find("signature_expiration"); exp != query.end() && !exp->second.empty()) {
    int64_t value = 0;
    const char* first = exp->second.data();
    const char* last = first + exp->second.size();
    auto [end, ec] = std::from_chars(first, last, value);
    if (ec != std::errc() || end != last) return SignatureCheck::kInvalid;
    expiration = value;
  }
  std::string user;
  if (auto u = query.find("username"); u != query.end()) user = u->second;
  // The SDKs sign "" for the default user; some sign its name.
  const bool valid =
      sameToken(sig->second, fileSignature(path->second, operation, user, token, expiration)) ||
      (user.empty() && sameToken(sig->second, fileSignature(path->second, operation, kDefaultUser,
                                                            token, expiration)));
  if (!valid) return SignatureCheck::kInvalid;
  if (expiration && *expiration < now) return SignatureCheck::kExpired;
  return SignatureCheck::kValid;
}

std::string_view signatureProblem(SignatureCheck check) {
  switch (check) {
    case SignatureCheck::kValid: return "";
    case SignatureCheck::kMissing: return "missing signature query parameter";
    case SignatureCheck::kInvalid: return "invalid signature";
    case SignatureCheck::kExpired: return "signature is already expired";
  }
  return "invalid signature";
}

Result<std::string> userFromAuthorization(std::string_view header, std::string_view fallback) {
  if (header.empty()) return std::string(fallback);
  constexpr std::string_view kBasic = "Basic ";
  if (header.size() <= kBasic.size() || header.substr(0, kBasic.size()) != kBasic) {
    return fail(Errc::kUnauthenticated,
                "The Authorization header must be 'Basic base64(user:)' naming the box user");
  }
  HUTCH_TRY(std::string decoded,
            api::base64Decode(header.substr(kBasic.size()), "the Authorization header"));
  std::string user = decoded.substr(0, decoded.find(':'));
  if (user.empty()) return std::string(fallback);
  return user;
}

bool isWriteTemporary(std::string_view path) {
  std::string_view name = path.substr(path.rfind('/') + 1);
  constexpr std::string_view kMark = ".hutch-";
  if (name.size() < 1 + kMark.size() + 16 || name.front() != '.') return false;
  std::string_view suffix = name.substr(name.size() - 16);
  if (suffix.find_first_not_of("0123456789abcdef") != std::string_view::npos) return false;
  return name.substr(name.size() - 16 - kMark.size(), kMark.size()) == kMark;
}

json entryJson(const proto::FileInfo& info) {
  int type = 0;
  switch (info.type) {
    case proto::FileType::kFile: type = 1; break;
    case proto::FileType::kDir: type = 2; break;
    case proto::FileType::kSymlink: type = 3; break;
    case proto::FileType::kOther: type = 0; break;
  }
  static constexpr const char* kTypes[] = {"FILE_TYPE_UNSPECIFIED", "FILE_TYPE_FILE",
                                           "FILE_TYPE_DIRECTORY", "FILE_TYPE_SYMLINK"};
  json j{{"name", info.name},
         {"type", kTypes[type]},
         {"path", info.path},
         {"size", std::to_string(info.size)},
         {"mode", info.mode & 0777u},
         {"permissions", info.permissions},
         {"owner", info.owner},
         {"group", info.group},
         {"modifiedTime", rfc3339Nanos(info.mtime_ns)}};
  if (info.type == proto::FileType::kSymlink) {
    j["symlinkTarget"] = symlinkTargetPath(info.path, info.symlink_target);
  }
  return j;
}

std::string cleanPath(std::string_view path) {
  return base::lexicalAbsolute(path);
}

std::string symlinkTargetPath(std::string_view link, std::string_view target) {
  if (target.starts_with('/')) return cleanPath(target);
  const size_t slash = link.rfind('/');
  std::string joined(slash == std::string_view::npos ? std::string_view() : link.substr(0, slash));
  joined.push_back('/');
  joined.append(target);
  return cleanPath(joined);
}

std::string resolveForUser(std::string_view path, std::string_view home) {
  if (path.starts_with('/')) return std::string(path);
  if (path == "~") return cleanPath(home);
  if (path.starts_with("~/")) path.remove_prefix(2);
  std::string joined(home);
  joined.push_back('/');
  joined.append(path);
  return cleanPath(joined);
}

std::optional<PasswdEntry> passwdEntry(std::string_view passwd, std::string_view user) {
  while (!passwd.empty()) {
    const size_t nl = passwd.find('\n');
    std::string_view line = passwd.substr(0, nl);
    passwd = nl == std::string_view::npos ? std::string_view() : passwd.substr(nl + 1);
    // name:password:uid:gid:gecos:home:shell
    std::vector<std::string_view> fields;
    while (true) {
      const size_t colon = line.find(':');
      fields.push_back(line.substr(0, colon));
      if (colon == std::string_view::npos) break;
      line.remove_prefix(colon + 1);
    }
    if (fields.size() < 7) continue;
    PasswdEntry entry;
    entry.name = std::string(fields[0]);
    auto number = [](std::string_view text, uint32_t& out) {
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
      return ec == std::errc() && end == text.data() + text.size() && !text.empty();
    };
    if (!number(fields[2], entry.uid) || !number(fields[3], entry.gid)) continue;
    entry.home = std::string(fields[5]);
    if (entry.name == user || std::to_string(entry.uid) == user) return entry;
  }
  return std::nullopt;
}

json toJson(const ProcessConfig& config) {
  json j{{"cmd", config.cmd}, {"args", config.args}, {"envs", config.envs}};
  if (config.cwd) j["cwd"] = *config.cwd;
  return j;
}

Result<ProcessConfig> parseProcessConfig(const json& j) {
  constexpr std::string_view kWhat = "The process";
  if (!j.is_object()) return fail(Errc::kInvalidArgument, "'process' must be an object");
  ProcessConfig out;
  HUTCH_TRY(out.cmd, stringField(j, "cmd", kWhat));
  if (out.cmd.empty()) return fail(Errc::kInvalidArgument, "The process needs 'cmd'");
  HUTCH_TRY(out.args, stringList(j, "args", kWhat));
  HUTCH_TRY(out.envs, stringMap(j, "envs", kWhat));
  if (auto it = j.find("cwd"); it != j.end() && !it->is_null()) {
    if (!it->is_string())
      return fail(Errc::kInvalidArgument, "The process: 'cwd' must be a string");
    if (!it->get<std::string>().empty()) out.cwd = it->get<std::string>();
  }
  return out;
}

Result<StartRequest> parseStartRequest(const json& j) {
  StartRequest out;
  auto p = j.find("process");
  if (p == j.end()) return fail(Errc::kInvalidArgument, "The start request needs 'process'");
  HUTCH_TRY(out.process, parseProcessConfig(*p));
  if (auto pty = j.find("pty"); pty != j.end() && pty->is_object()) {
    out.tty = true;
    if (auto size = pty->find("size"); size != pty->end() && size->is_object()) {
      HUTCH_TRY(auto rows, integerField(*size, "rows", "The pty size"));
      HUTCH_TRY(auto cols, integerField(*size, "cols", "The pty size"));
      if ((rows && (*rows < 0 || *rows > 65535)) || (cols && (*cols < 0 || *cols > 65535))) {
        return fail(Errc::kInvalidArgument, "The pty size must be 0-65535 rows and columns");
      }
      out.rows = static_cast<uint16_t>(rows.value_or(0));
      out.cols = static_cast<uint16_t>(cols.value_or(0));
    }
  }
  if (auto tag = j.find("tag"); tag != j.end() && tag->is_string())
    out.tag = tag->get<std::string>();
  if (auto in = j.find("stdin"); in != j.end() && !in->is_null()) {
    if (!in->is_boolean()) return fail(Errc::kInvalidArgument, "'stdin' must be a boolean");
    out.stdin = in->get<bool>();
  }
  return out;
}

Result<Selector> parseSelector(const json& message) {
  auto p = message.find("process");
  if (p == message.end() || !p->is_object()) {
    return fail(Errc::kInvalidArgument, "The request needs 'process' ({\"pid\": N} or {\"tag\"})");
  }
  Selector out;
  HUTCH_TRY(auto pid, integerField(*p, "pid", "The process selector"));
  if (pid) {
    if (*pid < 0 || *pid > 0xffffffffLL) {
      return fail(Errc::kInvalidArgument, "The process selector's pid is out of range");
    }
    out.pid = static_cast<uint32_t>(*pid);
  }
  if (auto tag = p->find("tag"); tag != p->end() && tag->is_string())
    out.tag = tag->get<std::string>();
  if (!out.pid && !out.tag) {
    return fail(Errc::kInvalidArgument, "The process selector needs 'pid' or 'tag'");
  }
  return out;
}

Result<int> parseSignal(const json& value) {
  if (value.is_string()) {
    const auto& s = value.get_ref<const std::string&>();
    if (s == "SIGNAL_SIGKILL") return SIGKILL;
    if (s == "SIGNAL_SIGTERM") return SIGTERM;
  } else if (value.is_number_integer()) {
    int n = value.get<int>();
    if (n == SIGKILL || n == SIGTERM) return n;
  }
  return fail(Errc::kInvalidArgument, "'signal' must be SIGNAL_SIGKILL or SIGNAL_SIGTERM");
}

Result<json> parseMessage(std::string_view body) {
  json j = body.empty() ? json::object() : json::parse(body, nullptr, false);
  if (!j.is_object()) return fail(Errc::kInvalidArgument, "The message must be a JSON object");
  return j;
}

std::string exitStatusText(const proto::ExitStatus& status) {
  if (status.code) return fmt::format("exit status {}", *status.code);
  if (status.signal) {
    // Go's ProcessState.String(): "signal: killed", from strsignal's "Killed".
    std::string name = strsignal(*status.signal);
    if (!name.empty())
      name[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(name[0])));
    return fmt::format("signal: {}", name);
  }
  return "unknown";
}

}  // namespace hutch::e2b

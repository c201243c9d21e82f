// hutch template build NAME -f Dockerfile [CONTEXT]: the context (minus what .dockerignore
// leaves out) goes to hutchd as a tar, as `docker build` sends it; hutchd runs every step in a
// box and answers with the build's log, then the template (docs/cli.md "template build").
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "api/json_model.h"
#include "base/unique_fd.h"
#include "build/build_context.h"
#include "build/dockerignore.h"
#include "cli/commands/commands.h"

namespace hutch::cli {

namespace fs = std::filesystem;
using boost::beast::http::verb;

namespace {

// Where the context's tar is kept while it is sent: an unnamed file in $TMPDIR.
Result<fs::path> tempTar() {
  const char* dir = std::getenv("TMPDIR");
  std::string pattern = fmt::format("{}/hutch-context-XXXXXX", dir && *dir ? dir : "/tmp");
  int fd = ::mkstemp(pattern.data());
  if (fd < 0) return fail(sysError("Cannot create a temp file for the build context", errno));
  ::close(fd);
  return fs::path(pattern);
}

struct ArchiveFree {
  void operator()(archive* a) const { archive_write_free(a); }
};
struct EntryFree {
  void operator()(archive_entry* e) const { archive_entry_free(e); }
};

Result<> addEntry(archive* tar, const fs::path& context, const std::string& name,
                  const build::ContextEntry& entry, const fs::path& file) {
  std::unique_ptr<archive_entry, EntryFree> e(archive_entry_new());
  archive_entry_set_pathname(e.get(), name.c_str());
  archive_entry_set_perm(e.get(), entry.mode & 07777);
  archive_entry_set_uid(e.get(), 0);
  archive_entry_set_gid(e.get(), 0);
  switch (entry.type) {
    case build::ContextEntry::Type::kDirectory:
      archive_entry_set_filetype(e.get(), AE_IFDIR);
      break;
    case build::ContextEntry::Type::kSymlink:
      archive_entry_set_filetype(e.get(), AE_IFLNK);
      archive_entry_set_symlink(e.get(), entry.target.c_str());
      break;
    case build::ContextEntry::Type::kFile: archive_entry_set_filetype(e.get(), AE_IFREG); break;
  }
  UniqueFd fd;
  if (entry.type == build::ContextEntry::Type::kFile) {
    fd = UniqueFd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd) return fail(sysError("Cannot read " + file.string(), errno));
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return fail(sysError("Cannot stat " + file.string(), errno));
    archive_entry_set_size(e.get(), st.st_size);
  }
  if (archive_write_header(tar, e.get()) != ARCHIVE_OK) {
    return fail(Errc::kInternal,
                fmt::format("Cannot add {} to the context: {}", name, archive_error_string(tar)));
  }
  if (fd) {
    char buffer[1 << 16];
    for (;;) {
      ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return fail(sysError("Cannot read " + file.string(), errno));
      if (n == 0) break;
      if (archive_write_data(tar, buffer, static_cast<size_t>(n)) < 0) {
        return fail(Errc::kInternal, fmt::format("Cannot add {} to the context: {}", name,
                                                 archive_error_string(tar)));
      }
    }
  }
  (void)context;
  return ok();
}

// The context as a tar: its entries minus .dockerignore's, and the Dockerfile (always, under
// `dockerfile_name`, wherever it is). Returns how many entries and bytes went in.
Result<std::pair<size_t, uint64_t>> writeContext(const fs::path& context,
                                                 const fs::path& dockerfile,
                                                 const std::string& dockerfile_name,
                                                 const fs::path& tar_path) {
  HUTCH_TRY(build::DockerIgnore ignore, build::DockerIgnore::load(context));
  HUTCH_TRY(std::vector<build::ContextEntry> entries, build::listContext(context, ignore));
  std::unique_ptr<archive, ArchiveFree> tar(archive_write_new());
  archive_write_set_format_pax_restricted(tar.get());
  if (archive_write_open_filename(tar.get(), tar_path.c_str()) != ARCHIVE_OK) {
    return fail(Errc::kInternal, fmt::format("Cannot write {}: {}", tar_path.string(),
                                             archive_error_string(tar.get())));
  }
  uint64_t bytes = 0;
  bool dockerfile_sent = false;
  for (const build::ContextEntry& entry : entries) {
    HUTCH_TRY_VOID(addEntry(tar.get(), context, entry.path, entry, context / entry.path));
    if (entry.type == build::ContextEntry::Type::kFile) bytes += entry.size;
    dockerfile_sent = dockerfile_sent || entry.path == dockerfile_name;
  }
  if (!dockerfile_sent) {
    struct stat st {};
    if (::stat(dockerfile.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      return fail(
          Errc::kInvalidArgument,
          fmt::format("{}: no such Dockerfile (give one with -f FILE)", dockerfile.string()));
    }
    build::ContextEntry file{.path = dockerfile_name,
                             .type = build::ContextEntry::Type::kFile,
                             .mode = 0644,
                             .size = static_cast<uint64_t>(st.st_size)};
    HUTCH_TRY_VOID(addEntry(tar.get(), context, dockerfile_name, file, dockerfile));
  }
  if (archive_write_close(tar.get()) != ARCHIVE_OK) {
    return fail(Errc::kInternal, fmt::format("Cannot write {}: {}", tar_path.string(),
                                             archive_error_string(tar.get())));
  }
  return std::pair{entries.size(), bytes};
}

std::string queryEscape(std::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

}  // namespace

int cmdTemplateBuildDockerfile(const ApiClient& client, const Output& out,
                               const DockerfileBuild& build) {
  const fs::path context = build.context.empty() ? fs::path(".") : fs::path(build.context);
  std::error_code ec;
  if (!fs::is_directory(context, ec)) {
    return reportError(
        out, Error(Errc::kInvalidArgument,
                   fmt::format("{}: the build context must be a directory", context.string())));
  }
  // The options are checked before the context is read.
  std::string policy_text;
  if (!build.network_policy.empty()) {
    // A preset name or a policy file, as for `hutch run --network-policy`.
    auto policy = policyArgument(build.network_policy);
    if (!policy) return reportError(out, policy.error());
    policy_text = policy->is_string() ? policy->get<std::string>() : policy->dump();
  }
  for (const std::string& secret : build.secrets) {
    if (secret.empty() || secret.find(',') != std::string::npos) {
      return reportError(out, Error(Errc::kInvalidArgument,
                                    fmt::format("--secret '{}': give one secret's name (hutch "
                                                "secret ls); repeat --secret for more",
                                                secret)));
    }
  }
  const fs::path dockerfile =
      build.dockerfile.empty() ? context / "Dockerfile" : fs::path(build.dockerfile);
  // Its path in the context when it is inside, else a name of its own beside the context's.
  std::string name = ".hutch-dockerfile";
  const fs::path canonical_context = fs::weakly_canonical(context, ec);
  const fs::path canonical_file = fs::weakly_canonical(dockerfile, ec);
  const fs::path relative = canonical_file.lexically_relative(canonical_context);
  if (!relative.empty() && *relative.begin() != ".." && relative != ".") name = relative.string();

  auto tar = tempTar();
  if (!tar) return reportError(out, tar.error());
  struct Remove {
    fs::path path;
    ~Remove() {
      std::error_code ignored;
      fs::remove(path, ignored);
    }
  } remove{*tar};
  auto written = writeContext(context, dockerfile, name, *tar);
  if (!written) return reportError(out, written.error());
  if (!out.json) {
    fmt::print(stderr, "Sending the build context: {} entries, {} bytes of files\n", written->first,
               written->second);
  }
  std::string target =
      "/v1/builds?name=" + queryEscape(build.name) + "&dockerfile=" + queryEscape(name);
  if (!build.build_args.empty()) {
    nlohmann::json args = nlohmann::json::object();
    for (const std::string& kv : build.build_args) {
      const size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) {
        // Docker's --build-arg NAME takes the value from the environment.
        const char* value = eq == 0 ? nullptr : std::getenv(kv.c_str());
        if (!value) {
          return reportError(out, Error(Errc::kInvalidArgument,
                                        fmt::format("--build-arg {}: give NAME=VALUE (or NAME "
                                                    "set in the environment)",
                                                    kv)));
        }
        args[kv] = value;
      } else {
        args[kv.substr(0, eq)] = kv.substr(eq + 1);
      }
    }
    target += "&build_args=" + queryEscape(args.dump());
  }
  auto add = [&target](const char* key, const std::string& value) {
    if (!value.empty()) target += fmt::format("&{}={}", key, queryEscape(value));
  };
  add("target", build.target);
  add("start_cmd", build.start_cmd);
  add("ready_cmd", build.ready_cmd);
  add("network_policy", policy_text);
  add("secrets", fmt::format("{}", fmt::join(build.secrets, ",")));
  if (build.no_cache) target += "&no_cache=true";
  if (build.cpus) target += fmt::format("&cpus={}", build.cpus);
  if (build.memory_mib) target += fmt::format("&memory_mib={}", build.memory_mib);
  if (build.disk_mib) target += fmt::format("&disk_mib={}", build.disk_mib);

  UniqueFd body(::open(tar->c_str(), O_RDONLY | O_CLOEXEC));
  if (!body) return reportError(out, sysError("Cannot read " + tar->string(), errno));
  TemplateStream stream(out);
  auto streamed =
      client.uploadLines(verb::post, target, "application/x-tar", body.get(),
                         [&stream](const nlohmann::json& line) { stream.onLine(line); });
  auto made = stream.result(streamed);
  if (!made) return reportError(out, made.error());
  if (out.json) {
    printJson(*made);
  } else {
    fmt::print("{}\n", build.name);
  }
  return 0;
}

}  // namespace hutch::cli

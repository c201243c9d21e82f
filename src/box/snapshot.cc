#include "box/snapshot.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <array>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "base/unique_fd.h"
#include "sys/files.h"

namespace hutch::box {

namespace {

constexpr std::array<std::pair<SnapshotKind, std::string_view>, 5> kKindNames{{
    {SnapshotKind::kTemplate, "template"},
    {SnapshotKind::kCheckpoint, "checkpoint"},
    {SnapshotKind::kFork, "fork"},
    {SnapshotKind::kSaved, "saved"},
    {SnapshotKind::kSuspend, "suspend"},
}};

uint64_t readBigEndian(const unsigned char* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

std::string_view snapshotKindName(SnapshotKind kind) {
  for (const auto& [k, n] : kKindNames) {
    if (k == kind) return n;
  }
  return "?";
}

Result<SnapshotKind> parseSnapshotKind(std::string_view text) {
  for (const auto& [k, n] : kKindNames) {
    if (n == text) return k;
  }
  return fail(Errc::kInvalidArgument, fmt::format("Unknown snapshot kind '{}'", text));
}

nlohmann::json SnapshotManifest::toJson() const {
  return {{"format", format},
          {"kind", snapshotKindName(kind)},
          {"qemu_version", env.qemu_version},
          {"accel", env.accel},
          {"cpu_model", env.cpu_model},
          {"network", env.network},
          {"balloon", env.balloon},
          {"guest_cpu", env.guest_cpu},
          {"machine", machine},
          {"ram_block", ram_block},
          {"ignore_shared", ignore_shared},
          {"ram", ram},
          {"cpus", cpus},
          {"memory_mib", memory_mib},
          {"image_dir", image_dir},
          {"image_key", image_key},
          {"layer", layer},
          {"disk_bytes", disk_bytes},
          {"created_at", created_at},
          {"files", file_sizes},
          {"files_xxh3", file_hashes},
          {"state_sha256", state_sha256}};
}

Result<SnapshotManifest> SnapshotManifest::fromJson(const nlohmann::json& json) {
  if (!json.is_object()) return fail(Errc::kInvalidArgument, "A manifest is a JSON object");
  SnapshotManifest m;
  try {
    m.format = json.at("format").get<int>();
    if (m.format != kManifestFormat) {
      // Later fields may mean something else: stop before reading them.
      return m;
    }
    HUTCH_TRY(m.kind, parseSnapshotKind(json.at("kind").get<std::string>()));
    m.env.qemu_version = json.at("qemu_version").get<std::string>();
    m.env.accel = json.at("accel").get<std::string>();
    m.env.cpu_model = json.at("cpu_model").get<std::string>();
    m.env.network = json.value("network", "none");  // manifests before networking had none
    m.env.balloon = json.value("balloon", "none");  // and before free page reporting, no balloon
    m.env.guest_cpu = json.value("guest_cpu", "");  // and before CPU models, QEMU's default
    m.machine = json.at("machine").get<std::string>();
    m.ram_block = json.at("ram_block").get<std::string>();
    m.ignore_shared = json.at("ignore_shared").get<bool>();
    m.ram = json.at("ram").get<std::string>();
    m.cpus = json.at("cpus").get<unsigned>();
    m.memory_mib = json.at("memory_mib").get<uint64_t>();
    m.image_dir = json.at("image_dir").get<std::string>();
    m.image_key = json.value("image_key", "");
    m.layer = json.at("layer").get<std::string>();
    m.disk_bytes = json.value("disk_bytes", uint64_t{0});
    m.created_at = json.value("created_at", int64_t{0});
    if (json.contains("files"))
      m.file_sizes = json.at("files").get<std::map<std::string, uint64_t>>();
    if (json.contains("files_xxh3"))
      m.file_hashes = json.at("files_xxh3").get<std::map<std::string, std::string>>();
    m.state_sha256 = json.value("state_sha256", "");
  } catch (const nlohmann::json::exception& e) {
    return fail(Errc::kInvalidArgument, fmt::format("Bad snapshot manifest: {}", e.what()));
  }
  if (m.ram != "file" && m.ram != "stream") {
    return fail(Errc::kInvalidArgument,
                fmt::format("Bad snapshot manifest: ram is '{}', not file or stream", m.ram));
  }
  return m;
}

std::optional<std::string> incompatibility(const SnapshotManifest& m, const SnapshotEnv& env,
                                           unsigned cpus, uint64_t memory_mib) {
  if (m.format != kManifestFormat) {
    return fmt::format("its manifest format is {}, this hutchd reads {}", m.format,
                       kManifestFormat);
  }
  if (m.env.qemu_version != env.qemu_version) {
    return fmt::format("it was made by QEMU {}, this host runs QEMU {}", m.env.qemu_version,
                       env.qemu_version);
  }
  if (m.env.accel != env.accel) {
    return fmt::format("it was made under {}, boxes here run under {}", m.env.accel, env.accel);
  }
  if (m.env.cpu_model != env.cpu_model) {
    return fmt::format("it was made on a '{}' CPU, this host has '{}'", m.env.cpu_model,
                       env.cpu_model);
  }
  if (m.env.guest_cpu != env.guest_cpu) {
    auto shown = [](const std::string& model) {
      return model.empty() ? std::string("QEMU's default") : "'" + model + "'";
    };
    return fmt::format("it was made for the emulated CPU {}, boxes here get {}",
                       shown(m.env.guest_cpu), shown(env.guest_cpu));
  }
  if (m.env.network != env.network) {
    return fmt::format("it was made with network '{}', boxes here get '{}'", m.env.network,
                       env.network);
  }
  if (m.env.balloon != env.balloon) {
    return fmt::format("it was made with balloon '{}', boxes here get '{}'", m.env.balloon,
                       env.balloon);
  }
  if (m.machine != "microvm" || m.ram_block != "mem" || !m.ignore_shared) {
    return fmt::format(
        "it was made with machine {} and RAM block '{}' (x-ignore-shared {}), "
        "hutch restores microvm with 'mem' and x-ignore-shared on",
        m.machine, m.ram_block, m.ignore_shared ? "on" : "off");
  }
  if (m.cpus != cpus || m.memory_mib != memory_mib) {
    return fmt::format("it has {} vCPU(s) and {} MiB of RAM, the box asks for {} and {} MiB",
                       m.cpus, m.memory_mib, cpus, memory_mib);
  }
  return std::nullopt;
}

namespace {

// Where a manifest's file lives: "state" and "memory" in the directory, "layer" where it says.
std::filesystem::path snapshotFile(const std::filesystem::path& dir, const SnapshotManifest& m,
                                   const std::string& name) {
  if (name == "layer") return m.layer;
  return dir / name;
}

// Feeds fd's content from where it is to its end to `consume`, a MiB at a time.
Result<> readWhole(int fd, const std::filesystem::path& path,
                   const std::function<void(const char*, size_t)>& consume) {
  std::vector<char> buffer(1 << 20);
  while (true) {
    ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(sysError("Cannot read " + path.string(), errno));
    }
    if (n == 0) return ok();
    consume(buffer.data(), static_cast<size_t>(n));
  }
}

Result<std::string> sha256File(const std::filesystem::path& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return fail(sysError("Cannot open " + path.string(), errno));
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    return fail(Errc::kInternal, "Cannot start a SHA-256 digest");
  }
  HUTCH_TRY_VOID(readWhole(fd.get(), path, [&ctx](const char* data, size_t size) {
    EVP_DigestUpdate(ctx.get(), data, size);
  }));
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  EVP_DigestFinal_ex(ctx.get(), digest.data(), &length);
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

// What a file was when its hash was last computed in this process. Every write changes the
// mtime or the ctime (and a replacement the inode), so the same stamp means the same content
// as far as the filesystem knows: a big snapshot file is hashed once per hutchd, not on every
// restore from it.
struct FileStamp {
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  bool operator==(const FileStamp&) const = default;
};

Result<FileStamp> stampOf(int fd, const std::filesystem::path& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return fail(sysError("Cannot stat " + path.string(), errno));
  auto ns = [](const timespec& t) { return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec; };
  return FileStamp{st.st_dev, st.st_ino, st.st_size, ns(st.st_mtim), ns(st.st_ctim)};
}

class HashCache {
 public:
  std::optional<std::string> find(const std::string& path, const FileStamp& stamp) {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(path);
    if (it == entries_.end() || !(it->second.first == stamp)) return std::nullopt;
    return it->second.second;
  }
  void put(const std::string& path, const FileStamp& stamp, std::string hash) {
    std::lock_guard lock(mutex_);
    if (entries_.size() >= 4096) entries_.clear();  // a bound; forgetting costs only a rehash
    entries_[path] = {stamp, std::move(hash)};
  }

 private:
  std::mutex mutex_;
  std::map<std::string, std::pair<FileStamp, std::string>> entries_;
};

HashCache& hashCache() {
  static HashCache cache;
  return cache;
}

}  // namespace

Result<std::string> xxh3File(const std::filesystem::path& path, bool use_cache) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return fail(sysError("Cannot open " + path.string(), errno));
  HUTCH_TRY(FileStamp before, stampOf(fd.get(), path));
  if (use_cache) {
    if (auto known = hashCache().find(path.string(), before)) return *known;
  }
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(),
                                                                 XXH3_freeState);
  if (!state || XXH3_128bits_reset(state.get()) != XXH_OK) {
    return fail(Errc::kInternal, "Cannot start an XXH3 hash");
  }
  HUTCH_TRY_VOID(readWhole(fd.get(), path, [&state](const char* data, size_t size) {
    XXH3_128bits_update(state.get(), data, size);
  }));
  const XXH128_hash_t hash = XXH3_128bits_digest(state.get());
  std::string hex = fmt::format("{:016x}{:016x}", hash.high64, hash.low64);
  // Written to while it was read: the hash means nothing, and is not kept.
  HUTCH_TRY(FileStamp after, stampOf(fd.get(), path));
  if (after == before) hashCache().put(path.string(), after, hex);
  return hex;
}

namespace {

Result<> checkFiles(const std::filesystem::path& dir, const SnapshotManifest& m) {
  for (const auto& [name, size] : m.file_sizes) {
    std::filesystem::path file = snapshotFile(dir, m, name);
    std::error_code ec;
    uint64_t now = std::filesystem::file_size(file, ec);
    if (ec) {
      return fail(Errc::kFailedPrecondition,
                  fmt::format("Snapshot {}: its {} file {} is gone ({})", dir.filename().string(),
                              name, file.string(), ec.message()));
    }
    if (now != size) {
      return fail(Errc::kFailedPrecondition,
                  fmt::format("Snapshot {}: its {} file {} is {} bytes, {} when it was made "
                              "(truncated or replaced since): it cannot be restored",
                              dir.filename().string(), name, file.string(), now, size));
    }
  }
  for (const auto& [name, expected] : m.file_hashes) {
    std::filesystem::path file = snapshotFile(dir, m, name);
    HUTCH_TRY(std::string now, xxh3File(file));
    if (now != expected) {
      return fail(Errc::kFailedPrecondition,
                  fmt::format("Snapshot {}: its {} file {} is not what was saved (its content "
                              "changed since: XXH3 {}, {} when it was made): it cannot be "
                              "restored",
                              dir.filename().string(), name, file.string(), now, expected));
    }
  }
  if (!m.state_sha256.empty()) {
    HUTCH_TRY(std::string now, sha256File(dir / "state"));
    if (now != m.state_sha256) {
      return fail(Errc::kFailedPrecondition,
                  fmt::format("Snapshot {}: its state file's content is not what was saved "
                              "(SHA-256 {}, {} when it was made): it cannot be restored",
                              dir.filename().string(), now, m.state_sha256));
    }
  }
  return ok();
}

}  // namespace

Result<SnapshotManifest> readManifest(const std::filesystem::path& dir) {
  HUTCH_TRY(SnapshotManifest manifest, loadManifest(dir));
  HUTCH_TRY_VOID(checkFiles(dir, manifest));
  return manifest;
}

Result<SnapshotManifest> loadManifest(const std::filesystem::path& dir) {
  std::filesystem::path file = dir / "manifest.json";
  HUTCH_TRY(std::string text, sys::readFile(file, 1 << 20));
  auto json = nlohmann::json::parse(text, nullptr, false);
  if (json.is_discarded()) {
    return fail(Errc::kInvalidArgument, fmt::format("{} is not valid JSON", file.string()));
  }
  auto manifest = SnapshotManifest::fromJson(json);
  if (!manifest) return fail(manifest.error().withContext(file.string()));
  return manifest;
}

Result<> writeManifest(const std::filesystem::path& dir, const SnapshotManifest& manifest) {
  SnapshotManifest m = manifest;
  m.file_sizes.clear();
  m.file_hashes.clear();
  m.state_sha256.clear();
  for (const std::string name : {"state", "memory", "layer"}) {
    // A suspended box's disk is its own, not frozen: it changes with the box (a checkpoint of
    // the suspended box gives it a new top layer).
    if (name == "layer" && m.kind == SnapshotKind::kSuspend) continue;
    std::filesystem::path path = snapshotFile(dir, m, name);
    std::error_code ec;
    if (path.empty() || !std::filesystem::is_regular_file(path, ec)) continue;
    uint64_t size = std::filesystem::file_size(path, ec);
    if (ec) continue;
    m.file_sizes[name] = size;
    // Not from the cache: this is the content the manifest vouches for.
    HUTCH_TRY(m.file_hashes[name], xxh3File(path, /*use_cache=*/false));
  }
  return sys::writeFileAtomic(dir / "manifest.json", m.toJson().dump(2) + "\n");
}

std::string templateSnapshotKey(const std::string& image_dir, unsigned cpus, uint64_t memory_mib) {
  return fmt::format("{}|cpus={}|memory={}", image_dir, cpus, memory_mib);
}

Result<std::filesystem::path> qcow2BackingFile(const std::filesystem::path& image) {
  UniqueFd fd(::open(image.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return fail(sysError("Cannot open " + image.string(), errno));
  // QCowHeader: magic "QFI\xfb", version, backing_file_offset (u64), backing_file_size (u32).
  std::array<unsigned char, 20> header{};
  ssize_t n = ::pread(fd.get(), header.data(), header.size(), 0);
  if (n != static_cast<ssize_t>(header.size()) || header[0] != 'Q' || header[1] != 'F' ||
      header[2] != 'I' || header[3] != 0xfb) {
    return fail(Errc::kInvalidArgument, image.string() + " is not a qcow2 image");
  }
  uint64_t offset = readBigEndian(&header[8], 8);
  uint64_t size = readBigEndian(&header[16], 4);
  if (offset == 0 || size == 0) return std::filesystem::path();
  if (size > 1023) {
    return fail(Errc::kInvalidArgument, image.string() + ": backing file name too long");
  }
  std::string name(size, '\0');
  n = ::pread(fd.get(), name.data(), size, static_cast<off_t>(offset));
  if (n != static_cast<ssize_t>(size)) {
    return fail(Errc::kInvalidArgument, image.string() + ": truncated backing file name");
  }
  std::filesystem::path backing(name);
  if (backing.is_relative()) backing = image.parent_path() / backing;
  return backing;
}

Result<std::vector<std::filesystem::path>> backingChain(const std::filesystem::path& top) {
  std::vector<std::filesystem::path> chain{top};
  for (;;) {
    std::error_code ec;
    if (!std::filesystem::exists(chain.back(), ec)) {
      return fail(Errc::kNotFound, fmt::format("Disk layer {} is missing (chain from {})",
                                               chain.back().string(), top.string()));
    }
    auto backing = qcow2BackingFile(chain.back());
    if (!backing) {
      if (backing.error().code() == Errc::kInvalidArgument) return chain;  // raw base
      return fail(backing.error());
    }
    if (backing->empty()) return chain;
    if (chain.size() > 4096) {
      return fail(Errc::kInvalidArgument, "Backing chain of " + top.string() + " is too long");
    }
    chain.push_back(*backing);
  }
}

std::string hostCpuModel(const std::filesystem::path& cpuinfo) {
  std::ifstream in(cpuinfo);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string value = line.substr(colon + 1);
    size_t start = value.find_first_not_of(" \t");
    return start == std::string::npos ? "" : value.substr(start);
  }
  return "unknown";
}

}  // namespace hutch::box

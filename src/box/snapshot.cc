#include "box/snapshot.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <fstream>

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
          {"created_at", created_at}};
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

Result<SnapshotManifest> readManifest(const std::filesystem::path& dir) {
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
  return sys::writeFileAtomic(dir / "manifest.json", manifest.toJson().dump(2) + "\n");
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

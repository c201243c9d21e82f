#include "box/snapshot.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <map>

#include "sys/run.h"

namespace hutch::box {
namespace {

SnapshotEnv hereEnv() {
  return SnapshotEnv{.qemu_version = "7.2.22", .accel = "tcg", .cpu_model = "Test CPU @ 2GHz"};
}

SnapshotManifest manifest() {
  SnapshotManifest m;
  m.kind = SnapshotKind::kCheckpoint;
  m.env = hereEnv();
  m.ram = "stream";
  m.cpus = 2;
  m.memory_mib = 1024;
  m.image_dir = "/cache/images/base-abc";
  m.image_key = "abc";
  m.layer = "/state/layers/l1.qcow2";
  m.disk_bytes = 1 << 30;
  m.created_at = 1700000000;
  return m;
}

TEST(SnapshotManifestTest, RoundTripsThroughJson) {
  SnapshotManifest m = manifest();
  auto back = SnapshotManifest::fromJson(m.toJson());
  ASSERT_TRUE(back) << back.error().describe();
  EXPECT_EQ(*back, m);
}

TEST(SnapshotManifestTest, BadJsonSaysWhatIsWrong) {
  auto json = manifest().toJson();
  json.erase("qemu_version");
  auto missing = SnapshotManifest::fromJson(json);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message().find("qemu_version"), std::string::npos);
  json = manifest().toJson();
  json["ram"] = "disk";
  EXPECT_FALSE(SnapshotManifest::fromJson(json));
  json = manifest().toJson();
  json["cpus"] = "two";
  EXPECT_FALSE(SnapshotManifest::fromJson(json));
  EXPECT_FALSE(SnapshotManifest::fromJson(nlohmann::json::array()));
}

TEST(SnapshotManifestTest, CompatibleOnlyWithTheSameHostAndShape) {
  SnapshotManifest m = manifest();
  EXPECT_EQ(incompatibility(m, hereEnv(), 2, 1024), std::nullopt);

  auto reason = [&](SnapshotManifest changed, unsigned cpus = 2, uint64_t mib = 1024) {
    return incompatibility(changed, hereEnv(), cpus, mib).value_or("");
  };
  SnapshotManifest other = m;
  other.env.qemu_version = "8.0.0";
  EXPECT_EQ(reason(other), "it was made by QEMU 8.0.0, this host runs QEMU 7.2.22");
  other = m;
  other.env.accel = "kvm";
  EXPECT_EQ(reason(other), "it was made under kvm, boxes here run under tcg");
  other = m;
  other.env.cpu_model = "Other CPU";
  EXPECT_NE(reason(other).find("'Other CPU' CPU"), std::string::npos);
  other = m;
  other.env.network = "virtio-net 10.0.2.15/24";
  EXPECT_EQ(reason(other),
            "it was made with network 'virtio-net 10.0.2.15/24', boxes here get 'none'");
  // A manifest from before networking names none: it still restores into a box without a NIC.
  auto old = m.toJson();
  old.erase("network");
  auto parsed = SnapshotManifest::fromJson(old);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(reason(*parsed), "");
  // The balloon is part of the device model; a manifest from before it had none.
  other = m;
  other.env.balloon = SnapshotEnv::kFreePageReporting;
  EXPECT_EQ(reason(other), "it was made with balloon 'free-page-reporting', boxes here get 'none'");
  EXPECT_EQ(SnapshotManifest::fromJson(other.toJson())->env.balloon, "free-page-reporting");
  old.erase("balloon");
  parsed = SnapshotManifest::fromJson(old);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->env.balloon, "none");
  // So is the emulated CPU model: a snapshot of a "max" guest may hold code that uses AVX2.
  other = m;
  other.env.guest_cpu = "max";
  EXPECT_EQ(reason(other), "it was made for the emulated CPU 'max', boxes here get QEMU's default");
  EXPECT_EQ(SnapshotManifest::fromJson(other.toJson())->env.guest_cpu, "max");
  old.erase("guest_cpu");
  parsed = SnapshotManifest::fromJson(old);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(reason(*parsed), "");
  other = m;
  other.ram_block = "ram0";
  EXPECT_NE(reason(other).find("RAM block 'ram0'"), std::string::npos);
  EXPECT_NE(reason(m, 1, 1024).find("asks for 1"), std::string::npos);
  EXPECT_NE(reason(m, 2, 512).find("512 MiB"), std::string::npos);
  // A future format is refused before anything else is compared.
  auto json = m.toJson();
  json["format"] = 2;
  json.erase("qemu_version");
  auto future = SnapshotManifest::fromJson(json);
  ASSERT_TRUE(future);
  EXPECT_EQ(reason(*future), "its manifest format is 2, this hutchd reads 1");
}

class SnapshotFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hutch-snapshot-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(SnapshotFilesTest, ManifestFileRoundTripAndCorruption) {
  ASSERT_TRUE(writeManifest(dir_, manifest()));
  auto read = readManifest(dir_);
  ASSERT_TRUE(read) << read.error().describe();
  EXPECT_EQ(*read, manifest());
  std::ofstream(dir_ / "manifest.json") << "{not json";
  auto bad = readManifest(dir_);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("not valid JSON"), std::string::npos);
}

TEST_F(SnapshotFilesTest, DamagedFilesAreRefusedSayingWhatChanged) {
  // A snapshot as hutchd leaves it: state, memory and a layer, then the manifest.
  // Rewritten in place (same inode, maybe within the same timestamp tick): moved a second on,
  // as any later write would be, so the hash cache sees a changed file.
  auto write = [](const std::filesystem::path& path, const std::string& content) {
    const bool existed = std::filesystem::exists(path);
    std::ofstream(path, std::ios::binary) << content;
    if (existed) {
      std::filesystem::last_write_time(
          path, std::filesystem::last_write_time(path) + std::chrono::seconds(1));
    }
  };
  write(dir_ / "state", std::string(4096, 's'));
  write(dir_ / "memory", std::string(8192, 'm'));
  write(dir_ / "layer.qcow2", std::string(1024, 'l'));
  SnapshotManifest m = manifest();
  m.layer = (dir_ / "layer.qcow2").string();
  ASSERT_TRUE(writeManifest(dir_, m));
  auto read = readManifest(dir_);
  ASSERT_TRUE(read) << read.error().describe();
  EXPECT_EQ(read->file_sizes,
            (std::map<std::string, uint64_t>{{"layer", 1024}, {"memory", 8192}, {"state", 4096}}));
  ASSERT_EQ(read->file_hashes.size(), 3U);
  for (const auto& [name, hash] : read->file_hashes) EXPECT_EQ(hash.size(), 32U) << name;
  EXPECT_TRUE(read->state_sha256.empty());

  // A memory file cut short (a disk that filled up): refused, naming the file and both sizes.
  std::filesystem::resize_file(dir_ / "memory", 4000);
  auto truncated = readManifest(dir_);
  ASSERT_FALSE(truncated);
  EXPECT_EQ(truncated.error().code(), Errc::kFailedPrecondition);
  EXPECT_NE(truncated.error().message().find("memory file"), std::string::npos);
  EXPECT_NE(truncated.error().message().find("4000 bytes, 8192"), std::string::npos)
      << truncated.error().message();
  write(dir_ / "memory", std::string(8192, 'm'));
  ASSERT_TRUE(readManifest(dir_));

  // A file of the same size with one byte changed: its hash tells, for each of the three.
  const std::map<std::string, std::pair<std::filesystem::path, std::string>> files = {
      {"state", {dir_ / "state", std::string(4096, 's')}},
      {"memory", {dir_ / "memory", std::string(8192, 'm')}},
      {"layer", {dir_ / "layer.qcow2", std::string(1024, 'l')}}};
  for (const auto& [name, file] : files) {
    const auto& [path, content] = file;
    write(path, content.substr(0, content.size() - 1) + "x");
    auto changed = readManifest(dir_);
    ASSERT_FALSE(changed) << name;
    EXPECT_EQ(changed.error().code(), Errc::kFailedPrecondition);
    EXPECT_NE(changed.error().message().find("its " + name + " file"), std::string::npos)
        << changed.error().message();
    EXPECT_NE(changed.error().message().find("content changed"), std::string::npos)
        << changed.error().message();
    write(path, content);
    ASSERT_TRUE(readManifest(dir_)) << name;
  }

  // A layer that is gone.
  std::filesystem::remove(dir_ / "layer.qcow2");
  auto gone = readManifest(dir_);
  ASSERT_FALSE(gone);
  EXPECT_NE(gone.error().message().find("layer file"), std::string::npos);
}

TEST_F(SnapshotFilesTest, ASuspendedBoxsOwnDiskIsNotChecked) {
  std::ofstream(dir_ / "state") << "device state";
  std::ofstream(dir_ / "disk.qcow2") << "the box's disk";
  SnapshotManifest m = manifest();
  m.kind = SnapshotKind::kSuspend;
  m.layer = (dir_ / "disk.qcow2").string();
  ASSERT_TRUE(writeManifest(dir_, m));
  // The box's disk changes while it is suspended (a checkpoint gives it a new top layer).
  std::ofstream(dir_ / "disk.qcow2") << "the box's disk, and a new layer over it";
  auto read = readManifest(dir_);
  ASSERT_TRUE(read) << read.error().describe();
  EXPECT_EQ(read->file_sizes, (std::map<std::string, uint64_t>{{"state", 12}}));
}

TEST_F(SnapshotFilesTest, ManifestsFromBeforeTheChecksAreReadAsTheyAre) {
  // An earlier hutchd's manifest: no "files", no "state_sha256".
  auto json = manifest().toJson();
  json.erase("files");
  json.erase("state_sha256");
  std::ofstream(dir_ / "manifest.json") << json.dump();
  auto read = readManifest(dir_);
  ASSERT_TRUE(read) << read.error().describe();
  EXPECT_TRUE(read->file_sizes.empty());
  EXPECT_TRUE(read->file_hashes.empty());
}

TEST_F(SnapshotFilesTest, ASmallStatesSha256FromAnEarlierHutchdIsStillChecked) {
  std::ofstream(dir_ / "state") << "device state";
  ASSERT_TRUE(writeManifest(dir_, manifest()));
  auto json = nlohmann::json::parse(std::ifstream(dir_ / "manifest.json"));
  json.erase("files_xxh3");
  json["state_sha256"] = std::string(64, '0');  // not the state's
  std::ofstream(dir_ / "manifest.json") << json.dump();
  auto read = readManifest(dir_);
  ASSERT_FALSE(read);
  EXPECT_NE(read.error().message().find("SHA-256"), std::string::npos) << read.error().message();
}

TEST_F(SnapshotFilesTest, FollowsQcow2BackingChains) {
  std::filesystem::path base = dir_ / "base.img";
  std::ofstream(base).put('\0');
  std::filesystem::resize_file(base, 1 << 20);
  auto img = [&](const std::filesystem::path& file, const std::filesystem::path& backing,
                 const char* fmt) {
    auto r = sys::runCapture({"qemu-img", "create", "-q", "-f", "qcow2", "-F", fmt, "-b",
                              backing.string(), file.string()});
    ASSERT_TRUE(r) << r.error().describe();
  };
  img(dir_ / "l1.qcow2", base, "raw");
  img(dir_ / "l2.qcow2", dir_ / "l1.qcow2", "qcow2");
  img(dir_ / "top.qcow2", dir_ / "l2.qcow2", "qcow2");
  auto chain = backingChain(dir_ / "top.qcow2");
  ASSERT_TRUE(chain) << chain.error().describe();
  EXPECT_EQ(*chain, (std::vector<std::filesystem::path>{dir_ / "top.qcow2", dir_ / "l2.qcow2",
                                                        dir_ / "l1.qcow2", base}));
  auto none = qcow2BackingFile(base);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code(), Errc::kInvalidArgument);

  std::filesystem::remove(dir_ / "l1.qcow2");
  auto broken = backingChain(dir_ / "top.qcow2");
  ASSERT_FALSE(broken);
  EXPECT_NE(broken.error().message().find("l1.qcow2 is missing"), std::string::npos);
}

TEST_F(SnapshotFilesTest, ReadsTheCpuModel) {
  std::ofstream(dir_ / "cpuinfo") << "processor\t: 0\nmodel name\t: Fancy CPU @ 3.00GHz\n";
  EXPECT_EQ(hostCpuModel(dir_ / "cpuinfo"), "Fancy CPU @ 3.00GHz");
  EXPECT_EQ(hostCpuModel(dir_ / "missing"), "unknown");
}

}  // namespace
}  // namespace hutch::box

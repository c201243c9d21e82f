// Every box's QEMU runs jailed (docs/security.md), seen from outside on real boxes: its own
// uid and namespaces, a root holding only its files, its cgroup's limits, files that stay the
// host's once QEMU is gone, and a box whose QEMU the OOM killer takes is failed with that
// reason.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <thread>

#include "harness.h"
#include "jail/cgroup.h"

namespace hutch::e2e {
namespace {

namespace fs = std::filesystem;

std::string procStatus(int64_t pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      std::string value = line.substr(key.size() + 1);
      size_t start = value.find_first_not_of(" \t");
      return start == std::string::npos ? "" : value.substr(start);
    }
  }
  return "";
}

std::string nsOf(const std::string& pid, const std::string& ns) {
  std::error_code ec;
  return fs::read_symlink("/proc/" + pid + "/ns/" + ns, ec).string();
}

// The directories of a process's cgroup, by controller ("memory", "pids", "cpu"; v2: ""), found
// the way hutchd finds its own.
std::map<std::string, fs::path> cgroupDirsOf(int64_t pid) {
  std::map<std::string, fs::path> dirs;
  auto host = jail::CgroupHost::fromText(readFile("/proc/" + std::to_string(pid) + "/cgroup"),
                                         readFile("/proc/self/mountinfo"));
  if (!host) {
    ADD_FAILURE() << host.error().describe();
    return dirs;
  }
  for (const jail::CgroupDir& dir : host->baseDirs()) {
    if (host->version() == jail::CgroupVersion::kV2) {
      dirs[""] = dir.path;
      continue;
    }
    std::string controllers = dir.controllers + ",";
    for (size_t at = 0, comma; (comma = controllers.find(',', at)) != std::string::npos;
         at = comma + 1) {
      dirs[controllers.substr(at, comma - at)] = dir.path;
    }
  }
  return dirs;
}

std::string firstLine(const fs::path& file) {
  std::string text = readFile(file);
  return text.substr(0, text.find('\n'));
}

class JailTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "hutchd jails QEMU only as root";
    daemon_ = std::make_unique<Daemon>();
  }
  void TearDown() override { daemon_.reset(); }
  Daemon& d() { return *daemon_; }

  // Runs a box and returns its inspect object.
  nlohmann::json runBox(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"run"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto run = d().hutch(argv);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    return d().inspect(args.back());
  }

  std::unique_ptr<Daemon> daemon_;
};

TEST_F(JailTest, QemuRunsAsItsOwnUidInItsOwnNamespacesSeeingOnlyItsFiles) {
  nlohmann::json a = runBox({"--name", "a"});
  nlohmann::json b = runBox({"--name", "b"});
  int64_t pid = a["pid"].get<int64_t>();
  ASSERT_GT(pid, 0);
  std::string p = std::to_string(pid);

  // Its own ids, no privileges, seccomp on.
  std::string uid = procStatus(pid, "Uid").substr(0, procStatus(pid, "Uid").find('\t'));
  ASSERT_FALSE(uid.empty());
  EXPECT_GE(std::stoull(uid), 0x7C000000ULL);
  EXPECT_EQ(procStatus(pid, "Uid"), uid + "\t" + uid + "\t" + uid + "\t" + uid);
  EXPECT_EQ(procStatus(pid, "Gid"), uid + "\t" + uid + "\t" + uid + "\t" + uid);
  EXPECT_EQ(procStatus(pid, "Groups"), "");
  EXPECT_EQ(procStatus(pid, "CapEff"), "0000000000000000");
  EXPECT_EQ(procStatus(pid, "CapBnd"), "0000000000000000");
  EXPECT_EQ(procStatus(pid, "NoNewPrivs"), "1");
  EXPECT_EQ(procStatus(pid, "Seccomp"), "2");
  EXPECT_EQ(procStatus(pid, "Seccomp_filters"), "2");  // hutch-jail's, then QEMU's -sandbox
  // PID 1 of its own PID namespace; new mount, IPC, UTS, network and cgroup namespaces.
  EXPECT_EQ(procStatus(pid, "NSpid"), p + "\t1");
  for (const char* ns : {"mnt", "pid", "ipc", "uts", "net", "cgroup"}) {
    EXPECT_NE(nsOf(p, ns), nsOf("self", ns)) << ns;
  }
  // Another box: another uid, other namespaces.
  int64_t other = b["pid"].get<int64_t>();
  EXPECT_NE(procStatus(other, "Uid"), procStatus(pid, "Uid"));
  EXPECT_NE(nsOf(std::to_string(other), "mnt"), nsOf(p, "mnt"));
  // QEMU's own sandbox is on its command line.
  std::string cmdline = readFile("/proc/" + p + "/cmdline");
  std::string sandbox = std::string("-sandbox") + '\0' +
                        "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny";
  EXPECT_NE(cmdline.find(sandbox), std::string::npos);

  // Its root, as the kernel shows it: its box directory and the read-only template files, not
  // the other box, hutch.db, the API socket or the host's secrets.
  fs::path root = "/proc/" + p + "/root";
  fs::path state = fs::canonical(d().stateDir());
  fs::path own = state / "boxes" / a["id"].get<std::string>();
  EXPECT_TRUE(fs::exists(root / own.relative_path() / "disk.qcow2"));
  EXPECT_FALSE(fs::exists(root / (state / "boxes" / b["id"].get<std::string>()).relative_path()));
  EXPECT_FALSE(fs::exists(root / (state / "hutch.db").relative_path()));
  EXPECT_FALSE(fs::exists(root / fs::path(d().socket()).relative_path()));
  for (const char* host : {"etc/shadow", "etc/passwd", "root", "home", "var/log", "run", "sys"}) {
    EXPECT_FALSE(fs::exists(root / host)) << host;
  }
  EXPECT_TRUE(fs::exists(root / "dev/urandom"));
  EXPECT_FALSE(fs::exists(root / "dev/kvm"));  // TCG here (a KVM box gets it)

  // The box's files are its own while it runs; hutchd's log and pid file stay root's.
  struct stat st {};
  ASSERT_EQ(::stat(own.c_str(), &st), 0);
  EXPECT_EQ(std::to_string(st.st_uid), uid);
  EXPECT_EQ(st.st_mode & 07777, 0700U);
  ASSERT_EQ(::stat((own / "qemu.log").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0U);

  // The guest works as before.
  auto exec = d().hutch({"exec", "a", "--", "sh", "-c", "echo jailed > ~/f && cat ~/f"});
  EXPECT_EQ(exec.out, "jailed\n") << exec.err;
}

TEST_F(JailTest, CgroupLimitsFollowTheBoxAndShowInStats) {
  nlohmann::json box = runBox({"--cpus", "2", "--memory", "640M", "--name", "limited"});
  int64_t pid = box["pid"].get<int64_t>();
  ASSERT_GT(pid, 0);
  auto dirs = cgroupDirsOf(pid);
  uint64_t memory_max = (640 + jail::kVmmOverheadMib + 256) << 20;  // guest + VMM + TCG cache
  if (dirs.contains("")) {
    fs::path dir = dirs[""];
    EXPECT_EQ(firstLine(dir / "memory.max"), std::to_string(memory_max));
    EXPECT_EQ(firstLine(dir / "cpu.max"), "200000 100000");
    EXPECT_EQ(firstLine(dir / "pids.max"), "130");
  } else {
    ASSERT_TRUE(dirs.contains("memory") && dirs.contains("pids") && dirs.contains("cpu"));
    EXPECT_EQ(firstLine(dirs["memory"] / "memory.limit_in_bytes"), std::to_string(memory_max));
    EXPECT_EQ(firstLine(dirs["cpu"] / "cpu.cfs_quota_us"), "200000");
    EXPECT_EQ(firstLine(dirs["cpu"] / "cpu.cfs_period_us"), "100000");
    EXPECT_EQ(firstLine(dirs["pids"] / "pids.max"), "130");
  }
  for (const auto& [controller, dir] : dirs) {
    if (controller.empty() || controller == "memory" || controller == "pids" ||
        controller == "cpu") {
      EXPECT_EQ(dir.filename(), box["id"].get<std::string>()) << controller;
    }
  }

  auto stats = d().hutch({"--json", "stats", "limited"});
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  nlohmann::json s = nlohmann::json::parse(stats.out)[0];
  EXPECT_EQ(s["name"], "limited");
  EXPECT_EQ(std::to_string(s["uid"].get<int64_t>()),
            procStatus(pid, "Uid").substr(0, procStatus(pid, "Uid").find('\t')));
  EXPECT_EQ(s["memory"]["max_bytes"].get<uint64_t>(), memory_max);
  EXPECT_GT(s["memory"]["bytes"].get<uint64_t>(), 0U);
  EXPECT_GE(s["memory"]["peak_bytes"].get<uint64_t>(), s["memory"]["bytes"].get<uint64_t>());
  EXPECT_EQ(s["pids"]["max"].get<uint64_t>(), 130U);
  EXPECT_GT(s["pids"]["current"].get<uint64_t>(), 2U);  // QEMU's threads
  EXPECT_GT(s["cpu_ns"].get<uint64_t>(), 0U);
  EXPECT_EQ(s["oom_kills"].get<uint64_t>(), 0U);
  // The io weight (100 on the v2 scale) in every weight file the kernel offers this cgroup (this
  // v1 host: blkio.bfq.weight), and stats says which.
  fs::path io_dir = dirs.contains("") ? dirs[""] : dirs["blkio"];
  auto version = dirs.contains("") ? jail::CgroupVersion::kV2 : jail::CgroupVersion::kV1;
  nlohmann::json weights = nlohmann::json::object();
  std::string shown;
  for (const std::string& file : jail::ioWeightFiles(version)) {
    if (io_dir.empty() || !fs::exists(io_dir / file)) continue;
    uint64_t want = file == "blkio.weight" ? 500 : 100;
    std::string text = firstLine(io_dir / file);
    EXPECT_TRUE(text == std::to_string(want) || text == "default " + std::to_string(want))
        << file << ": " << text;
    weights[file] = want;
    shown += (shown.empty() ? "" : " ") + file + "=" + std::to_string(want);
  }
  EXPECT_EQ(s["io_weights"], weights);
  auto table = d().hutch({"stats", "limited"});
  EXPECT_NE(table.out.find("MEMORY / LIMIT"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("IO WEIGHT"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(shown.empty() ? " -\n" : shown), std::string::npos) << table.out;
  std::printf("io weights of a box here: %s\n", shown.empty() ? "none" : shown.c_str());

  // Stopped: the cgroup is gone, the box's files are the host's again, and stats says why not.
  ASSERT_EQ(d().hutch({"stop", "limited"}).exit_code, 0);
  for (const auto& [controller, dir] : dirs) {
    if (dir.filename() == box["id"].get<std::string>()) {
      EXPECT_FALSE(fs::exists(dir)) << dir;
    }
  }
  struct stat st {};
  fs::path own = d().stateDir() / "boxes" / box["id"].get<std::string>();
  ASSERT_EQ(::stat(own.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0U);
  ASSERT_EQ(::stat((own / "disk.qcow2").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0U);
  EXPECT_NE(d().hutch({"stats", "limited"}).exit_code, 0);
  // Started again, the same uid.
  ASSERT_EQ(d().hutch({"start", "limited"}).exit_code, 0);
  int64_t again = d().inspect("limited")["pid"].get<int64_t>();
  EXPECT_EQ(std::to_string(s["uid"].get<int64_t>()),
            procStatus(again, "Uid").substr(0, procStatus(again, "Uid").find('\t')));
}

TEST_F(JailTest, CapturesKeepFrozenLayersRootsAndReadOnly) {
  runBox({"--name", "src"});
  ASSERT_EQ(d().hutch({"exec", "src", "--", "sh", "-c", "echo before > ~/f; sync"}).exit_code, 0);
  ASSERT_EQ(d().hutch({"checkpoint", "src", "--name", "c1"}).exit_code, 0);
  ASSERT_EQ(d().hutch({"exec", "src", "--", "sh", "-c", "echo after > ~/f; sync"}).exit_code, 0);
  auto fork = d().hutch({"fork", "src", "--name", "child"});
  ASSERT_EQ(fork.exit_code, 0) << fork.err;
  // Every frozen layer is root's and 0444: no box's uid can change what others stand on.
  int layers = 0;
  for (const auto& entry : fs::directory_iterator(d().stateDir() / "layers")) {
    struct stat st {};
    ASSERT_EQ(::stat(entry.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 0U) << entry.path();
    EXPECT_EQ(st.st_mode & 07777, 0444U) << entry.path();
    ++layers;
  }
  EXPECT_GE(layers, 2);
  // The running parent's new top is its own; the child is another uid.
  nlohmann::json src = d().inspect("src");
  nlohmann::json child = d().inspect("child");
  EXPECT_NE(procStatus(src["pid"].get<int64_t>(), "Uid"),
            procStatus(child["pid"].get<int64_t>(), "Uid"));
  EXPECT_EQ(d().hutch({"exec", "child", "--", "cat", "/home/hutch/f"}).out, "after\n");
  EXPECT_EQ(d().hutch({"exec", "src", "--", "sh", "-c", "echo more >> ~/f; cat ~/f"}).out,
            "after\nmore\n");
  auto rollback = d().hutch({"rollback", "src", "c1"});
  ASSERT_EQ(rollback.exit_code, 0) << rollback.err;
  EXPECT_EQ(d().hutch({"exec", "src", "--", "cat", "/home/hutch/f"}).out, "before\n");
}

// The OOM killer takes a box's QEMU when the box's memory use passes its cgroup's limit. The
// limit hutchd sets is roomy (guest RAM + VMM overhead); the test lowers it under the box's feet
// and makes the guest touch memory it has not used yet (a restored box's RAM is a private
// mapping: each page the guest writes becomes QEMU's own anonymous memory).
TEST_F(JailTest, ABoxWhoseQemuIsOomKilledIsFailedWithThatReason) {
  nlohmann::json box = runBox({"--name", "hog"});
  int64_t pid = box["pid"].get<int64_t>();
  ASSERT_GT(pid, 0);
  auto dirs = cgroupDirsOf(pid);
  fs::path limit_file;
  uint64_t usage = 0;
  if (dirs.contains("")) {
    limit_file = dirs[""] / "memory.max";
    usage = std::stoull(firstLine(dirs[""] / "memory.current"));
  } else {
    ASSERT_TRUE(dirs.contains("memory"));
    limit_file = dirs["memory"] / "memory.limit_in_bytes";
    usage = std::stoull(firstLine(dirs["memory"] / "memory.usage_in_bytes"));
  }
  {
    std::ofstream limit(limit_file);
    limit << usage + (48 << 20);
  }
  ASSERT_EQ(firstLine(limit_file), std::to_string((usage + (48 << 20)) / 4096 * 4096));
  // 200 MiB into the guest's tmpfs: far past the 48 MiB of room.
  auto hog = d().hutch({"exec", "-u", "root", "hog", "--", "dd", "if=/dev/zero", "of=/dev/shm/fill",
                        "bs=1M", "count=200"});
  EXPECT_NE(hog.exit_code, 0);
  nlohmann::json failed = d().waitForState("hog", "failed");
  EXPECT_EQ(failed["state"], "failed");
  std::string reason = failed.value("reason", "");
  EXPECT_NE(reason.find("killed by the OOM killer (memory.max "), std::string::npos) << reason;
  // Its cgroup went with it, and the box starts again (with hutchd's own limit).
  EXPECT_FALSE(fs::exists(limit_file.parent_path()));
  auto start = d().hutch({"start", "hog"});
  ASSERT_EQ(start.exit_code, 0) << start.err;
  EXPECT_EQ(d().hutch({"exec", "hog", "--", "true"}).exit_code, 0);
  auto stats = d().hutch({"--json", "stats", "hog"});
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  EXPECT_EQ(nlohmann::json::parse(stats.out)[0]["oom_kills"].get<uint64_t>(), 0U);
}

}  // namespace
}  // namespace hutch::e2e

// A full host disk (issue 18.3), on real boxes: hutchd's state directory on a small filesystem of
// the test's own (an ext4 image on a loop device, as a host's own disk would be), filled up while
// a box runs. Captures fail with the reason and leave nothing half-made; a box whose disk write
// finds no space is stalled, says so, and goes on by itself once space is freed, with nothing
// lost on its disk.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"

namespace hutch::e2e {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// An ext4 filesystem of `mib` MiB in a sparse file, loop-mounted on the directory given to
// mountAt(); unmounted (and the daemon's directory removed) when it goes, after the Daemon.
class SmallDisk {
 public:
  explicit SmallDisk(uint64_t mib) : mib_(mib) {}
  ~SmallDisk() {
    if (!mountpoint_.empty()) {
      shell("umount -l " + e2e::quoted(mountpoint_.string()));
      std::error_code ec;
      fs::remove_all(mountpoint_.parent_path(), ec);
    }
    std::error_code ec;
    if (!image_.empty()) fs::remove(image_, ec);
  }
  SmallDisk(const SmallDisk&) = delete;
  SmallDisk& operator=(const SmallDisk&) = delete;

  void mountAt(const fs::path& dir) {
    image_ = dir.parent_path() / "small-disk.img";
    auto made = shell("truncate -s " + std::to_string(mib_) + "M " + e2e::quoted(image_.string()) +
                      " && mkfs.ext4 -q -F " + e2e::quoted(image_.string()) + " && mount -o loop " +
                      e2e::quoted(image_.string()) + " " + e2e::quoted(dir.string()));
    ASSERT_EQ(made.exit_code, 0) << "cannot make the small filesystem: " << made.err;
    mountpoint_ = dir;
  }

  uint64_t freeBytes() const {
    struct statvfs st {};
    if (::statvfs(mountpoint_.c_str(), &st) != 0) return 0;
    return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
  }
  // Fills it up but for `leave` bytes.
  void fill(uint64_t leave) {
    uint64_t take = freeBytes() - leave;
    auto filled = shell("fallocate -l " + std::to_string(take) + " " + e2e::quoted(filler()));
    ASSERT_EQ(filled.exit_code, 0) << filled.err;
  }
  // Fills it up to the last block, root's reserve included (hutchd is root): fallocate takes
  // what statvfs says is free, then a write takes whatever blocks metadata left.
  void fillAll() {
    struct statvfs st {};
    ASSERT_EQ(::statvfs(mountpoint_.c_str(), &st), 0);
    const uint64_t all = static_cast<uint64_t>(st.f_bfree) * st.f_frsize;
    shell("fallocate -l " + std::to_string(all) + " " + e2e::quoted(filler()));
    auto last = shell("dd if=/dev/zero of=" + e2e::quoted(filler() + "2") + " bs=4k");
    ASSERT_NE(last.err.find("No space left on device"), std::string::npos) << last.err;
  }
  void free() {
    fs::remove(filler());
    fs::remove(filler() + "2");
  }

 private:
  std::string filler() const { return (mountpoint_ / "filler").string(); }
  uint64_t mib_;
  fs::path image_;
  fs::path mountpoint_;
};

size_t snapshotDirs(const Daemon& d) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(d.stateDir() / "snapshots")) {
    ++n;
  }
  return n;
}

std::vector<std::string> eventTypes(const Daemon& d, const std::string& box) {
  std::vector<std::string> types;
  std::istringstream in(d.hutch({"events", "--box", box, "--json"}).out);
  for (std::string line; std::getline(in, line);) {
    auto event = json::parse(line, nullptr, false);
    if (event.is_object()) types.push_back(event.value("type", ""));
  }
  return types;
}

bool has(const std::vector<std::string>& all, const std::string& one) {
  return std::find(all.begin(), all.end(), one) != all.end();
}

TEST(DiskFullTest, CapturesFailClearlyAndAStalledBoxGoesOnOnceSpaceIsFreed) {
  SmallDisk disk(1536);
  Daemon d({}, "", [&](const fs::path& state) { disk.mountAt(state); });
  ASSERT_EQ(d.hutch({"run", "--name", "a"}).exit_code, 0);
  auto kept = d.hutch({"exec", "a", "--", "sh", "-c", "echo kept > /home/hutch/kept.txt; sync"});
  ASSERT_EQ(kept.exit_code, 0) << kept.err;
  const size_t snapshots_before = snapshotDirs(d);

  disk.fill(8ULL << 20);
  // A checkpoint and a fork: refused with the reason, nothing half-made left, the box untouched.
  auto checkpoint = d.hutch({"checkpoint", "a", "--name", "full"});
  EXPECT_NE(checkpoint.exit_code, 0);
  EXPECT_NE(checkpoint.err.find("No space left on device"), std::string::npos) << checkpoint.err;
  auto fork = d.hutch({"fork", "a", "--name", "child"});
  EXPECT_NE(fork.exit_code, 0);
  EXPECT_NE(fork.err.find("No space left on device"), std::string::npos) << fork.err;
  auto checkpoints = json::parse(d.hutch({"checkpoint", "ls", "a", "--json"}).out, nullptr, false);
  EXPECT_TRUE(checkpoints.is_array() && checkpoints.empty()) << checkpoints.dump();
  auto boxes = json::parse(d.hutch({"--json", "ls"}).out, nullptr, false);
  EXPECT_EQ(boxes.size(), 1u) << boxes.dump();
  EXPECT_EQ(snapshotDirs(d), snapshots_before) << "a failed capture left its directory";
  EXPECT_EQ(d.hutch({"exec", "a", "--", "cat", "/home/hutch/kept.txt"}).out, "kept\n");

  // A diff needs scratch space for both views of the disk: refused with the reason (75, as any
  // exhausted resource), nothing of it left.
  auto diffed = d.hutch({"diff", "a"});
  EXPECT_EQ(diffed.exit_code, 75) << diffed.err;
  EXPECT_NE(diffed.err.find("No space left on device"), std::string::npos) << diffed.err;
  {
    std::error_code ec;
    EXPECT_TRUE(!fs::exists(d.stateDir() / "diff", ec) || fs::is_empty(d.stateDir() / "diff", ec));
  }
  // A template snapshot of a new size (its memory file alone is 768 MiB) cannot be written:
  // the box boots cold instead and says why, and no snapshot is left half-made.
  auto bigger = d.hutch({"run", "--name", "bigger", "--memory", "768M"});
  ASSERT_EQ(bigger.exit_code, 0) << bigger.err;
  std::string boot = d.inspect("bigger").value("boot", "");
  EXPECT_NE(boot.find("cold boot: no template snapshot"), std::string::npos) << boot;
  EXPECT_NE(boot.find("No space left on device for its memory file"), std::string::npos) << boot;
  EXPECT_EQ(snapshotDirs(d), snapshots_before) << "a failed template snapshot left its directory";
  d.hutch({"rm", "-f", "bigger"});

  // The box writes more than the host has: its VMM stops it at the write that found no space.
  // The box says so, and an exec is refused at once with the reason (not left hanging).
  const fs::path out = d.dir() / "writer.out";
  const fs::path err = d.dir() / "writer.err";
  pid_t writer = d.start({"exec", "a", "--", "sh", "-c",
                          "head -c 40M /dev/urandom > /home/hutch/big && cd /home/hutch && "
                          "sha256sum big > big.sum && sync && echo synced"},
                         out, err);
  std::string reason;
  EXPECT_TRUE(eventually(
      [&] {
        reason = d.inspect("a").value("reason", "");
        return reason.find("stalled") != std::string::npos;
      },
      std::chrono::seconds(120)))
      << "the box never read as stalled: " << d.inspect("a").dump();
  EXPECT_NE(reason.find("disk is full"), std::string::npos) << reason;
  EXPECT_EQ(d.inspect("a")["state"], "running");
  auto refused = d.hutch({"exec", "a", "--", "true"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("disk is full"), std::string::npos) << refused.err;
  EXPECT_TRUE(has(eventTypes(d, "a"), "box.stalled"));

  // Space freed: it goes on by itself, the write that stalled it included.
  disk.free();
  auto wrote = collect(writer, out, err);
  EXPECT_EQ(wrote.exit_code, 0) << wrote.err;
  EXPECT_EQ(wrote.out, "synced\n");
  EXPECT_TRUE(eventually([&] { return d.inspect("a").value("reason", "x").empty(); }))
      << d.inspect("a").dump();
  EXPECT_TRUE(has(eventTypes(d, "a"), "box.unstalled"));
  auto later = d.hutch({"checkpoint", "a", "--name", "later"});
  EXPECT_EQ(later.exit_code, 0) << later.err;

  // Nothing was lost on its disk: a cold boot reads every byte back from it.
  ASSERT_EQ(d.hutch({"stop", "--shutdown", "a"}).exit_code, 0);
  ASSERT_EQ(d.hutch({"start", "a"}).exit_code, 0);
  auto checked = d.hutch({"exec", "-w", "/home/hutch", "a", "--", "sha256sum", "-c", "big.sum"});
  EXPECT_EQ(checked.exit_code, 0) << checked.out << checked.err;
  EXPECT_EQ(d.hutch({"exec", "a", "--", "cat", "/home/hutch/kept.txt"}).out, "kept\n");
}

// Not one byte left, root's reserve included: what hutchd records (SQLite, the audit log,
// events) cannot be written. Changes are refused with the reason, hutchd stays up, what runs
// goes on, and once space is freed everything works with nothing lost: the database is whole and
// a restarted hutchd finds every box.
TEST(DiskFullTest, WithNoByteLeftChangesAreRefusedAndNothingIsLost) {
  SmallDisk disk(1536);
  Daemon d({}, "", [&](const fs::path& state) { disk.mountAt(state); });
  ASSERT_EQ(d.hutch({"run", "--name", "a"}).exit_code, 0);
  ASSERT_EQ(
      d.hutch({"exec", "a", "--", "sh", "-c", "echo kept > /home/hutch/kept.txt; sync"}).exit_code,
      0);
  ASSERT_EQ(d.hutch({"run", "--name", "q"}).exit_code, 0);
  const int q_qemu = d.inspect("q")["pid"];
  disk.fillAll();

  // A box whose QEMU dies now cannot be recorded as failed: it is not left "running" with
  // nothing behind it. Its exec says what happened and what to do; once space is freed it
  // reads failed.
  ASSERT_EQ(::kill(q_qemu, SIGKILL), 0);
  std::string log;
  for (int i = 0; i < 300 && log.find("cannot be recorded as failed") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    log = readFile(d.dir() / "hutchd.log");
  }
  EXPECT_NE(log.find("cannot be recorded as failed"), std::string::npos);
  auto lost = d.hutch({"exec", "q", "--", "true"});
  EXPECT_EQ(lost.exit_code, 69) << lost.err;
  EXPECT_NE(lost.err.find("has failed (QEMU killed by signal 9"), std::string::npos) << lost.err;
  EXPECT_NE(lost.err.find("which hutchd cannot record yet: free space"), std::string::npos)
      << lost.err;

  // What hutchd records cannot be written: a create and a new key are refused (75, as any
  // exhausted resource) with what to do, and nothing of them is left.
  const std::string what_to_do = "free space on the filesystem of hutchd's state directory";
  auto made = d.hutch({"run", "--name", "b"});
  EXPECT_EQ(made.exit_code, 75) << made.out << made.err;
  EXPECT_NE(made.err.find(what_to_do), std::string::npos) << made.err;
  auto key = d.hutch({"key", "create", "late"});
  EXPECT_EQ(key.exit_code, 75) << key.out << key.err;
  EXPECT_NE(key.err.find(what_to_do), std::string::npos) << key.err;
  auto removed = d.hutch({"rm", "-f", "a"});
  EXPECT_EQ(removed.exit_code, 75) << removed.out << removed.err;
  // What runs goes on, and hutchd answers.
  auto exec = d.hutch({"exec", "a", "--", "cat", "/home/hutch/kept.txt"});
  EXPECT_EQ(exec.exit_code, 0) << exec.err;
  EXPECT_EQ(exec.out, "kept\n");
  EXPECT_TRUE(processAlive(d.pid())) << "hutchd died with a full disk";
  auto listed = json::parse(d.hutch({"--json", "ls"}).out, nullptr, false);
  ASSERT_TRUE(listed.is_array());
  ASSERT_EQ(listed.size(), 2u) << listed.dump();
  EXPECT_EQ(listed[0]["name"], "a");
  EXPECT_EQ(listed[0]["state"], "running");

  disk.free();
  auto q = d.waitForState("q", "failed");
  EXPECT_EQ(q["state"], "failed") << q.dump();
  EXPECT_EQ(q["reason"], "QEMU killed by signal 9 (SIGKILL) unexpectedly") << q.dump();
  ASSERT_EQ(d.hutch({"rm", "-f", "q"}).exit_code, 0);
  auto integrity = shell("sqlite3 " + e2e::quoted((d.stateDir() / "hutch.db").string()) +
                         " 'PRAGMA integrity_check'");
  EXPECT_EQ(integrity.out, "ok\n") << integrity.err;
  // Space freed: everything works again, and a restarted hutchd finds it all, its audit log
  // whole (records that reached the file but not the database are taken up, not a break).
  ASSERT_EQ(d.hutch({"run", "--name", "b"}).exit_code, 0);
  EXPECT_EQ(d.hutch({"key", "create", "late"}).exit_code, 0);
  d.crashAndRestart();
  listed = json::parse(d.hutch({"--json", "ls"}).out, nullptr, false);
  EXPECT_EQ(listed.size(), 2u) << listed.dump();
  EXPECT_EQ(d.hutch({"exec", "a", "--", "cat", "/home/hutch/kept.txt"}).out, "kept\n");
  EXPECT_EQ(d.hutch({"exec", "b", "--", "echo", "hi"}).out, "hi\n");
  EXPECT_EQ(d.hutch({"rm", "-f", "a"}).exit_code, 0);
  auto verified = d.hutch({"audit", "verify"});
  EXPECT_EQ(verified.exit_code, 0) << verified.out << verified.err;
}

}  // namespace
}  // namespace hutch::e2e

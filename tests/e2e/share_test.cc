// Shared folders (hutch run -v HOSTDIR:BOXDIR[:ro]; docs/security.md "Shared folders") on real
// boxes: the host's directory seen and written from the box, files the box writes owned by the
// directory's owner (or by the box's own uid, never root), nothing outside the directory
// reachable, a read-only share that stays so, its server jailed, the share back after stop and
// start, and the refusals: what cannot be snapshotted, and bad input that leaves nothing behind.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "harness.h"
#include "jail/box_ids.h"

namespace hutch::e2e {
namespace {

namespace fs = std::filesystem;

// Who owns the shared directory in these tests: an ordinary host uid, not root, and not one
// that the guest's users map to by chance.
constexpr uid_t kOwner = 4242;

std::string statusLine(const std::string& pid, const std::string& key) {
  std::ifstream in("/proc/" + pid + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) return line.substr(key.size() + 1);
  }
  return "";
}

// The first of a /proc status id line ("\t1\t1\t1\t1").
uid_t firstId(const std::string& line) {
  return static_cast<uid_t>(std::stoul(line));
}

// The pids of the virtiofsd processes running as `uid` (a box's own uid: its shares' servers),
// or as any box's uid when `uid` is 0.
std::vector<std::string> serversOf(uid_t uid) {
  std::vector<std::string> pids;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    std::string pid = entry.path().filename();
    if (pid.empty() || !std::isdigit(static_cast<unsigned char>(pid[0]))) continue;
    if (readFile(entry.path() / "cmdline").find("virtiofsd") == std::string::npos) continue;
    std::string ids = statusLine(pid, "Uid");
    if (ids.empty()) continue;
    uid_t runs_as = firstId(ids);
    if (uid == 0 ? runs_as >= jail::kDefaultIdBase : runs_as == uid) pids.push_back(pid);
  }
  return pids;
}

// Waits (up to 30 s) for those servers to end: each sees its QEMU's socket close.
bool serversGone(uid_t uid) {
  for (int i = 0; i < 300; ++i) {
    if (serversOf(uid).empty()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

class ShareTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "shared folders need hutchd's jail (root)";
    ASSERT_TRUE(fs::exists("/usr/lib/qemu/virtiofsd")) << "virtiofsd comes with qemu-system-common";
    daemon_ = std::make_unique<Daemon>();
  }
  void TearDown() override { daemon_.reset(); }
  Daemon& d() { return *daemon_; }

  // A directory owned by kOwner with one file the host wrote in it.
  fs::path ownedDir(const std::string& name) {
    fs::path dir = d().dir() / name;
    fs::create_directories(dir);
    { std::ofstream(dir / "from-host.txt") << "written on the host\n"; }
    EXPECT_EQ(::chown(dir.c_str(), kOwner, kOwner), 0);
    EXPECT_EQ(::chown((dir / "from-host.txt").c_str(), kOwner, kOwner), 0);
    return dir;
  }

  CommandResult exec(const std::string& box, const std::string& script,
                     const std::string& user = "") {
    std::vector<std::string> args = {"exec"};
    if (!user.empty()) args.insert(args.end(), {"-u", user});
    args.insert(args.end(), {box, "--", "sh", "-c", script});
    return d().hutch(args);
  }

  std::unique_ptr<Daemon> daemon_;
};

TEST_F(ShareTest, TheHostsFolderIsTheBoxsBothWaysAndNothingElse) {
  fs::path dir = ownedDir("project");
  auto run = d().hutch({"run", "-d", "--name", "s", "-v", dir.string() + ":/work"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  nlohmann::json box = d().inspect("s");
  ASSERT_EQ(box["shares"].size(), 1u) << box.dump();
  EXPECT_EQ(box["shares"][0]["host_dir"], dir.string());
  EXPECT_EQ(box["shares"][0]["box_dir"], "/work");
  EXPECT_EQ(box["shares"][0]["read_only"], false);
  EXPECT_NE(box["boot"].get<std::string>().find("cold boot"), std::string::npos) << box["boot"];

  // The host's file, read in the box; the box's file, on the host, the directory owner's.
  auto read = exec("s", "cat /work/from-host.txt");
  EXPECT_EQ(read.out, "written on the host\n") << read.err;
  auto write = exec("s", "echo written in the box > /work/from-box.txt && id -u");
  ASSERT_EQ(write.exit_code, 0) << write.err;
  EXPECT_EQ(write.out, "1000\n");
  EXPECT_EQ(readFile(dir / "from-box.txt"), "written in the box\n");
  struct stat st {};
  ASSERT_EQ(::stat((dir / "from-box.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kOwner);
  EXPECT_EQ(st.st_gid, kOwner);
  // A file the host makes now is seen at once, and so is an edit of one the box has read.
  { std::ofstream(dir / "later.txt") << "later\n"; }
  EXPECT_EQ(exec("s", "cat /work/later.txt").out, "later\n");
  { std::ofstream(dir / "later.txt") << "edited on the host, longer\n"; }
  EXPECT_EQ(exec("s", "cat /work/later.txt").out, "edited on the host, longer\n");
  // Hard links stay inside: the box cannot name a host file outside the share to link to, and
  // a link to a file of its own disk is refused.
  auto hard = exec("s", "ln /etc/hostname /work/hostname");
  EXPECT_NE(hard.exit_code, 0);
  EXPECT_FALSE(fs::exists(dir / "hostname"));

  // The box's root writes as the box's own uid (its QEMU's), never as the host's root; it
  // cannot make device nodes or set-uid files that mean anything on the host.
  std::string qemu = std::to_string(box["pid"].get<int64_t>());
  uid_t box_uid = firstId(statusLine(qemu, "Uid"));
  ASSERT_NE(box_uid, 0u);
  auto as_root = exec("s", "touch /work/root-made && chmod 4755 /work/root-made", "root");
  EXPECT_EQ(as_root.exit_code, 0) << as_root.err;
  ASSERT_EQ(::stat((dir / "root-made").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, box_uid);
  EXPECT_NE(st.st_uid, 0u);
  auto mknod = exec("s", "mknod /work/mem c 1 1", "root");
  EXPECT_NE(mknod.exit_code, 0);
  EXPECT_FALSE(fs::exists(dir / "mem"));
  // A link on the host that points outside the folder points into the box, not the host.
  { std::ofstream(d().dir() / "host-only.txt") << "host secret\n"; }
  fs::create_symlink(d().dir() / "host-only.txt", dir / "link");
  auto through = exec("s", "cat /work/link");
  EXPECT_NE(through.exit_code, 0);
  EXPECT_EQ(through.out.find("host secret"), std::string::npos);
  // The server runs as the box's uid, in its own user namespace, without privileges on the host.
  auto servers = serversOf(box_uid);
  ASSERT_FALSE(servers.empty());
  for (const auto& pid : servers) {
    EXPECT_EQ(firstId(statusLine(pid, "Uid")), box_uid) << pid;
    EXPECT_EQ(statusLine(pid, "NoNewPrivs"), "\t1") << pid;
    std::istringstream map(readFile("/proc/" + pid + "/uid_map"));
    std::map<uid_t, uid_t> inside_to_host;
    for (uid_t inside = 0, host = 0, count = 0; map >> inside >> host >> count;) {
      EXPECT_EQ(count, 1u);
      inside_to_host[inside] = host;
    }
    EXPECT_EQ(inside_to_host, (std::map<uid_t, uid_t>{{0, box_uid}, {1000, kOwner}})) << pid;
  }

  // What needs the box's memory saved is refused, saying why; stop shuts it down and start
  // mounts the folder again.
  auto checkpoint = d().hutch({"checkpoint", "s"});
  EXPECT_NE(checkpoint.exit_code, 0);
  EXPECT_NE(checkpoint.err.find("shared folders"), std::string::npos) << checkpoint.err;
  auto fork = d().hutch({"fork", "s"});
  EXPECT_NE(fork.exit_code, 0);
  EXPECT_NE(fork.err.find("shared folders"), std::string::npos) << fork.err;
  // A running box gets no new share (as with docker, -v is for run only).
  auto late = d().hutch({"exec", "-v", dir.string() + ":/late", "s", "--", "true"});
  EXPECT_NE(late.exit_code, 0);
  EXPECT_NE(late.err.find("-v"), std::string::npos) << late.err;
  EXPECT_EQ(d().inspect("s")["shares"].size(), 1u);
  ASSERT_EQ(d().hutch({"stop", "s"}).exit_code, 0);
  EXPECT_EQ(d().inspect("s")["state"], "stopped");
  EXPECT_TRUE(serversGone(box_uid)) << "the server ends with the box's QEMU";
  ASSERT_EQ(d().hutch({"start", "s"}).exit_code, 0);
  EXPECT_EQ(exec("s", "cat /work/from-box.txt").out, "written in the box\n");
  ASSERT_EQ(d().hutch({"rm", "-f", "s"}).exit_code, 0);
  // Removing the box leaves the host's folder as it was.
  EXPECT_EQ(readFile(dir / "from-box.txt"), "written in the box\n");
  EXPECT_EQ(readFile(dir / "from-host.txt"), "written on the host\n");
}

TEST_F(ShareTest, AReadOnlyShareStaysReadOnlyEvenForTheBoxsRoot) {
  fs::path dir = ownedDir("data");
  auto run = d().hutch({"run", "-d", "--name", "ro", "-v", dir.string() + ":/data:ro"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(exec("ro", "cat /data/from-host.txt").out, "written on the host\n");
  auto write = exec("ro", "echo x > /data/new.txt", "root");
  EXPECT_NE(write.exit_code, 0);
  EXPECT_NE(write.err.find("Read-only"), std::string::npos) << write.err;
  auto remount = exec("ro", "mount -o remount,rw /data && echo x > /data/new.txt", "root");
  EXPECT_NE(remount.exit_code, 0) << "the host's bind is read-only, whatever the guest mounts";
  EXPECT_FALSE(fs::exists(dir / "new.txt"));
  EXPECT_EQ(readFile(dir / "from-host.txt"), "written on the host\n");
}

TEST_F(ShareTest, BadSharesAreRefusedClearlyAndLeaveNothingBehind) {
  fs::path dir = ownedDir("ok");
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"-v", (d().dir() / "missing").string() + ":/work"}, "does not exist"},
      {{"-v", d().dir().string() + ":/work"}, "belongs to root"},
      {{"-v", (dir / "from-host.txt").string() + ":/work"}, "not a directory"},
      {{"-v", dir.string() + ":work"}, "absolute"},
      {{"-v", dir.string() + ":/"}, "'/'"},
      {{"-v", dir.string()}, "HOSTDIR:BOXDIR"},
      {{"-v", dir.string() + ":/a", "-v", dir.string() + ":/a/"}, "Two shared folders"},
      {{"-v", dir.string() + "/../ok:/a"}, "'..'"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {"run", "-d", "--name", "bad"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    auto run = d().hutch(args);
    EXPECT_NE(run.exit_code, 0) << c.args.back();
    EXPECT_NE(run.err.find(c.says), std::string::npos) << c.args.back() << ": " << run.err;
  }
  auto ls = d().hutch({"--json", "ls"});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_EQ(nlohmann::json::parse(ls.out).size(), 0u) << "no box was made: " << ls.out;

  // A box path that is a file in the guest: the box fails to start, saying so.
  auto file = d().hutch({"run", "-d", "--name", "onfile", "-v", dir.string() + ":/etc/hostname"});
  EXPECT_NE(file.exit_code, 0);
  EXPECT_NE(file.err.find("not a directory"), std::string::npos) << file.err;
  EXPECT_TRUE(serversGone(0));
  EXPECT_EQ(readFile(dir / "from-host.txt"), "written on the host\n");
}

}  // namespace
}  // namespace hutch::e2e

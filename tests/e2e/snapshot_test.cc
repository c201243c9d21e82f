// Snapshots on real boxes: every create restores the template's snapshot with a new identity;
// fork copies a running box, processes and unsaved files included; checkpoints roll a box back;
// incompatible snapshots are refused; a hutchd killed mid-capture leaves the parent intact.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <set>
#include <thread>

#include "harness.h"

namespace hutch::e2e {
namespace {

// A process the tests start in a box and look for later: a `sleep` with an odd argument, in
// its own session so it outlives the exec that started it.
constexpr const char* kStartMarker =
    "setsid nohup sleep 7777 >/dev/null 2>&1 < /dev/null & echo started";
constexpr const char* kMarkerRunning = "pgrep -x sleep -a | grep -c 7777 || true";

class SnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override { daemon_ = std::make_unique<Daemon>(); }
  void TearDown() override { daemon_.reset(); }
  Daemon& d() { return *daemon_; }

  CommandResult sh(const std::string& box, const std::string& script) {
    return d().hutch({"exec", box, "--", "sh", "-c", script});
  }
  std::string out(const std::string& box, const std::string& script) {
    auto r = sh(box, script);
    EXPECT_EQ(r.exit_code, 0) << box << ": " << script << ": " << r.err;
    return r.out;
  }
  void run(const std::string& name) {
    auto r = d().hutch({"run", "--name", name});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  // The template snapshot's directory (there is one per template, cpus and memory).
  std::filesystem::path templateSnapshotDir() {
    for (const auto& entry : std::filesystem::directory_iterator(d().stateDir() / "snapshots")) {
      if (!std::filesystem::exists(entry.path() / "manifest.json")) continue;
      auto manifest = nlohmann::json::parse(readFile(entry.path() / "manifest.json"));
      if (manifest["kind"] == "template") return entry.path();
    }
    ADD_FAILURE() << "no template snapshot";
    return {};
  }
  void editManifest(const std::filesystem::path& dir, const std::string& key,
                    const std::string& value) {
    auto manifest = nlohmann::json::parse(readFile(dir / "manifest.json"));
    manifest[key] = value;
    std::ofstream(dir / "manifest.json", std::ios::trunc) << manifest.dump(2);
  }

  std::unique_ptr<Daemon> daemon_;
};

TEST_F(SnapshotTest, EveryCreateRestoresTheTemplateSnapshotWithItsOwnIdentity) {
  run("first");
  run("second");
  auto first = d().inspect("first");
  auto second = d().inspect("second");
  EXPECT_NE(first["boot"].get<std::string>().find("restored from template snapshot"),
            std::string::npos)
      << first["boot"];
  EXPECT_NE(second["boot"].get<std::string>().find("restored from template snapshot"),
            std::string::npos)
      << second["boot"];

  // Each clone is itself, not a copy of the snapshot.
  const std::string probe = "hostname; cat /etc/machine-id; head -c 16 /dev/urandom | od -An -tx1";
  std::string a = out("first", probe);
  std::string b = out("second", probe);
  EXPECT_EQ(a.substr(0, a.find('\n')), "first");
  EXPECT_EQ(b.substr(0, b.find('\n')), "second");
  EXPECT_NE(a, b);
  std::set<std::string> lines_a, lines_b;
  for (size_t at = 0, nl; (nl = a.find('\n', at)) != std::string::npos; at = nl + 1) {
    lines_a.insert(a.substr(at, nl - at));
  }
  for (size_t at = 0, nl; (nl = b.find('\n', at)) != std::string::npos; at = nl + 1) {
    EXPECT_FALSE(lines_a.contains(b.substr(at, nl - at))) << "shared: " << b.substr(at, nl - at);
  }
  // The guest clock is the host's, not the snapshot's.
  auto guest_now = std::stoll(out("second", "date +%s"));
  auto host_now = std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  EXPECT_LT(std::llabs(guest_now - host_now), 10);
  // A running process's world works: files, users, sudo.
  EXPECT_EQ(out("second", "sudo -n true && echo ok"), "ok\n");
}

TEST_F(SnapshotTest, ForkCopiesProcessesAndUnsavedFilesAndWritesDoNotLeak) {
  run("parent");
  ASSERT_EQ(out("parent", std::string("echo unsaved > ~/draft.txt; ") + kStartMarker), "started\n");
  auto fork = d().hutch({"fork", "parent", "-n", "2", "--json"});
  ASSERT_EQ(fork.exit_code, 0) << fork.err;
  auto children = nlohmann::json::parse(fork.out);
  ASSERT_EQ(children.size(), 2u);
  std::vector<std::string> names;
  for (const auto& child : children) {
    names.push_back(child["name"]);
    EXPECT_EQ(child["state"], "running");
  }
  for (const std::string& box : {names[0], names[1], std::string("parent")}) {
    EXPECT_EQ(out(box, "cat ~/draft.txt"), "unsaved\n") << box;
    EXPECT_EQ(out(box, kMarkerRunning), "1\n") << box << " lost the process started before";
  }
  EXPECT_EQ(out(names[0], "hostname"), names[0] + "\n");

  // After the fork each box writes only its own disk and memory.
  ASSERT_EQ(sh("parent", "echo parent > ~/after.txt; sync").exit_code, 0);
  ASSERT_EQ(sh(names[0], "echo child > ~/child.txt; rm ~/draft.txt; sync").exit_code, 0);
  EXPECT_NE(sh(names[0], "cat ~/after.txt").exit_code, 0);
  EXPECT_NE(sh(names[1], "cat ~/after.txt").exit_code, 0);
  EXPECT_NE(sh("parent", "cat ~/child.txt").exit_code, 0);
  EXPECT_NE(sh(names[1], "cat ~/child.txt").exit_code, 0);
  EXPECT_EQ(out("parent", "cat ~/draft.txt"), "unsaved\n");
  EXPECT_EQ(out(names[1], "cat ~/draft.txt"), "unsaved\n");

  // A child survives stop/start on its own disk (the layers it stands on stay).
  ASSERT_EQ(d().hutch({"rm", "-f", "parent"}).exit_code, 0);
  ASSERT_EQ(d().hutch({"stop", names[0]}).exit_code, 0);
  auto start = d().hutch({"start", names[0]});
  ASSERT_EQ(start.exit_code, 0) << start.err;
  EXPECT_EQ(out(names[0], "cat ~/child.txt"), "child\n");
}

TEST_F(SnapshotTest, RollbackRestoresFilesAndProcessesAndCheckpointsLast) {
  run("work");
  ASSERT_EQ(out("work", std::string("echo v1 > ~/state.txt; ") + kStartMarker), "started\n");
  auto cp = d().hutch({"checkpoint", "work", "--name", "before"});
  ASSERT_EQ(cp.exit_code, 0) << cp.err;
  EXPECT_EQ(cp.out, "before\n");
  auto listed = d().hutch({"checkpoint", "ls", "work", "--json"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  auto list = nlohmann::json::parse(listed.out);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["name"], "before");
  EXPECT_GT(list[0]["size_bytes"].get<uint64_t>(), 0u);

  // Break things: delete the file, kill the process, leave a new file.
  ASSERT_EQ(sh("work", "rm ~/state.txt; pkill -x sleep; echo junk > ~/junk.txt").exit_code, 0);
  EXPECT_EQ(out("work", kMarkerRunning), "0\n");
  auto rolled = d().hutch({"rollback", "work", "before"});
  ASSERT_EQ(rolled.exit_code, 0) << rolled.err;
  EXPECT_EQ(out("work", "cat ~/state.txt"), "v1\n");
  EXPECT_EQ(out("work", kMarkerRunning), "1\n");
  EXPECT_NE(sh("work", "cat ~/junk.txt").exit_code, 0);
  EXPECT_EQ(out("work", "hostname"), "work\n");

  // Checkpoints survive stop/start and a hutchd restart.
  ASSERT_EQ(sh("work", "rm ~/state.txt; sync").exit_code, 0);
  ASSERT_EQ(d().hutch({"stop", "work"}).exit_code, 0);
  ASSERT_EQ(d().hutch({"start", "work"}).exit_code, 0);
  d().crashAndRestart();
  auto again = d().hutch({"checkpoint", "ls", "work", "--json"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(nlohmann::json::parse(again.out).size(), 1u);
  ASSERT_EQ(d().hutch({"rollback", "work", "before"}).exit_code, 0);
  EXPECT_EQ(out("work", "cat ~/state.txt"), "v1\n");

  // A second checkpoint stands on the first one's layer: removing the first keeps it working.
  ASSERT_EQ(sh("work", "echo v2 > ~/state.txt; sync").exit_code, 0);
  ASSERT_EQ(d().hutch({"checkpoint", "work", "--name", "later"}).exit_code, 0);
  ASSERT_EQ(d().hutch({"checkpoint", "rm", "work", "before"}).exit_code, 0);
  ASSERT_EQ(sh("work", "echo v3 > ~/state.txt").exit_code, 0);
  ASSERT_EQ(d().hutch({"rollback", "work", "later"}).exit_code, 0);
  EXPECT_EQ(out("work", "cat ~/state.txt"), "v2\n");
}

TEST_F(SnapshotTest, BadRequestsAreRefusedClearly) {
  run("box");
  auto dup1 = d().hutch({"checkpoint", "box", "--name", "one"});
  ASSERT_EQ(dup1.exit_code, 0) << dup1.err;
  auto dup2 = d().hutch({"checkpoint", "box", "--name", "one"});
  EXPECT_EQ(dup2.exit_code, 73) << dup2.err;
  EXPECT_NE(dup2.err.find("already has a checkpoint named 'one'"), std::string::npos) << dup2.err;
  auto missing = d().hutch({"rollback", "box", "nope"});
  EXPECT_EQ(missing.exit_code, 66) << missing.err;
  EXPECT_NE(missing.err.find("checkpoint ls"), std::string::npos) << missing.err;
  auto zero = d().hutch({"fork", "box", "-n", "0"});
  EXPECT_EQ(zero.exit_code, 64) << zero.err;
  auto taken = d().hutch({"fork", "box", "--name", "box"});
  EXPECT_EQ(taken.exit_code, 73) << taken.err;
  auto bad_name = d().hutch({"checkpoint", "box", "--name", "no/slash"});
  EXPECT_EQ(bad_name.exit_code, 64) << bad_name.err;
  ASSERT_EQ(d().hutch({"stop", "--shutdown", "box"}).exit_code, 0);
  auto stopped = d().hutch({"fork", "box"});
  EXPECT_EQ(stopped.exit_code, 65) << stopped.err;
  EXPECT_NE(stopped.err.find("needs a running box"), std::string::npos) << stopped.err;
  EXPECT_EQ(d().hutch({"checkpoint", "box"}).exit_code, 65);
  // Nothing was made by the refused requests.
  auto ls = d().hutch({"ls", "--json"});
  EXPECT_EQ(nlohmann::json::parse(ls.out).size(), 1u) << ls.out;
  // Rolling a stopped box back starts it at the checkpoint.
  auto rolled = d().hutch({"rollback", "box", "one"});
  ASSERT_EQ(rolled.exit_code, 0) << rolled.err;
  EXPECT_EQ(d().inspect("box")["state"], "running");
}

TEST_F(SnapshotTest, IncompatibleSnapshotsAreNeverRestored) {
  run("a");
  std::filesystem::path tmpl = templateSnapshotDir();
  editManifest(tmpl, "qemu_version", "6.0.0 (elsewhere)");
  run("b");
  std::string boot = d().inspect("b")["boot"];
  EXPECT_NE(boot.find("was refused: it was made by QEMU 6.0.0 (elsewhere)"), std::string::npos)
      << boot;
  // Box a still stands on the refused snapshot's disk layer: only that file stays.
  EXPECT_FALSE(std::filesystem::exists(tmpl / "state")) << "the refused snapshot should be gone";
  EXPECT_FALSE(std::filesystem::exists(tmpl / "memory"));
  EXPECT_TRUE(std::filesystem::exists(tmpl / "layer.qcow2"));
  EXPECT_EQ(out("b", "echo ok"), "ok\n");

  ASSERT_EQ(d().hutch({"checkpoint", "a", "--name", "cp"}).exit_code, 0);
  std::filesystem::path cp;
  for (const auto& entry : std::filesystem::directory_iterator(d().stateDir() / "snapshots")) {
    if (!std::filesystem::exists(entry.path() / "manifest.json")) continue;
    auto manifest = nlohmann::json::parse(readFile(entry.path() / "manifest.json"));
    if (manifest["kind"] == "checkpoint") cp = entry.path();
  }
  ASSERT_FALSE(cp.empty());
  editManifest(cp, "accel", "kvm");
  ASSERT_EQ(sh("a", "echo still > ~/here.txt").exit_code, 0);
  auto refused = d().hutch({"rollback", "a", "cp"});
  EXPECT_EQ(refused.exit_code, 65) << refused.err;
  EXPECT_NE(refused.err.find("it was made under kvm, boxes here run under tcg"), std::string::npos)
      << refused.err;
  // The box was not touched.
  EXPECT_EQ(d().inspect("a")["state"], "running");
  EXPECT_EQ(out("a", "cat ~/here.txt"), "still\n");
}

// What the guest wrote just before a checkpoint is in the checkpoint's disk layer, not only in
// the page cache its RAM holds: hutch runs `sync` in the guest before it pauses, so what reads
// the layer alone (a template made from it, a diff, a cold boot) finds every file. Read here as
// the host sees it: the layer's chain as a raw image, its journal replayed (e2fsck), the file
// read with debugfs. Without the sync the file is not there (written seconds before, it is still
// dirty in the guest's page cache).
TEST_F(SnapshotTest, ACheckpointsDiskLayerHoldsWhatTheGuestWroteJustBefore) {
  run("w");
  ASSERT_EQ(out("w", "echo just-written > ~/fresh.txt; echo ok"), "ok\n");
  ASSERT_EQ(d().hutch({"checkpoint", "w", "--name", "c"}).exit_code, 0);
  std::string layer;
  for (const auto& dir : std::filesystem::directory_iterator(d().stateDir() / "snapshots")) {
    auto manifest = nlohmann::json::parse(readFile(dir.path() / "manifest.json"), nullptr, false);
    if (manifest.is_object() && manifest.value("kind", "") == "checkpoint") {
      layer = manifest.value("layer", "");
    }
  }
  ASSERT_FALSE(layer.empty()) << "no checkpoint's manifest names a layer";
  std::string raw = (d().dir() / "checkpoint-layer.raw").string();
  auto converted = shell("qemu-img convert -O raw " + e2e::quoted(layer) + " " + e2e::quoted(raw));
  ASSERT_EQ(converted.exit_code, 0) << converted.err;
  // 0: clean, 1: errors fixed (the replayed journal counts): either leaves a readable image.
  auto checked = shell("e2fsck -fy " + e2e::quoted(raw) + " >/dev/null 2>&1; test $? -le 1");
  EXPECT_EQ(checked.exit_code, 0) << "e2fsck could not make the layer readable";
  auto read = shell("debugfs -R 'cat /home/hutch/fresh.txt' " + e2e::quoted(raw) + " 2>/dev/null");
  std::filesystem::remove(raw);
  EXPECT_EQ(read.out, "just-written\n");
  // And the box goes on.
  EXPECT_EQ(out("w", "cat ~/fresh.txt"), "just-written\n");
}

TEST_F(SnapshotTest, ADamagedCheckpointIsRefusedAndTheBoxGoesOn) {
  run("d");
  ASSERT_EQ(out("d", "echo kept > ~/kept.txt; sync; echo ok"), "ok\n");
  ASSERT_EQ(d().hutch({"checkpoint", "d", "--name", "c"}).exit_code, 0);
  // Its state file cut in half, as a disk that filled up would leave it.
  std::filesystem::path state;
  for (const auto& dir : std::filesystem::directory_iterator(d().stateDir() / "snapshots")) {
    if (readFile(dir.path() / "manifest.json").find("\"checkpoint\"") != std::string::npos) {
      state = dir.path() / "state";
    }
  }
  ASSERT_FALSE(state.empty()) << "no checkpoint's directory";
  std::filesystem::permissions(state, std::filesystem::perms::owner_write,
                               std::filesystem::perm_options::add);
  std::filesystem::resize_file(state, std::filesystem::file_size(state) / 2);
  auto rollback = d().hutch({"rollback", "d", "c"});
  EXPECT_NE(rollback.exit_code, 0);
  EXPECT_NE(rollback.err.find("truncated"), std::string::npos) << rollback.err;
  // Nothing happened to the box.
  EXPECT_EQ(d().inspect("d")["state"], "running");
  EXPECT_EQ(out("d", "cat ~/kept.txt"), "kept\n");
}

// One byte in the middle of `file` inverted: the same size, other content (a bad block).
void flipAByte(const std::filesystem::path& file) {
  std::filesystem::permissions(file, std::filesystem::perms::owner_write,
                               std::filesystem::perm_options::add);
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  const auto middle = static_cast<std::streamoff>(std::filesystem::file_size(file) / 2);
  char c = 0;
  f.seekg(middle);
  f.get(c);
  f.seekp(middle);
  f.put(static_cast<char>(~c));
  ASSERT_TRUE(f.good()) << file;
}

// The same size, one byte changed: the hashes in the manifests tell, for the template
// snapshot's memory file (the warm pool's VM made from it is not used either) and a
// checkpoint's disk layer.
TEST_F(SnapshotTest, AFileWithOneByteChangedIsRefusedNotRestored) {
  run("a");
  ASSERT_EQ(d().hutch({"checkpoint", "a", "--name", "c"}).exit_code, 0);
  std::filesystem::path tmpl = templateSnapshotDir();
  flipAByte(tmpl / "memory");
  run("b");
  std::string boot = d().inspect("b")["boot"];
  EXPECT_NE(boot.find("was refused"), std::string::npos) << boot;
  EXPECT_NE(boot.find("memory file"), std::string::npos) << boot;
  EXPECT_NE(boot.find("content changed"), std::string::npos) << boot;
  EXPECT_EQ(out("b", "echo ok"), "ok\n");

  std::string layer;
  for (const auto& dir : std::filesystem::directory_iterator(d().stateDir() / "snapshots")) {
    auto manifest = nlohmann::json::parse(readFile(dir.path() / "manifest.json"), nullptr, false);
    if (manifest.is_object() && manifest.value("kind", "") == "checkpoint") {
      layer = manifest.value("layer", "");
    }
  }
  ASSERT_FALSE(layer.empty());
  // (Box a's own disk stands on that layer too: what it now reads there is not checked here.)
  flipAByte(layer);
  auto rollback = d().hutch({"rollback", "a", "c"});
  EXPECT_EQ(rollback.exit_code, 65) << rollback.err;
  EXPECT_NE(rollback.err.find("its layer file"), std::string::npos) << rollback.err;
  EXPECT_NE(rollback.err.find("content changed"), std::string::npos) << rollback.err;
}

TEST_F(SnapshotTest, KillingHutchdDuringForkOrCheckpointLeavesTheParentUsable) {
  run("p");
  ASSERT_EQ(out("p", std::string("echo mine > ~/mine.txt; ") + kStartMarker), "started\n");
  // Land the kill at different moments of the capture: before, during and after the pause.
  int round = 0;
  for (int delay_ms : {30, 90, 160, 260}) {
    for (const char* verb : {"fork", "checkpoint"}) {
      SCOPED_TRACE(std::string(verb) + " killed after " + std::to_string(delay_ms) + " ms");
      auto out_file = d().dir() / ("op" + std::to_string(round) + ".out");
      auto err_file = d().dir() / ("op" + std::to_string(round) + ".err");
      round++;
      pid_t cli = d().start({verb, "p"}, out_file, err_file);
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      d().crashAndRestart();
      collect(cli, out_file, err_file);
      auto parent = d().waitForState("p", "running");
      ASSERT_EQ(parent["state"], "running") << parent.dump();
      EXPECT_EQ(out("p", "cat ~/mine.txt"), "mine\n");
      EXPECT_EQ(out("p", kMarkerRunning), "1\n");
      ASSERT_EQ(sh("p", "echo " + std::to_string(round) + " > ~/round.txt; sync").exit_code, 0);
      EXPECT_EQ(out("p", "cat ~/round.txt"), std::to_string(round) + "\n");
    }
  }
  // It still forks, checkpoints and restarts from its disk.
  auto fork = d().hutch({"fork", "p", "--name", "p2"});
  ASSERT_EQ(fork.exit_code, 0) << fork.err;
  EXPECT_EQ(out("p2", "cat ~/mine.txt"), "mine\n");
  ASSERT_EQ(d().hutch({"stop", "p"}).exit_code, 0);
  ASSERT_EQ(d().hutch({"start", "p"}).exit_code, 0);
  EXPECT_EQ(out("p", "cat ~/round.txt"), std::to_string(round) + "\n");
}

TEST_F(SnapshotTest, AParentWhoseQemuDiesDuringAForkLeavesNoHalfMadeChildren) {
  // The children's VMs start while the parent's RAM is being saved: whenever the parent dies,
  // the fork either made every child (running, with the parent's files) or fails and leaves
  // none behind.
  int round = 0;
  for (int delay_ms : {0, 60, 120, 200, 400, 2000}) {
    SCOPED_TRACE("parent killed after " + std::to_string(delay_ms) + " ms");
    std::string parent = "p" + std::to_string(round++);
    run(parent);
    ASSERT_EQ(out(parent, "echo mine > ~/mine.txt; sync; echo ok"), "ok\n");
    pid_t qemu = d().inspect(parent)["pid"].get<pid_t>();
    auto out_file = d().dir() / (parent + ".out");
    auto err_file = d().dir() / (parent + ".err");
    pid_t cli = d().start({"fork", parent, "-n", "2", "--json"}, out_file, err_file);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    ::kill(qemu, SIGKILL);
    auto forked = collect(cli, out_file, err_file);
    auto boxes = nlohmann::json::parse(d().hutch({"ls", "--json"}).out);
    std::vector<std::string> children;
    for (const auto& b : boxes) {
      if (b["name"] != parent) children.push_back(b["name"]);
    }
    if (forked.exit_code == 0) {
      EXPECT_EQ(children.size(), 2u) << boxes.dump();
      for (const auto& child : children) {
        EXPECT_EQ(d().inspect(child)["state"], "running") << child;
        EXPECT_EQ(out(child, "cat ~/mine.txt"), "mine\n") << child;
      }
    } else {
      EXPECT_TRUE(children.empty()) << forked.err << "\n" << boxes.dump();
      EXPECT_NE(forked.err.find(parent), std::string::npos) << forked.err;
    }
    for (const auto& b : boxes) ASSERT_EQ(d().hutch({"rm", "-f", b["id"]}).exit_code, 0);
  }
}

TEST_F(SnapshotTest, DiskUsageIsReportedAndUnusedLayersAreDeleted) {
  run("a");
  auto checkpoint = d().hutch({"checkpoint", "a", "--name", "c1"});
  ASSERT_EQ(checkpoint.exit_code, 0) << checkpoint.err;
  auto fork = d().hutch({"fork", "a", "--name", "b"});
  ASSERT_EQ(fork.exit_code, 0) << fork.err;
  auto df = d().hutch({"df", "--json"});
  ASSERT_EQ(df.exit_code, 0) << df.err;
  auto usage = nlohmann::json::parse(df.out);
  EXPECT_EQ(usage["template_snapshots"]["count"], 1);
  EXPECT_GT(usage["template_snapshots"]["bytes"].get<uint64_t>(), 1u << 20);
  EXPECT_EQ(usage["checkpoints"]["count"], 1);
  EXPECT_EQ(usage["boxes"]["count"], 2);
  auto table = d().hutch({"df"});
  EXPECT_NE(table.out.find("Checkpoints"), std::string::npos) << table.out;

  auto layers = [&] {
    size_t n = 0;
    for ([[maybe_unused]] const auto& e :
         std::filesystem::directory_iterator(d().stateDir() / "layers")) {
      n++;
    }
    return n;
  };
  EXPECT_GE(layers(), 2u);
  // Removing every box removes its checkpoints and every layer nothing stands on.
  ASSERT_EQ(d().hutch({"rm", "-f", "a"}).exit_code, 0);
  EXPECT_GE(layers(), 1u) << "b still stands on the fork's layer";
  EXPECT_EQ(out("b", "echo alive"), "alive\n");
  ASSERT_EQ(d().hutch({"rm", "-f", "b"}).exit_code, 0);
  EXPECT_TRUE(eventually([&] { return layers() == 0u; })) << layers() << " layers left";
  usage = nlohmann::json::parse(d().hutch({"df", "--json"}).out);
  EXPECT_EQ(usage["checkpoints"]["count"], 0);
  EXPECT_EQ(usage["boxes"]["count"], 0);
  EXPECT_EQ(usage["template_snapshots"]["count"], 1) << "kept for the next create";
}

}  // namespace
}  // namespace hutch::e2e

namespace hutch::e2e {
namespace {

// QEMU processes of this daemon that are not any box's: the warm pool.
size_t pooledVms(const Daemon& d) {
  auto listed = nlohmann::json::parse(d.hutch({"ls", "--json"}).out);
  size_t all = pidsMentioning((d.stateDir() / "boxes").string() + "/").size();
  return all - listed.size();
}

bool waitForPool(const Daemon& d, size_t want) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    if (pooledVms(d) == want) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return false;
}

// The pool is off by default (docs/snapshots.md): this daemon turns it on.
// The CPU a box is emulated with (TCG) is hutchd's --tcg-cpu-model: QEMU's default model has no
// AVX2, which some agents' binaries need; "max" has it. A snapshot made for one model is never
// restored into the other: its code may already have picked instructions by the CPU it saw.
TEST(CpuModelTest, TheEmulatedCpuIsHutchdsChoiceAndSnapshotsKeepTo) {
  const std::string avx2 = "grep -cw avx2 /proc/cpuinfo || true";
  Daemon d;
  ASSERT_EQ(d.hutch({"run", "--name", "plain"}).exit_code, 0);
  auto seen = d.hutch({"exec", "plain", "--", "sh", "-c", avx2});
  ASSERT_EQ(seen.exit_code, 0) << seen.err;
  EXPECT_EQ(seen.out, "0\n") << "QEMU's default TCG CPU was expected to lack AVX2";
  ASSERT_EQ(d.hutch({"exec", "plain", "--", "sh", "-c", kStartMarker}).exit_code, 0);
  ASSERT_EQ(d.hutch({"stop", "plain"}).exit_code, 0);  // suspended, with the old CPU's state

  d.crashAndRestartWith({"--tcg-cpu-model", "max"});
  ASSERT_EQ(d.hutch({"run", "--name", "max"}).exit_code, 0);
  seen = d.hutch({"exec", "max", "--", "sh", "-c", avx2});
  EXPECT_EQ(seen.out, "1\n") << seen.err;
  // The template snapshot made for the default CPU was refused and one made for "max".
  std::string boot = d.inspect("max")["boot"];
  EXPECT_NE(boot.find("it was made for the emulated CPU QEMU's default, boxes here get 'max'"),
            std::string::npos)
      << boot;
  ASSERT_EQ(d.hutch({"run", "--name", "max2"}).exit_code, 0);
  boot = d.inspect("max2")["boot"];
  EXPECT_NE(boot.find("restored"), std::string::npos) << boot;
  // The suspended box boots cold instead of resuming with a CPU it was not saved with, and
  // says so; its disk is kept.
  auto started = d.hutch({"start", "plain"});
  ASSERT_EQ(started.exit_code, 0) << started.err;
  boot = d.inspect("plain")["boot"];
  EXPECT_NE(boot.find("emulated CPU"), std::string::npos) << boot;
  EXPECT_EQ(d.hutch({"exec", "plain", "--", "sh", "-c", kMarkerRunning}).out, "0\n");
  EXPECT_EQ(d.hutch({"exec", "plain", "--", "sh", "-c", avx2}).out, "1\n");

  // A model QEMU does not have stops hutchd before it makes anything.
  auto typo = shell((std::filesystem::path(HUTCHD_BIN_DIR) / "hutchd").string() + " --state-dir " +
                    quoted((d.dir() / "typo").string()) + " --socket " +
                    quoted((d.dir() / "typo.sock").string()) + " --tcg-cpu-model Haswel");
  EXPECT_EQ(typo.exit_code, 64) << typo.out << typo.err;
  EXPECT_NE((typo.out + typo.err).find("QEMU has no CPU model 'Haswel'"), std::string::npos)
      << typo.out << typo.err;
}

TEST(WarmPoolTest, CreatesTakeAPausedRestoredBoxAndThePoolRefills) {
  // A fixed pool of 2 (--pool-max: a create that finds the pool empty would grow it).
  Daemon d({"--pool-size", "2", "--pool-max", "2"});
  ASSERT_EQ(d.hutch({"run", "--name", "first"}).exit_code, 0);
  ASSERT_TRUE(waitForPool(d, 2)) << "the pool did not fill to its default size of 2";
  // hutchd says so too, once both VMs are warmed up and paused.
  auto ready = [&] {
    auto pools = nlohmann::json::parse(d.hutch({"pool", "--json"}).out)["pools"];
    return pools.size() == 1 ? pools[0].value("ready", 0) : -1;
  };
  for (int i = 0; i < 300 && ready() != 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  auto pools = nlohmann::json::parse(d.hutch({"pool", "--json"}).out)["pools"];
  ASSERT_EQ(pools.size(), 1u) << pools.dump();
  EXPECT_EQ(pools[0]["template"], "base");
  EXPECT_EQ(pools[0]["ready"], 2);
  EXPECT_EQ(pools[0]["size"], 2);
  EXPECT_NE(d.hutch({"pool"}).out.find("2/2"), std::string::npos);
  auto second = d.hutch({"run", "--name", "second", "--", "hostname"});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(second.out, "second\n");
  std::string boot = d.inspect("second")["boot"];
  EXPECT_NE(boot.find("(warm pool)"), std::string::npos) << boot;
  ASSERT_TRUE(waitForPool(d, 2)) << "the pool was not refilled";
  // A box from the pool is a box like any other.
  ASSERT_EQ(d.hutch({"checkpoint", "second", "--name", "c"}).exit_code, 0);
  ASSERT_EQ(d.hutch({"stop", "second"}).exit_code, 0);
  ASSERT_EQ(d.hutch({"start", "second"}).exit_code, 0);
  // A restarted hutchd does not leak the earlier one's pool.
  d.crashAndRestart();
  ASSERT_TRUE(waitForPool(d, 0)) << "pool VMs of the killed hutchd are still running";
  // Nor the VMs of a refill under way: killed right after a create, when the refill is most
  // likely restoring (QEMU -incoming, whose QMP may not answer while the state loads: adopting
  // such a VM to kill it used to fail and leave it running, its directory deleted).
  ASSERT_EQ(d.hutch({"run", "--name", "third"}).exit_code, 0);
  d.crashAndRestart();
  ASSERT_TRUE(waitForPool(d, 0)) << "a refill's VM of the killed hutchd is still running";
  EXPECT_EQ(d.hutch({"exec", "third", "--", "hostname"}).out, "third\n");
}

}  // namespace
}  // namespace hutch::e2e

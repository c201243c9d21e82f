// hutch diff and export on real boxes: what an agent added, changed and deleted since the
// template or a checkpoint, on a running, a suspended and a stopped box; a file's unified diff;
// the changed tree brought out; bad input refused with a clear error.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "harness.h"

namespace hutch::e2e {
namespace {

namespace fs = std::filesystem;

class DiffTest : public ::testing::Test {
 protected:
  void SetUp() override { daemon_ = std::make_unique<Daemon>(); }
  void TearDown() override { daemon_.reset(); }
  Daemon& d() { return *daemon_; }

  // As root: the agent's work touches /etc too.
  void sh(const std::string& box, const std::string& script) {
    auto r = d().hutch({"exec", "-u", "root", box, "--", "sh", "-c", script});
    ASSERT_EQ(r.exit_code, 0) << script << ": " << r.err;
  }
  nlohmann::json diff(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"--json", "diff"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = d().hutch(argv);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    if (r.exit_code != 0) return nlohmann::json::object();
    return nlohmann::json::parse(r.out);
  }
  // path -> the change's JSON.
  static std::map<std::string, nlohmann::json> byPath(const nlohmann::json& diffed) {
    std::map<std::string, nlohmann::json> out;
    for (const auto& c : diffed.value("changes", nlohmann::json::array())) out[c["path"]] = c;
    return out;
  }

  std::unique_ptr<Daemon> daemon_;
};

// What the agent does in every test: each kind of change, and noise the default rules hide.
constexpr const char* kAgentWork =
    "mkdir -p /home/hutch/proj && printf 'hello\\n' > /home/hutch/proj/README.md && "
    "chmod 600 /etc/motd && rm /etc/debian_version && "
    "mkdir -p /srv/data && printf 'x%.0s' $(seq 1 5000) > /srv/data/blob && "
    "ln -s proj /home/hutch/link && echo 'extra line' >> /etc/issue && "
    "mkdir -p /home/hutch/proj/__pycache__ && echo c > /home/hutch/proj/__pycache__/m.pyc && "
    "mkdir -p /root/.cache && echo c > /root/.cache/x && "
    // Names are bytes: one UTF-8 (café), one not (bad\xff).
    "printf x > /home/hutch/proj/$(printf 'caf\\303\\251') && "
    "printf y > /home/hutch/proj/$(printf 'bad\\377')";

void expectAgentWork(const std::map<std::string, nlohmann::json>& changes) {
  ASSERT_TRUE(changes.count("/home/hutch/proj/README.md"));
  const auto& readme = changes.at("/home/hutch/proj/README.md");
  EXPECT_EQ(readme["change"], "added");
  EXPECT_EQ(readme["type"], "file");
  EXPECT_EQ(readme["size"], 6);
  ASSERT_TRUE(changes.count("/home/hutch/proj"));
  EXPECT_EQ(changes.at("/home/hutch/proj")["type"], "dir");
  ASSERT_TRUE(changes.count("/etc/motd"));
  EXPECT_EQ(changes.at("/etc/motd")["change"], "changed");
  EXPECT_EQ(changes.at("/etc/motd")["what"], nlohmann::json::array({"mode"}));
  EXPECT_EQ(changes.at("/etc/motd")["mode"], 0600);
  ASSERT_TRUE(changes.count("/etc/debian_version"));
  EXPECT_EQ(changes.at("/etc/debian_version")["change"], "deleted");
  ASSERT_TRUE(changes.count("/srv/data/blob"));
  EXPECT_EQ(changes.at("/srv/data/blob")["size"], 5000);
  ASSERT_TRUE(changes.count("/home/hutch/link"));
  EXPECT_EQ(changes.at("/home/hutch/link")["type"], "symlink");
  EXPECT_EQ(changes.at("/home/hutch/link")["symlink_target"], "proj");
  ASSERT_TRUE(changes.count("/etc/issue"));
  EXPECT_EQ(changes.at("/etc/issue")["what"], nlohmann::json::array({"content"}));
  // Hidden by the default rules.
  EXPECT_FALSE(changes.count("/home/hutch/proj/__pycache__/m.pyc"));
  EXPECT_FALSE(changes.count("/root/.cache/x"));
  EXPECT_FALSE(changes.count("/etc/hostname"));
}

TEST_F(DiffTest, ShowsWhatTheAgentChangedOnARunningSuspendedAndStoppedBox) {
  ASSERT_EQ(d().hutch({"run", "--name", "d"}).exit_code, 0);
  // A fresh box: only what hutch itself writes, and that is hidden.
  auto fresh = diff({"d"});
  EXPECT_EQ(fresh["changes"], nlohmann::json::array()) << fresh.dump(2);
  EXPECT_EQ(fresh["from"]["kind"], "template");

  sh("d", kAgentWork);  // no sync: the diff must see what is still in the guest's page cache
  auto running = diff({"d"});
  expectAgentWork(byPath(running));
  EXPECT_GE(running["hidden"].value("python-caches", 0), 2);
  EXPECT_GE(running["hidden"].value("user-caches", 0), 1);
  EXPECT_EQ(running["box"]["state"], "running");

  // --all shows the hidden ones; --ignore hides more and counts them.
  auto all = byPath(diff({"d", "--all"}));
  EXPECT_TRUE(all.count("/home/hutch/proj/__pycache__/m.pyc"));
  EXPECT_TRUE(all.count("/root/.cache/x"));
  auto ignored = diff({"d", "--ignore", "/srv/data", "--ignore", "*.md"});
  EXPECT_FALSE(byPath(ignored).count("/srv/data/blob"));
  EXPECT_FALSE(byPath(ignored).count("/home/hutch/proj/README.md"));
  EXPECT_EQ(ignored["hidden"]["ignored"], 3);  // /srv/data, its blob, README.md

  // docker diff's format, and the table.
  auto shrt = d().hutch({"diff", "d", "--short"});
  ASSERT_EQ(shrt.exit_code, 0) << shrt.err;
  EXPECT_NE(shrt.out.find("A /home/hutch/proj/README.md\n"), std::string::npos) << shrt.out;
  EXPECT_NE(shrt.out.find("D /etc/debian_version\n"), std::string::npos);
  EXPECT_NE(shrt.out.find("C /etc/motd\n"), std::string::npos);
  auto table = d().hutch({"diff", "d"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("deleted since template base"), std::string::npos) << table.out;

  // One file's unified diff.
  auto patch = d().hutch({"diff", "d", "--patch", "/etc/issue"});
  ASSERT_EQ(patch.exit_code, 0) << patch.err;
  EXPECT_NE(patch.out.find("--- a/etc/issue\n+++ b/etc/issue\n"), std::string::npos) << patch.out;
  EXPECT_NE(patch.out.find("\n+extra line\n"), std::string::npos) << patch.out;
  auto added = d().hutch({"diff", "d", "--patch", "/home/hutch/proj/README.md"});
  ASSERT_EQ(added.exit_code, 0) << added.err;
  EXPECT_NE(added.out.find("--- /dev/null\n+++ b/home/hutch/proj/README.md\n"), std::string::npos)
      << added.out;
  EXPECT_NE(added.out.find("+hello\n"), std::string::npos);

  // The changed tree, brought out.
  fs::path out = d().dir() / "export";
  fs::create_directories(out);
  auto exported = d().hutch({"export", "d", out.string()});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_EQ(readFile(out / "home/hutch/proj/README.md"), "hello\n");
  EXPECT_EQ(fs::file_size(out / "srv/data/blob"), 5000u);
  EXPECT_EQ(readFile(out / "home/hutch/proj/caf\xc3\xa9"), "x");
  EXPECT_EQ(readFile(out / "home/hutch/proj/bad\xff"), "y");
  EXPECT_TRUE(fs::is_symlink(out / "home/hutch/link"));
  EXPECT_EQ(fs::read_symlink(out / "home/hutch/link"), "proj");
  EXPECT_FALSE(fs::exists(out / "etc/debian_version"));
  EXPECT_FALSE(fs::exists(out / "root/.cache/x"));
  EXPECT_EQ(fs::status(out / "etc/motd").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);

  // Since a checkpoint: only what came after it.
  ASSERT_EQ(d().hutch({"checkpoint", "d", "--name", "c1"}).exit_code, 0);
  sh("d", "echo later > /home/hutch/later.txt && rm /home/hutch/proj/README.md");
  auto since = byPath(diff({"d", "--from", "c1"}));
  EXPECT_EQ(since.size(), 2u);
  ASSERT_TRUE(since.count("/home/hutch/later.txt"));
  EXPECT_EQ(since.at("/home/hutch/later.txt")["change"], "added");
  ASSERT_TRUE(since.count("/home/hutch/proj/README.md"));
  EXPECT_EQ(since.at("/home/hutch/proj/README.md")["change"], "deleted");

  // Suspended (memory kept), then stopped: the same disk, read without the guest.
  ASSERT_EQ(d().hutch({"stop", "d"}).exit_code, 0);
  ASSERT_EQ(d().inspect("d")["state"], "suspended");
  auto suspended = diff({"d"});
  EXPECT_EQ(suspended["box"]["state"], "suspended");
  auto s = byPath(suspended);
  EXPECT_TRUE(s.count("/home/hutch/later.txt"));
  EXPECT_TRUE(s.count("/etc/debian_version"));
  EXPECT_FALSE(s.count("/home/hutch/proj/README.md"));  // added, then deleted: no change
  EXPECT_EQ(d().inspect("d")["state"], "suspended");    // the diff did not resume it
  ASSERT_EQ(d().hutch({"start", "d"}).exit_code, 0);
  ASSERT_EQ(d().hutch({"stop", "--shutdown", "d"}).exit_code, 0);
  auto stopped = diff({"d"});
  EXPECT_EQ(stopped["box"]["state"], "stopped");
  EXPECT_EQ(byPath(stopped), s);
  // Each read of the disk is in the audit log, with who asked.
  auto audit = d().hutch({"audit", "--box", "d", "--json"});
  for (const char* type : {"\"box.diff\"", "\"box.diff_patch\"", "\"box.export\""}) {
    EXPECT_NE(audit.out.find(type), std::string::npos) << type << " not audited";
  }
  // The box is unharmed by all of it.
  ASSERT_EQ(d().hutch({"start", "d"}).exit_code, 0);
  auto cat = d().hutch({"exec", "d", "--", "cat", "/home/hutch/later.txt"});
  EXPECT_EQ(cat.out, "later\n");
}

TEST_F(DiffTest, BadInputGetsAClearErrorAndChangesNothing) {
  ASSERT_EQ(d().hutch({"run", "--name", "b"}).exit_code, 0);
  struct Bad {
    std::vector<std::string> args;
    int exit_code;        // the error table's (src/api/error_mapping.cc)
    std::string message;  // what the error says
  };
  const std::vector<Bad> cases = {
      {{"diff", "b", "--from", "nope"}, 66, "has no checkpoint nope"},
      {{"diff", "b", "--patch", "etc/motd"}, 64, "absolute path"},
      {{"diff", "b", "--patch", "/etc"}, 64, "regular files"},
      {{"diff", "b", "--patch", "/no/such/file"}, 66, "Nothing at that path"},
      {{"diff", "b", "--ignore", ""}, 64, "ignore pattern"},
      {{"export", "b", (d().dir() / "absent").string()}, 66, "is not a directory"},
      {{"diff", "ghost"}, 66, "ghost"},
  };
  for (const auto& bad : cases) {
    auto r = d().hutch(bad.args);
    EXPECT_EQ(r.exit_code, bad.exit_code) << bad.args[2] << ": " << r.err;
    EXPECT_NE(r.err.find(bad.message), std::string::npos) << r.err;
  }
  // Nothing of the failed diffs is left behind, and the box still works.
  EXPECT_TRUE(eventually([&] {
    std::error_code ec;
    return !fs::exists(d().stateDir() / "diff", ec) || fs::is_empty(d().stateDir() / "diff", ec);
  }));
  EXPECT_EQ(d().hutch({"exec", "b", "--", "true"}).exit_code, 0);
  EXPECT_EQ(d().inspect("b")["state"], "running");
}

}  // namespace
}  // namespace hutch::e2e

// hutch cp end to end against real boxes: trees with binary files, modes, symlinks and an empty
// directory both ways, docker cp path semantics, ownership, a large file, and bad input that must
// fail cleanly and change nothing.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "harness.h"

namespace hutch::e2e {
namespace {

namespace fs = std::filesystem;

constexpr const char* kBox = "files";

std::string randomBytes(size_t size, unsigned seed) {
  std::mt19937 gen(seed);
  std::string bytes(size, '\0');
  for (char& c : bytes) c = static_cast<char>(gen() & 0xff);
  return bytes;
}

void writeFile(const fs::path& path, const std::string& content, mode_t mode) {
  std::ofstream(path, std::ios::binary) << content;
  ASSERT_EQ(::chmod(path.c_str(), mode), 0) << path;
}

void setMtime(const fs::path& path, time_t seconds) {
  timespec times[2] = {{seconds, 0}, {seconds, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW), 0) << path;
}

// What a copy must keep of each file: its type, permission bits, content (sha256) or link
// target, and mtime in whole seconds (files and directories).
struct Node {
  char type = '?';  // f, d, l
  unsigned mode = 0;
  std::string content;
  int64_t mtime = 0;

  bool operator==(const Node&) const = default;
};
using Snapshot = std::map<std::string, Node>;

std::ostream& operator<<(std::ostream& os, const Node& n) {
  return os << fmt::format("{} {:o} {} {}", n.type, n.mode, n.content, n.mtime);
}

Snapshot localSnapshot(const fs::path& root) {
  Snapshot snap;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    struct stat st {};
    EXPECT_EQ(::lstat(entry.path().c_str(), &st), 0) << entry.path();
    Node n;
    n.mode = st.st_mode & 07777;
    n.mtime = st.st_mtim.tv_sec;
    if (S_ISDIR(st.st_mode)) {
      n.type = 'd';
    } else if (S_ISLNK(st.st_mode)) {
      n.type = 'l';
      n.mode = 0;
      n.mtime = 0;
      n.content = fs::read_symlink(entry.path()).string();
    } else {
      n.type = 'f';
      n.content = sha256Hex(readFile(entry.path()));
    }
    snap[entry.path().lexically_relative(root).string()] = n;
  }
  return snap;
}

class CpTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    daemon_ = new Daemon();
    auto run = daemon_->hutch({"run", "--name", kBox});
    ASSERT_EQ(run.exit_code, 0) << run.err;
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  static Daemon* daemon_;

  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    local_ = daemon_->dir() / fmt::format("cp-{}", info->name());
    fs::create_directories(local_);
  }

  CommandResult cp(std::vector<std::string> args) {
    args.insert(args.begin(), "cp");
    return daemon_->hutch(args);
  }
  // Looks at the box as root, which sees every file whatever the default exec user.
  CommandResult exec(std::vector<std::string> argv) {
    argv.insert(argv.begin(), {"exec", "-u", "root", kBox, "--"});
    return daemon_->hutch(argv);
  }
  std::string box(const std::string& path) { return std::string(kBox) + ":" + path; }

  // The same Snapshot as localSnapshot, of a directory in the box.
  Snapshot boxSnapshot(const std::string& dir) {
    Snapshot snap;
    auto listed =
        exec({"sh", "-c", "cd \"$1\" && find . -mindepth 1 -printf '%P\\t%y\\t%m\\t%T@\\t%l\\n'",
              "sh", dir});
    EXPECT_EQ(listed.exit_code, 0) << listed.err;
    std::istringstream lines(listed.out);
    std::string line;
    while (std::getline(lines, line)) {
      std::vector<std::string> f;
      size_t start = 0;
      for (size_t tab; (tab = line.find('\t', start)) != std::string::npos; start = tab + 1) {
        f.push_back(line.substr(start, tab - start));
      }
      f.push_back(line.substr(start));
      EXPECT_EQ(f.size(), 5u) << line;
      if (f.size() != 5) continue;
      Node n;
      n.type = f[1][0];
      n.mode = std::stoul(f[2], nullptr, 8);
      n.mtime = std::stoll(f[3].substr(0, f[3].find('.')));
      if (n.type == 'l') {
        n.mode = 0;
        n.mtime = 0;
        n.content = f[4];
      }
      snap[f[0]] = n;
    }
    auto sums =
        exec({"sh", "-c", "cd \"$1\" && find . -type f -exec sha256sum -- {} +", "sh", dir});
    EXPECT_EQ(sums.exit_code, 0) << sums.err;
    std::istringstream sum_lines(sums.out);
    while (std::getline(sum_lines, line)) {
      if (line.size() < 68) continue;
      snap[line.substr(68)].content = line.substr(0, 64);  // "<hash>  ./<name>"
    }
    return snap;
  }

  std::string boxOwner(const std::string& path) {
    auto r = exec({"stat", "-c", "%u:%g", path});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  }

  // The tree of the round trip: binary files, modes, symlinks, an empty directory, spaces.
  fs::path makeTree() {
    fs::path tree = local_ / "tree";
    fs::create_directories(tree / "sub" / "deep");
    fs::create_directories(tree / "empty");
    std::string all_bytes;
    for (int rep = 0; rep < 64; ++rep) {
      for (int b = 0; b < 256; ++b) all_bytes.push_back(static_cast<char>((b + rep) & 0xff));
    }
    writeFile(tree / "all-bytes.bin", all_bytes, 0644);
    writeFile(tree / "random.bin", randomBytes(300 * 1024, 1), 0644);
    writeFile(tree / "run.sh", "#!/bin/sh\necho ran\n", 0755);
    writeFile(tree / "secret", "only me\n", 0600);
    writeFile(tree / "name with spaces.txt", "spaces\n", 0644);
    writeFile(tree / "caf\xc3\xa9.txt", "utf-8 name\n", 0644);
    writeFile(tree / "sub" / "deep" / "file.txt", "deep\n", 0640);
    fs::create_symlink("random.bin", tree / "link");
    fs::create_symlink("../run.sh", tree / "sub" / "link-up");
    fs::create_symlink("does/not/exist", tree / "dangling");
    ::chmod((tree / "empty").c_str(), 0750);
    setMtime(tree / "sub" / "deep" / "file.txt", 1000000000);
    setMtime(tree / "empty", 1000000000);
    setMtime(tree / "sub" / "deep", 1100000000);
    return tree;
  }

  fs::path local_;
};
Daemon* CpTest::daemon_ = nullptr;

TEST_F(CpTest, TreeRoundTripKeepsContentModesLinksAndTimes) {
  fs::path tree = makeTree();
  Snapshot original = localSnapshot(tree);
  std::string names;
  for (const auto& [name, node] : original) names += name + "\n";
  ASSERT_EQ(original.size(), 13u) << names;

  auto in = cp({tree.string(), box("/tmp/rt")});
  ASSERT_EQ(in.exit_code, 0) << in.err;
  EXPECT_EQ(in.out, "");
  EXPECT_EQ(boxSnapshot("/tmp/rt"), original);
  EXPECT_EQ(exec({"/tmp/rt/run.sh"}).out, "ran\n");
  EXPECT_EQ(exec({"readlink", "/tmp/rt/dangling"}).out, "does/not/exist\n");

  auto out = cp({box("/tmp/rt"), (local_ / "back").string()});
  ASSERT_EQ(out.exit_code, 0) << out.err;
  EXPECT_EQ(localSnapshot(local_ / "back"), original);
  EXPECT_EQ(readFile(local_ / "back" / "all-bytes.bin"), readFile(tree / "all-bytes.bin"));
}

TEST_F(CpTest, ExistingDirectoryReceivesTheSourceOtherwiseTheNewName) {
  fs::path tree = makeTree();
  ASSERT_EQ(exec({"mkdir", "/tmp/into"}).exit_code, 0);
  // Host -> box.
  ASSERT_EQ(cp({(tree / "secret").string(), box("/tmp/into")}).exit_code, 0);
  ASSERT_EQ(cp({(tree / "secret").string(), box("/tmp/into/renamed")}).exit_code, 0);
  ASSERT_EQ(cp({tree.string(), box("/tmp/into")}).exit_code, 0);
  ASSERT_EQ(cp({tree.string(), box("/tmp/into/copy")}).exit_code, 0);
  ASSERT_EQ(cp({(tree / ".").string(), box("/tmp/into/")}).exit_code, 0);
  auto listed = exec({"sh", "-c",
                      "cd /tmp/into && stat -c %n secret renamed tree/run.sh copy/run.sh run.sh "
                      "sub/deep/file.txt && cat renamed && stat -c %a renamed"});
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_EQ(listed.out,
            "secret\nrenamed\ntree/run.sh\ncopy/run.sh\nrun.sh\nsub/deep/file.txt\nonly me\n600\n");
  EXPECT_NE(exec({"test", "-e", "/tmp/into/copy/tree"}).exit_code, 0);

  // Box -> host.
  fs::path got = local_ / "got";
  fs::create_directories(got);
  ASSERT_EQ(cp({box("/tmp/into/secret"), got.string()}).exit_code, 0);
  ASSERT_EQ(cp({box("/tmp/into/secret"), (got / "renamed").string()}).exit_code, 0);
  ASSERT_EQ(cp({box("/tmp/into/tree"), got.string()}).exit_code, 0);
  ASSERT_EQ(cp({box("/tmp/into/tree"), (got / "copy").string()}).exit_code, 0);
  ASSERT_EQ(cp({box("/tmp/into/tree/."), (got / "").string()}).exit_code, 0);
  for (const char* path :
       {"secret", "renamed", "tree/run.sh", "copy/run.sh", "run.sh", "sub/deep/file.txt"}) {
    EXPECT_TRUE(fs::exists(got / path)) << path;
  }
  EXPECT_EQ(readFile(got / "renamed"), "only me\n");
  EXPECT_FALSE(fs::exists(got / "copy" / "tree"));
  EXPECT_EQ(localSnapshot(got / "copy"), localSnapshot(tree));

  // A file over an existing file replaces it.
  writeFile(local_ / "new-secret", "replaced\n", 0644);
  ASSERT_EQ(cp({(local_ / "new-secret").string(), box("/tmp/into/secret")}).exit_code, 0);
  EXPECT_EQ(exec({"cat", "/tmp/into/secret"}).out, "replaced\n");
}

TEST_F(CpTest, OwnerIsTheDestinationDirectoryOwnerUnlessArchive) {
  writeFile(local_ / "mine", "x\n", 0644);
  ASSERT_EQ(::chown((local_ / "mine").c_str(), 4242, 4343), 0);
  ASSERT_EQ(cp({(local_ / "mine").string(), box("/home/hutch/")}).exit_code, 0);
  EXPECT_EQ(boxOwner("/home/hutch/mine"), "1000:1000\n");
  ASSERT_EQ(cp({(local_ / "mine").string(), box("/tmp/")}).exit_code, 0);
  EXPECT_EQ(boxOwner("/tmp/mine"), "0:0\n");
  ASSERT_EQ(cp({"-a", (local_ / "mine").string(), box("/tmp/kept")}).exit_code, 0);
  EXPECT_EQ(boxOwner("/tmp/kept"), "4242:4343\n");

  // Here, copies belong to whoever runs hutch unless -a.
  ASSERT_EQ(cp({box("/home/hutch/mine"), (local_ / "plain").string()}).exit_code, 0);
  struct stat st {};
  ASSERT_EQ(::stat((local_ / "plain").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, ::geteuid());
  ASSERT_EQ(cp({"--archive", box("/home/hutch/mine"), (local_ / "archived").string()}).exit_code,
            0);
  ASSERT_EQ(::stat((local_ / "archived").c_str(), &st), 0);
  if (::geteuid() == 0) {
    EXPECT_EQ(st.st_uid, 1000u);
    EXPECT_EQ(st.st_gid, 1000u);
  }
}

TEST_F(CpTest, RelativeBoxPathsStartWhereExecRuns) {
  auto pwd = daemon_->hutch({"exec", kBox, "--", "pwd"});  // the default user's working directory
  ASSERT_EQ(pwd.exit_code, 0) << pwd.err;
  std::string cwd = pwd.out.substr(0, pwd.out.find('\n'));
  writeFile(local_ / "note", "relative\n", 0644);
  ASSERT_EQ(cp({(local_ / "note").string(), box("rel-note")}).exit_code, 0);
  EXPECT_EQ(exec({"cat", cwd + "/rel-note"}).out, "relative\n");
  ASSERT_EQ(cp({box("rel-note"), (local_ / "back").string()}).exit_code, 0);
  EXPECT_EQ(readFile(local_ / "back"), "relative\n");
}

TEST_F(CpTest, LargeFileBothWaysIntact) {
  constexpr size_t kSize = size_t{24} * 1024 * 1024 + 12345;
  std::string data = randomBytes(kSize, 7);
  writeFile(local_ / "big.bin", data, 0644);
  auto in = cp({"--progress", (local_ / "big.bin").string(), box("/tmp/big.bin")});
  ASSERT_EQ(in.exit_code, 0) << in.err;
  EXPECT_NE(in.err.find("Copied 24.0 MiB"), std::string::npos) << in.err;
  auto sum = exec({"sha256sum", "/tmp/big.bin"});
  ASSERT_EQ(sum.exit_code, 0) << sum.err;
  EXPECT_EQ(sum.out.substr(0, 64), sha256Hex(data));

  auto out = cp({"-q", box("/tmp/big.bin"), (local_ / "back.bin").string()});
  ASSERT_EQ(out.exit_code, 0) << out.err;
  EXPECT_EQ(out.err, "");
  std::string back = readFile(local_ / "back.bin");
  EXPECT_EQ(back.size(), kSize);
  EXPECT_EQ(sha256Hex(back), sha256Hex(data));

  auto json = daemon_->hutch({"--json", "cp", box("/tmp/big.bin"), (local_ / "j.bin").string()});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto j = nlohmann::json::parse(json.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << json.out;
  EXPECT_GT(j.value("bytes", uint64_t{0}), kSize);
}

TEST_F(CpTest, MissingDirectoryInTheBoxFailsAndCreatesNothing) {
  writeFile(local_ / "f", "x\n", 0644);
  auto r = cp({(local_ / "f").string(), box("/no/such/x")});
  EXPECT_EQ(r.exit_code, 66);
  EXPECT_NE(r.err.find("/no/such: no such directory in box files"), std::string::npos) << r.err;
  r = cp({(local_ / "f").string(), box("/no/such/dir/")});
  EXPECT_EQ(r.exit_code, 66);
  EXPECT_NE(r.err.find("no such directory in box files"), std::string::npos) << r.err;
  r = cp({(local_ / "f").string(), box("/tmp/not-yet/")});
  EXPECT_EQ(r.exit_code, 66);
  EXPECT_NE(exec({"test", "-e", "/no"}).exit_code, 0);
  EXPECT_NE(exec({"test", "-e", "/tmp/not-yet"}).exit_code, 0);

  // A directory onto a file, and a missing directory here.
  fs::create_directories(local_ / "dir");
  r = cp({(local_ / "dir").string(), box("/etc/hostname")});
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_NE(r.err.find("onto the file"), std::string::npos) << r.err;
  r = cp({box("/etc/hostname"), (local_ / "missing" / "x").string()});
  EXPECT_EQ(r.exit_code, 66);
  EXPECT_NE(r.err.find("no such directory"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(local_ / "missing"));
}

TEST_F(CpTest, MissingSourceIsNotFound) {
  auto r = cp({(local_ / "nope").string(), box("/tmp/")});
  EXPECT_EQ(r.exit_code, 66);
  EXPECT_NE(r.err.find("nope: no such file or directory"), std::string::npos) << r.err;
  EXPECT_NE(exec({"test", "-e", "/tmp/nope"}).exit_code, 0);

  r = cp({box("/no/such/file"), (local_ / "x").string()});
  EXPECT_EQ(r.exit_code, 66);
  EXPECT_NE(r.err.find("/no/such/file: no such file or directory in box files"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(local_ / "x"));
}

TEST_F(CpTest, BoxOnNeitherOrBothSidesIsAUsageError) {
  auto neither = cp({"a", "b"});
  EXPECT_EQ(neither.exit_code, 64);
  EXPECT_NE(neither.err.find("BOX:PATH"), std::string::npos) << neither.err;
  auto both = cp({box("/etc/hostname"), box("/tmp/x")});
  EXPECT_EQ(both.exit_code, 64);
  EXPECT_NE(both.err.find("BOX:PATH"), std::string::npos) << both.err;
  EXPECT_EQ(cp({"files:", "x"}).exit_code, 64);
  EXPECT_EQ(cp({"only-one"}).exit_code, 64);
}

TEST_F(CpTest, UnknownOrStoppedBoxIsRefused) {
  writeFile(local_ / "f", "x\n", 0644);
  auto unknown = cp({(local_ / "f").string(), "no-such-box:/tmp/"});
  EXPECT_EQ(unknown.exit_code, 66);
  EXPECT_NE(unknown.err.find("no-such-box"), std::string::npos) << unknown.err;
  EXPECT_EQ(cp({"no-such-box:/etc/hostname", local_.string()}).exit_code, 66);

  ASSERT_EQ(daemon_->hutch({"run", "--name", "idle"}).exit_code, 0);
  ASSERT_EQ(daemon_->hutch({"stop", "--shutdown", "idle"}).exit_code, 0);
  auto in = cp({(local_ / "f").string(), "idle:/tmp/"});
  EXPECT_EQ(in.exit_code, 65);
  EXPECT_NE(in.err.find("Box idle is stopped"), std::string::npos) << in.err;
  auto out = cp({"idle:/etc/hostname", (local_ / "h").string()});
  EXPECT_EQ(out.exit_code, 65);
  EXPECT_FALSE(fs::exists(local_ / "h"));
}

}  // namespace
}  // namespace hutch::e2e

// Files without exec (docs/api.md) end to end: a real hutchd with a loopback HTTP listener, a
// real box, keys and owners, and curl (someone else's HTTP client) for every request. What the
// API did is checked inside the box with exec (as root) where it matters.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "harness.h"

namespace hutch::e2e {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string urlEncode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

void writeFile(const fs::path& path, const std::string& data) {
  std::ofstream(path, std::ios::binary) << data;
}

struct Answer {
  int status = 0;
  std::string body;
  std::string headers;
  json j() const { return json::parse(body, nullptr, false); }
  std::string code() const {
    json parsed = j();
    return parsed.is_object() && parsed["error"].is_object() ? parsed["error"].value("code", "")
                                                             : "";
  }
  std::string message() const {
    json parsed = j();
    return parsed.is_object() && parsed["error"].is_object() ? parsed["error"].value("message", "")
                                                             : "";
  }
};

class FilesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    daemon_ = new Daemon({"--listen-http", "127.0.0.1:0"});
    auto info = daemon_->hutch({"--json", "doctor"});
    auto j = json::parse(info.out, nullptr, false);
    ASSERT_TRUE(j.is_object()) << info.out << info.err;
    for (const auto& l : j["hutchd"]["info"]["listeners"]) {
      std::string s = l.get<std::string>();
      if (s.starts_with("http://")) base_ = new std::string(s);
    }
    ASSERT_NE(base_, nullptr);
    alice_ = new std::string(makeKey("files-alice"));
    bob_ = new std::string(makeKey("files-bob"));
    auto run =
        daemon_->hutchAs(RemoteCli{{"--host", *base_}, *alice_}, {"run", "-d", "--name", "fbox"});
    ASSERT_EQ(run.exit_code, 0) << run.err;
  }
  static void TearDownTestSuite() {
    if (daemon_) daemon_->hutch({"rm", "-f", "fbox"});
    delete daemon_;
    daemon_ = nullptr;
    delete base_;
    delete alice_;
    delete bob_;
  }

  static std::string makeKey(const std::string& name) {
    auto r = daemon_->hutch({"--json", "key", "create", name});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto j = json::parse(r.out, nullptr, false);
    return j.is_object() ? j.value("key", "") : "";
  }

  // curl with alice's key (or `key`); `args` are curl arguments, `path` the URL path and query.
  // The body goes to a file when `out` is given.
  static Answer curl(const std::string& args, const std::string& path,
                     const std::string& key = "alice", const fs::path& out = {}) {
    std::string k = key == "alice" ? *alice_ : key == "bob" ? *bob_ : key;
    fs::path body = out.empty() ? daemon_->dir() / "curl-body" : out;
    fs::path headers = daemon_->dir() / "curl-headers";
    std::string auth = k.empty() ? "" : "-H " + quoted("Authorization: Bearer " + k) + " ";
    auto r = shell("curl -sS -o " + quoted(body.string()) + " -D " + quoted(headers.string()) +
                   " -w '%{http_code}' " + auth + args + " " + quoted(*base_ + path));
    Answer a;
    a.status = static_cast<int>(std::strtol(r.out.c_str(), nullptr, 10));
    a.headers = readFile(headers);
    if (out.empty()) a.body = readFile(body);
    return a;
  }
  static std::string files(const std::string& suffix = "") {
    return "/v1/boxes/fbox/files" + suffix;
  }
  static std::string q(const std::string& path) { return "?path=" + urlEncode(path); }
  static Answer put(const std::string& path, const std::string& data,
                    const std::string& extra_query = "", const std::string& key = "alice") {
    fs::path f = daemon_->dir() / "put-body";
    writeFile(f, data);
    return curl("-T " + quoted(f.string()), files() + q(path) + extra_query, key);
  }
  static Answer get(const std::string& path, const std::string& extra_query = "") {
    return curl("", files() + q(path) + extra_query);
  }
  static Answer stat(const std::string& path, const std::string& extra_query = "") {
    return curl("", files("/stat") + q(path) + extra_query);
  }
  static Answer postJson(const std::string& suffix, const json& body,
                         const std::string& key = "alice") {
    fs::path f = daemon_->dir() / "post-body";
    writeFile(f, body.dump());
    return curl("-X POST -H 'Content-Type: application/json' --data-binary @" + quoted(f.string()),
                files(suffix), key);
  }
  // A command in the box as root over the unix socket; its stdout.
  static std::string inBox(const std::string& command) {
    auto r = daemon_->hutch({"exec", "-u", "root", "fbox", "--", "sh", "-c", command});
    EXPECT_EQ(r.exit_code, 0) << command << ": " << r.err;
    return r.out;
  }

  static Daemon* daemon_;
  static std::string* base_;
  static std::string* alice_;
  static std::string* bob_;
};
Daemon* FilesTest::daemon_ = nullptr;
std::string* FilesTest::base_ = nullptr;
std::string* FilesTest::alice_ = nullptr;
std::string* FilesTest::bob_ = nullptr;

TEST_F(FilesTest, TextAndBinaryFilesRoundTripByteForByte) {
  auto text = put("notes/a.txt", "hello, box\n");
  ASSERT_EQ(text.status, 200) << text.body;
  EXPECT_EQ(text.j()["path"], "/home/hutch/notes/a.txt") << "relative to the user's home";
  EXPECT_EQ(text.j()["owner"], "hutch");
  EXPECT_EQ(text.j()["size"], 11);
  auto back = get("notes/a.txt");
  EXPECT_EQ(back.status, 200);
  EXPECT_EQ(back.body, "hello, box\n");
  EXPECT_NE(back.headers.find("X-Hutch-File-Mode: 420"), std::string::npos) << back.headers;
  EXPECT_NE(back.headers.find("Content-Length: 11"), std::string::npos) << back.headers;
  EXPECT_EQ(inBox("cat /home/hutch/notes/a.txt"), "hello, box\n");

  std::string binary;
  for (size_t i = 0; i < 300000; ++i) binary += static_cast<char>((i * 7919) % 256);
  ASSERT_EQ(put("/tmp/bin.dat", binary).status, 200);
  auto bin = get("/tmp/bin.dat");
  EXPECT_EQ(bin.status, 200);
  EXPECT_TRUE(bin.body == binary) << "binary content differs (" << bin.body.size() << " bytes)";
  ASSERT_EQ(put("/tmp/empty", "").status, 200);
  auto empty = get("/tmp/empty");
  EXPECT_EQ(empty.status, 200);
  EXPECT_EQ(empty.body, "");

  // 50 MiB of random bytes, both ways, streamed (made and summed on disk by other programs).
  fs::path up = daemon_->dir() / "big.bin";
  ASSERT_EQ(
      shell("dd if=/dev/urandom bs=1M count=50 status=none of=" + quoted(up.string())).exit_code,
      0);
  auto summed = shell("sha256sum " + quoted(up.string()));
  ASSERT_GE(summed.out.size(), 64u);
  const std::string sum = summed.out.substr(0, 64);
  auto sent = curl("-T " + quoted(up.string()), files() + q("/home/hutch/big.bin"));
  ASSERT_EQ(sent.status, 200) << sent.body;
  EXPECT_EQ(sent.j()["size"], 52428800);
  EXPECT_EQ(inBox("sha256sum /home/hutch/big.bin").substr(0, 64), sum);
  fs::path down = daemon_->dir() / "big-back.bin";
  auto got = curl("", files() + q("/home/hutch/big.bin"), "alice", down);
  ASSERT_EQ(got.status, 200);
  EXPECT_EQ(shell("sha256sum " + quoted(down.string())).out.substr(0, 64), sum);
  // The same connection serves the next request after a streamed answer (keep-alive).
  auto twice = shell("curl -sS -o /dev/null -o /dev/null -w '%{http_code} %{num_connects}\\n' -H " +
                     quoted("Authorization: Bearer " + *alice_) + " " +
                     quoted(*base_ + files() + q("/tmp/bin.dat")) + " " +
                     quoted(*base_ + files() + q("/tmp/bin.dat")));
  EXPECT_NE(twice.out.find("200 0"), std::string::npos) << twice.out << twice.err;
  inBox("rm -f /home/hutch/big.bin");
}

TEST_F(FilesTest, PutSetsModeAndOwnerAndKeepsThemOtherwise) {
  auto made = put("/tmp/modes/secret", "s", "&mode=0600");
  ASSERT_EQ(made.status, 200) << made.body;
  EXPECT_EQ(made.j()["mode"], 0600);
  EXPECT_EQ(made.j()["permissions"], "-rw-------");
  EXPECT_EQ(inBox("stat -c '%a %U %G' /tmp/modes/secret"), "600 hutch hutch\n");
  // Rewritten without mode: the file keeps its mode.
  auto again = put("/tmp/modes/secret", "t");
  ASSERT_EQ(again.status, 200);
  EXPECT_EQ(again.j()["mode"], 0600);
  // As root, given to hutch.
  auto given = put("/tmp/modes/given", "g", "&user=root&owner=hutch&group=hutch&mode=640");
  ASSERT_EQ(given.status, 200) << given.body;
  EXPECT_EQ(given.j()["owner"], "hutch");
  EXPECT_EQ(inBox("stat -c '%a %U %G' /tmp/modes/given"), "640 hutch hutch\n");
  // Root's file in root's home.
  auto root = put("rootfile", "r", "&user=root");
  ASSERT_EQ(root.status, 200);
  EXPECT_EQ(root.j()["path"], "/root/rootfile");
  EXPECT_EQ(root.j()["owner"], "root");
  // hutch cannot give a file away.
  auto away = put("/tmp/modes/away", "a", "&owner=root");
  EXPECT_EQ(away.status, 403) << away.body;
  EXPECT_EQ(inBox("test -e /tmp/modes/away || echo absent"), "absent\n");
  auto bad_mode = put("/tmp/modes/x", "x", "&mode=rw-r--r--");
  EXPECT_EQ(bad_mode.status, 400);
  EXPECT_EQ(bad_mode.code(), "invalid_argument");
}

TEST_F(FilesTest, StatAndListWithDepth) {
  inBox(
      "mkdir -p /tmp/tree/a/b && echo 1 > /tmp/tree/a/b/deep && echo 22 > /tmp/tree/top && "
      "ln -s top /tmp/tree/link && chown -R hutch:hutch /tmp/tree");
  auto s = stat("/tmp/tree/top");
  ASSERT_EQ(s.status, 200) << s.body;
  EXPECT_EQ(s.j()["type"], "file");
  EXPECT_EQ(s.j()["size"], 3);
  EXPECT_EQ(s.j()["name"], "top");
  auto link = stat("/tmp/tree/link");
  EXPECT_EQ(link.j()["type"], "symlink");
  EXPECT_EQ(link.j()["symlink_target"], "top");
  auto one = curl("", files("/list") + q("/tmp/tree"));
  ASSERT_EQ(one.status, 200) << one.body;
  ASSERT_TRUE(one.j()["entries"].is_array()) << one.body;
  std::vector<std::string> paths;
  const json listed = one.j();  // iterated below: not a temporary
  for (const auto& e : listed["entries"]) paths.push_back(e["path"]);
  EXPECT_EQ(paths, (std::vector<std::string>{"/tmp/tree/a", "/tmp/tree/link", "/tmp/tree/top"}));
  EXPECT_EQ(one.j()["truncated"], false);
  auto three = curl("", files("/list") + q("/tmp/tree") + "&depth=3");
  paths.clear();
  const json deeper = three.j();
  for (const auto& e : deeper["entries"]) paths.push_back(e["path"]);
  EXPECT_EQ(paths, (std::vector<std::string>{"/tmp/tree/a", "/tmp/tree/a/b", "/tmp/tree/a/b/deep",
                                             "/tmp/tree/link", "/tmp/tree/top"}));
  EXPECT_EQ(curl("", files("/list") + q("/tmp/tree") + "&depth=0").status, 400);
  EXPECT_EQ(curl("", files("/list") + q("/tmp/tree") + "&depth=33").status, 400);
}

TEST_F(FilesTest, MkdirMoveAndRemove) {
  auto made = postJson("/mkdir", {{"path", "/tmp/mk/a/b/c"}, {"mode", "0700"}});
  ASSERT_EQ(made.status, 201) << made.body;
  EXPECT_EQ(made.j()["created"], true);
  EXPECT_EQ(made.j()["mode"], 0700);
  EXPECT_EQ(inBox("stat -c '%a %U' /tmp/mk/a/b/c /tmp/mk/a"), "700 hutch\n755 hutch\n");
  auto there = postJson("/mkdir", {{"path", "/tmp/mk/a/b/c"}, {"mode", 448}});
  EXPECT_EQ(there.status, 200);
  EXPECT_EQ(there.j()["created"], false);
  auto numeric = postJson("/mkdir", {{"path", "/tmp/mk/n"}, {"mode", 488}});
  EXPECT_EQ(numeric.j()["mode"], 0750);
  auto no_parents = postJson("/mkdir", {{"path", "/tmp/mk/x/y"}, {"parents", false}});
  EXPECT_EQ(no_parents.status, 404) << no_parents.body;
  ASSERT_EQ(put("/tmp/mk/file", "f").status, 200);
  auto in_the_way = postJson("/mkdir", {{"path", "/tmp/mk/file"}});
  EXPECT_EQ(in_the_way.status, 409) << in_the_way.body;

  ASSERT_EQ(put("/tmp/mk/other", "o").status, 200);
  auto clash = postJson("/move", {{"from", "/tmp/mk/file"}, {"to", "/tmp/mk/other"}});
  EXPECT_EQ(clash.status, 409);
  EXPECT_EQ(clash.code(), "already_exists");
  EXPECT_NE(clash.message().find("overwrite"), std::string::npos) << clash.message();
  auto moved =
      postJson("/move", {{"from", "/tmp/mk/file"}, {"to", "/tmp/mk/other"}, {"overwrite", true}});
  ASSERT_EQ(moved.status, 200) << moved.body;
  EXPECT_EQ(moved.j()["path"], "/tmp/mk/other");
  EXPECT_EQ(get("/tmp/mk/other").body, "f");
  EXPECT_EQ(stat("/tmp/mk/file").status, 404);
  auto renamed = postJson("/move", {{"from", "/tmp/mk/a"}, {"to", "/tmp/mk/renamed"}});
  EXPECT_EQ(renamed.status, 200);
  EXPECT_EQ(renamed.j()["type"], "dir");

  auto not_empty = curl("-X DELETE", files() + q("/tmp/mk/renamed"));
  EXPECT_EQ(not_empty.status, 409);
  EXPECT_NE(not_empty.message().find("recursive"), std::string::npos) << not_empty.message();
  auto removed = curl("-X DELETE", files() + q("/tmp/mk/renamed") + "&recursive=true");
  ASSERT_EQ(removed.status, 200) << removed.body;
  EXPECT_EQ(removed.j(), json({{"removed", "/tmp/mk/renamed"}}));
  EXPECT_EQ(inBox("test -e /tmp/mk/renamed || echo gone"), "gone\n");
  EXPECT_EQ(curl("-X DELETE", files() + q("/tmp/mk/other")).status, 200);
  EXPECT_EQ(curl("-X DELETE", files() + q("/tmp/mk/other")).status, 404);
}

TEST_F(FilesTest, ArchivesBothWaysKeepModesAndSymlinks) {
  fs::path src = daemon_->dir() / "tree-src";
  fs::remove_all(src);
  fs::create_directories(src / "proj" / "bin");
  writeFile(src / "proj" / "bin" / "run.sh", "#!/bin/sh\necho run\n");
  writeFile(src / "proj" / "secret", "s3cret");
  writeFile(src / "proj" / "readme", "read me");
  fs::permissions(src / "proj" / "bin" / "run.sh", fs::perms(0755));
  fs::permissions(src / "proj" / "secret", fs::perms(0600));
  fs::permissions(src / "proj" / "bin", fs::perms(0750));
  fs::create_symlink("../readme", src / "proj" / "bin" / "readme-link");
  fs::path tar = daemon_->dir() / "up.tar";
  auto made = shell("tar -C " + quoted(src.string()) + " -cf " + quoted(tar.string()) + " proj");
  ASSERT_EQ(made.exit_code, 0) << made.err;

  auto up = curl("-T " + quoted(tar.string()), files("/archive") + q("/tmp/unpacked"));
  ASSERT_EQ(up.status, 200) << up.body;
  EXPECT_EQ(up.j()["path"], "/tmp/unpacked");
  EXPECT_EQ(up.j()["entries"], 6);
  EXPECT_EQ(inBox("cd /tmp/unpacked/proj && stat -c '%n %a %U' bin bin/run.sh secret && "
                  "readlink bin/readme-link && cat bin/readme-link && bin/run.sh"),
            "bin 750 hutch\nbin/run.sh 755 hutch\nsecret 600 hutch\n../readme\nread merun\n");

  fs::path down = daemon_->dir() / "down.tar";
  auto got = curl("", files("/archive") + q("/tmp/unpacked/proj"), "alice", down);
  ASSERT_EQ(got.status, 200);
  EXPECT_NE(got.headers.find("application/x-tar"), std::string::npos);
  fs::path back = daemon_->dir() / "tree-back";
  fs::remove_all(back);
  fs::create_directories(back);
  auto listing = shell("tar -tvf " + quoted(down.string()));
  auto extracted = shell("tar -C " + quoted(back.string()) + " -xpf " + quoted(down.string()));
  ASSERT_EQ(extracted.exit_code, 0) << extracted.err << listing.out;
  EXPECT_EQ(readFile(back / "proj" / "secret"), "s3cret");
  EXPECT_EQ(fs::status(back / "proj" / "secret").permissions(), fs::perms(0600));
  EXPECT_EQ(fs::status(back / "proj" / "bin" / "run.sh").permissions(), fs::perms(0755));
  EXPECT_EQ(fs::status(back / "proj" / "bin").permissions(), fs::perms(0750));
  EXPECT_EQ(fs::read_symlink(back / "proj" / "bin" / "readme-link"), "../readme");
  // One top entry, named after the path's last component.
  auto names = shell("tar -tf " + quoted(down.string()) + " | cut -d/ -f1 | sort -u");
  EXPECT_EQ(names.out, "proj\n");
  // A single file as an archive.
  auto one = curl("", files("/archive") + q("/tmp/unpacked/proj/secret"), "alice", down);
  ASSERT_EQ(one.status, 200);
  EXPECT_EQ(shell("tar -tf " + quoted(down.string())).out, "secret\n");
  EXPECT_EQ(curl("", files("/archive") + q("/tmp/nothing-here")).status, 404);
}

TEST_F(FilesTest, HostileArchivesAreRefusedAndChangeNothing) {
  auto python = [&](const std::string& name, const std::string& script) {
    fs::path f = daemon_->dir() / name;
    auto r = shell("python3 -c " +
                   quoted("import io,tarfile,sys\nt=tarfile.open(sys.argv[1],'w')\n" + script +
                          "\nt.close()") +
                   " " + quoted(f.string()));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return f;
  };
  const std::string add_file =
      "def f(n,d=b'x'):\n i=tarfile.TarInfo(n);i.size=len(d);t.addfile(i,io.BytesIO(d))\n";
  const std::string add_link =
      "def l(n,target):\n i=tarfile.TarInfo(n);i.type=tarfile.SYMTYPE;i.linkname=target;"
      "t.addfile(i)\n";
  struct Case {
    std::string name;
    std::string script;
    std::string needle;
  };
  for (const Case& c : std::vector<Case>{
           {"dotdot.tar", add_file + "f('../escape.txt')", "'..'"},
           {"absolute.tar", add_file + "f('/tmp/absolute.txt')", "absolute"},
           {"link-out.tar", add_link + "l('etc','/etc')", "outside"},
           {"link-up.tar", add_link + "l('up','../../tmp')", "outside"},
       }) {
    fs::path f = python(c.name, c.script);
    auto r = curl("-T " + quoted(f.string()), files("/archive") + q("/tmp/evil-" + c.name));
    EXPECT_EQ(r.status, 400) << c.name << ": " << r.body;
    EXPECT_EQ(r.code(), "invalid_argument");
    EXPECT_NE(r.message().find(c.needle), std::string::npos) << r.message();
    // Refused before anything in the box changed: not even the directory was made.
    EXPECT_EQ(inBox("test -e /tmp/evil-" + c.name + " || echo absent"), "absent\n") << c.name;
  }
  EXPECT_EQ(inBox("ls /tmp/escape.txt /tmp/absolute.txt 2>/dev/null; echo done"), "done\n");
  auto not_tar = put("/tmp/x", "not a tar");  // the bytes, to the archive endpoint:
  ASSERT_EQ(not_tar.status, 200);
  fs::path junk = daemon_->dir() / "junk";
  writeFile(junk, std::string(4096, 'j'));
  auto junk_up = curl("-T " + quoted(junk.string()), files("/archive") + q("/tmp/junk-dir"));
  EXPECT_EQ(junk_up.status, 400) << junk_up.body;
  EXPECT_NE(junk_up.message().find("not a tar archive"), std::string::npos) << junk_up.message();
  // A file where the directory should be.
  fs::path good = python("good.tar", add_file + "f('a')");
  auto onto_file = curl("-T " + quoted(good.string()), files("/archive") + q("/tmp/x"));
  EXPECT_EQ(onto_file.status, 400) << onto_file.body;
  EXPECT_EQ(get("/tmp/x").body, "not a tar");
}

TEST_F(FilesTest, BadRequestsSayWhatIsWrong) {
  auto bad_json = curl("-X POST --data-binary '{\"path\": '", files("/mkdir"));
  EXPECT_EQ(bad_json.status, 400);
  EXPECT_EQ(bad_json.code(), "invalid_argument");
  EXPECT_NE(bad_json.message().find("JSON"), std::string::npos) << bad_json.message();
  auto unknown = postJson("/mkdir", {{"path", "/tmp/u"}, {"parent", true}});
  EXPECT_EQ(unknown.status, 400);
  EXPECT_NE(unknown.message().find("'parent'"), std::string::npos) << unknown.message();
  auto bad_mode = postJson("/mkdir", {{"path", "/tmp/u"}, {"mode", "rwx"}});
  EXPECT_EQ(bad_mode.status, 400);
  auto no_to = postJson("/move", {{"from", "/tmp/u"}});
  EXPECT_EQ(no_to.status, 400);

  auto missing = get("/tmp/definitely-missing");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.code(), "not_found");
  EXPECT_NE(missing.message().find("/tmp/definitely-missing"), std::string::npos);
  EXPECT_EQ(stat("/tmp/definitely-missing").status, 404);

  auto dir = get("/tmp");
  EXPECT_EQ(dir.status, 400);
  EXPECT_EQ(dir.code(), "invalid_argument");
  EXPECT_NE(dir.message().find("/tmp is a directory"), std::string::npos) << dir.message();
  EXPECT_NE(dir.message().find("list"), std::string::npos) << dir.message();
  auto list_file = curl("", files("/list") + q("/etc/hostname"));
  EXPECT_EQ(list_file.status, 400);
  EXPECT_NE(list_file.message().find("not a directory"), std::string::npos) << list_file.message();
  auto put_dir = put("/tmp", "x");
  EXPECT_EQ(put_dir.status, 400) << put_dir.body;
  auto no_path = curl("", files());
  EXPECT_EQ(no_path.status, 400);
  EXPECT_NE(no_path.message().find("'path'"), std::string::npos);
  auto typo = curl("", files("/list") + q("/tmp") + "&dept=2");
  EXPECT_EQ(typo.status, 400);
  EXPECT_NE(typo.message().find("'dept'"), std::string::npos) << typo.message();
  auto no_user = stat("/tmp", "&user=nosuchuser");
  EXPECT_EQ(no_user.status, 404) << no_user.body;

  // A JSON body over 8 MiB is refused; uploads are not limited (see the 50 MiB round trip).
  fs::path huge = daemon_->dir() / "huge.json";
  writeFile(huge, "{\"path\": \"/tmp/h\", \"user\": \"" + std::string(9u << 20, 'u') + "\"}");
  auto too_big = curl("-X POST --data-binary @" + quoted(huge.string()), files("/mkdir"));
  EXPECT_EQ(too_big.status, 400) << too_big.body;
  EXPECT_NE(too_big.message().find("8 MiB"), std::string::npos) << too_big.message();
}

TEST_F(FilesTest, WhatTheUserMayNotTouchIs403AndStaysAsItWas) {
  const std::string hostname = inBox("cat /etc/hostname");
  auto shadow = get("/etc/shadow");
  EXPECT_EQ(shadow.status, 403);
  EXPECT_EQ(shadow.code(), "permission_denied");
  EXPECT_NE(shadow.message().find("as user hutch"), std::string::npos) << shadow.message();
  EXPECT_EQ(get("/etc/shadow", "&user=root").status, 200) << "root may";

  auto overwrite = put("/etc/hostname", "owned\n");
  EXPECT_EQ(overwrite.status, 403) << overwrite.body;
  EXPECT_EQ(inBox("cat /etc/hostname"), hostname);
  auto create = put("/root/new-file", "x");
  EXPECT_EQ(create.status, 403);
  auto in_etc = put("/etc/new-file", "x");
  EXPECT_EQ(in_etc.status, 403);
  EXPECT_EQ(postJson("/mkdir", {{"path", "/root/newdir"}}).status, 403);
  EXPECT_EQ(postJson("/move", {{"from", "/etc/hostname"}, {"to", "/tmp/stolen"}}).status, 403);
  EXPECT_EQ(curl("-X DELETE", files() + q("/etc/hostname")).status, 403);
  EXPECT_EQ(curl("", files("/list") + q("/root")).status, 403);
  EXPECT_EQ(curl("", files("/archive") + q("/root")).status, 403);
  fs::path src = daemon_->dir() / "perm-src";
  fs::create_directories(src);
  writeFile(src / "planted", "p");
  fs::path tar = daemon_->dir() / "perm.tar";
  ASSERT_EQ(shell("tar -C " + quoted(src.string()) + " -cf " + quoted(tar.string()) + " planted")
                .exit_code,
            0);
  auto unpack = curl("-T " + quoted(tar.string()), files("/archive") + q("/etc"));
  EXPECT_EQ(unpack.status, 403) << unpack.body;
  EXPECT_EQ(inBox("ls /root/new-file /etc/new-file /root/newdir /tmp/stolen /etc/planted "
                  "2>/dev/null; cat /etc/hostname"),
            hostname);
}

TEST_F(FilesTest, AnotherOwnersBoxIsNotFoundAndAKeyIsNeeded) {
  ASSERT_EQ(put("/tmp/alices", "mine").status, 200);
  for (const auto& [args, path] : std::vector<std::pair<std::string, std::string>>{
           {"", files() + q("/tmp/alices")},
           {"-T /etc/hostname", files() + q("/tmp/alices")},
           {"-X DELETE", files() + q("/tmp/alices")},
           {"", files("/stat") + q("/tmp/alices")},
           {"", files("/list") + q("/tmp")},
           {"-X POST --data-binary '{\"path\":\"/tmp/bobs\"}'", files("/mkdir")},
           {"-X POST --data-binary '{\"from\":\"/tmp/alices\",\"to\":\"/tmp/b\"}'", files("/move")},
           {"", files("/archive") + q("/tmp")},
           {"-T /etc/hostname", files("/archive") + q("/tmp/bobs")}}) {
    auto bob = curl(args, path, "bob");
    EXPECT_EQ(bob.status, 404) << args << " " << path << ": " << bob.body;
    EXPECT_EQ(bob.code(), "not_found");
    auto nobody = curl(args, path, "");
    EXPECT_EQ(nobody.status, 401) << args << " " << path;
    EXPECT_EQ(nobody.code(), "unauthenticated");
  }
  EXPECT_EQ(get("/tmp/alices").body, "mine");
  EXPECT_EQ(inBox("ls /tmp/bobs /tmp/b 2>/dev/null; echo ok"), "ok\n");
}

}  // namespace
}  // namespace hutch::e2e

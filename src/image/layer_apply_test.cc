#include "image/layer_apply.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <fstream>
#include <iterator>

#include "image/test_tar.h"

namespace hutch::image {
namespace {

using testing::dir;
using testing::file;
using testing::hardlink;
using testing::makeTar;
using testing::snapshot;
using testing::symlink;
using testing::TarEntry;
using testing::TempDir;

std::string readHost(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

struct stat lstatHost(const std::filesystem::path& p) {
  struct stat st {};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return st;
}

// A tree at tmp/root and tmp/sentinel beside it, which no layer may change.
class LayerApplyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    host_ = tmp_.path() / "root";
    sentinel_ = tmp_.path() / "sentinel";
    std::filesystem::create_directories(host_);
    std::filesystem::create_directories(sentinel_ / "etc");
    std::ofstream(sentinel_ / "passwd") << "root:x:0:0\n";
    std::ofstream(sentinel_ / "shadow") << "root:secret\n";
    std::ofstream(sentinel_ / "etc" / "passwd") << "root:x:0:0\n";
    before_ = snapshot(sentinel_);
    auto root = RootDir::open(host_);
    ASSERT_TRUE(root);
    root_.emplace(std::move(*root));
  }
  void TearDown() override { EXPECT_EQ(snapshot(sentinel_), before_); }

  Result<LayerStats> apply(const std::vector<TarEntry>& entries,
                           Compression compression = Compression::kNone) {
    return applyBlob(makeTar(entries, compression), testing::layerOf("", compression));
  }
  // `layer` with its digest and size taken from `blob` unless set.
  Result<LayerStats> applyBlob(const std::string& blob, Descriptor layer) {
    if (layer.size == 0) {
      Descriptor d = testing::layerOf(blob, layer.compression);
      layer.digest = d.digest;
      layer.size = d.size;
    }
    UniqueFd fd = testing::memfdOf(blob);
    return applyLayer(*root_, fd.get(), layer, limits_, usage_);
  }
  void expectRefused(const std::vector<TarEntry>& entries, Errc code, std::string_view text) {
    auto r = apply(entries);
    ASSERT_FALSE(r) << "applied";
    EXPECT_EQ(r.error().code(), code) << r.error().message();
    EXPECT_NE(r.error().message().find(text), std::string::npos) << r.error().message();
  }

  TempDir tmp_;
  std::filesystem::path host_;
  std::filesystem::path sentinel_;
  std::string before_;
  std::optional<RootDir> root_;
  ApplyLimits limits_;
  ApplyUsage usage_;
};

TEST_F(LayerApplyTest, AppliesEntriesWithMetadata) {
  TarEntry tool = file("usr/bin/tool", "#!/bin/sh\n", 04755);
  tool.uid = 1000;
  tool.gid = 50;
  tool.mtime = 1600000000;
  tool.xattrs = {{"user.note", "hi"}, {"trusted.secret", "no"}};
  TarEntry ping = file("usr/bin/ping", "elf");
  ping.xattrs = {{"security.capability", std::string("\x01\x00\x00\x02\x00\x20\x00\x00"
                                                     "\x00\x00\x00\x00\x00\x00\x00\x00"
                                                     "\x00\x00\x00\x00",
                                                     20)}};
  TarEntry etc = dir("etc", 0751);
  etc.mtime = 1500000000;
  TarEntry fifo;
  fifo.name = "run/fifo";
  fifo.kind = TarEntry::Kind::kFifo;
  fifo.mode = 0620;
  std::string tar = makeTar({etc, file("etc/hostname", "box\n"), tool, ping,
                             symlink("bin", "usr/bin"), symlink("etc/abs", "/etc/hostname"),
                             hardlink("usr/bin/tool2", "usr/bin/tool"), fifo, dir("./tmp", 01777)});
  auto stats = applyBlob(tar, testing::layerOf(tar));
  ASSERT_TRUE(stats) << stats.error().message();
  EXPECT_EQ(stats->diff_id, sha256Digest(tar));
  EXPECT_EQ(stats->compressed_bytes, tar.size());
  EXPECT_EQ(stats->uncompressed_bytes, tar.size());
  EXPECT_EQ(stats->entries, 9u);
  EXPECT_EQ(usage_.entries, 9u);
  EXPECT_EQ(usage_.bytes, tar.size());

  EXPECT_EQ(readHost(host_ / "etc/hostname"), "box\n");
  struct stat st = lstatHost(host_ / "usr/bin/tool");
  EXPECT_EQ(st.st_mode & 07777, 04755u);
  EXPECT_EQ(st.st_uid, 1000u);
  EXPECT_EQ(st.st_gid, 50u);
  EXPECT_EQ(st.st_mtim.tv_sec, 1600000000);
  EXPECT_EQ(st.st_nlink, 2u);
  char buf[32] = {};
  if (::getxattr((host_ / "usr/bin/tool").c_str(), "user.note", buf, sizeof buf) >= 0) {
    EXPECT_STREQ(buf, "hi");
  }
  EXPECT_LT(::getxattr((host_ / "usr/bin/tool").c_str(), "trusted.secret", buf, sizeof buf), 0);
  EXPECT_EQ(::getxattr((host_ / "usr/bin/ping").c_str(), "security.capability", buf, sizeof buf),
            20);
  st = lstatHost(host_ / "etc");
  EXPECT_EQ(st.st_mode & 07777, 0751u);
  EXPECT_EQ(st.st_mtim.tv_sec, 1500000000);  // kept though etc/hostname came after
  EXPECT_EQ(std::filesystem::read_symlink(host_ / "etc/abs"), "/etc/hostname");
  EXPECT_EQ(std::filesystem::read_symlink(host_ / "bin"), "usr/bin");
  EXPECT_TRUE(S_ISFIFO(lstatHost(host_ / "run/fifo").st_mode));
  EXPECT_EQ(lstatHost(host_ / "run/fifo").st_mode & 07777, 0620u);
  EXPECT_EQ(lstatHost(host_ / "tmp").st_mode & 07777, 01777u);
  EXPECT_EQ(lstatHost(host_ / "usr").st_mode & 07777, 0755u);  // a parent made for the entry
}

TEST_F(LayerApplyTest, CompressedLayersAndDigests) {
  std::vector<TarEntry> entries = {file("a", std::string(100000, 'a')), file("b", "b")};
  std::string plain = makeTar(entries);
  for (Compression c : {Compression::kGzip, Compression::kZstd}) {
    std::string blob = makeTar(entries, c);
    ASSERT_NE(blob, plain);
    auto stats = applyBlob(blob, testing::layerOf(blob, c));
    ASSERT_TRUE(stats) << stats.error().message();
    EXPECT_EQ(stats->diff_id, sha256Digest(plain));
    EXPECT_EQ(stats->compressed_bytes, blob.size());
    EXPECT_EQ(stats->uncompressed_bytes, plain.size());
    EXPECT_EQ(readHost(host_ / "a"), std::string(100000, 'a'));
  }
  std::string gz = makeTar(entries, Compression::kGzip);
  // Another digest, another size, another compression than the media type says.
  Descriptor wrong = testing::layerOf(gz, Compression::kGzip);
  wrong.digest = sha256Digest("other");
  auto r = applyBlob(gz, wrong);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), Errc::kInvalidArgument);
  EXPECT_NE(r.error().message().find("does not match its digest"), std::string::npos);
  EXPECT_NE(r.error().message().find(wrong.digest), std::string::npos);
  wrong = testing::layerOf(gz, Compression::kGzip);
  wrong.size -= 1;
  EXPECT_NE(applyBlob(gz, wrong).error().message().find("larger than"), std::string::npos);
  wrong.size += 2;
  EXPECT_NE(applyBlob(gz, wrong).error().message().find("its manifest says"), std::string::npos);
  auto plain_as_gzip = applyBlob(plain, testing::layerOf(plain, Compression::kGzip));
  ASSERT_FALSE(plain_as_gzip);
  EXPECT_NE(plain_as_gzip.error().message().find("is not gzip-compressed"), std::string::npos);
  auto gzip_as_zstd = applyBlob(gz, testing::layerOf(gz, Compression::kZstd));
  ASSERT_FALSE(gzip_as_zstd);
  EXPECT_NE(gzip_as_zstd.error().message().find("is not zstd-compressed"), std::string::npos);
  std::string broken = gz.substr(0, gz.size() / 2);
  EXPECT_EQ(applyBlob(broken, testing::layerOf(broken, Compression::kGzip)).error().code(),
            Errc::kInvalidArgument);
  EXPECT_FALSE(applyBlob("not a tar at all", testing::layerOf("not a tar at all")));
  // Digest checks off (fuzzing): no digest needed.
  limits_.verify_digest = false;
  Descriptor none;
  none.size = 1;  // not read
  EXPECT_TRUE(applyBlob(plain, none));
}

TEST_F(LayerApplyTest, Whiteouts) {
  ASSERT_TRUE(apply(
      {file("a/x", "1"), file("a/y", "2"), file("b/z", "3"), file("c", "4"), file("keep", "5")}));
  auto r = apply({file("a/.wh.x", ""), file(".wh.b", ""), file(".wh.c", ""),
                  file(".wh.missing", ""), file("a/.wh..wh.plnk", "")});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->whiteouts, 4u);
  EXPECT_FALSE(std::filesystem::exists(host_ / "a/x"));
  EXPECT_TRUE(std::filesystem::exists(host_ / "a/y"));
  EXPECT_FALSE(std::filesystem::exists(host_ / "b"));
  EXPECT_FALSE(std::filesystem::exists(host_ / "c"));
  EXPECT_TRUE(std::filesystem::exists(host_ / "keep"));
  EXPECT_FALSE(std::filesystem::exists(host_ / "a/.wh.x"));
  EXPECT_FALSE(std::filesystem::exists(host_ / ".wh.b"));
  // A whiteout does not hide an entry of its own layer.
  ASSERT_TRUE(apply({file("n", "new"), file(".wh.n", "")}));
  EXPECT_EQ(readHost(host_ / "n"), "new");
  expectRefused({file("a/.wh..", "")}, Errc::kInvalidArgument, "names no file");
}

TEST_F(LayerApplyTest, WithoutWhiteoutsAWhiteoutNameIsAFile) {
  // A build context or uploaded files: `.wh.x` is a file of the user's, nothing is hidden.
  limits_.whiteouts = false;
  ASSERT_TRUE(apply({file("x", "1"), file("d/y", "2")}));
  auto r = apply({file(".wh.x", "a"), file("d/.wh..wh..opq", "b")});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->whiteouts, 0u);
  EXPECT_EQ(readHost(host_ / "x"), "1");
  EXPECT_EQ(readHost(host_ / "d/y"), "2");
  EXPECT_EQ(readHost(host_ / ".wh.x"), "a");
  EXPECT_EQ(readHost(host_ / "d/.wh..wh..opq"), "b");
}

TEST_F(LayerApplyTest, OpaqueDirectories) {
  ASSERT_TRUE(
      apply({file("d/old", "1"), file("d/sub/z", "2"), file("d/sub/w", "3"), file("other", "4")}));
  // Entries of this layer before and after the marker stay, lower ones go.
  auto r = apply({dir("d"), file("d/new", "n"), dir("d/sub"), file("d/.wh..wh..opq", ""),
                  file("d/after", "a")});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_FALSE(std::filesystem::exists(host_ / "d/old"));
  EXPECT_FALSE(std::filesystem::exists(host_ / "d/sub/z"));
  EXPECT_TRUE(std::filesystem::is_directory(host_ / "d/sub"));
  EXPECT_EQ(readHost(host_ / "d/new"), "n");
  EXPECT_EQ(readHost(host_ / "d/after"), "a");
  EXPECT_TRUE(std::filesystem::exists(host_ / "other"));
  EXPECT_FALSE(std::filesystem::exists(host_ / "d/.wh..wh..opq"));
  ASSERT_TRUE(apply({file("missing/.wh..wh..opq", "")}));
}

TEST_F(LayerApplyTest, ReplacesAcrossTypes) {
  ASSERT_TRUE(apply({file("d/inner", "1"), file("f", "2"), symlink("l", "/etc"), dir("keep"),
                     file("keep/child", "3")}));
  ASSERT_TRUE(
      apply({file("d", "now a file"), dir("f"), file("l", "now a file"), dir("keep", 0700)}));
  EXPECT_EQ(readHost(host_ / "d"), "now a file");
  EXPECT_TRUE(std::filesystem::is_directory(host_ / "f"));
  EXPECT_FALSE(std::filesystem::is_symlink(host_ / "l"));
  EXPECT_EQ(readHost(host_ / "keep/child"), "3");  // an existing directory keeps its contents
  EXPECT_EQ(lstatHost(host_ / "keep").st_mode & 07777, 0700u);
  ASSERT_TRUE(apply({symlink("d", "/x"), hardlink("h", "d")}));
  EXPECT_TRUE(std::filesystem::is_symlink(host_ / "d"));
}

TEST_F(LayerApplyTest, RefusesDevicesAndBadLinks) {
  TarEntry null;
  null.name = "dev/null";
  null.kind = TarEntry::Kind::kCharDev;
  auto r = apply({null});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), Errc::kUnsupported);
  EXPECT_EQ(r.error().message(), "Layer " + testing::layerOf(makeTar({null})).digest +
                                     " has a device node at /dev/null; images with device nodes "
                                     "are not supported");
  expectRefused({hardlink("h", "missing")}, Errc::kInvalidArgument, "not a file of the image");
  expectRefused({dir("d"), hardlink("h", "d")}, Errc::kInvalidArgument, "not a file of the image");
  TarEntry owner = file("f", "x");
  owner.uid = 0xffffffffLL;
  expectRefused({owner}, Errc::kInvalidArgument, "out of range");
}

// The escapes: every one either lands inside the tree or is refused; the sentinel beside the
// tree is checked by TearDown.
TEST_F(LayerApplyTest, NothingEscapesTheRoot) {
  expectRefused({file("../../etc/x", "pwned")}, Errc::kInvalidArgument, "outside the image root");
  expectRefused({file("../sentinel/passwd", "pwned")}, Errc::kInvalidArgument, "../sentinel");
  expectRefused({file("a/../../sentinel/passwd", "pwned")}, Errc::kInvalidArgument, "outside");
  expectRefused({file("x", ""), hardlink("h", "../sentinel/shadow")}, Errc::kInvalidArgument,
                "outside the image");

  ASSERT_TRUE(apply({file("/abs", "inside"), file("//etc/../etc/./y", "y")}));
  EXPECT_EQ(readHost(host_ / "abs"), "inside");
  EXPECT_EQ(readHost(host_ / "etc/y"), "y");

  for (std::string target : {"/", "..", "../../..", "../sentinel", "/../sentinel"}) {
    SCOPED_TRACE(target);
    ASSERT_TRUE(root_->remove("a"));
    auto r = apply({symlink("a", target), dir("a/sentinel"), file("a/sentinel/passwd", "pwned"),
                    file("a/sentinel/.wh.shadow", ""), file("a/etc/.wh..wh..opq", "")});
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_TRUE(std::filesystem::is_symlink(host_ / "a"));
  }
  for (std::string target : {"/", "..", "../../..", "../sentinel"}) {
    SCOPED_TRACE(target);
    ASSERT_TRUE(apply({symlink("b", target)}));  // a layer below
    // Through the link: the files land inside the tree (or find nothing to remove).
    auto r = apply({file("b/sentinel/passwd", "pwned"), file("b/.wh.shadow", ""),
                    file("b/sentinel/.wh.shadow", ""), file("b/etc/.wh..wh..opq", "")});
    ASSERT_TRUE(r) << r.error().message();
    auto link = apply({hardlink("h", "b/shadow")});
    EXPECT_FALSE(link);
    auto link2 = apply({hardlink("h", "/etc/shadow")});
    EXPECT_FALSE(link2);
  }
  EXPECT_EQ(readHost(host_ / "sentinel/passwd"), "pwned");  // the tree's own /sentinel
  // A symlink replaced by a file is replaced, not written through.
  ASSERT_TRUE(apply({symlink("f", "../sentinel/passwd")}));
  ASSERT_TRUE(apply({file("f", "pwned")}));
  ASSERT_TRUE(apply({symlink("g", "/sentinel/passwd"), file("g", "pwned")}));
  EXPECT_FALSE(std::filesystem::is_symlink(host_ / "g"));
  // A hard link to a symlink that points outside links the symlink, not its target.
  ASSERT_TRUE(apply({symlink("out", sentinel_.string() + "/shadow"), hardlink("h2", "out")}));
  EXPECT_TRUE(std::filesystem::is_symlink(host_ / "h2"));
}

TEST_F(LayerApplyTest, Limits) {
  limits_.max_entries = 3;
  auto r = apply({file("1", ""), file("2", ""), file("3", ""), file("4", "")});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), Errc::kResourceExhausted);
  EXPECT_NE(r.error().message().find("limit of 3"), std::string::npos);
  limits_ = {};
  usage_ = {};
  limits_.max_path_length = 10;
  expectRefused({file("0123456789a", "")}, Errc::kResourceExhausted, "entry name of 11 bytes");
  expectRefused({symlink("s", "0123456789a")}, Errc::kResourceExhausted, "longer than 10");
  limits_ = {};
  limits_.max_file_bytes = 5;
  expectRefused({file("big", "123456")}, Errc::kResourceExhausted, "6 bytes, more than");
  EXPECT_TRUE(apply({file("ok", "12345")}));
  // The total carries over from layer to layer.
  limits_ = {};
  usage_ = {};
  std::string tar = makeTar({file("x", std::string(5000, 'x'))});
  limits_.max_total_bytes = tar.size() * 2 - 1;
  ASSERT_TRUE(applyBlob(tar, testing::layerOf(tar)));
  auto second = applyBlob(tar, testing::layerOf(tar));
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().code(), Errc::kResourceExhausted);
  EXPECT_NE(second.error().message().find("total uncompressed size"), std::string::npos);
  // A zstd bomb: small compressed, large uncompressed.
  usage_ = {};
  limits_.max_total_bytes = 1 << 20;
  std::string bomb = makeTar({file("zeros", std::string(8 << 20, '\0'))}, Compression::kZstd);
  EXPECT_LT(bomb.size(), 4096u);
  EXPECT_EQ(applyBlob(bomb, testing::layerOf(bomb, Compression::kZstd)).error().code(),
            Errc::kResourceExhausted);
}

}  // namespace
}  // namespace hutch::image

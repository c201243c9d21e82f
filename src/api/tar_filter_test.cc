#include "api/tar_filter.h"

#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <map>
#include <string>
#include <vector>

namespace hutch::api {
namespace {

struct TestEntry {
  std::string name;
  mode_t type = AE_IFREG;
  unsigned mode = 0644;
  std::string data;
  std::string link;  // symlink target
  std::string hardlink;
  int64_t mtime = 1764400000;
};

la_ssize_t appendTo(archive* /*a*/, void* client, const void* buffer, size_t length) {
  static_cast<std::string*>(client)->append(static_cast<const char*>(buffer), length);
  return static_cast<la_ssize_t>(length);
}

// An archive as libarchive writes it in `format` (ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, ...).
std::string makeTar(const std::vector<TestEntry>& entries, int format) {
  std::string out;
  archive* a = archive_write_new();
  archive_write_set_format(a, format);
  archive_write_open(a, &out, nullptr, appendTo, nullptr);
  for (const TestEntry& e : entries) {
    archive_entry* entry = archive_entry_new();
    archive_entry_set_pathname(entry, e.name.c_str());
    archive_entry_set_filetype(entry, e.type);
    archive_entry_set_perm(entry, e.mode);
    archive_entry_set_mtime(entry, e.mtime, 0);
    archive_entry_set_uid(entry, 1000);
    archive_entry_set_gid(entry, 1000);
    if (!e.link.empty()) archive_entry_set_symlink(entry, e.link.c_str());
    if (!e.hardlink.empty()) archive_entry_set_hardlink(entry, e.hardlink.c_str());
    archive_entry_set_size(entry, static_cast<la_int64_t>(e.data.size()));
    EXPECT_EQ(archive_write_header(a, entry), ARCHIVE_OK) << archive_error_string(a);
    if (!e.data.empty()) archive_write_data(a, e.data.data(), e.data.size());
    archive_entry_free(entry);
  }
  archive_write_close(a);
  archive_write_free(a);
  return out;
}

struct ReadEntry {
  std::string name;
  mode_t type;
  unsigned mode;
  std::string data;
  std::string link;
  std::string hardlink;
  int64_t mtime;
};

// What libarchive reads back from `tar`.
std::vector<ReadEntry> readTar(const std::string& tar) {
  std::vector<ReadEntry> out;
  archive* a = archive_read_new();
  archive_read_support_format_tar(a);
  EXPECT_EQ(archive_read_open_memory(a, tar.data(), tar.size()), ARCHIVE_OK);
  archive_entry* entry = nullptr;
  while (archive_read_next_header(a, &entry) == ARCHIVE_OK) {
    ReadEntry e{archive_entry_pathname(entry),
                archive_entry_filetype(entry),
                static_cast<unsigned>(archive_entry_perm(entry)),
                "",
                archive_entry_symlink(entry) ? archive_entry_symlink(entry) : "",
                archive_entry_hardlink(entry) ? archive_entry_hardlink(entry) : "",
                archive_entry_mtime(entry)};
    char buffer[4096];
    la_ssize_t n;
    while ((n = archive_read_data(a, buffer, sizeof buffer)) > 0) {
      e.data.append(buffer, static_cast<size_t>(n));
    }
    out.push_back(std::move(e));
  }
  archive_read_free(a);
  return out;
}

Result<std::string> filter(const std::string& input, TarFilterOptions options = {},
                           size_t piece = 0, uint64_t* entries = nullptr) {
  TarFilter f(std::move(options));
  std::string out;
  if (piece == 0) piece = input.size() + 1;
  for (size_t at = 0; at < input.size(); at += piece) {
    HUTCH_TRY_VOID(f.feed(std::string_view(input).substr(at, piece), out));
  }
  HUTCH_TRY_VOID(f.finish(out));
  if (entries) *entries = f.entries();
  return out;
}

const std::string kLongName = std::string(60, 'a') + "/" + std::string(70, 'b') + "/file.txt";

std::vector<TestEntry> sampleTree() {
  return {{.name = "top/", .type = AE_IFDIR, .mode = 0750},
          {.name = "top/a.txt", .data = "hello\n"},
          {.name = "top/run.sh", .mode = 04755, .data = std::string(1000, 'x')},
          {.name = "top/link", .type = AE_IFLNK, .mode = 0777, .link = "a.txt"},
          {.name = "top/hard", .hardlink = "top/a.txt"},
          {.name = "top/" + kLongName, .data = "long"},
          {.name = "top/empty"}};
}

class TarFormats : public ::testing::TestWithParam<int> {};

TEST_P(TarFormats, PassesEntriesOfEveryFormat) {
  std::string input = makeTar(sampleTree(), GetParam());
  uint64_t entries = 0;
  auto out = filter(input, {}, 0, &entries);
  ASSERT_TRUE(out) << out.error().message();
  EXPECT_EQ(entries, 7u);
  EXPECT_EQ(out->size() % 10240, 0u);
  auto read = readTar(*out);
  ASSERT_EQ(read.size(), 7u);
  EXPECT_EQ(read[0].name, "top/");
  EXPECT_EQ(read[0].type, AE_IFDIR);
  EXPECT_EQ(read[0].mode, 0750u);
  EXPECT_EQ(read[1].name, "top/a.txt");
  EXPECT_EQ(read[1].data, "hello\n");
  EXPECT_EQ(read[1].mtime, 1764400000);
  EXPECT_EQ(read[2].mode, 04755u);
  EXPECT_EQ(read[2].data, std::string(1000, 'x'));
  EXPECT_EQ(read[3].type, AE_IFLNK);
  EXPECT_EQ(read[3].link, "a.txt");
  EXPECT_EQ(read[4].hardlink, "top/a.txt");
  EXPECT_EQ(read[5].name, "top/" + kLongName);
  EXPECT_EQ(read[5].data, "long");
  EXPECT_EQ(read[6].data, "");
}

INSTANTIATE_TEST_SUITE_P(All, TarFormats,
                         ::testing::Values(ARCHIVE_FORMAT_TAR_PAX_RESTRICTED,
                                           ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE,
                                           ARCHIVE_FORMAT_TAR_GNUTAR, ARCHIVE_FORMAT_TAR_USTAR));

TEST(TarFilter, ByteByByteIsTheSameAsAllAtOnce) {
  std::string input = makeTar(sampleTree(), ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
  auto whole = filter(input);
  auto bytes = filter(input, {}, 1);
  auto odd = filter(input, {}, 777);
  ASSERT_TRUE(whole && bytes && odd);
  EXPECT_EQ(*whole, *bytes);
  EXPECT_EQ(*whole, *odd);
}

TEST(TarFilter, NamesAreNormalized) {
  auto out = filter(makeTar({{.name = "./", .type = AE_IFDIR}, {.name = "./x//y", .data = "1"}},
                            ARCHIVE_FORMAT_TAR_PAX_RESTRICTED));
  ASSERT_TRUE(out) << out.error().message();
  auto read = readTar(*out);
  ASSERT_EQ(read.size(), 2u);
  EXPECT_EQ(read[0].name, "./");
  EXPECT_EQ(read[1].name, "x/y");
}

void expectRefused(const std::vector<TestEntry>& entries, std::string_view needle,
                   const TarFilterOptions& options = {}) {
  auto out = filter(makeTar(entries, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED), options);
  ASSERT_FALSE(out) << "accepted, expected a refusal mentioning " << needle;
  EXPECT_EQ(out.error().code(), options.error_code);
  EXPECT_NE(out.error().message().find(needle), std::string::npos) << out.error().message();
}

TEST(TarFilter, RefusesNamesOutsideTheDirectory) {
  expectRefused({{.name = "../escape.txt", .data = "x"}}, "'..' component");
  expectRefused({{.name = "a/../../b", .data = "x"}}, "'..' component");
  expectRefused({{.name = "/etc/passwd", .data = "x"}}, "absolute");
  expectRefused({{.name = "a", .hardlink = "../b"}}, "hard link");
  expectRefused({{.name = "a", .hardlink = "/etc/shadow"}}, "hard link");
}

TEST(TarFilter, RefusesLinksPointingOutside) {
  expectRefused({{.name = "l", .type = AE_IFLNK, .link = "/etc"}}, "symlink 'l'");
  expectRefused({{.name = "d/l", .type = AE_IFLNK, .link = "../../x"}}, "symlink 'd/l'");
  // Each looks inside on its own; together "b" is the parent of the directory.
  expectRefused({{.name = "a", .type = AE_IFLNK, .link = "."},
                 {.name = "b", .type = AE_IFLNK, .link = "a/.."}},
                "symlink 'b'");
  auto fine = filter(makeTar({{.name = "d/l", .type = AE_IFLNK, .link = "../x"},
                              {.name = "d/m", .type = AE_IFLNK, .link = "./e/../f"}},
                             ARCHIVE_FORMAT_TAR_PAX_RESTRICTED));
  EXPECT_TRUE(fine) << fine.error().message();
}

TEST(TarFilter, RefusesDevicesOnUploadAndLeavesThemOutOfDownloads) {
  expectRefused({{.name = "null", .type = AE_IFCHR}}, "device node");
  auto out =
      filter(makeTar({{.name = "top/", .type = AE_IFDIR}, {.name = "top/null", .type = AE_IFCHR}},
                     ARCHIVE_FORMAT_TAR_PAX_RESTRICTED),
             {.download = true, .root = "top", .error_code = Errc::kProtocol});
  ASSERT_TRUE(out) << out.error().message();
  EXPECT_EQ(readTar(*out).size(), 1u);
}

TEST(TarFilter, DownloadsHaveOneTopEntryAndKeepTheBoxsLinks) {
  TarFilterOptions download{
      .download = true, .root = "top", .error_code = Errc::kProtocol, .where = "from the box"};
  auto out = filter(makeTar({{.name = "top/", .type = AE_IFDIR},
                             {.name = "top/etc", .type = AE_IFLNK, .link = "/etc"}},
                            ARCHIVE_FORMAT_TAR_PAX_RESTRICTED),
                    download);
  ASSERT_TRUE(out) << out.error().message();
  EXPECT_EQ(readTar(*out)[1].link, "/etc");
  expectRefused({{.name = "top/", .type = AE_IFDIR}, {.name = "other", .data = "x"}},
                "is not below 'top'", download);
  expectRefused({{.name = "topper", .data = "x"}}, "is not below 'top'", download);
  expectRefused({{.name = "top/../x", .data = "x"}}, "'..' component", download);
}

TEST(TarFilter, RefusesWhatIsNotATar) {
  auto out = filter("not a tar");
  ASSERT_FALSE(out);
  EXPECT_EQ(out.error().code(), Errc::kInvalidArgument);
  EXPECT_NE(out.error().message().find("ends in the middle"), std::string::npos);
  out = filter(std::string(2048, 'x'));
  ASSERT_FALSE(out);
  EXPECT_NE(out.error().message().find("not a tar archive"), std::string::npos);
  out = filter("");
  ASSERT_FALSE(out);
  EXPECT_NE(out.error().message().find("empty"), std::string::npos);
}

TEST(TarFilter, RefusesDamagedArchives) {
  std::string input = makeTar({{.name = "a", .data = std::string(5000, 'a')}, {.name = "b"}},
                              ARCHIVE_FORMAT_TAR_USTAR);
  // Cut inside the first entry's data.
  auto cut = filter(input.substr(0, 2000));
  ASSERT_FALSE(cut);
  EXPECT_NE(cut.error().message().find("ends in the middle of entry 'a'"), std::string::npos);
  // The second header damaged.
  std::string damaged = input;
  damaged[512 + 5120 + 10] ^= 0x55;
  auto bad = filter(damaged);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("checksum"), std::string::npos) << bad.error().message();
  // After an error every call fails the same way.
  TarFilter f({});
  std::string out;
  EXPECT_FALSE(f.feed("x", out) && f.finish(out));
  EXPECT_FALSE(f.feed(input, out));
}

TEST(TarFilter, RefusesSparseFiles) {
  // A pax header with a GNU sparse map, written by hand.
  std::string record = "22 GNU.sparse.major=1\n";
  TestEntry e{.name = "s", .data = "x"};
  std::string tar = makeTar({e}, ARCHIVE_FORMAT_TAR_USTAR);
  // Build an 'x' header in front of the ustar entry: reuse the entry's header as a template.
  std::string header = tar.substr(0, 512);
  header[156] = 'x';
  std::string size = "00000000026";  // 22 bytes, octal
  std::copy(size.begin(), size.end(), header.begin() + 124);
  std::fill(header.begin() + 148, header.begin() + 156, ' ');
  unsigned sum = 0;
  for (char c : header) sum += static_cast<unsigned char>(c);
  char octal[8];
  std::snprintf(octal, sizeof octal, "%06o", sum);
  std::copy(octal, octal + 7, header.begin() + 148);
  std::string body = record + std::string(512 - record.size(), '\0');
  auto out = filter(header + body + tar);
  ASSERT_FALSE(out);
  EXPECT_NE(out.error().message().find("sparse"), std::string::npos) << out.error().message();
}

TEST(TarFilter, IgnoresWhatFollowsTheEnd) {
  std::string input = makeTar({{.name = "a", .data = "1"}}, ARCHIVE_FORMAT_TAR_USTAR);
  uint64_t entries = 0;
  auto out = filter(input + "trailing garbage", {}, 0, &entries);
  ASSERT_TRUE(out) << out.error().message();
  EXPECT_EQ(entries, 1u);
}

TEST(TarNames, Normalize) {
  EXPECT_EQ(normalizeEntryName("a/b"), "a/b");
  EXPECT_EQ(normalizeEntryName("./a//b/"), "a/b");
  EXPECT_EQ(normalizeEntryName("."), "");
  EXPECT_EQ(normalizeEntryName("./"), "");
  EXPECT_EQ(normalizeEntryName("a/./b"), "a/b");
  EXPECT_EQ(normalizeEntryName("/a"), std::nullopt);
  EXPECT_EQ(normalizeEntryName(".."), std::nullopt);
  EXPECT_EQ(normalizeEntryName("a/../b"), std::nullopt);
  EXPECT_EQ(normalizeEntryName("..a/b.."), "..a/b..");
}

TEST(TarNames, LinksStayInside) {
  EXPECT_TRUE(linkStaysInside("l", "x"));
  EXPECT_TRUE(linkStaysInside("d/l", "../x"));
  EXPECT_TRUE(linkStaysInside("d/e/l", "../../x"));
  EXPECT_TRUE(linkStaysInside("l", "a/../b"));
  EXPECT_FALSE(linkStaysInside("l", "../x"));
  EXPECT_FALSE(linkStaysInside("d/l", "../../x"));
  EXPECT_FALSE(linkStaysInside("l", "/etc"));
  EXPECT_FALSE(linkStaysInside("l", ""));
  EXPECT_FALSE(linkStaysInside("l", "a/../../x"));
  std::set<std::string, std::less<>> links{"a"};
  EXPECT_FALSE(linkStaysInside("b", "a/..", &links));
  EXPECT_TRUE(linkStaysInside("b", "a/x", &links));
}

}  // namespace
}  // namespace hutch::api

#include "e2b/multipart.h"

#include <gtest/gtest.h>

#include <vector>

namespace hutch::e2b {
namespace {

struct Part {
  std::string name, filename, data;
};

// Feeds `body` in pieces of `step` bytes; the parts as read.
Result<std::vector<Part>> readAll(const std::string& boundary, const std::string& body,
                                  size_t step) {
  MultipartReader reader(boundary);
  std::vector<Part> parts;
  size_t fed = 0;
  bool in_part = false;
  while (true) {
    HUTCH_TRY(auto event, reader.next());
    switch (event.kind) {
      case MultipartReader::Event::kNeedMore:
        if (fed >= body.size()) return fail(Errc::kInvalidArgument, "ended early");
        reader.feed(std::string_view(body).substr(fed, step));
        fed += step;
        break;
      case MultipartReader::Event::kPartStart:
        EXPECT_FALSE(in_part);
        in_part = true;
        parts.push_back({event.name, event.filename, ""});
        break;
      case MultipartReader::Event::kData:
        EXPECT_TRUE(in_part);
        parts.back().data += event.data;
        break;
      case MultipartReader::Event::kPartEnd: in_part = false; break;
      case MultipartReader::Event::kEnd: EXPECT_FALSE(in_part); return parts;
    }
  }
}

const std::string kBoundary = "----formdata-undici-053397250727";

std::string body(const std::vector<Part>& parts) {
  std::string out;
  for (const auto& p : parts) {
    out += "--" + kBoundary + "\r\n";
    out += "Content-Disposition: form-data; name=\"" + p.name + "\"; filename=\"" + p.filename +
           "\"\r\nContent-Type: application/octet-stream\r\n\r\n";
    out += p.data + "\r\n";
  }
  return out + "--" + kBoundary + "--\r\n";
}

TEST(MultipartTest, BoundaryFromContentType) {
  EXPECT_EQ(multipartBoundary("multipart/form-data; boundary=" + kBoundary).value(), kBoundary);
  EXPECT_EQ(multipartBoundary("multipart/form-data; boundary=\"a b\"").value(), "a b");
  EXPECT_FALSE(multipartBoundary("multipart/form-data"));
}

TEST(MultipartTest, PartsArriveWholeWhateverThePieces) {
  std::string binary;
  for (int i = 0; i < 3000; ++i) binary += static_cast<char>(i % 256);
  binary += "\r\n--" + kBoundary.substr(0, 10);  // almost a delimiter, inside the content
  std::vector<Part> parts{{"file", "/home/user/dir/a.txt", "file content"},
                          {"file", "b.bin", binary},
                          {"file", "/empty", ""}};
  const std::string b = body(parts);
  for (size_t step : {size_t{1}, size_t{7}, size_t{64}, b.size()}) {
    auto read = readAll(kBoundary, b, step);
    ASSERT_TRUE(read) << read.error().describe() << " step " << step;
    ASSERT_EQ(read->size(), 3u) << step;
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ((*read)[i].filename, parts[i].filename);
      EXPECT_EQ((*read)[i].name, "file");
      EXPECT_EQ((*read)[i].data, parts[i].data) << "part " << i << " step " << step;
    }
  }
}

TEST(MultipartTest, AQuotedFilenameKeepsItsEscapes) {
  std::string b = "--" + kBoundary +
                  "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a \\\"q\\\".txt\""
                  "\r\n\r\nx\r\n--" +
                  kBoundary + "--";
  auto read = readAll(kBoundary, b, 5);
  ASSERT_TRUE(read);
  EXPECT_EQ((*read)[0].filename, "a \"q\".txt");
}

TEST(MultipartTest, BrokenBodiesAreErrors) {
  // Garbage after a boundary instead of CRLF.
  std::string bad = "--" + kBoundary + "garbage\r\n\r\n";
  EXPECT_FALSE(readAll(kBoundary, bad, 4));
  // Headers that never end.
  std::string endless = "--" + kBoundary + "\r\nX: " + std::string(20000, 'a');
  EXPECT_FALSE(readAll(kBoundary, endless, 1000));
  // A body cut before the closing boundary.
  EXPECT_FALSE(readAll(kBoundary, body({{"file", "a", "data"}}).substr(0, 80), 8));
}

}  // namespace
}  // namespace hutch::e2b

// The dashboard's static files: which request paths name which file, what is refused (`..`,
// encoded slashes, hidden names, symlinks out of the directory), and the plane on a real
// plain-HTTP listener: served without a key while the API still needs one.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/http.hpp>
#include <fstream>
#include <thread>

#include "api/handlers.h"
#include "storage/box_store.h"

namespace hutch::api {
namespace {

using tcp = asio::ip::tcp;

TEST(UiFilePathTest, NamesFilesBelowUi) {
  EXPECT_EQ(*uiFilePath("/ui/"), "index.html");
  EXPECT_EQ(*uiFilePath("/ui"), "index.html");
  EXPECT_EQ(*uiFilePath("/ui/index.html"), "index.html");
  EXPECT_EQ(*uiFilePath("/ui/assets/main-AB12.js"), "assets/main-AB12.js");
  EXPECT_EQ(*uiFilePath("/ui/assets/a%20b.css"), "assets/a b.css");
  EXPECT_EQ(*uiFilePath("/ui/a/b/c/d/e/f"), "a/b/c/d/e/f");
}

TEST(UiFilePathTest, RefusesClimbingAndTricks) {
  for (const char* path :
       {"/ui/..", "/ui/../etc/passwd", "/ui/assets/../../x", "/ui/./index.html", "/ui/%2e%2e/x",
        "/ui/%2E%2E", "/ui//etc/passwd", "/ui/a//b", "/ui/..%2f..%2fetc%2fpasswd",
        "/ui/%2fetc%2fpasswd", "/ui/a%00.js", "/ui/a%5c..%5cb", "/ui/a\\b"}) {
    auto refused = uiFilePath(path);
    ASSERT_FALSE(refused) << path << " gave " << *refused;
    EXPECT_EQ(refused.error().code(), Errc::kInvalidArgument) << path;
  }
  for (const char* path : {"/uix", "/v1/boxes", "/", "/ui/.git/config", "/ui/.env", "/ui/assets/",
                           "/ui/a/b/c/d/e/f/g"}) {
    auto refused = uiFilePath(path);
    ASSERT_FALSE(refused) << path << " gave " << *refused;
    EXPECT_EQ(refused.error().code(), Errc::kNotFound) << path;
  }
}

TEST(UiContentTypeTest, ByExtension) {
  EXPECT_EQ(uiContentType("index.html"), "text/html; charset=utf-8");
  EXPECT_EQ(uiContentType("assets/main-X.js"), "text/javascript; charset=utf-8");
  EXPECT_EQ(uiContentType("assets/main-X.css"), "text/css; charset=utf-8");
  EXPECT_EQ(uiContentType("assets/main-X.js.map"), "application/json");
  EXPECT_EQ(uiContentType("logo.svg"), "image/svg+xml");
  EXPECT_EQ(uiContentType("LICENSE"), "application/octet-stream");
}

class UiDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = std::filesystem::temp_directory_path() / ("ui-test-" + std::to_string(::getpid()));
    std::filesystem::remove_all(base_);
    dist_ = base_ / "dist";
    std::filesystem::create_directories(dist_ / "assets");
    write(dist_ / "index.html", "<!doctype html><title>hutch</title>");
    write(dist_ / "assets" / "main-1.js", "console.log(1)");
    write(base_ / "secret.txt", "not for the web");
    // Inside: fine. Out of the directory, relative or absolute: refused.
    std::filesystem::create_symlink("main-1.js", dist_ / "assets" / "alias.js");
    std::filesystem::create_symlink("../secret.txt", dist_ / "escape.txt");
    std::filesystem::create_symlink(base_ / "secret.txt", dist_ / "absolute.txt");
    std::filesystem::create_directory_symlink(base_, dist_ / "up");
    ASSERT_EQ(::mkfifo((dist_ / "fifo.js").c_str(), 0600), 0);
  }
  void TearDown() override { std::filesystem::remove_all(base_); }

  static void write(const std::filesystem::path& p, const std::string& text) {
    std::ofstream(p) << text;
  }

  std::filesystem::path base_;
  std::filesystem::path dist_;
};

TEST_F(UiDirTest, ReadsFilesAndSymlinksThatStayInside) {
  auto index = readUiFile(dist_, "index.html");
  ASSERT_TRUE(index) << index.error().describe();
  EXPECT_EQ(index->content, "<!doctype html><title>hutch</title>");
  EXPECT_GT(index->mtime_ns, 0);
  auto alias = readUiFile(dist_, "assets/alias.js");
  ASSERT_TRUE(alias) << alias.error().describe();
  EXPECT_EQ(alias->content, "console.log(1)");
}

TEST_F(UiDirTest, RefusesWhatLeadsOutOrIsNoFile) {
  for (const char* name : {"escape.txt", "absolute.txt", "up/secret.txt", "../secret.txt",
                           "assets/../../secret.txt", "missing.js", "assets", "fifo.js"}) {
    auto refused = readUiFile(dist_, name);
    ASSERT_FALSE(refused) << name << " was served: " << refused->content;
    EXPECT_EQ(refused.error().code(), Errc::kNotFound) << name;
  }
  EXPECT_NE(readUiFile(dist_, "escape.txt").error().message().find("outside"), std::string::npos);
  EXPECT_EQ(readUiFile(dist_, (base_ / "secret.txt").string()).error().code(),
            Errc::kInvalidArgument);
}

TEST_F(UiDirTest, AMissingDirectorySaysHowToBuildIt) {
  auto missing = readUiFile(base_ / "nothing", "index.html");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code(), Errc::kNotFound);
  EXPECT_NE(missing.error().message().find("web/dashboard/build.sh"), std::string::npos)
      << missing.error().message();
}

struct Answer {
  int status = 0;
  std::string body;
  http::fields headers;
};

// The plane on a plain-HTTP listener, beside an API route that needs a key.
class UiPlaneTest : public UiDirTest {
 protected:
  void SetUp() override {
    UiDirTest::SetUp();
    auto opened = storage::BoxStore::open(":memory:");
    ASSERT_TRUE(opened);
    db_.emplace(std::move(*opened));
    key_store_.emplace(db_->database());
    keys_.emplace(*key_store_);
    router_.add(http::verb::get, "/v1/hello",
                [](RequestContext&) -> asio::awaitable<std::optional<Response>> {
                  co_return jsonResponse(http::status::ok, {{"hello", true}});
                });
    registerUiRoutes(ui_router_, dist_);
    server_.emplace(io_.get_executor(), router_, &*keys_);
    server_->addPlane(uiPlane(ui_router_));
    auto plain = server_->listenTcp("127.0.0.1:0", nullptr);
    ASSERT_TRUE(plain);
    port_ = static_cast<uint16_t>(std::stoul(plain->substr(plain->rfind(':') + 1)));
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    asio::post(io_, [this] {
      server_->stop();
      io_.stop();
    });
    thread_.join();
    UiDirTest::TearDown();
  }

  Answer request(http::verb method, const std::string& target, const std::string& etag = {}) {
    asio::io_context io;
    tcp::socket socket(io);
    socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port_));
    http::request<http::string_body> req{method, target, 11};
    req.set(http::field::host, "localhost");
    if (!etag.empty()) req.set(http::field::if_none_match, etag);
    req.prepare_payload();
    http::write(socket, req);
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.skip(method == http::verb::head);
    http::read(socket, buffer, parser);
    auto res = parser.release();
    return {static_cast<int>(res.result_int()), res.body(), res.base()};
  }

  std::optional<storage::BoxStore> db_;
  std::optional<storage::KeyStore> key_store_;
  std::optional<KeyService> keys_;
  ApiRouter router_;
  ApiRouter ui_router_;
  asio::io_context io_;
  std::optional<HttpServer> server_;
  uint16_t port_ = 0;
  std::thread thread_;
};

TEST_F(UiPlaneTest, ServesTheFilesWithoutAKeyAndTheApiStillNeedsOne) {
  Answer index = request(http::verb::get, "/ui/");
  EXPECT_EQ(index.status, 200) << index.body;
  EXPECT_EQ(index.body, "<!doctype html><title>hutch</title>");
  EXPECT_EQ(index.headers[http::field::content_type], "text/html; charset=utf-8");
  EXPECT_EQ(index.headers[http::field::cache_control], "no-cache");
  EXPECT_NE(index.headers["Content-Security-Policy"].find("default-src 'self'"), std::string::npos);
  Answer script = request(http::verb::get, "/ui/assets/main-1.js?v=1");
  EXPECT_EQ(script.status, 200);
  EXPECT_EQ(script.body, "console.log(1)");
  EXPECT_EQ(script.headers[http::field::cache_control], "public, max-age=31536000, immutable");
  EXPECT_EQ(request(http::verb::get, "/v1/hello").status, 401);

  Answer moved = request(http::verb::get, "/ui");
  EXPECT_EQ(moved.status, 301);
  EXPECT_EQ(moved.headers[http::field::location], "/ui/");
}

TEST_F(UiPlaneTest, RevalidatesHeadsAndRefusesOtherMethodsAndEscapes) {
  Answer first = request(http::verb::get, "/ui/index.html");
  std::string etag(first.headers[http::field::etag]);
  ASSERT_FALSE(etag.empty());
  Answer again = request(http::verb::get, "/ui/index.html", etag);
  EXPECT_EQ(again.status, 304);
  EXPECT_TRUE(again.body.empty());

  Answer head = request(http::verb::head, "/ui/index.html");
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.headers[http::field::content_length], std::to_string(first.body.size()));

  Answer post = request(http::verb::post, "/ui/index.html");
  EXPECT_EQ(post.status, 405);
  EXPECT_EQ(post.headers[http::field::allow], "GET, HEAD");

  EXPECT_EQ(request(http::verb::get, "/ui/escape.txt").status, 404);
  EXPECT_EQ(request(http::verb::get, "/ui/up/secret.txt").status, 404);
  EXPECT_EQ(request(http::verb::get, "/ui/%2e%2e/secret.txt").status, 400);
  EXPECT_EQ(request(http::verb::get, "/ui/..%2fsecret.txt").status, 400);
  Answer missing = request(http::verb::get, "/ui/nothing.js");
  EXPECT_EQ(missing.status, 404);
  EXPECT_NE(missing.body.find("\"not_found\""), std::string::npos) << missing.body;
}

TEST_F(UiPlaneTest, WithoutABuildTheAnswerSaysHowToMakeOneAndABuildIsSeenAtOnce) {
  std::filesystem::rename(dist_, base_ / "built");
  Answer answer = request(http::verb::get, "/ui/");
  EXPECT_EQ(answer.status, 404);
  EXPECT_NE(answer.body.find("web/dashboard/build.sh"), std::string::npos) << answer.body;
  // The directory is looked at per request: a build after hutchd started is served.
  std::filesystem::rename(base_ / "built", dist_);
  EXPECT_EQ(request(http::verb::get, "/ui/").status, 200);
}

}  // namespace
}  // namespace hutch::api

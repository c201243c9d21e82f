// The web dashboard's static files at /ui/ (docs/dashboard.md): GET and HEAD of the files that
// web/dashboard/build.sh writes to web/dashboard/dist (or hutchd --ui-dir DIR). They carry no
// data, so they are served without a key, through a plane of their own on the TCP listeners;
// every API call the page then makes needs one.
//
// A file is opened below the directory with openat2(RESOLVE_BENEATH): a symlink inside may
// point elsewhere inside, never out, and `..` or an absolute path cannot climb out either.
// The request path is checked before that (no `.`, `..` or empty segments, no NUL, no encoded
// `/`, no hidden names), so that what is opened is what was asked for.
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "api/handlers.h"

namespace hutch::api {

namespace {

using asio::awaitable;
using Reply = std::optional<Response>;

constexpr std::string_view kPrefix = "/ui";
constexpr size_t kMaxSegments = 6;  // the deepest route below /ui
constexpr int64_t kMaxFileBytes = int64_t{64} << 20;
// Built files are a script, styles and their source maps: nothing else runs or is fetched. The
// terminal's styles are set by xterm.js at run time (style elements), hence 'unsafe-inline' for
// styles only; connect-src 'self' covers the exec WebSocket (same host and port).
constexpr const char* kContentSecurityPolicy =
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' "
    "data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'";

std::string notBuilt(const std::filesystem::path& dir) {
  return fmt::format(
      "The dashboard is not built ({} does not exist): run web/dashboard/build.sh in the source "
      "tree, or start hutchd with --ui-dir DIR",
      dir.string());
}

Result<UniqueFd> openBeneath(int dir_fd, const std::string& relative) {
  open_how how{};
  // O_NONBLOCK: a FIFO planted in the directory cannot block the open.
  how.flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  long fd = ::syscall(SYS_openat2, dir_fd, relative.c_str(), &how, sizeof how);
  if (fd >= 0) return UniqueFd(static_cast<int>(fd));
  int err = errno;
  if (err == ENOENT || err == ENOTDIR) {
    return fail(Errc::kNotFound, "No file " + relative + " in the dashboard", err);
  }
  if (err == EXDEV || err == ELOOP) {
    return fail(Errc::kNotFound,
                relative + " leads outside the dashboard's directory (a symlink); not served", err);
  }
  if (err == ENOSYS) {
    return fail(Errc::kUnsupported, "Serving the dashboard needs openat2 (Linux 5.6 or newer)",
                err);
  }
  return fail(sysError("Cannot open the dashboard's " + relative, err));
}

Result<std::string> readAll(int fd, size_t size, const std::string& relative) {
  std::string out;
  out.resize(size);
  size_t got = 0;
  while (got < size) {
    ssize_t n = ::read(fd, out.data() + got, size - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(sysError("Cannot read the dashboard's " + relative, errno));
    }
    if (n == 0) break;  // shrank while read: what is there
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  return out;
}

awaitable<Reply> serveUi(const std::filesystem::path& dir, RequestContext& ctx) {
  std::string_view target(ctx.request.target().data(), ctx.request.target().size());
  std::string_view path = target.substr(0, target.find('?'));
  // /ui itself: to /ui/, so that the page's relative asset URLs resolve below it.
  if (path == kPrefix) {
    Response res{http::status::moved_permanently, 11};
    res.set(http::field::location, "/ui/");
    res.set(http::field::cache_control, "no-cache");
    res.prepare_payload();
    co_return res;
  }
  auto relative = uiFilePath(path);
  if (!relative) co_return errorResponse(relative.error());
  auto file = readUiFile(dir, *relative);
  if (!file) co_return errorResponse(file.error());

  const bool hashed = relative->starts_with("assets/");
  const std::string etag = fmt::format("\"{:x}-{:x}\"", file->content.size(), file->mtime_ns);
  Response res{http::status::ok, 11};
  res.set(http::field::etag, etag);
  // Assets carry a hash of their content in their name: cached for good. index.html (which
  // names them) is asked again every time, cheaply with If-None-Match.
  res.set(http::field::cache_control, hashed ? "public, max-age=31536000, immutable" : "no-cache");
  res.set("X-Content-Type-Options", "nosniff");
  res.set("Referrer-Policy", "no-referrer");
  res.set("Content-Security-Policy", kContentSecurityPolicy);
  if (ctx.request[http::field::if_none_match] == etag) {
    res.result(http::status::not_modified);
    co_return res;
  }
  res.set(http::field::content_type, std::string(uiContentType(*relative)));
  res.body() = std::move(file->content);
  res.prepare_payload();
  co_return res;
}

}  // namespace

Result<std::string> uiFilePath(std::string_view request_path) {
  if (request_path != kPrefix && !request_path.starts_with(std::string(kPrefix) + "/")) {
    return fail(Errc::kNotFound, "The dashboard is served below /ui/");
  }
  std::string_view rest = request_path.substr(kPrefix.size());
  if (rest.empty() || rest == "/") return std::string("index.html");
  rest.remove_prefix(1);
  std::string out;
  size_t segments = 0;
  while (true) {
    size_t slash = rest.find('/');
    std::string_view raw = rest.substr(0, slash);
    std::string segment = decodePathSegment(raw);
    if (segment.empty() || segment == "." || segment == "..") {
      return fail(Errc::kInvalidArgument,
                  fmt::format("The dashboard path {} has an empty, '.' or '..' segment",
                              std::string(request_path)));
    }
    if (segment.find_first_of(std::string_view("/\\\0", 3)) != std::string::npos) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("The dashboard path {} has a '/', '\\' or NUL byte in a segment",
                              std::string(request_path)));
    }
    if (segment.front() == '.') {
      return fail(Errc::kNotFound, "No file " + segment +
                                       " in the dashboard (hidden names are "
                                       "not served)");
    }
    if (++segments > kMaxSegments) {
      return fail(Errc::kNotFound, "No file " + std::string(request_path) + " in the dashboard");
    }
    if (!out.empty()) out += '/';
    out += segment;
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
    if (rest.empty()) {
      // "/ui/assets/": a directory, not a file.
      return fail(Errc::kNotFound, "No file " + std::string(request_path) + " in the dashboard");
    }
  }
  return out;
}

std::string_view uiContentType(std::string_view file) {
  struct Type {
    std::string_view extension;
    std::string_view content_type;
  };
  static constexpr Type kTypes[] = {
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".mjs", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".json", "application/json"},
      {".map", "application/json"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".ico", "image/x-icon"},
      {".woff2", "font/woff2"},
      {".txt", "text/plain; charset=utf-8"},
      {".wasm", "application/wasm"},
  };
  for (const Type& t : kTypes) {
    if (file.ends_with(t.extension)) return t.content_type;
  }
  return "application/octet-stream";
}

Result<UiFile> readUiFile(const std::filesystem::path& dir, const std::string& relative) {
  if (relative.empty() || relative.front() == '/') {
    return fail(Errc::kInvalidArgument, "A dashboard file is named relative to its directory");
  }
  int dir_fd = ::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) {
    int err = errno;
    if (err == ENOENT || err == ENOTDIR) return fail(Errc::kNotFound, notBuilt(dir), err);
    return fail(sysError("Cannot open the dashboard's directory " + dir.string(), err));
  }
  UniqueFd root(dir_fd);
  HUTCH_TRY(UniqueFd fd, openBeneath(root.get(), relative));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return fail(sysError("Cannot stat the dashboard's " + relative, errno));
  }
  if (!S_ISREG(st.st_mode)) {
    return fail(Errc::kNotFound, relative + " in the dashboard is not a file");
  }
  if (st.st_size > kMaxFileBytes) {
    return fail(Errc::kInternal, fmt::format("The dashboard's {} is larger than {} MiB", relative,
                                             kMaxFileBytes >> 20));
  }
  UiFile file;
  HUTCH_TRY(file.content, readAll(fd.get(), static_cast<size_t>(st.st_size), relative));
  file.mtime_ns = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
  return file;
}

void registerUiRoutes(ApiRouter& router, const std::filesystem::path& dir) {
  Handler serve = [dir](RequestContext& ctx) { return serveUi(dir, ctx); };
  // One route per depth (the router matches whole segments): /ui, /ui/{p1}, /ui/{p1}/{p2}, ...
  // HEAD is served as GET by the server; any other method is 405.
  std::string pattern(kPrefix);
  router.add(http::verb::get, pattern, serve);
  for (size_t i = 1; i <= kMaxSegments; ++i) {
    pattern += fmt::format("/{{p{}}}", i);
    router.add(http::verb::get, pattern, serve);
  }
}

Plane uiPlane(const ApiRouter& router) {
  Plane plane;
  plane.name = "ui";
  plane.claims = [](const http::request_header<>&, std::string_view path) {
    return path == kPrefix || path.starts_with(std::string(kPrefix) + "/");
  };
  plane.router = &router;
  // No key: the caller is nobody in particular, who may see no box (these routes touch none).
  plane.authenticate = [](const http::request_header<>&, const PathParams&,
                          PathParams&) -> Result<Principal> {
    Principal nobody;
    nobody.kind = Principal::Kind::kKey;
    nobody.admin = false;
    return nobody;
  };
  plane.render = [](const Error& error, std::string_view) { return errorResponse(error); };
  return plane;
}

}  // namespace hutch::api

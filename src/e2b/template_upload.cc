// E2B's template builder, COPY's files (template_build_internal.h): whether the files of a hash
// are here, the upload URL that carries its own authorization, and the upload itself, a tar
// (gzip or not) received on the loop and unpacked on the builder's worker pool.

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cctype>

#include "base/unique_fd.h"
#include "e2b/template_build_internal.h"
#include "event/offload.h"
#include "image/digest.h"
#include "image/layer_apply.h"
#include "image/root_dir.h"

namespace hutch::e2b {

namespace fs = std::filesystem;
using api::Response;
using asio::awaitable;

namespace {

bool safeSegment(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
  }
  return true;
}

// A received upload, unpacked (box::unpackClientTar: hostile input, within `limit` bytes).
// Blocking: on the worker pool.
Result<> unpackUpload(const fs::path& tar, const fs::path& tree, const std::string& digest,
                      uint64_t size, bool gzip, uint64_t limit) {
  image::Descriptor layer;
  layer.media_type = gzip ? "application/vnd.oci.image.layer.v1.tar+gzip"
                          : "application/vnd.oci.image.layer.v1.tar";
  layer.compression = gzip ? image::Compression::kGzip : image::Compression::kNone;
  layer.digest = digest;
  layer.size = static_cast<int64_t>(size);
  image::ApplyLimits limits;
  limits.max_total_bytes = limit;
  return box::unpackClientTar(tar, tree, layer, limits, "The uploaded files");
}

// Writes all of `data` to `fd`.
Result<> writeAll(int fd, std::string_view data, const fs::path& path) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(sysError("Cannot write " + path.string(), errno));
    data.remove_prefix(static_cast<size_t>(n));
  }
  return ok();
}

}  // namespace

awaitable<Reply> filesLink(Impl& s, Ctx& ctx) {
  const std::string& id = ctx.params.find("templateID")->second;
  const std::string& hash = ctx.params.find("hash")->second;
  auto t = s.mine(ctx.principal, id);
  if (!t) co_return controlError(t.error());
  if (!validFilesHash(hash)) {
    co_return controlError(Error(Errc::kInvalidArgument, "A files hash is 64 hex digits"));
  }
  std::error_code ec;
  const bool present = fs::is_directory(s.filesDir(t->owner_id) / hash, ec);
  const std::string owner = ownerSegment(t->owner_id);
  const int64_t expires = box::unixNow() + kUploadUrlSeconds;
  const std::string host(ctx.request[http::field::host]);
  const char* scheme = ctx.connection && ctx.connection->stream.isTls() ? "https" : "http";
  const std::string url =
      fmt::format("{}://{}{}{}/{}?expires={}&token={}", scheme, host, kUploadPrefix, owner, hash,
                  expires, uploadToken(s.secret, owner, hash, expires));
  co_return jsonReply(http::status::created, {{"present", present}, {"url", url}});
}

awaitable<Reply> upload(Impl& s, Ctx& ctx) {
  const std::string& owner = ctx.params.find("owner")->second;
  const std::string& hash = ctx.params.find("hash")->second;
  // npm e2b 2.14.1 streams the tar chunked (its GCS URLs took that); later SDKs send an exact
  // Content-Length, which the parser then holds the body to.
  auto length = ctx.body->contentLength();
  const uint64_t limit = s.builder.contextLimit();
  auto too_large = [limit] {
    return Error(Errc::kResourceExhausted,
                 fmt::format("The files are larger than {} MiB", limit >> 20));
  };
  if (length && *length > limit) co_return controlError(too_large());
  const fs::path owner_dir = s.dir / "files" / owner;
  std::error_code ec;
  fs::create_directories(owner_dir, ec);
  if (ec) {
    co_return controlError(Error(Errc::kInternal, "Cannot create " + owner_dir.string()));
  }
  const std::string tag = box::randomId();
  // Both go whatever happens; the pool's work is over before this frame ends.
  auto tar = std::make_shared<const fs::path>(owner_dir / (hash + ".upload-" + tag));
  auto tree = std::make_shared<const fs::path>(owner_dir / (hash + ".tmp-" + tag));
  struct Cleanup {
    std::shared_ptr<const fs::path> a, b;
    ~Cleanup() {
      std::error_code e;
      fs::remove_all(*a, e);
      fs::remove_all(*b, e);
    }
  } cleanup{tar, tree};
  // Received on the loop (the body is the connection's), written as it comes: small writes
  // to a file of hutchd's own, the same as the API's other uploads.
  image::Sha256 sha;
  uint64_t size = 0;
  std::string head;
  {
    UniqueFd out(::open(tar->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!out) co_return controlError(sysError("Cannot create " + tar->string(), errno));
    for (;;) {
      auto chunk = co_await ctx.body->read();
      if (!chunk) co_return controlError(chunk.error());
      if (chunk->empty()) break;
      size += chunk->size();
      if (size > limit) co_return controlError(too_large());
      if (head.size() < 2) head += chunk->substr(0, 2 - head.size());
      sha.update(*chunk);
      if (auto written = writeAll(out.get(), *chunk, *tar); !written) {
        co_return controlError(written.error());
      }
    }
  }
  if (length && size != *length) {
    co_return controlError(Error(Errc::kInvalidArgument,
                                 fmt::format("Got {} bytes of the {} announced", size, *length)));
  }
  const bool gzip = head.size() == 2 && static_cast<unsigned char>(head[0]) == 0x1f &&
                    static_cast<unsigned char>(head[1]) == 0x8b;
  // Unpacking (gunzip, every entry checked, the files written) is the slow part: the pool's.
  auto work = [tar, tree, digest = sha.finish(), size, gzip, limit] {
    return unpackUpload(*tar, *tree, digest, size, gzip, limit);
  };
  Result<> unpacked = co_await event::offload(s.builder.pool(), std::move(work));
  if (!unpacked) co_return controlError(unpacked.error());
  const fs::path final_dir = owner_dir / hash;
  if (!fs::exists(final_dir, ec)) {
    fs::rename(*tree, final_dir, ec);
    // Another upload of the same files got there first: theirs are the same.
    if (ec && !fs::exists(final_dir)) {
      co_return controlError(Error(Errc::kInternal, "Cannot keep the files: " + ec.message()));
    }
  }
  Response res{http::status::ok, 11};
  res.prepare_payload();
  co_return res;
}

api::Plane TemplateBuilds::uploadPlane() {
  api::Plane plane;
  plane.name = "e2b-upload";
  plane.claims = [](const http::request_header<>&, std::string_view path) {
    return path.starts_with(kUploadPrefix);
  };
  plane.router = &uploads_;
  plane.render = renderControl;
  std::string secret = impl_->secret;
  plane.authenticate = [secret](const http::request_header<>& header, const api::PathParams& query,
                                api::PathParams&) -> Result<api::Principal> {
    // The URL is its own authorization: /e2b-files/OWNER/HASH?expires=&token=.
    std::string_view target(header.target().data(), header.target().size());
    target = target.substr(0, target.find('?'));
    target.remove_prefix(std::min(target.size(), kUploadPrefix.size()));
    const size_t slash = target.find('/');
    const std::string owner(target.substr(0, slash));
    const std::string hash(slash == std::string_view::npos ? "" : target.substr(slash + 1));
    if (!safeSegment(owner) || !validFilesHash(hash)) {
      return fail(Errc::kNotFound, "No such upload URL");
    }
    auto get = [&](const char* key) {
      auto it = query.find(key);
      return it == query.end() ? std::string() : it->second;
    };
    HUTCH_TRY_VOID(
        checkUploadToken(secret, owner, hash, get("expires"), get("token"), box::unixNow()));
    api::Principal principal;
    principal.kind = api::Principal::Kind::kKey;
    principal.key_id = owner;
    principal.admin = false;
    return principal;
  };
  return plane;
}

}  // namespace hutch::e2b

#include "agent/files/file_read_stream.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "agent/files/file_info.h"
#include "proto/messages.h"
#include "proto/tcp.h"

namespace hutch::agent {

using proto::FrameType;

namespace {
// At most this much is read per call into the stream, so that a host granting a huge window
// does not keep the loop from its other streams.
constexpr uint64_t kReadPerTurn = uint64_t{1} << 20;
}  // namespace

FileReadStream::FileReadStream(StreamSink& sink, FileWorkers& workers, uint32_t id,
                               FsCredentials who, FileContext ctx)
    : sink_(sink),
      workers_(workers),
      id_(id),
      who_(std::move(who)),
      ctx_(std::move(ctx)),
      send_window_(proto::kInitialWindow) {}

FileReadStream::~FileReadStream() {
  *alive_ = false;
}

void FileReadStream::start(const std::string& path) {
  auto ctx = ctx_;
  std::weak_ptr<bool> alive = alive_;
  // The descriptor travels in a shared_ptr: std::function wants copyable results.
  workers_.submit<std::shared_ptr<OpenedFile>>(
      who_,
      [ctx, path]() -> Result<std::shared_ptr<OpenedFile>> {
        HUTCH_TRY(OpenedFile file, openForReading(ctx, path));
        return std::make_shared<OpenedFile>(std::move(file));
      },
      [this, alive](Result<std::shared_ptr<OpenedFile>> file) {
        if (alive.expired()) return;  // the descriptor closes with the result
        if (!file) return endWithError(file.error());
        opened(std::move((*file)->fd), (*file)->info);
      });
}

void FileReadStream::opened(UniqueFd fd, const proto::FileInfo& info) {
  if (finished_) return;
  fd_ = std::move(fd);
  path_ = info.path;
  sink_.sendFrame(FrameType::kFileOpened, id_, proto::encodeMessage(info));
  pump();
}

void FileReadStream::pump() {
  uint64_t budget = kReadPerTurn;
  char buffer[proto::kMaxDataPayload];
  while (!finished_ && fd_ && send_window_ > 0 && budget > 0) {
    const size_t want = static_cast<size_t>(
        std::min<uint64_t>({send_window_, budget, static_cast<uint64_t>(sizeof buffer)}));
    const ssize_t n = ::read(fd_.get(), buffer, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return endWithError(fileError(errno, path_, ctx_.user));
    if (n == 0) {
      sink_.sendFrame(FrameType::kEof, id_, {});
      return finish();
    }
    sink_.sendFrame(FrameType::kData, id_, std::string_view(buffer, static_cast<size_t>(n)));
    send_window_ -= static_cast<uint64_t>(n);
    budget -= static_cast<uint64_t>(n);
  }
  // Out of budget with window left: the host's next kWindow, sent as it consumes what it got,
  // brings the stream back here.
}

void FileReadStream::onWindow(std::string_view payload) {
  if (finished_) return;
  auto increment = proto::decodeWindow(payload);
  if (!increment) return endWithError(Error(Errc::kProtocol, increment.error().message()));
  send_window_ += *increment;
  pump();
}

void FileReadStream::onClose() {
  if (finished_) return;
  sink_.sendFrame(FrameType::kClose, id_, "{}");
  finish();
}

void FileReadStream::onUnexpected(FrameType type) {
  endWithError(Error(Errc::kProtocol, "Frame type " + std::to_string(static_cast<int>(type)) +
                                          " is not sent to a read stream"));
}

void FileReadStream::endWithError(const Error& error) {
  if (finished_) return;
  sink_.sendFrame(FrameType::kError, id_,
                  proto::encodeMessage(proto::ErrorMessage::fromError(error)));
  finish();
}

void FileReadStream::finish() {
  finished_ = true;
  fd_.reset();
  sink_.streamFinished(id_);
}

}  // namespace hutch::agent

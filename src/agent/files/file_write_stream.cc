#include "agent/files/file_write_stream.h"

#include "proto/messages.h"

namespace hutch::agent {

using proto::FrameType;

FileWriteStream::FileWriteStream(StreamSink& sink, FileWorkers& workers, uint32_t id,
                                 FsCredentials who, FileContext ctx, WriteAttributes attributes)
    : sink_(sink),
      workers_(workers),
      id_(id),
      who_(std::move(who)),
      ctx_(std::move(ctx)),
      attributes_(attributes),
      strand_(workers.makeStrand()),
      state_(std::make_shared<State>()),
      receive_credit_(proto::kInitialWindow) {}

FileWriteStream::~FileWriteStream() {
  *alive_ = false;
  if (committed_) return;
  // After whatever job is still on the strand: it ran (or runs) first.
  auto state = state_;
  workers_.submit<void>(
      strand_, who_,
      [state]() -> Result<> {
        discardWrite(state->write);
        return ok();
      },
      [](const Result<>&) {});
}

void FileWriteStream::start(const std::string& path, bool parents) {
  busy_ = true;
  auto state = state_;
  auto ctx = ctx_;
  std::weak_ptr<bool> alive = alive_;
  const WriteAttributes attributes = attributes_;
  workers_.submit<std::string>(
      strand_, who_,
      [state, ctx, path, parents, attributes]() -> Result<std::string> {
        HUTCH_TRY_VOID(beginWrite(ctx, state->write, path, parents, attributes));
        return state->write.path;
      },
      [this, alive](Result<std::string> target) {
        if (alive.expired()) return;
        busy_ = false;
        if (!target) return endWithError(target.error());
        if (finished_) return;
        opened_ = true;
        sink_.sendFrame(FrameType::kFileOpened, id_,
                        proto::encodeMessage(proto::FileWriteOpened{*target}));
        next();
      });
}

void FileWriteStream::next() {
  if (finished_ || busy_ || !opened_) return;
  std::weak_ptr<bool> alive = alive_;
  auto state = state_;
  auto ctx = ctx_;
  if (!buffer_.empty()) {
    busy_ = true;
    auto chunk = std::make_shared<std::string>(std::move(buffer_));
    buffer_.clear();
    workers_.submit<size_t>(
        strand_, who_,
        [state, ctx, chunk]() -> Result<size_t> {
          HUTCH_TRY_VOID(writeChunk(ctx, state->write, *chunk));
          return chunk->size();
        },
        [this, alive](Result<size_t> written) {
          if (alive.expired()) return;
          busy_ = false;
          if (!written) return endWithError(written.error());
          if (finished_) return;
          // Granted once in the file: the host's data never piles up here beyond the window.
          receive_credit_ += *written;
          sink_.sendFrame(FrameType::kWindow, id_,
                          proto::encodeWindow(static_cast<uint32_t>(*written)));
          next();
        });
    return;
  }
  if (!host_eof_) return;
  busy_ = true;
  const WriteAttributes attributes = attributes_;
  workers_.submit<proto::FileInfo>(
      strand_, who_,
      [state, ctx, attributes]() -> Result<proto::FileInfo> {
        auto info = commitWrite(ctx, state->write, attributes);
        if (!info) discardWrite(state->write);
        return info;
      },
      [this, alive](Result<proto::FileInfo> info) {
        if (alive.expired()) return;
        busy_ = false;
        if (!info) return endWithError(info.error());
        committed_ = true;
        if (finished_) return;  // aborted meanwhile: the host no longer waits for the answer
        sink_.sendFrame(FrameType::kResult, id_, proto::encodeMessage(*info));
        finish();
      });
}

void FileWriteStream::onData(std::string_view data) {
  if (finished_) return;
  if (host_eof_) return endWithError(Error(Errc::kProtocol, "Data after kEof on a write stream"));
  if (data.size() > receive_credit_) {
    return endWithError(Error(Errc::kProtocol, "Data exceeds the write stream's window"));
  }
  receive_credit_ -= data.size();
  buffer_.append(data);
  next();
}

void FileWriteStream::onEof() {
  if (finished_ || host_eof_) return;
  host_eof_ = true;
  next();
}

void FileWriteStream::onClose() {
  if (finished_) return;
  sink_.sendFrame(FrameType::kClose, id_, "{}");
  finish();
}

void FileWriteStream::onUnexpected(FrameType type) {
  endWithError(Error(Errc::kProtocol, "Frame type " + std::to_string(static_cast<int>(type)) +
                                          " is not sent to a write stream"));
}

void FileWriteStream::endWithError(const Error& error) {
  if (finished_) return;
  sink_.sendFrame(FrameType::kError, id_,
                  proto::encodeMessage(proto::ErrorMessage::fromError(error)));
  finish();
}

void FileWriteStream::finish() {
  finished_ = true;
  buffer_.clear();
  sink_.streamFinished(id_);
}

}  // namespace hutch::agent

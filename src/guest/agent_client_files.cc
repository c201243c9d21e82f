// AgentClient's file requests and streams (docs/protocol.md, "Files").
#include <string>

#include "guest/agent_client.h"
#include "proto/files.h"

namespace hutch::guest {

namespace asio = boost::asio;
using proto::Frame;
using proto::FrameType;

namespace {

// A listing the agent sends is at most max_entries entries and this many bytes of JSON in all
// (a real one of 100 000 entries is about 30 MB): a box cannot make hutchd hold more.
constexpr size_t kMaxListingBytes = size_t{64} << 20;

// kFileList: kFileEntries parts, then kResult with the last part (or kError).
class PendingList : public StreamHandler {
 public:
  PendingList(asio::any_io_executor executor, uint32_t max_entries)
      : changed(std::move(executor)), max_entries_(max_entries) {}

  void onStreamFrame(const Frame& frame) override {
    if (answer) return;
    if (frame.type == FrameType::kFileEntries || frame.type == FrameType::kResult) {
      bytes_ += frame.payload.size();
      auto part = proto::decodeMessage<proto::FileList>(frame.payload);
      if (!part) return finish(fail(part.error()));
      if (bytes_ > kMaxListingBytes || part->entries.size() > max_entries_ - list_.entries.size()) {
        return finish(fail(Errc::kProtocol, "The agent sent more entries than were asked for"));
      }
      for (auto& entry : part->entries) list_.entries.push_back(std::move(entry));
      if (frame.type == FrameType::kResult) {
        list_.truncated = part->truncated;
        return finish(std::move(list_));
      }
      return;
    }
    if (frame.type == FrameType::kError) {
      auto message = proto::decodeMessage<proto::ErrorMessage>(frame.payload);
      return finish(fail(message ? message->toError()
                                 : Error(Errc::kProtocol, "The agent sent a malformed error")));
    }
    finish(fail(Errc::kProtocol, "The agent answered a listing with frame type " +
                                     std::to_string(static_cast<int>(frame.type))));
  }
  void onStreamClosed(const Error& error) override {
    if (answer) return;
    finish(fail(
        error.code() == Errc::kCancelled
            ? error
            : Error(Errc::kUnavailable, "Lost the connection to the agent: " + error.message())));
  }
  bool streamFinished() const override { return answer.has_value(); }

  std::optional<Result<proto::FileList>> answer;
  event::AsyncEvent changed;

 private:
  void finish(Result<proto::FileList> result) {
    answer = std::move(result);
    list_ = {};
    changed.notify();
  }

  const uint32_t max_entries_;
  size_t bytes_ = 0;
  proto::FileList list_;
};

Error unsupported(std::string_view capability) {
  return Error(
      Errc::kUnsupported,
      "This box's agent cannot " +
          std::string(capability == "watch" ? "watch directories" : "work on files without exec") +
          " (no \"" + std::string(capability) +
          "\" capability); rebuild its image with a newer "
          "hutch-agent");
}

}  // namespace

Result<> AgentClient::checkFiles(std::string_view capability) const {
  if (!open_) return fail(closedError());
  if (!hello_ack_) return fail(Errc::kFailedPrecondition, "Call handshake() first");
  if (!hello_ack_->hasCapability(capability)) return fail(unsupported(capability));
  return ok();
}

asio::awaitable<Result<proto::FileInfo>> AgentClient::stat(proto::FileStatRequest request,
                                                           std::chrono::milliseconds timeout) {
  auto self = shared_from_this();
  HUTCH_CO_TRY_VOID(checkFiles("files"));
  HUTCH_CO_TRY_VOID(proto::validate(request));
  const std::string payload = proto::encodeMessage(request);
  auto answer = co_await this->request(FrameType::kFileStat, payload, timeout);
  if (!answer) co_return fail(answer.error());
  co_return proto::decodeMessage<proto::FileInfo>(*answer);
}

asio::awaitable<Result<proto::FileList>> AgentClient::listDir(proto::FileListRequest request,
                                                              std::chrono::milliseconds timeout) {
  auto self = shared_from_this();
  HUTCH_CO_TRY_VOID(checkFiles("files"));
  HUTCH_CO_TRY_VOID(proto::validate(request));
  const uint32_t stream = allocateStream();
  auto pending = std::make_shared<PendingList>(executor_, request.max_entries);
  streams_[stream] = pending;
  send(FrameType::kFileList, stream, proto::encodeMessage(request));
  const auto deadline = Clock::now() + timeout;
  while (!pending->answer && Clock::now() < deadline) co_await pending->changed.waitUntil(deadline);
  if (!pending->answer) {
    forget(stream);
    co_return fail(Errc::kTimeout, "The agent did not list the directory within " +
                                       std::to_string(timeout.count()) + " ms");
  }
  co_return std::move(*pending->answer);
}

asio::awaitable<Result<proto::FileMkdirResult>> AgentClient::makeDir(
    proto::FileMkdirRequest request, std::chrono::milliseconds timeout) {
  auto self = shared_from_this();
  HUTCH_CO_TRY_VOID(checkFiles("files"));
  HUTCH_CO_TRY_VOID(proto::validate(request));
  const std::string payload = proto::encodeMessage(request);
  auto answer = co_await this->request(FrameType::kFileMkdir, payload, timeout);
  if (!answer) co_return fail(answer.error());
  co_return proto::decodeMessage<proto::FileMkdirResult>(*answer);
}

asio::awaitable<Result<proto::FileInfo>> AgentClient::move(proto::FileMoveRequest request,
                                                           std::chrono::milliseconds timeout) {
  auto self = shared_from_this();
  HUTCH_CO_TRY_VOID(checkFiles("files"));
  HUTCH_CO_TRY_VOID(proto::validate(request));
  const std::string payload = proto::encodeMessage(request);
  auto answer = co_await this->request(FrameType::kFileMove, payload, timeout);
  if (!answer) co_return fail(answer.error());
  co_return proto::decodeMessage<proto::FileInfo>(*answer);
}

asio::awaitable<Result<>> AgentClient::remove(proto::FileRemoveRequest request,
                                              std::chrono::milliseconds timeout) {
  auto self = shared_from_this();
  HUTCH_CO_TRY_VOID(checkFiles("files"));
  HUTCH_CO_TRY_VOID(proto::validate(request));
  const std::string payload = proto::encodeMessage(request);
  auto answer = co_await this->request(FrameType::kFileRemove, payload, timeout);
  if (!answer) co_return fail(answer.error());
  co_return ok();
}

asio::awaitable<Result<std::shared_ptr<FileReader>>> AgentClient::openRead(
    proto::FileReadRequest request, std::chrono::milliseconds timeout) {
  auto self = shared_from_this();
  HUTCH_CO_TRY_VOID(checkFiles("files"));
  HUTCH_CO_TRY_VOID(proto::validate(request));
  const uint32_t stream = allocateStream();
  std::shared_ptr<FileReader> reader(new FileReader(self, stream));
  streams_[stream] = reader;
  send(FrameType::kFileRead, stream, proto::encodeMessage(request));
  const auto deadline = Clock::now() + timeout;
  while (!reader->opened_ && !reader->ended_ && Clock::now() < deadline) {
    co_await reader->changed_.waitUntil(deadline);
  }
  // Opened: what came since (the content, its end, an error) is for next() to report.
  if (reader->opened_) co_return reader;
  if (reader->error_) co_return fail(*reader->error_);
  reader->close();
  co_return fail(Errc::kTimeout, "The agent did not open " + request.path + " within " +
                                     std::to_string(timeout.count()) + " ms");
}

asio::awaitable<Result<std::shared_ptr<FileWriter>>> AgentClient::openWrite(
    proto::FileWriteRequest request, std::chrono::milliseconds timeout) {
  auto self = shared_from_this();
  HUTCH_CO_TRY_VOID(checkFiles("files"));
  HUTCH_CO_TRY_VOID(proto::validate(request));
  const uint32_t stream = allocateStream();
  std::shared_ptr<FileWriter> writer(new FileWriter(self, stream));
  streams_[stream] = writer;
  send(FrameType::kFileWrite, stream, proto::encodeMessage(request));
  const auto deadline = Clock::now() + timeout;
  while (!writer->opened_ && !writer->ended_ && Clock::now() < deadline) {
    co_await writer->changed_.waitUntil(deadline);
  }
  if (writer->opened_ && !writer->ended_) co_return writer;
  if (writer->error_) co_return fail(*writer->error_);
  writer->abort();
  co_return fail(Errc::kTimeout, "The agent did not open " + request.path + " for writing within " +
                                     std::to_string(timeout.count()) + " ms");
}

asio::awaitable<Result<std::shared_ptr<FileWatch>>> AgentClient::watch(
    proto::WatchRequest request, std::chrono::milliseconds timeout) {
  auto self = shared_from_this();
  HUTCH_CO_TRY_VOID(checkFiles("watch"));
  HUTCH_CO_TRY_VOID(proto::validate(request));
  const uint32_t stream = allocateStream();
  std::shared_ptr<FileWatch> watch(new FileWatch(self, stream));
  streams_[stream] = watch;
  send(FrameType::kWatch, stream, proto::encodeMessage(request));
  const auto deadline = Clock::now() + timeout;
  while (!watch->opened_ && !watch->ended_ && Clock::now() < deadline) {
    co_await watch->changed_.waitUntil(deadline);
  }
  if (watch->opened_) co_return watch;
  if (watch->error_) co_return fail(*watch->error_);
  watch->close();
  co_return fail(Errc::kTimeout, "The agent did not set the watch on " + request.path + " within " +
                                     std::to_string(timeout.count()) + " ms");
}

}  // namespace hutch::guest

// FileWriter: the host's end of a kFileWrite stream (AgentClient::openWrite, docs/protocol.md
// "Files"): the new content goes to a temporary file beside the target and replaces it only
// when finish() succeeds. abort(), dropping the writer unfinished, an error or a lost
// connection leave the target as it was (the agent removes its temporary file).
//
// write() waits for window: the agent grants it back once the bytes are in its file, so at most
// 256 KiB is in flight. Not thread-safe: use it on the client's executor, one call at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "event/async_event.h"
#include "guest/asio.h"
#include "guest/stream_handler.h"
#include "proto/files.h"
#include "proto/frame.h"

namespace hutch::guest {

class AgentClient;

class FileWriter : public StreamHandler {
 public:
  ~FileWriter() override;
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;

  uint32_t streamId() const { return stream_; }
  // The file that will be replaced or made (a symlink at the requested path is followed).
  const std::string& path() const { return path_; }

  // Sends bytes, waiting for window as needed; returns once all are queued. bytes must stay
  // valid until it returns. kFailedPrecondition after finish() or abort(); the stream's error
  // once it has ended (e.g. the disk is full).
  boost::asio::awaitable<Result<>> write(std::string_view bytes);

  // Ends the content: the agent syncs the file, sets its owner and mode and renames it over the
  // target. The new file's FileInfo. kTimeout (the write is aborted) if the answer does not come
  // within timeout.
  boost::asio::awaitable<Result<proto::FileInfo>> finish(
      std::chrono::milliseconds timeout = std::chrono::seconds(120));

  // Gives up: the target stays as it was. Later calls fail with kCancelled.
  void abort();

  bool ended() const { return ended_; }

 private:
  friend class AgentClient;

  FileWriter(std::shared_ptr<AgentClient> client, uint32_t stream);

  // StreamHandler
  void onStreamFrame(const proto::Frame& frame) override;
  void onStreamClosed(const Error& error) override;
  bool streamFinished() const override { return ended_; }

  void end(std::optional<Error> error);
  void abortWith(Error error);

  std::shared_ptr<AgentClient> client_;
  const uint32_t stream_;
  event::AsyncEvent changed_;

  bool opened_ = false;
  std::string path_;
  bool eof_sent_ = false;
  bool ended_ = false;
  std::optional<Error> error_;
  std::optional<proto::FileInfo> result_;
  uint64_t send_credit_;
};

}  // namespace hutch::guest

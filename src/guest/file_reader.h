// FileReader: the host's end of a kFileRead stream (AgentClient::openRead, docs/protocol.md
// "Files"): the file's FileInfo, then its content chunk by chunk.
//
// next() grants the agent more window as it returns chunks, so a consumer that stops pulling
// stops the agent (which reads the file only as far as the window allows): at most 256 KiB is
// buffered. Everything the agent sends is checked: data beyond the window or before kFileOpened
// is a protocol error that aborts the stream. Not thread-safe: use it on the client's executor.
// Destroying a reader that has not reached the end aborts the stream.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "base/result.h"
#include "event/async_event.h"
#include "guest/asio.h"
#include "guest/stream_handler.h"
#include "proto/files.h"
#include "proto/frame.h"

namespace hutch::guest {

class AgentClient;

class FileReader : public StreamHandler {
 public:
  ~FileReader() override;
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;

  uint32_t streamId() const { return stream_; }
  // The file as it was when opened (size: its size then; the content is read to its end).
  const proto::FileInfo& info() const { return info_; }

  // The next chunk (at most 64 KiB), or std::nullopt at the end of the file (and on every call
  // after). Errors: the agent's (a read failure midway), kProtocol when it broke the stream's
  // rules, kCancelled after close() or AgentClient::close(), kUnavailable when the connection to
  // the agent was lost.
  boost::asio::awaitable<Result<std::optional<std::string>>> next();

  // Aborts the read; pending and later next() calls fail with kCancelled.
  void close();

  // The agent has sent the stream's last frame.
  bool ended() const { return ended_; }
  uint64_t bytesReceived() const { return received_; }

 private:
  friend class AgentClient;

  FileReader(std::shared_ptr<AgentClient> client, uint32_t stream);

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
  proto::FileInfo info_;
  bool ended_ = false;
  bool eof_ = false;
  std::optional<Error> error_;
  std::deque<std::string> chunks_;
  uint64_t receive_window_;
  uint64_t ungranted_ = 0;
  uint64_t received_ = 0;
};

}  // namespace hutch::guest

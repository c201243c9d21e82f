// FileWatch: the host's end of a kWatch stream (AgentClient::watch, docs/protocol.md "Files"):
// batches of changes in a directory of the box (and below it, recursive) until close().
//
// next() grants the agent more window as it returns batches; a consumer that stops pulling
// makes the agent stop reading its inotify queue (the kernel's queue may then overflow, which
// the next batch says with overflow = true). Every batch is checked (paths, event types) before
// it is queued. Not thread-safe: use it on the client's executor. Destroying it ends the watch.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>

#include "base/result.h"
#include "event/async_event.h"
#include "guest/asio.h"
#include "guest/stream_handler.h"
#include "proto/files.h"
#include "proto/frame.h"

namespace hutch::guest {

class AgentClient;

class FileWatch : public StreamHandler {
 public:
  ~FileWatch() override;
  FileWatch(const FileWatch&) = delete;
  FileWatch& operator=(const FileWatch&) = delete;

  uint32_t streamId() const { return stream_; }
  // The watched directory.
  const proto::FileInfo& info() const { return info_; }

  // The next batch of events, or std::nullopt once the agent ended the watch because the
  // directory was removed (its remove event came in the batch before). Errors: the agent's,
  // kProtocol for a broken batch, kCancelled after close(), kUnavailable when the connection to
  // the agent was lost.
  boost::asio::awaitable<Result<std::optional<proto::FileEvents>>> next();

  // Ends the watch.
  void close();

  bool ended() const { return ended_; }

 private:
  friend class AgentClient;

  FileWatch(std::shared_ptr<AgentClient> client, uint32_t stream);

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
  bool agent_closed_ = false;  // the agent ended the watch (kClose): the directory is gone
  std::optional<Error> error_;
  struct Batch {
    proto::FileEvents events;
    size_t bytes = 0;  // its payload, granted back once consumed
  };
  std::deque<Batch> batches_;
  uint64_t receive_window_;
  uint64_t ungranted_ = 0;
};

}  // namespace hutch::guest

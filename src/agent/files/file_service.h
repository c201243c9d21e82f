// FileService: the agent's side of the files protocol (docs/protocol.md, "Files"). The server
// hands it the file requests (kFileStat ... kWatch) on fresh streams and the frames of the
// streams it opened; it resolves the user, runs the work on its FileWorkers under that user's
// credentials and answers on the loop.
//
// A request whose answer is still on a worker when the session ends (kHello, a reset, a
// disconnect) is forgotten: its answer is dropped, as for every request. Read, write and watch
// streams end with the session; a write's temporary file is removed.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "agent/event_loop.h"
#include "agent/exec/exec_stream.h"
#include "agent/files/file_read_stream.h"
#include "agent/files/file_workers.h"
#include "agent/files/file_write_stream.h"
#include "agent/files/watch_stream.h"
#include "proto/frame.h"

namespace hutch::agent {

struct FileServiceOptions {
  std::string passwd_path = "/etc/passwd";
  std::string group_path = "/etc/group";
};

class FileService {
 public:
  FileService(EventLoop& loop, StreamSink& sink, FileServiceOptions options);
  ~FileService();
  FileService(const FileService&) = delete;
  FileService& operator=(const FileService&) = delete;

  static bool isRequest(proto::FrameType type);
  // A request on a fresh stream (the server checked that it is nonzero and not open).
  void handleRequest(const proto::Frame& frame);

  // Whether stream is one of ours (a request being worked on, or an open stream).
  bool isOpen(uint32_t stream) const;
  // kData, kEof, kWindow, kClose for one of our streams: handled (true) or not ours (false).
  bool routeStreamFrame(const proto::Frame& frame);
  // The stream sent its last frame (StreamSink::streamFinished): drop it.
  void reap(uint32_t stream);
  // The session ended: every stream and pending answer goes.
  void closeAll();
  // Power-off: closeAll(), then waits for the workers to finish what is queued (the removal of
  // temporary files among it). File requests after it fail.
  void shutdown();

 private:
  struct Caller {
    FsCredentials who;
    FileContext ctx;
    std::string home;
  };

  Result<Caller> resolveCaller(const std::string& user) const;
  // Runs work on a worker as the caller and answers kResult with its encoding.
  template <class T>
  void answer(uint32_t stream, const Caller& caller, std::function<Result<T>()> work);
  void sendError(uint32_t stream, const Error& error);

  void handleStat(const proto::Frame& frame);
  void handleList(const proto::Frame& frame);
  void handleMkdir(const proto::Frame& frame);
  void handleMove(const proto::Frame& frame);
  void handleRemove(const proto::Frame& frame);
  void handleRead(const proto::Frame& frame);
  void handleWrite(const proto::Frame& frame);
  void handleWatch(const proto::Frame& frame);

  EventLoop& loop_;
  StreamSink& sink_;
  FileServiceOptions options_;
  // Declared first, destroyed last: the streams' destructors queue their cleanup on it.
  FileWorkers workers_;
  uint64_t next_serial_ = 1;
  std::map<uint32_t, uint64_t> pending_;  // requests on a worker: stream -> serial
  std::map<uint32_t, std::unique_ptr<FileReadStream>> reads_;
  std::map<uint32_t, std::unique_ptr<FileWriteStream>> writes_;
  std::map<uint32_t, std::unique_ptr<WatchStream>> watches_;
};

}  // namespace hutch::agent

// FileWriteStream: one kFileWrite stream on the loop; the file work happens on a worker, as the
// user, one job at a time in order (the stream's strand): begin (parents, the temporary file),
// the chunks, then the commit (fsync, owner and mode, rename) or the cleanup.
//
// The host may send kInitialWindow bytes of kData, plus what the stream grants back with
// kWindow once the bytes are in the temporary file; data beyond the window, or after kEof, is a
// protocol error. kEof from the host commits and is answered by kResult FileInfo. kClose from
// the host, any error and the end of the session remove the temporary file, so a broken upload
// never leaves a partial target.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "agent/exec/exec_stream.h"
#include "agent/files/file_ops.h"
#include "agent/files/file_workers.h"
#include "proto/files.h"

namespace hutch::agent {

class FileWriteStream {
 public:
  FileWriteStream(StreamSink& sink, FileWorkers& workers, uint32_t id, FsCredentials who,
                  FileContext ctx, WriteAttributes attributes);
  // Removes the temporary file (on the worker) unless the write was committed.
  ~FileWriteStream();
  FileWriteStream(const FileWriteStream&) = delete;
  FileWriteStream& operator=(const FileWriteStream&) = delete;

  // Starts the write of path: kFileOpened once the temporary file exists.
  void start(const std::string& path, bool parents);
  bool finished() const { return finished_; }

  // Frames from the host for this stream.
  void onData(std::string_view data);
  void onEof();
  void onClose();
  void onUnexpected(proto::FrameType type);

 private:
  // What the worker jobs share with the stream; only jobs (one at a time) touch `write`.
  struct State {
    PendingWrite write;
  };

  void next();
  void endWithError(const Error& error);
  void finish();

  StreamSink& sink_;
  FileWorkers& workers_;
  const uint32_t id_;
  const FsCredentials who_;
  const FileContext ctx_;
  const WriteAttributes attributes_;
  std::shared_ptr<FileWorkers::Strand> strand_;
  std::shared_ptr<State> state_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // jobs' completions check it

  bool opened_ = false;
  bool busy_ = false;  // a job is on the worker
  bool committed_ = false;
  std::string buffer_;       // data not yet handed to a worker
  uint64_t receive_credit_;  // kData the host may still send
  bool host_eof_ = false;
  bool finished_ = false;
};

}  // namespace hutch::agent

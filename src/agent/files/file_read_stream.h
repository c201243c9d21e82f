// FileReadStream: one kFileRead stream on the loop. The file is opened on a worker as the user
// (FileService); the stream then sends kFileOpened with its FileInfo and the content as kData,
// never more than the window the host granted (256 KiB at open, plus kWindow), and kEof at the
// end of the file. A read error is kError; kClose from the host aborts (answered by kClose).
//
// Reading happens on the loop, with the descriptor the user's worker opened: permissions were
// checked at open, and a regular file's read() is served from the page cache or a short disk
// read (measured in docs/protocol.md, "Files").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "agent/exec/exec_stream.h"
#include "agent/files/file_ops.h"
#include "agent/files/file_workers.h"
#include "base/unique_fd.h"
#include "proto/files.h"

namespace hutch::agent {

class FileReadStream {
 public:
  FileReadStream(StreamSink& sink, FileWorkers& workers, uint32_t id, FsCredentials who,
                 FileContext ctx);
  ~FileReadStream();
  FileReadStream(const FileReadStream&) = delete;
  FileReadStream& operator=(const FileReadStream&) = delete;

  // Opens path on a worker as the user; kFileOpened once it is open.
  void start(const std::string& path);
  bool finished() const { return finished_; }

  // Frames from the host for this stream.
  void onWindow(std::string_view payload);
  void onClose();
  void onUnexpected(proto::FrameType type);

 private:
  void opened(UniqueFd fd, const proto::FileInfo& info);
  void pump();
  void endWithError(const Error& error);
  void finish();

  StreamSink& sink_;
  FileWorkers& workers_;
  const uint32_t id_;
  const FsCredentials who_;
  const FileContext ctx_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  std::string path_;
  UniqueFd fd_;
  uint64_t send_window_;
  bool finished_ = false;
};

}  // namespace hutch::agent

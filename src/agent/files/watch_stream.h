// WatchStream: one kWatch stream on the loop. The watches are added on a worker as the user
// (watch_ops.h); the stream then answers kFileOpened with the directory's FileInfo, reads the
// inotify descriptor on the loop and sends what happened as kFileEvents batches:
//
//   IN_CREATE, IN_MOVED_TO -> create   IN_MODIFY -> write      IN_ATTRIB -> chmod
//   IN_DELETE              -> remove   IN_MOVED_FROM -> rename (the old path)
//
// (fsnotify's mapping, which E2B's watcher uses). The watched directory's own removal or move
// is reported for it; after its removal the stream ends with kClose {}. Recursive: a directory
// created below gets its watches at once and what it already holds is reported as create
// events (so a create may come twice); a directory moved within the tree is watched under its
// new path.
//
// Flow control: kFileEvents payload counts against a window (kInitialWindow at open, plus the
// host's kWindow). Without window the stream stops reading inotify once 4096 events wait; the
// kernel then queues (and may overflow, reported as "overflow": true on the next batch).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>

#include "agent/event_loop.h"
#include "agent/exec/exec_stream.h"
#include "agent/files/file_workers.h"
#include "agent/files/watch_ops.h"
#include "proto/files.h"

struct inotify_event;

namespace hutch::agent {

inline constexpr size_t kMaxPendingEvents = 4096;

class WatchStream {
 public:
  WatchStream(EventLoop& loop, StreamSink& sink, FileWorkers& workers, uint32_t id,
              FsCredentials who, FileContext ctx, std::shared_ptr<WatchState> state);
  ~WatchStream();
  WatchStream(const WatchStream&) = delete;
  WatchStream& operator=(const WatchStream&) = delete;

  void start(const std::string& path);
  bool finished() const { return finished_; }

  // Frames from the host for this stream.
  void onWindow(std::string_view payload);
  void onClose();
  void onUnexpected(proto::FrameType type);

 private:
  void readEvents();
  void handleEvent(const inotify_event& event);
  void push(proto::FileEventType type, std::string path);
  void addDirectory(const std::string& path, bool report_contents);
  void forgetBelow(const std::string& path);
  void flush();
  void updateInterest();
  void endWithError(const Error& error);
  void finish();

  EventLoop& loop_;
  StreamSink& sink_;
  FileWorkers& workers_;
  const uint32_t id_;
  const FsCredentials who_;
  const FileContext ctx_;
  std::shared_ptr<WatchState> state_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);

  std::string root_;
  bool opened_ = false;
  bool reading_ = false;  // the inotify descriptor is in the loop
  std::deque<proto::FileEvent> pending_;
  bool overflow_ = false;
  bool root_gone_ = false;
  uint64_t send_window_;
  bool finished_ = false;
};

}  // namespace hutch::agent

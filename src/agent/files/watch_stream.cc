#include "agent/files/watch_stream.h"

#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "agent/files/file_info.h"
#include "agent/files/paths.h"
#include "agent/log.h"
#include "proto/messages.h"

namespace hutch::agent {

using proto::FileEventType;
using proto::FrameType;

namespace {

// The JSON of one event is at most this much more than 6 bytes per byte of its path (every
// byte escaped as \u00XX), so a batch built against this bound never exceeds the window.
constexpr size_t kEventOverhead = 40;
constexpr size_t kBatchOverhead = 40;

size_t eventBound(const proto::FileEvent& event) {
  return kEventOverhead + 6 * event.path.size();
}

}  // namespace

WatchStream::WatchStream(EventLoop& loop, StreamSink& sink, FileWorkers& workers, uint32_t id,
                         FsCredentials who, FileContext ctx, std::shared_ptr<WatchState> state)
    : loop_(loop),
      sink_(sink),
      workers_(workers),
      id_(id),
      who_(std::move(who)),
      ctx_(std::move(ctx)),
      state_(std::move(state)),
      send_window_(proto::kInitialWindow) {}

WatchStream::~WatchStream() {
  *alive_ = false;
  if (reading_) loop_.remove(state_->inotify.get());
  // Closing the inotify descriptor (with the state, once no job holds it) drops its watches.
}

void WatchStream::start(const std::string& path) {
  root_ = path;
  auto state = state_;
  auto ctx = ctx_;
  std::weak_ptr<bool> alive = alive_;
  workers_.submit<proto::FileInfo>(
      who_, [state, ctx, path]() { return beginWatch(ctx, *state, path); },
      [this, alive](Result<proto::FileInfo> info) {
        if (alive.expired() || finished_) return;
        if (!info) return endWithError(info.error());
        opened_ = true;
        sink_.sendFrame(FrameType::kFileOpened, id_, proto::encodeMessage(*info));
        updateInterest();
      });
}

void WatchStream::updateInterest() {
  if (finished_ || !opened_) return;
  const bool want = !root_gone_ && pending_.size() < kMaxPendingEvents;
  if (want == reading_) return;
  if (want) {
    auto added = loop_.add(state_->inotify.get(), EPOLLIN, [this](uint32_t) { readEvents(); });
    if (!added) return endWithError(added.error());
  } else {
    loop_.remove(state_->inotify.get());
  }
  reading_ = want;
}

void WatchStream::readEvents() {
  alignas(inotify_event) char buffer[64 * 1024];
  for (int round = 0; round < 16 && !finished_ && !root_gone_; ++round) {
    if (pending_.size() >= kMaxPendingEvents) break;
    const ssize_t n = ::read(state_->inotify.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return endWithError(Error(Errc::kInternal, "Reading the watch's events failed", errno));
    }
    for (ssize_t offset = 0; offset + static_cast<ssize_t>(sizeof(inotify_event)) <= n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(buffer + offset);
      handleEvent(*event);
      offset += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
    }
  }
  flush();
  updateInterest();
}

void WatchStream::handleEvent(const inotify_event& event) {
  if (event.mask & IN_Q_OVERFLOW) {
    overflow_ = true;
    return;
  }
  std::string dir;
  bool is_root = false;
  {
    std::lock_guard lock(state_->mutex);
    auto it = state_->dirs.find(event.wd);
    if (it == state_->dirs.end()) return;  // a watch removed since (its last events)
    dir = it->second;
    is_root = event.wd == state_->root_wd;
    if (event.mask & IN_IGNORED) state_->dirs.erase(it);
  }
  if (event.mask & IN_IGNORED) {
    // The directory is gone (removed, or its filesystem unmounted).
    if (is_root) root_gone_ = true;
    return;
  }
  const std::string path =
      event.len > 0 ? childPath(dir, std::string_view(event.name, ::strnlen(event.name, event.len)))
                    : dir;
  const bool is_dir = (event.mask & IN_ISDIR) != 0;
  if (event.mask & (IN_CREATE | IN_MOVED_TO)) {
    push(FileEventType::kCreate, path);
    if (is_dir && state_->recursive) addDirectory(path, (event.mask & IN_CREATE) != 0);
  }
  if (event.mask & IN_MODIFY) push(FileEventType::kWrite, path);
  if (event.mask & IN_ATTRIB) push(FileEventType::kChmod, path);
  if (event.mask & IN_DELETE) push(FileEventType::kRemove, path);
  if (event.mask & IN_MOVED_FROM) {
    push(FileEventType::kRename, path);
    // Watched again under its new name if it stays in the tree (IN_MOVED_TO).
    if (is_dir && state_->recursive) forgetBelow(path);
  }
  // A subdirectory's own removal and move are reported by its parent's watch.
  if (is_root && (event.mask & IN_DELETE_SELF)) push(FileEventType::kRemove, root_);
  if (is_root && (event.mask & IN_MOVE_SELF)) push(FileEventType::kRename, root_);
}

void WatchStream::push(FileEventType type, std::string path) {
  // Writes come one per write(2): repeated ones in a row say nothing new.
  if (!pending_.empty() && pending_.back().type == type && pending_.back().path == path) return;
  pending_.push_back(proto::FileEvent{type, std::move(path)});
}

void WatchStream::addDirectory(const std::string& path, bool report_contents) {
  auto state = state_;
  auto ctx = ctx_;
  std::weak_ptr<bool> alive = alive_;
  workers_.submit<FoundEntries>(
      who_,
      [state, ctx, path, report_contents]() {
        return watchNewDirectory(ctx, *state, path, report_contents);
      },
      [this, alive](Result<FoundEntries> found) {
        if (alive.expired() || finished_) return;
        if (!found) {
          if (found.error().code() == Errc::kCancelled) return;
          return endWithError(found.error());
        }
        for (auto& event : found->events) push(event.type, std::move(event.path));
        if (found->overflow) overflow_ = true;
        flush();
        updateInterest();
      });
}

void WatchStream::forgetBelow(const std::string& path) {
  std::lock_guard lock(state_->mutex);
  for (auto it = state_->dirs.begin(); it != state_->dirs.end();) {
    if (it->first != state_->root_wd && isUnder(it->second, path)) {
      ::inotify_rm_watch(state_->inotify.get(), it->first);
      it = state_->dirs.erase(it);
    } else {
      ++it;
    }
  }
}

void WatchStream::flush() {
  while (!finished_ && (!pending_.empty() || overflow_)) {
    const size_t room =
        static_cast<size_t>(std::min<uint64_t>(send_window_, proto::kFileBatchBytes));
    proto::FileEvents batch;
    batch.overflow = overflow_;
    size_t bound = kBatchOverhead;
    while (!pending_.empty() && bound + eventBound(pending_.front()) <= room) {
      bound += eventBound(pending_.front());
      batch.events.push_back(std::move(pending_.front()));
      pending_.pop_front();
    }
    if (batch.events.empty() && (!pending_.empty() || bound > room)) break;  // wait for window
    const std::string payload = proto::encodeMessage(batch);
    sink_.sendFrame(FrameType::kFileEvents, id_, payload);
    send_window_ -= std::min<uint64_t>(send_window_, payload.size());
    overflow_ = false;
  }
  if (!finished_ && root_gone_ && pending_.empty() && !overflow_) {
    // Everything about the watched directory is told: nothing more can happen in it.
    sink_.sendFrame(FrameType::kClose, id_, "{}");
    finish();
  }
}

void WatchStream::onWindow(std::string_view payload) {
  if (finished_) return;
  auto increment = proto::decodeWindow(payload);
  if (!increment) return endWithError(Error(Errc::kProtocol, increment.error().message()));
  send_window_ += *increment;
  flush();
  updateInterest();
}

void WatchStream::onClose() {
  if (finished_) return;
  sink_.sendFrame(FrameType::kClose, id_, "{}");
  finish();
}

void WatchStream::onUnexpected(FrameType type) {
  endWithError(Error(Errc::kProtocol, "Frame type " + std::to_string(static_cast<int>(type)) +
                                          " is not sent to a watch stream"));
}

void WatchStream::endWithError(const Error& error) {
  if (finished_) return;
  sink_.sendFrame(FrameType::kError, id_,
                  proto::encodeMessage(proto::ErrorMessage::fromError(error)));
  finish();
}

void WatchStream::finish() {
  finished_ = true;
  if (reading_) loop_.remove(state_->inotify.get());
  reading_ = false;
  pending_.clear();
  sink_.streamFinished(id_);
}

}  // namespace hutch::agent

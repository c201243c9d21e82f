#include "agent/files/file_service.h"

#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "agent/files/paths.h"
#include "proto/files.h"
#include "proto/messages.h"

namespace hutch::agent {

using proto::Frame;
using proto::FrameType;

namespace {

// What a request's worker hands back: kFileEntries payloads (a long listing), then the kResult.
struct Answer {
  std::vector<std::string> entries;
  std::string result;
};

Answer single(std::string result) {
  return Answer{{}, std::move(result)};
}

// A listing as kFileEntries payloads of about kFileBatchBytes and the final kResult; built from
// the entries' own encodings, so each entry is encoded once.
Answer batchListing(const proto::FileList& list) {
  static constexpr std::string_view kOpen = R"({"entries":[)";
  Answer answer;
  std::string current(kOpen);
  bool empty = true;
  for (const auto& entry : list.entries) {
    std::string one = proto::encodeMessage(entry);
    if (!empty && current.size() + one.size() > proto::kFileBatchBytes) {
      current += R"(],"truncated":false})";
      answer.entries.push_back(std::move(current));
      current.assign(kOpen);
      empty = true;
    }
    if (!empty) current += ',';
    current += one;
    empty = false;
  }
  current += list.truncated ? R"(],"truncated":true})" : R"(],"truncated":false})";
  answer.result = std::move(current);
  return answer;
}

}  // namespace

FileService::FileService(EventLoop& loop, StreamSink& sink, FileServiceOptions options)
    : loop_(loop), sink_(sink), options_(std::move(options)), workers_(loop) {}

FileService::~FileService() {
  closeAll();
}

bool FileService::isRequest(FrameType type) {
  switch (type) {
    case FrameType::kFileStat:
    case FrameType::kFileList:
    case FrameType::kFileMkdir:
    case FrameType::kFileMove:
    case FrameType::kFileRemove:
    case FrameType::kFileRead:
    case FrameType::kFileWrite:
    case FrameType::kWatch: return true;
    default: return false;
  }
}

bool FileService::isOpen(uint32_t stream) const {
  if (pending_.contains(stream)) return true;
  if (auto it = reads_.find(stream); it != reads_.end() && !it->second->finished()) return true;
  if (auto it = writes_.find(stream); it != writes_.end() && !it->second->finished()) return true;
  if (auto it = watches_.find(stream); it != watches_.end() && !it->second->finished()) {
    return true;
  }
  return false;
}

void FileService::reap(uint32_t stream) {
  if (auto it = reads_.find(stream); it != reads_.end() && it->second->finished()) reads_.erase(it);
  if (auto it = writes_.find(stream); it != writes_.end() && it->second->finished()) {
    writes_.erase(it);
  }
  if (auto it = watches_.find(stream); it != watches_.end() && it->second->finished()) {
    watches_.erase(it);
  }
}

void FileService::closeAll() {
  pending_.clear();
  reads_.clear();
  writes_.clear();  // each removes its temporary file (on its strand)
  watches_.clear();
}

void FileService::shutdown() {
  closeAll();
  workers_.stop();
}

Result<FileService::Caller> FileService::resolveCaller(const std::string& user) const {
  auto users =
      std::make_shared<const UserDb>(UserDb::load(options_.passwd_path, options_.group_path));
  // As for exec: an unprivileged (--listen) agent acts as itself by default.
  const std::string name = user.empty() && ::geteuid() != 0 ? std::to_string(::geteuid()) : user;
  HUTCH_TRY(UserInfo info, users->lookup(name));
  std::string label = user;
  if (label.empty()) label = info.name.empty() ? std::to_string(info.uid) : info.name;
  Caller caller;
  caller.who = FsCredentials{info.uid, info.gid, info.groups, label};
  caller.ctx = FileContext{label, std::move(users), &workers_.stopFlag()};
  caller.home = info.home;
  return caller;
}

void FileService::sendError(uint32_t stream, const Error& error) {
  sink_.sendFrame(FrameType::kError, stream,
                  proto::encodeMessage(proto::ErrorMessage::fromError(error)));
}

template <class T>
void FileService::answer(uint32_t stream, const Caller& caller, std::function<Result<T>()> work) {
  const uint64_t serial = next_serial_++;
  pending_[stream] = serial;
  workers_.submit<T>(caller.who, std::move(work), [this, stream, serial](Result<T> result) {
    auto it = pending_.find(stream);
    if (it == pending_.end() || it->second != serial) return;  // a session ago
    pending_.erase(it);
    if (!result) return sendError(stream, result.error());
    for (const auto& part : result->entries) sink_.sendFrame(FrameType::kFileEntries, stream, part);
    sink_.sendFrame(FrameType::kResult, stream, result->result);
  });
}

void FileService::handleRequest(const Frame& frame) {
  // A finished stream with this id may still wait to be reaped.
  reap(frame.stream);
  switch (frame.type) {
    case FrameType::kFileStat: return handleStat(frame);
    case FrameType::kFileList: return handleList(frame);
    case FrameType::kFileMkdir: return handleMkdir(frame);
    case FrameType::kFileMove: return handleMove(frame);
    case FrameType::kFileRemove: return handleRemove(frame);
    case FrameType::kFileRead: return handleRead(frame);
    case FrameType::kFileWrite: return handleWrite(frame);
    case FrameType::kWatch: return handleWatch(frame);
    default: return;
  }
}

void FileService::handleStat(const Frame& frame) {
  auto request = proto::decodeMessage<proto::FileStatRequest>(frame.payload);
  if (!request) return sendError(frame.stream, request.error());
  auto caller = resolveCaller(request->user);
  if (!caller) return sendError(frame.stream, caller.error());
  const std::string path = resolvePath(request->path, caller->home);
  const bool follow = request->follow;
  answer<Answer>(frame.stream, *caller, [ctx = caller->ctx, path, follow]() -> Result<Answer> {
    HUTCH_TRY(proto::FileInfo info, statPath(ctx, path, follow));
    return single(proto::encodeMessage(info));
  });
}

void FileService::handleList(const Frame& frame) {
  auto request = proto::decodeMessage<proto::FileListRequest>(frame.payload);
  if (!request) return sendError(frame.stream, request.error());
  auto caller = resolveCaller(request->user);
  if (!caller) return sendError(frame.stream, caller.error());
  const std::string path = resolvePath(request->path, caller->home);
  const uint32_t depth = request->depth;
  const uint32_t max_entries = request->max_entries;
  answer<Answer>(frame.stream, *caller,
                 [ctx = caller->ctx, path, depth, max_entries]() -> Result<Answer> {
                   HUTCH_TRY(proto::FileList list, listDirectory(ctx, path, depth, max_entries));
                   return batchListing(list);
                 });
}

void FileService::handleMkdir(const Frame& frame) {
  auto request = proto::decodeMessage<proto::FileMkdirRequest>(frame.payload);
  if (!request) return sendError(frame.stream, request.error());
  auto caller = resolveCaller(request->user);
  if (!caller) return sendError(frame.stream, caller.error());
  const std::string path = resolvePath(request->path, caller->home);
  const uint32_t mode = request->mode;
  const bool parents = request->parents;
  answer<Answer>(frame.stream, *caller,
                 [ctx = caller->ctx, path, mode, parents]() -> Result<Answer> {
                   HUTCH_TRY(proto::FileMkdirResult made, makeDirectory(ctx, path, mode, parents));
                   return single(proto::encodeMessage(made));
                 });
}

void FileService::handleMove(const Frame& frame) {
  auto request = proto::decodeMessage<proto::FileMoveRequest>(frame.payload);
  if (!request) return sendError(frame.stream, request.error());
  auto caller = resolveCaller(request->user);
  if (!caller) return sendError(frame.stream, caller.error());
  const std::string from = resolvePath(request->from, caller->home);
  const std::string to = resolvePath(request->to, caller->home);
  const bool overwrite = request->overwrite;
  answer<Answer>(frame.stream, *caller,
                 [ctx = caller->ctx, from, to, overwrite]() -> Result<Answer> {
                   HUTCH_TRY(proto::FileInfo info, movePath(ctx, from, to, overwrite));
                   return single(proto::encodeMessage(info));
                 });
}

void FileService::handleRemove(const Frame& frame) {
  auto request = proto::decodeMessage<proto::FileRemoveRequest>(frame.payload);
  if (!request) return sendError(frame.stream, request.error());
  auto caller = resolveCaller(request->user);
  if (!caller) return sendError(frame.stream, caller.error());
  const std::string path = resolvePath(request->path, caller->home);
  const bool recursive = request->recursive;
  answer<Answer>(frame.stream, *caller, [ctx = caller->ctx, path, recursive]() -> Result<Answer> {
    HUTCH_TRY_VOID(removePath(ctx, path, recursive));
    return single("{}");
  });
}

void FileService::handleRead(const Frame& frame) {
  auto request = proto::decodeMessage<proto::FileReadRequest>(frame.payload);
  if (!request) return sendError(frame.stream, request.error());
  auto caller = resolveCaller(request->user);
  if (!caller) return sendError(frame.stream, caller.error());
  auto stream =
      std::make_unique<FileReadStream>(sink_, workers_, frame.stream, caller->who, caller->ctx);
  FileReadStream& started = *stream;
  reads_[frame.stream] = std::move(stream);
  started.start(resolvePath(request->path, caller->home));
}

void FileService::handleWrite(const Frame& frame) {
  auto request = proto::decodeMessage<proto::FileWriteRequest>(frame.payload);
  if (!request) return sendError(frame.stream, request.error());
  auto caller = resolveCaller(request->user);
  if (!caller) return sendError(frame.stream, caller.error());
  WriteAttributes attributes;
  attributes.mode = request->mode;
  if (!request->owner.empty()) {
    auto owner = caller->ctx.users->lookup(request->owner);
    if (!owner) return sendError(frame.stream, owner.error());
    attributes.uid = owner->uid;
  }
  if (!request->group.empty()) {
    auto group = caller->ctx.users->lookupGroup(request->group);
    if (!group) return sendError(frame.stream, group.error());
    attributes.gid = *group;
  }
  auto stream = std::make_unique<FileWriteStream>(sink_, workers_, frame.stream, caller->who,
                                                  caller->ctx, attributes);
  FileWriteStream& started = *stream;
  writes_[frame.stream] = std::move(stream);
  started.start(resolvePath(request->path, caller->home), request->parents);
}

void FileService::handleWatch(const Frame& frame) {
  auto request = proto::decodeMessage<proto::WatchRequest>(frame.payload);
  if (!request) return sendError(frame.stream, request.error());
  auto caller = resolveCaller(request->user);
  if (!caller) return sendError(frame.stream, caller.error());
  auto state = std::make_shared<WatchState>();
  state->recursive = request->recursive;
  state->inotify = UniqueFd(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!state->inotify) {
    if (errno == EMFILE) {
      return sendError(frame.stream, Error(Errc::kResourceExhausted,
                                           "The box's limit of inotify instances is reached (raise "
                                           "fs.inotify.max_user_instances, or end other watches)"));
    }
    return sendError(frame.stream, Error(Errc::kInternal, "Cannot create a watch", errno));
  }
  auto stream = std::make_unique<WatchStream>(loop_, sink_, workers_, frame.stream, caller->who,
                                              caller->ctx, std::move(state));
  WatchStream& started = *stream;
  watches_[frame.stream] = std::move(stream);
  started.start(resolvePath(request->path, caller->home));
}

bool FileService::routeStreamFrame(const Frame& frame) {
  const FrameType type = frame.type;
  if (auto it = reads_.find(frame.stream); it != reads_.end()) {
    FileReadStream& stream = *it->second;
    if (stream.finished()) return true;  // crossed its last frame
    if (type == FrameType::kWindow) stream.onWindow(frame.payload);
    if (type == FrameType::kClose) stream.onClose();
    if (type == FrameType::kData || type == FrameType::kEof) stream.onUnexpected(type);
    return true;
  }
  if (auto it = writes_.find(frame.stream); it != writes_.end()) {
    FileWriteStream& stream = *it->second;
    if (stream.finished()) return true;
    if (type == FrameType::kData) stream.onData(frame.payload);
    if (type == FrameType::kEof) stream.onEof();
    if (type == FrameType::kClose) stream.onClose();
    if (type == FrameType::kWindow) stream.onUnexpected(type);
    return true;
  }
  if (auto it = watches_.find(frame.stream); it != watches_.end()) {
    WatchStream& stream = *it->second;
    if (stream.finished()) return true;
    if (type == FrameType::kWindow) stream.onWindow(frame.payload);
    if (type == FrameType::kClose) stream.onClose();
    if (type == FrameType::kData || type == FrameType::kEof) stream.onUnexpected(type);
    return true;
  }
  // A request still on a worker: nothing to abort (its answer is small), nothing to route.
  return pending_.contains(frame.stream);
}

}  // namespace hutch::agent

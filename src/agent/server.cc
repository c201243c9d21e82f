#include "agent/server.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "agent/exec/spawn.h"
#include "agent/exec/spawn_spec.h"
#include "agent/exec/user_db.h"
#include "agent/log.h"
#include "proto/identity.h"
#include "proto/messages.h"
#include "proto/processes.h"
#include "proto/services.h"
#include "proto/tcp.h"

namespace hutch::agent {

using proto::Frame;
using proto::FrameType;

namespace {

std::string typeName(FrameType type) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", static_cast<unsigned>(type));
  return buf;
}

// Exactly one complete, valid kHello frame: what a host writes first on a new connection. A
// guest read never mixes two host writes on a virtio-serial port, so after a restore from a
// snapshot (or a reconnect the guest did not notice) the new host's kHello arrives as one read
// of its own, even when the decoder still holds the unfinished frame of the previous host.
bool isLoneHello(std::string_view bytes) {
  if (bytes.size() < proto::kHeaderSize || bytes.size() > proto::kHeaderSize + 4096) return false;
  proto::FrameDecoder decoder;
  decoder.feed(bytes);
  auto frame = decoder.next();
  if (!frame || !frame->has_value() || decoder.buffered() != 0) return false;
  return (*frame)->type == FrameType::kHello && (*frame)->stream == 0 &&
         proto::decodeMessage<proto::Hello>((*frame)->payload).has_value();
}

}  // namespace

Server::Server(EventLoop& loop, ChannelSource& source, ServerOptions options)
    : loop_(loop), source_(source), options_(std::move(options)) {
  if (!options_.exec_log_dir.empty()) {
    detached_ = std::make_unique<DetachedProcesses>(options_.exec_log_dir);
  }
  files_ = std::make_unique<FileService>(
      loop_, *this, FileServiceOptions{options_.passwd_path, options_.group_path});
}

Server::~Server() {
  if (parked_expiry_) loop_.cancelTimer(*parked_expiry_);
  closeAllStreams();
  if (channel_) loop_.remove(channel_.get());
}

Result<> Server::start() {
  return source_.start([this](UniqueFd fd) { onConnected(std::move(fd)); });
}

void Server::onConnected(UniqueFd fd) {
  channel_ = std::move(fd);
  decoder_ = proto::FrameDecoder();
  out_.clear();
  out_offset_ = 0;
  handshaken_ = false;
  channel_events_ = EPOLLIN;
  if (auto added = loop_.add(channel_.get(), channel_events_,
                             [this](uint32_t events) { onChannelEvents(events); });
      !added) {
    logError(added.error().describe());
    source_.release(std::move(channel_));
    return;
  }
  logInfo("Host connected over " + source_.describe());
}

void Server::disconnect(const std::string& why) {
  if (!channel_) return;
  logInfo("Host disconnected (" + why + ")");
  resetSession();
  loop_.remove(channel_.get());
  out_.clear();
  out_offset_ = 0;
  source_.release(std::move(channel_));
}

void Server::onChannelEvents(uint32_t events) {
  if (events & EPOLLOUT) flush();
  // A hangup is noticed by reading: buffered input comes first, then read() returns 0.
  if (channel_ && (events & (EPOLLIN | EPOLLHUP | EPOLLERR))) readChannel();
}

void Server::readChannel() {
  char buffer[64 * 1024];
  ssize_t n;
  do {
    n = ::read(channel_.get(), buffer, sizeof buffer);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    return disconnect(std::string("read failed: ") + std::strerror(errno));
  }
  if (n == 0) return disconnect("end of stream");

  if (decoder_.buffered() > 0 && isLoneHello(std::string_view(buffer, static_cast<size_t>(n)))) {
    logWarning("A new host said hello while " + std::to_string(decoder_.buffered()) +
               " bytes of an unfinished frame were waiting: dropping them");
    decoder_ = proto::FrameDecoder();
  }
  decoder_.feed(std::span<const char>(buffer, static_cast<size_t>(n)));
  while (channel_) {
    auto next = decoder_.next();
    if (!next) {
      connectionError(next.error());
      break;
    }
    if (!next->has_value()) break;
    handleFrame(**next);
  }
  updateInterest();
}

void Server::sendFrame(FrameType type, uint32_t stream, std::string_view payload) {
  if (!channel_) return;
  proto::encodeFrame(type, stream, payload, out_);
  scheduleFlush();
}

void Server::scheduleFlush() {
  if (flush_posted_) return;
  flush_posted_ = true;
  // One write per loop round for everything queued in it.
  loop_.post([this] {
    flush_posted_ = false;
    flush();
  });
}

void Server::flush() {
  while (channel_ && out_offset_ < out_.size()) {
    const ssize_t n = ::write(channel_.get(), out_.data() + out_offset_, out_.size() - out_offset_);
    if (n > 0) {
      out_offset_ += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return disconnect(std::string("write failed: ") + std::strerror(errno));
  }
  if (out_offset_ == out_.size()) {
    out_.clear();
    out_offset_ = 0;
  } else if (out_offset_ >= (1u << 20)) {
    out_.erase(0, out_offset_);
    out_offset_ = 0;
  }
  updateInterest();
}

void Server::updateInterest() {
  if (!channel_) return;
  const size_t pending = out_.size() - out_offset_;
  const uint32_t events = (pending < kPauseInputAt ? EPOLLIN : 0u) | (pending ? EPOLLOUT : 0u);
  if (events == channel_events_) return;
  if (auto modified = loop_.modify(channel_.get(), events); !modified) {
    logError(modified.error().describe());
    return;
  }
  channel_events_ = events;
}

void Server::sendError(uint32_t stream, const Error& error) {
  sendFrame(FrameType::kError, stream, proto::encodeMessage(proto::ErrorMessage::fromError(error)));
}

void Server::connectionError(const Error& error) {
  logWarning("Resetting the session: " + error.message());
  sendError(0, error);
  resetSession();
}

void Server::resetSession() {
  closeAllStreams();
  decoder_ = proto::FrameDecoder();
  handshaken_ = false;
}

void Server::finishFileWork() {
  files_->shutdown();
}

void Server::closeAllStreams() {
  for (auto& [id, stream] : streams_) {
    // A process whose host went away goes on as a detached one (docs/protocol.md): a restored
    // snapshot, a resumed box and a restarted hutchd keep what ran in the box.
    if (!detached_ || stream->finished() || stream->exited()) continue;
    auto adopted =
        detached_->adopt(stream->pid(), stream->argv(), stream->user(), stream->startedNs());
    if (!adopted) {
      logWarning("Process " + std::to_string(stream->pid()) +
                 " ends with its session: " + adopted.error().describe());
      continue;
    }
    logInfo("Process " + std::to_string(stream->pid()) + " (stream " + std::to_string(id) +
            ") goes on without its host as detached process " + adopted->info.id);
    stream->orphan(std::move(adopted->log));
    orphans_.push_back(std::move(stream));
  }
  streams_.clear();
  tcp_streams_.clear();
  files_->closeAll();
  for (auto& [id, timer] : pending_requests_) loop_.cancelTimer(timer);
  pending_requests_.clear();
}

void Server::streamFinished(uint32_t stream) {
  loop_.post([this, stream] {
    if (auto it = streams_.find(stream); it != streams_.end() && it->second->finished()) {
      streams_.erase(it);
    }
    if (auto it = tcp_streams_.find(stream); it != tcp_streams_.end() && it->second->finished()) {
      tcp_streams_.erase(it);
    }
    files_->reap(stream);
  });
}

void Server::onChildExited(pid_t pid, int wait_status) {
  for (auto& [id, stream] : streams_) {
    if (stream->pid() == pid) {
      stream->onExited(wait_status);
      return;
    }
  }
  std::erase_if(orphans_, [](const auto& stream) { return stream->finished(); });
  for (auto& stream : orphans_) {
    if (stream->pid() == pid && !stream->exited()) {
      stream->onExited(wait_status);
      break;
    }
  }
  if (detached_) detached_->onExited(pid, wait_status);
}

void Server::handleHello(const Frame& frame) {
  auto hello = proto::decodeMessage<proto::Hello>(frame.payload);
  if (!hello) return connectionError(hello.error());
  if (hello->version != proto::kProtocolVersion) {
    closeAllStreams();
    handshaken_ = false;
    return sendError(
        0, Error(Errc::kUnsupported, "Protocol version " + std::to_string(hello->version) +
                                         " is not supported; this agent speaks version " +
                                         std::to_string(proto::kProtocolVersion)));
  }
  // A kHello always starts a new session (the framing is intact, so the decoder is kept); a
  // resent duplicate arrives before the host opens any stream, so this costs nothing.
  closeAllStreams();
  handshaken_ = true;
  expireParkedLater();
  proto::HelloAck ack{proto::kProtocolVersion, options_.agent_version, capabilities()};
  sendFrame(FrameType::kHelloAck, 0, proto::encodeMessage(ack));
}

std::vector<std::string> Server::capabilities() const {
  std::vector<std::string> names = {"exec", "signal", "window", "poweroff", "tty"};
  if (options_.system) names.emplace_back("identity");
  if (detached_) names.emplace_back("detach");
  names.emplace_back("tcp");
  names.emplace_back("park");
  if (options_.services) names.emplace_back("services");
  names.emplace_back("files");
  names.emplace_back("watch");
  return names;
}

bool Server::openStream(const Frame& frame) {
  const uint32_t id = frame.stream;
  if (id == 0) {
    connectionError(Error(Errc::kProtocol, "Frame type " + typeName(frame.type) + " on stream 0"));
    return false;
  }
  if (auto it = streams_.find(id); it != streams_.end()) {
    if (it->second->finished()) {
      streams_.erase(it);
    } else {
      sendError(id,
                Error(Errc::kAlreadyExists, "Stream " + std::to_string(id) + " is already open"));
      return false;
    }
  }
  if (auto it = tcp_streams_.find(id); it != tcp_streams_.end() && it->second->finished()) {
    tcp_streams_.erase(it);
  }
  if (pending_requests_.contains(id) || tcp_streams_.contains(id) || files_->isOpen(id)) {
    sendError(id, Error(Errc::kAlreadyExists, "Stream " + std::to_string(id) + " is already open"));
    return false;
  }
  return true;
}

void Server::handleExec(const Frame& frame) {
  const uint32_t id = frame.stream;
  if (!openStream(frame)) return;
  auto request = proto::decodeMessage<proto::ExecRequest>(frame.payload);
  if (!request) return sendError(id, request.error());
  if (request->detach) return handleDetachedExec(id, *request);
  auto spec = makeSpawnSpec(*request, UserDb::load(options_.passwd_path, options_.group_path));
  if (!spec) return sendError(id, spec.error());
  auto process = spawnProcess(*spec);
  if (!process) return sendError(id, process.error());

  const pid_t pid = process->pid;
  sendFrame(FrameType::kStarted, id, proto::encodeMessage(proto::Started{pid}));
  auto stream = std::make_unique<ExecStream>(loop_, *this, id, std::move(*process));
  stream->describe(request->argv, request->user, realtimeNs());
  stream->start();
  streams_[id] = std::move(stream);
}

void Server::handleDetachedExec(uint32_t id, const proto::ExecRequest& request) {
  if (!detached_) {
    return sendError(id, Error(Errc::kUnsupported,
                               "This agent does not run detached processes (a --listen agent "
                               "needs --root)"));
  }
  auto spec = makeSpawnSpec(request, UserDb::load(options_.passwd_path, options_.group_path));
  if (!spec) return sendError(id, spec.error());
  auto info = detached_->start(*spec, request);
  if (!info) return sendError(id, info.error());
  // The last frame of the stream: the process is on its own from now on.
  proto::Started started{info->pid, info->id, info->log};
  sendFrame(FrameType::kStarted, id, proto::encodeMessage(started));
}

void Server::handleProcesses(const Frame& frame) {
  const uint32_t id = frame.stream;
  if (!openStream(frame)) return;
  if (!detached_) return sendError(id, Error(Errc::kUnsupported, "No detached processes here"));
  sendFrame(FrameType::kResult, id, proto::encodeMessage(detached_->list()));
}

void Server::handleSignalProcess(const Frame& frame) {
  const uint32_t id = frame.stream;
  if (!openStream(frame)) return;
  if (!detached_) return sendError(id, Error(Errc::kUnsupported, "No detached processes here"));
  auto request = proto::decodeMessage<proto::SignalProcess>(frame.payload);
  if (!request) return sendError(id, request.error());
  if (auto signalled = detached_->signal(*request); !signalled) {
    return sendError(id, signalled.error());
  }
  sendFrame(FrameType::kResult, id, "{}");
}

void Server::handleServices(const Frame& frame) {
  const uint32_t id = frame.stream;
  if (!openStream(frame)) return;
  if (!options_.services) return sendError(id, Error(Errc::kUnsupported, "No services here"));
  sendFrame(FrameType::kResult, id, proto::encodeMessage(options_.services->status()));
}

void Server::handleConnect(const Frame& frame) {
  const uint32_t id = frame.stream;
  if (!openStream(frame)) return;
  auto request = proto::decodeMessage<proto::ConnectRequest>(frame.payload);
  if (!request) return sendError(id, request.error());
  auto stream = std::make_unique<TcpStream>(loop_, *this, id);
  if (auto connecting = stream->connect(*request); !connecting) {
    return sendError(id, connecting.error());
  }
  tcp_streams_[id] = std::move(stream);
}

void Server::handlePark(const Frame& frame) {
  const uint32_t id = frame.stream;
  if (!openStream(frame)) return;
  proto::ParkResult result;
  for (auto it = tcp_streams_.begin(); it != tcp_streams_.end();) {
    if (it->second->finished()) {
      ++it;
      continue;
    }
    if (parked_tcp_.contains(it->first)) {
      logWarning("TCP stream " + std::to_string(it->first) +
                 " parked again before an earlier one of that id was resumed: resetting that one");
    }
    it->second->park();
    result.streams.push_back(it->first);
    parked_tcp_[it->first] = std::move(it->second);
    it = tcp_streams_.erase(it);
  }
  logInfo("Parked " + std::to_string(result.streams.size()) + " TCP stream(s)");
  sendFrame(FrameType::kResult, id, proto::encodeMessage(result));
}

void Server::handleResume(const Frame& frame) {
  const uint32_t id = frame.stream;
  if (!openStream(frame)) return;
  auto request = proto::decodeMessage<proto::ResumeRequest>(frame.payload);
  if (!request) return sendError(id, request.error());
  auto it = parked_tcp_.find(request->stream);
  if (it == parked_tcp_.end()) {
    return sendError(
        id, Error(Errc::kNotFound, "No parked TCP stream " + std::to_string(request->stream) +
                                       " (it was never parked, was resumed already, or was reset "
                                       "after " +
                                       std::to_string(kParkedStreamTtl.count()) +
                                       " s without a host resuming it)"));
  }
  std::unique_ptr<TcpStream> stream = std::move(it->second);
  parked_tcp_.erase(it);
  sendFrame(FrameType::kConnected, id, "{}");
  TcpStream& resumed = *stream;
  tcp_streams_[id] = std::move(stream);
  resumed.resume(id);  // sends what it held, then goes on
}

void Server::expireParkedLater() {
  // From the newest kHello: an earlier host's timer must not cut the new host's time short.
  if (parked_expiry_) loop_.cancelTimer(*parked_expiry_);
  parked_expiry_.reset();
  if (parked_tcp_.empty()) return;
  parked_expiry_ = loop_.addTimer(kParkedStreamTtl, [this] {
    parked_expiry_.reset();
    if (parked_tcp_.empty()) return;
    logInfo("Resetting " + std::to_string(parked_tcp_.size()) +
            " parked TCP stream(s) no host resumed");
    parked_tcp_.clear();
  });
}

void Server::routeTcpFrame(const Frame& frame) {
  // A stream that is not open is ignored: these frames can cross its last frame in flight.
  auto it = tcp_streams_.find(frame.stream);
  if (it == tcp_streams_.end() || it->second->finished()) return;
  TcpStream& stream = *it->second;
  if (frame.type == FrameType::kData) stream.onData(frame.payload);
  if (frame.type == FrameType::kEof) stream.onEof();
  if (frame.type == FrameType::kWindow) stream.onWindow(frame.payload);
  if (frame.type == FrameType::kClose) stream.onClose();
}

void Server::handleIdentity(const Frame& frame) {
  const uint32_t id = frame.stream;
  if (!openStream(frame)) return;
  if (!options_.system) {
    return sendError(id, Error(Errc::kUnsupported,
                               "This agent does not apply identities (a --listen agent needs "
                               "--root)"));
  }
  auto identity = proto::decodeMessage<proto::Identity>(frame.payload);
  if (!identity) return sendError(id, identity.error());
  auto applied = applyIdentity(*identity, *options_.system, options_.identity_files);
  if (identity->grow_root) {
    std::optional<Error> earlier;
    if (!applied) earlier = applied.error();
    return growRootThenAnswer(id, std::move(earlier), EventLoop::Clock::now() + kGrowRootWait);
  }
  if (!applied) return sendError(id, applied.error());
  logInfo("Applied a new identity" +
          (identity->hostname.empty() ? std::string() : " (hostname " + identity->hostname + ")"));
  sendFrame(FrameType::kResult, id, proto::encodeMessage(proto::IdentityResult{}));
}

void Server::growRootThenAnswer(uint32_t id, std::optional<Error> earlier,
                                EventLoop::Clock::time_point deadline) {
  pending_requests_.erase(id);
  auto grown = options_.system->growRoot();
  if (grown && !grown->grew() && EventLoop::Clock::now() < deadline) {
    // The host resized the disk just before asking; the guest learns of it from a config
    // interrupt a moment later.
    pending_requests_[id] = loop_.addTimer(kGrowRootPoll, [this, id, earlier, deadline] {
      growRootThenAnswer(id, earlier, deadline);
    });
    return;
  }
  if (!grown) {
    Error error = grown.error();
    if (earlier) error = Error(earlier->code(), earlier->describe() + "; " + error.describe());
    return sendError(id, error);
  }
  if (earlier) return sendError(id, *earlier);
  if (grown->grew()) {
    logInfo("Applied a new identity; grew the root filesystem to " +
            std::to_string(grown->blocks_after) + " blocks");
  } else {
    logWarning("Applied a new identity; the root disk did not grow beyond its filesystem");
  }
  sendFrame(FrameType::kResult, id,
            proto::encodeMessage(proto::IdentityResult{grown->bytes(), grown->grew()}));
}

void Server::handleFrame(const Frame& frame) {
  switch (frame.type) {
    case FrameType::kPing: return sendFrame(FrameType::kPong, frame.stream, frame.payload);
    case FrameType::kHello: return handleHello(frame);
    case FrameType::kPong: return;
    case FrameType::kError: {
      auto error = proto::decodeMessage<proto::ErrorMessage>(frame.payload);
      logWarning("Host reported an error on stream " + std::to_string(frame.stream) + ": " +
                 (error ? error->code + ": " + error->message : std::string("(malformed)")));
      return;
    }
    default: break;
  }
  if (!handshaken_) {
    // Answered, otherwise ignored: the framing is intact, so there is nothing to reset.
    return sendError(0, Error(Errc::kProtocol, "Frame type " + typeName(frame.type) +
                                                   " before kHello; send kHello "
                                                   "first"));
  }
  switch (frame.type) {
    case FrameType::kExec: return handleExec(frame);
    case FrameType::kIdentity: return handleIdentity(frame);
    case FrameType::kProcesses: return handleProcesses(frame);
    case FrameType::kSignalProcess: return handleSignalProcess(frame);
    case FrameType::kServices: return handleServices(frame);
    case FrameType::kConnect: return handleConnect(frame);
    case FrameType::kPark: return handlePark(frame);
    case FrameType::kResume: return handleResume(frame);
    case FrameType::kFileStat:
    case FrameType::kFileList:
    case FrameType::kFileMkdir:
    case FrameType::kFileMove:
    case FrameType::kFileRemove:
    case FrameType::kFileRead:
    case FrameType::kFileWrite:
    case FrameType::kWatch:
      if (!openStream(frame)) return;
      return files_->handleRequest(frame);
    case FrameType::kData:
    case FrameType::kEof:
    case FrameType::kClose:
      if (files_->routeStreamFrame(frame)) return;
      return routeTcpFrame(frame);
    case FrameType::kStdin:
    case FrameType::kStdinEof:
    case FrameType::kSignal:
    case FrameType::kWindow:
    case FrameType::kResize: {
      if (frame.type == FrameType::kWindow && tcp_streams_.contains(frame.stream)) {
        return routeTcpFrame(frame);
      }
      if (frame.type == FrameType::kWindow && files_->routeStreamFrame(frame)) return;
      // A stream that is not open is ignored: these frames can cross its last frame in flight.
      auto it = streams_.find(frame.stream);
      if (it == streams_.end() || it->second->finished()) return;
      ExecStream& stream = *it->second;
      if (frame.type == FrameType::kStdin) stream.onStdin(frame.payload);
      if (frame.type == FrameType::kStdinEof) stream.onStdinEof();
      if (frame.type == FrameType::kSignal) stream.onSignal(frame.payload);
      if (frame.type == FrameType::kWindow) stream.onWindow(frame.payload);
      if (frame.type == FrameType::kResize) stream.onResize(frame.payload);
      return;
    }
    case FrameType::kPoweroff:
      logInfo("Power-off requested by the host");
      if (options_.on_poweroff) options_.on_poweroff();
      return;
    default:
      return connectionError(
          Error(Errc::kProtocol, "Frame type " + typeName(frame.type) + " is not sent by a host"));
  }
}

}  // namespace hutch::agent

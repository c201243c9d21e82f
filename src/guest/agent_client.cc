#include "guest/agent_client.h"

#include <time.h>

#include <algorithm>
#include <set>
#include <vector>

#include "proto/identity.h"
#include "proto/tcp.h"

namespace hutch::guest {

namespace asio = boost::asio;
using proto::Frame;
using proto::FrameType;

namespace {

// A request stream: one kResult or kError answers it.
class PendingRequest : public StreamHandler {
 public:
  explicit PendingRequest(asio::any_io_executor executor) : changed(std::move(executor)) {}

  void onStreamFrame(const Frame& frame) override {
    if (answer) return;
    if (frame.type == FrameType::kResult) {
      answer = frame.payload;
    } else if (frame.type == FrameType::kError) {
      auto message = proto::decodeMessage<proto::ErrorMessage>(frame.payload);
      answer = fail(message ? message->toError()
                            : Error(Errc::kProtocol, "The agent sent a malformed error"));
    } else {
      answer = fail(Errc::kProtocol, "The agent answered a request with frame type " +
                                         std::to_string(static_cast<int>(frame.type)));
    }
    changed.notify();
  }
  void onStreamClosed(const Error& error) override {
    if (answer) return;
    answer = fail(
        error.code() == Errc::kCancelled
            ? error
            : Error(Errc::kUnavailable, "Lost the connection to the agent: " + error.message()));
    changed.notify();
  }
  bool streamFinished() const override { return answer.has_value(); }

  std::optional<Result<std::string>> answer;
  event::AsyncEvent changed;
};

int64_t realtimeNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

std::shared_ptr<AgentClient> AgentClient::create(ByteChannel channel, AgentClientOptions options) {
  std::shared_ptr<AgentClient> client(new AgentClient(std::move(channel), std::move(options)));
  // The loops hold the client alive until the connection closes.
  asio::co_spawn(
      client->executor_, [client]() { return client->readLoop(); }, asio::detached);
  asio::co_spawn(
      client->executor_, [client]() { return client->writeLoop(); }, asio::detached);
  return client;
}

AgentClient::AgentClient(ByteChannel channel, AgentClientOptions options)
    : executor_(channel.get_executor()),
      channel_(std::move(channel)),
      options_(std::move(options)),
      changed_(executor_),
      output_ready_(executor_),
      drained_(executor_) {}

AgentClient::~AgentClient() = default;

Error AgentClient::closedError() const {
  return close_reason_ ? *close_reason_
                       : Error(Errc::kUnavailable, "The connection to the agent is closed");
}

void AgentClient::send(FrameType type, uint32_t stream, std::string_view payload) {
  if (!open_) return;
  if (queued() + proto::kHeaderSize + payload.size() > kMaxQueued) {
    // Only frames the host sends without waiting get here (data senders wait in writable()):
    // answers to the agent's own pings, grants, signals. An agent that asks for them and does
    // not read them would otherwise grow this queue without bound.
    shutdown(Error(Errc::kUnavailable, "The agent does not read what the host sends it (" +
                                           std::to_string(queued() >> 20) +
                                           " MiB queued for it); the connection is closed"));
    return;
  }
  proto::encodeFrame(type, stream, payload, out_);
  output_ready_.notify();
}

asio::awaitable<void> AgentClient::writable() {
  auto self = shared_from_this();
  while (open_ && queued() >= kWriteHighWater) co_await drained_.wait();
}

asio::awaitable<Result<>> AgentClient::sendWithCredit(FrameType type, uint32_t stream,
                                                      std::string_view bytes, size_t max_frame,
                                                      uint64_t& credit, event::AsyncEvent& changed,
                                                      const std::function<Result<>()>& usable,
                                                      uint64_t* sent) {
  auto self = shared_from_this();
  size_t offset = 0;
  while (offset < bytes.size()) {
    if (auto can = usable(); !can) co_return can;
    if (credit == 0) {
      co_await changed.wait();
      continue;
    }
    if (queued() >= kWriteHighWater) {
      co_await writable();
      continue;
    }
    const size_t chunk =
        static_cast<size_t>(std::min<uint64_t>({bytes.size() - offset, credit, max_frame}));
    send(type, stream, bytes.substr(offset, chunk));
    credit -= chunk;
    if (sent != nullptr) *sent += chunk;
    offset += chunk;
  }
  co_return ok();
}

void AgentClient::forget(uint32_t stream) {
  streams_.erase(stream);
}

uint32_t AgentClient::allocateStream() {
  const uint32_t stream = next_stream_++;
  if (next_stream_ == 0) next_stream_ = 1;
  return stream;
}

asio::awaitable<void> AgentClient::writeLoop() {
  std::string writing;
  while (open_) {
    if (out_.empty()) {
      co_await output_ready_.wait();
      continue;
    }
    writing.clear();
    writing.swap(out_);
    in_flight_ = writing.size();
    boost::system::error_code ec;
    co_await asio::async_write(channel_, asio::buffer(writing),
                               asio::redirect_error(asio::use_awaitable, ec));
    in_flight_ = 0;
    drained_.notify();
    if (ec) {
      if (open_)
        shutdown(Error(Errc::kUnavailable, "Writing to the agent failed: " + ec.message()));
      co_return;
    }
  }
}

asio::awaitable<void> AgentClient::readLoop() {
  std::vector<char> buffer(size_t{64} * 1024);
  while (open_) {
    boost::system::error_code ec;
    const size_t n = co_await channel_.async_read_some(
        asio::buffer(buffer), asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      if (open_) {
        shutdown(Error(Errc::kUnavailable, ec == asio::error::eof
                                               ? std::string("The agent closed the connection")
                                               : "Reading from the agent failed: " + ec.message()));
      }
      co_return;
    }
    std::string_view data(buffer.data(), n);
    std::optional<HandshakeScanner::Found> found;
    if (!hello_ack_) {
      // Before the handshake only the answer to kHello counts; it may follow leftovers of an
      // earlier session, so it is searched for rather than decoded in place.
      found = scanner_.feed(data);
      while (found && open_) {
        routeConnectionFrame(found->frame);
        if (hello_ack_) break;
        const std::string after = std::move(found->rest);
        found = scanner_.feed(after);
      }
      if (!hello_ack_ || !open_) continue;
      data = found->rest;
    }
    decoder_.feed(data);
    while (open_) {
      auto next = decoder_.next();
      if (!next) {
        shutdown(
            Error(Errc::kUnavailable, "The agent broke the protocol: " + next.error().message()));
        co_return;
      }
      if (!next->has_value()) break;
      route(**next);
    }
  }
}

void AgentClient::route(const Frame& frame) {
  if (frame.stream == 0) return routeConnectionFrame(frame);
  // A stream we gave up on (or never opened: leftovers of an earlier host's session after a
  // restore); its frames are dropped.
  auto it = streams_.find(frame.stream);
  if (it == streams_.end()) return;
  auto handler = it->second.lock();
  if (!handler) {
    streams_.erase(it);
    return;
  }
  handler->onStreamFrame(frame);
  if (handler->streamFinished()) streams_.erase(frame.stream);
}

void AgentClient::routeConnectionFrame(const Frame& frame) {
  switch (frame.type) {
    case FrameType::kHelloAck: {
      if (hello_ack_) return;  // an answer to a resent kHello: harmless
      auto ack = proto::decodeMessage<proto::HelloAck>(frame.payload);
      if (!ack) {
        hello_error_ = ack.error();
      } else if (ack->version != proto::kProtocolVersion) {
        hello_error_ = Error(Errc::kUnsupported, "The agent speaks protocol version " +
                                                     std::to_string(ack->version) + ", not " +
                                                     std::to_string(proto::kProtocolVersion));
      } else {
        hello_ack_ = std::move(*ack);
      }
      changed_.notify();
      return;
    }
    case FrameType::kPong: {
      const uint64_t seq = std::strtoull(frame.payload.c_str(), nullptr, 10);
      pongs_received_ = std::max(pongs_received_, seq);
      changed_.notify();
      return;
    }
    case FrameType::kPing: return send(FrameType::kPong, 0, frame.payload);
    case FrameType::kError: {
      auto message = proto::decodeMessage<proto::ErrorMessage>(frame.payload);
      Error error =
          message ? message->toError() : Error(Errc::kProtocol, "The agent sent a malformed error");
      if (!hello_ack_) {
        hello_error_ = error;
        changed_.notify();
        return;
      }
      // After the handshake an error on stream 0 means the agent reset the session: every
      // stream is gone on its side.
      shutdown(Error(Errc::kUnavailable,
                     "The agent reset the session: " + std::string(errcName(error.code())) + ": " +
                         error.message()));
      return;
    }
    default:
      shutdown(Error(Errc::kUnavailable, "The agent sent an unexpected frame on stream 0"));
      return;
  }
}

void AgentClient::shutdown(const Error& reason) {
  if (!open_) return;
  open_ = false;
  close_reason_ = reason;
  boost::system::error_code ec;
  channel_.shutdown(asio::socket_base::shutdown_both, ec);
  channel_.close(ec);
  out_.clear();
  // Copy first: a session's handler may forget() itself.
  auto streams = std::move(streams_);
  streams_.clear();
  for (auto& [id, weak] : streams) {
    if (auto handler = weak.lock()) handler->onStreamClosed(reason);
  }
  changed_.notify();
  output_ready_.notify();
  drained_.notify();
}

void AgentClient::close() {
  shutdown(Error(Errc::kCancelled, "The agent client was closed"));
}

asio::awaitable<Error> AgentClient::closed() {
  auto self = shared_from_this();
  while (open_) co_await changed_.wait();
  co_return closedError();
}

asio::awaitable<Result<proto::HelloAck>> AgentClient::handshake(std::chrono::milliseconds timeout) {
  auto self = shared_from_this();
  const auto deadline = Clock::now() + timeout;
  hello_error_.reset();
  while (true) {
    if (hello_ack_) co_return *hello_ack_;
    if (hello_error_) co_return fail(*hello_error_);
    if (!open_) co_return fail(closedError());
    const auto now = Clock::now();
    if (now >= deadline) {
      co_return fail(Errc::kTimeout, "The agent did not answer within " +
                                         std::to_string(timeout.count()) +
                                         " ms (the guest may not have booted)");
    }
    send(FrameType::kHello, 0,
         proto::encodeMessage(proto::Hello{proto::kProtocolVersion, options_.host_name}));
    const auto resend_at = std::min(deadline, now + options_.hello_interval);
    while (!hello_ack_ && !hello_error_ && open_ && Clock::now() < resend_at) {
      co_await changed_.waitUntil(resend_at);
    }
  }
}

asio::awaitable<Result<std::shared_ptr<ExecSession>>> AgentClient::exec(
    proto::ExecRequest request) {
  auto self = shared_from_this();
  if (!open_) co_return fail(closedError());
  if (!hello_ack_) co_return fail(Errc::kFailedPrecondition, "Call handshake() before exec()");
  if (auto valid = proto::validate(request); !valid) co_return fail(valid.error());
  if ((request.tty || request.login_shell) && !hello_ack_->hasCapability("tty")) {
    co_return fail(Errc::kUnsupported,
                   "This box's agent cannot run commands on a terminal (no \"tty\" capability); "
                   "rebuild its image with a newer hutch-agent, or run without a tty");
  }

  if (request.detach && !hello_ack_->hasCapability("detach")) {
    co_return fail(Errc::kUnsupported,
                   "This box's agent cannot run detached processes (no \"detach\" capability); "
                   "rebuild its image with a newer hutch-agent");
  }

  const uint32_t stream = allocateStream();
  std::shared_ptr<ExecSession> session(
      new ExecSession(self, stream, request.pipe_stdin, request.tty, request.detach));
  streams_[stream] = session;
  send(FrameType::kExec, stream, proto::encodeMessage(request));
  const auto deadline = Clock::now() + options_.exec_start_timeout;
  while (!session->started_ && !session->start_error_ && Clock::now() < deadline) {
    co_await session->changed_.waitUntil(deadline);
  }
  if (session->start_error_) co_return fail(*session->start_error_);
  if (!session->started_) {
    // Dropping the session forgets the stream and kills the process should it start late.
    co_return fail(Errc::kTimeout,
                   "The agent did not start the command within " +
                       std::to_string(options_.exec_start_timeout.count()) +
                       " ms (no kStarted and no error: the guest may be hung or misbehaving)");
  }
  co_return session;
}

asio::awaitable<Result<>> AgentClient::ping(std::chrono::milliseconds timeout) {
  auto self = shared_from_this();
  if (!open_) co_return fail(closedError());
  if (!hello_ack_) co_return fail(Errc::kFailedPrecondition, "Call handshake() before ping()");
  const uint64_t seq = ++pings_sent_;
  send(FrameType::kPing, 0, std::to_string(seq));
  const auto deadline = Clock::now() + timeout;
  while (open_ && pongs_received_ < seq && Clock::now() < deadline) {
    co_await changed_.waitUntil(deadline);
  }
  if (pongs_received_ >= seq) co_return ok();
  if (!open_) co_return fail(closedError());
  co_return fail(Errc::kTimeout, "The agent did not answer a ping");
}

asio::awaitable<Result<>> AgentClient::poweroff(std::chrono::milliseconds timeout) {
  auto self = shared_from_this();
  if (!open_) co_return fail(closedError());
  if (!hello_ack_) co_return fail(Errc::kFailedPrecondition, "Call handshake() before poweroff()");
  send(FrameType::kPoweroff, 0, {});
  const auto deadline = Clock::now() + timeout;
  while (open_ && Clock::now() < deadline) co_await changed_.waitUntil(deadline);
  if (open_) co_return fail(Errc::kTimeout, "The box did not power off in time");
  co_return ok();
}

}  // namespace hutch::guest

namespace hutch::guest {

asio::awaitable<Result<std::string>> AgentClient::request(FrameType type, std::string payload,
                                                          std::chrono::milliseconds timeout) {
  auto self = shared_from_this();
  if (!open_) co_return fail(closedError());
  if (!hello_ack_) co_return fail(Errc::kFailedPrecondition, "Call handshake() first");
  const uint32_t stream = allocateStream();
  auto pending = std::make_shared<PendingRequest>(executor_);
  streams_[stream] = pending;
  send(type, stream, payload);
  const auto deadline = Clock::now() + timeout;
  while (!pending->answer && Clock::now() < deadline) co_await pending->changed.waitUntil(deadline);
  if (!pending->answer) {
    forget(stream);  // a late answer is dropped
    co_return fail(Errc::kTimeout,
                   "The agent did not answer within " + std::to_string(timeout.count()) + " ms");
  }
  co_return std::move(*pending->answer);
}

asio::awaitable<Result<proto::IdentityResult>> AgentClient::applyIdentity(
    const Identity& identity, std::chrono::milliseconds timeout) {
  auto self = shared_from_this();
  if (!open_) co_return fail(closedError());
  if (!hello_ack_) co_return fail(Errc::kFailedPrecondition, "Call handshake() first");
  if (!hello_ack_->hasCapability("identity")) {
    co_return fail(Errc::kUnsupported,
                   "This box's agent cannot take a new identity (no \"identity\" capability); "
                   "rebuild its image with a newer hutch-agent");
  }
  proto::Identity message;
  message.hostname = identity.hostname;
  message.machine_id = identity.machine_id;
  message.seed = identity.seed;
  message.grow_root = identity.grow_root;
  if (identity.set_clock) message.time_ns = realtimeNs();
  if (auto valid = proto::validate(message); !valid) co_return fail(valid.error());
  std::string payload = proto::encodeMessage(message);
  const auto answer = co_await request(FrameType::kIdentity, payload, timeout);
  if (!answer) co_return fail(answer.error().withContext("Applying the box's identity"));
  co_return proto::decodeMessage<proto::IdentityResult>(*answer);
}

}  // namespace hutch::guest

namespace hutch::guest {

asio::awaitable<Result<proto::ProcessList>> AgentClient::listProcesses(
    std::chrono::milliseconds timeout) {
  auto self = shared_from_this();
  if (hello_ack_ && !hello_ack_->hasCapability("detach")) {
    co_return fail(Errc::kUnsupported, "This box's agent has no detached processes");
  }
  const std::string payload = "{}";
  auto answer = co_await request(FrameType::kProcesses, payload, timeout);
  if (!answer) co_return fail(answer.error());
  co_return proto::decodeMessage<proto::ProcessList>(*answer);
}

asio::awaitable<Result<>> AgentClient::signalProcess(std::string id, int signo,
                                                     std::chrono::milliseconds timeout) {
  auto self = shared_from_this();
  if (signo < 1 || signo > 64) {
    co_return fail(Errc::kInvalidArgument, "Signal " + std::to_string(signo) + " is not 1-64");
  }
  if (hello_ack_ && !hello_ack_->hasCapability("detach")) {
    co_return fail(Errc::kUnsupported, "This box's agent has no detached processes");
  }
  const std::string payload = proto::encodeMessage(proto::SignalProcess{std::move(id), signo});
  auto answer = co_await request(FrameType::kSignalProcess, payload, timeout);
  if (!answer) co_return fail(answer.error());
  co_return ok();
}

}  // namespace hutch::guest

namespace hutch::guest {

asio::awaitable<Result<std::shared_ptr<TcpStream>>> AgentClient::connect(
    uint16_t port, std::string address, std::chrono::milliseconds timeout) {
  auto self = shared_from_this();
  if (!open_) co_return fail(closedError());
  if (!hello_ack_) co_return fail(Errc::kFailedPrecondition, "Call handshake() before connect()");
  if (!hello_ack_->hasCapability("tcp")) {
    co_return fail(Errc::kUnsupported,
                   "This box's agent cannot forward ports (no \"tcp\" capability); rebuild its "
                   "image with a newer hutch-agent");
  }
  const proto::ConnectRequest request{port, std::move(address)};
  if (auto valid = proto::validate(request); !valid) co_return fail(valid.error());
  const uint32_t stream = allocateStream();
  std::shared_ptr<TcpStream> tcp(new TcpStream(self, stream));
  streams_[stream] = tcp;
  send(FrameType::kConnect, stream, proto::encodeMessage(request));
  // Connected: what happened since (data, end of file, even a reset) is for read() to report.
  if (co_await tcp->waitAnswered(Clock::now() + timeout)) co_return tcp;
  if (tcp->error_) co_return fail(*tcp->error_);
  tcp->close();
  co_return fail(Errc::kTimeout, "Connecting to port " + std::to_string(port) +
                                     " in the box took longer than " +
                                     std::to_string(timeout.count()) + " ms");
}

asio::awaitable<Result<std::vector<std::shared_ptr<TcpStream>>>> AgentClient::parkTcpStreams(
    std::chrono::milliseconds timeout) {
  auto self = shared_from_this();
  if (!open_) co_return fail(closedError());
  if (!hello_ack_) co_return fail(Errc::kFailedPrecondition, "Call handshake() first");
  if (!hello_ack_->hasCapability("park")) {
    co_return fail(Errc::kUnsupported,
                   "This box's agent cannot keep connections across a suspend (no \"park\" "
                   "capability); rebuild its image with a newer hutch-agent");
  }
  // Parked here first: from the kPark on, nothing more is sent on them.
  std::vector<std::shared_ptr<TcpStream>> parked;
  for (const auto& [id, weak] : streams_) {
    auto tcp = std::dynamic_pointer_cast<TcpStream>(weak.lock());
    if (!tcp || tcp->ended_) continue;
    tcp->park();
    parked.push_back(std::move(tcp));
  }
  const std::string payload = "{}";
  auto answer = co_await request(FrameType::kPark, payload, timeout);
  auto result = answer ? proto::decodeMessage<proto::ParkResult>(*answer)
                       : Result<proto::ParkResult>(fail(answer.error()));
  if (!result) {
    for (const auto& tcp : parked) tcp->close();
    co_return fail(result.error().withContext("Parking the box's TCP connections"));
  }
  const std::set<uint32_t> ids(result->streams.begin(), result->streams.end());
  std::erase_if(parked, [&ids](const std::shared_ptr<TcpStream>& tcp) {
    if (tcp->ended_) return true;
    if (ids.contains(tcp->stream_)) return false;
    tcp->close();  // not parked by the agent, yet not ended: it cannot go on
    return true;
  });
  co_return parked;
}

asio::awaitable<Result<>> AgentClient::resumeTcpStream(std::shared_ptr<TcpStream> stream,
                                                       std::chrono::milliseconds timeout) {
  auto self = shared_from_this();
  auto failed = [&stream](Error error) -> Result<> {
    stream->close();
    return fail(std::move(error));
  };
  if (!stream->parked_ || stream->ended_) {
    co_return fail(Errc::kFailedPrecondition, "The connection is not parked");
  }
  if (!open_) co_return failed(closedError());
  if (!hello_ack_) co_return failed(Error(Errc::kFailedPrecondition, "Call handshake() first"));
  if (!hello_ack_->hasCapability("park")) {
    co_return failed(Error(Errc::kUnsupported, "This box's agent cannot resume connections"));
  }
  const uint32_t parked_id = stream->stream_;
  stream->client_->forget(parked_id);
  const uint32_t id = allocateStream();
  stream->client_ = self;
  stream->stream_ = id;
  stream->connected_ = false;
  streams_[id] = stream;
  send(FrameType::kResume, id, proto::encodeMessage(proto::ResumeRequest{parked_id}));
  if (co_await stream->waitAnswered(Clock::now() + timeout)) {
    stream->unpark();
    co_return ok();
  }
  if (stream->error_) co_return failed(*stream->error_);
  co_return failed(Error(Errc::kTimeout, "The agent did not resume the connection within " +
                                             std::to_string(timeout.count()) + " ms"));
}

}  // namespace hutch::guest

namespace hutch::guest {

asio::awaitable<Result<proto::ServiceList>> AgentClient::listServices(
    std::chrono::milliseconds timeout) {
  auto self = shared_from_this();
  if (hello_ack_ && !hello_ack_->hasCapability("services")) {
    co_return fail(Errc::kUnsupported, "This box's agent does not supervise services");
  }
  const std::string payload = "{}";
  auto answer = co_await request(FrameType::kServices, payload, timeout);
  if (!answer) co_return fail(answer.error());
  co_return proto::decodeMessage<proto::ServiceList>(*answer);
}

}  // namespace hutch::guest

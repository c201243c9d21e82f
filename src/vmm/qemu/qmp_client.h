// An asynchronous QMP (QEMU Machine Protocol) client over a unix socket.
//
// One reader coroutine owns the socket's input: it matches responses to commands by "id" and
// collects asynchronous events. Commands may be issued concurrently from several coroutines.
// Not thread-safe: use it from its executor's thread (or a strand).
#pragma once

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/result.h"

namespace hutch::vmm::qemu {

namespace asio = boost::asio;
using Json = nlohmann::json;

struct QmpEvent {
  std::string name;  // "STOP", "RESUME", "SHUTDOWN"...
  Json data;         // may be null
  uint64_t seq = 0;  // 1, 2, 3... in arrival order on this connection
};

class QmpClient : public std::enable_shared_from_this<QmpClient> {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kDefaultTimeout{30000};
  static constexpr size_t kMaxEventsKept = 256;

  // Connects to a QMP unix socket once (no retry) and negotiates capabilities.
  // A missing socket or refused connection is kUnavailable.
  static asio::awaitable<Result<std::shared_ptr<QmpClient>>> connect(
      std::filesystem::path socket_path, std::chrono::milliseconds timeout = kDefaultTimeout);

  // Takes an already connected socket (tests use a socketpair) and negotiates capabilities:
  // reads the greeting and sends qmp_capabilities.
  static asio::awaitable<Result<std::shared_ptr<QmpClient>>> handshake(
      asio::local::stream_protocol::socket socket,
      std::chrono::milliseconds timeout = kDefaultTimeout);

  ~QmpClient();
  QmpClient(const QmpClient&) = delete;
  QmpClient& operator=(const QmpClient&) = delete;

  // Runs a command and returns its "return" value. A QMP error answer becomes an Error
  // (CommandNotFound → kUnsupported, DeviceNotFound → kNotFound, others kFailedPrecondition)
  // whose message carries QEMU's description; a lost connection is kUnavailable; no answer
  // within `timeout` is kTimeout.
  asio::awaitable<Result<Json>> execute(std::string command, Json arguments = nullptr,
                                        std::chrono::milliseconds timeout = kDefaultTimeout);
  // Like execute(), sending `fd` with the command (SCM_RIGHTS), as "getfd" and "add-fd" expect.
  // The caller keeps its descriptor; QEMU gets its own copy.
  asio::awaitable<Result<Json>> executeWithFd(std::string command, Json arguments, int fd,
                                              std::chrono::milliseconds timeout = kDefaultTimeout);

  // Events: kept (the last kMaxEventsKept) and passed to the handler as they arrive.
  void setEventHandler(std::function<void(const QmpEvent&)> handler);
  std::deque<QmpEvent> events() const { return events_; }
  // Waits for an event named `name` that arrives after `after_seq` (0: any kept one).
  asio::awaitable<Result<QmpEvent>> waitEvent(std::string name, uint64_t after_seq,
                                              std::chrono::milliseconds timeout);
  uint64_t lastEventSeq() const { return event_seq_; }

  // The greeting's "QMP" object (version, capabilities).
  const Json& greeting() const { return greeting_; }
  // "7.2.22" from the greeting.
  std::string qemuVersion() const;

  bool connected() const { return connected_; }
  // Closes the socket; pending and later commands fail with kUnavailable.
  void close();

 private:
  struct Pending;
  explicit QmpClient(asio::local::stream_protocol::socket socket);

  asio::awaitable<Result<>> negotiate(std::chrono::milliseconds timeout);
  asio::awaitable<void> readLoop();
  asio::awaitable<Result<Json>> send(std::string command, Json arguments, int fd,
                                     std::chrono::milliseconds timeout);
  asio::awaitable<void> flushWrites();
  // Writes the head of `text` with `fd` attached; returns the bytes written.
  asio::awaitable<Result<size_t>> sendWithFd(const std::string& text, int fd);
  void dispatch(const Json& message);
  void connectionLost(const std::string& why);
  void wakeWaiters();

  asio::local::stream_protocol::socket socket_;
  std::string read_buffer_;
  struct Outgoing {
    std::string text;
    int fd = -1;  // sent with the first byte; owned by the caller until execute returns
  };
  std::deque<Outgoing> outbox_;
  bool writing_ = false;
  bool connected_ = true;
  std::string lost_reason_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::shared_ptr<Pending>> pending_;
  Json greeting_;
  std::deque<QmpEvent> events_;
  uint64_t event_seq_ = 0;
  std::function<void(const QmpEvent&)> event_handler_;
  std::vector<asio::steady_timer*> event_waiters_;
};

}  // namespace hutch::vmm::qemu

// hutch-egress's end of the control socket (README.md "Control protocol"): a SOCK_SEQPACKET
// unix socket, one JSON object per message (at most 1 MiB), descriptors as SCM_RIGHTS.
// Messages become EgressProxy calls; log entries and errors go back as events.
#pragma once

#include <deque>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "egress/log_entry.h"
#include "egress/proxy/asio.h"

namespace hutch::egress::proxy {

class EgressProxy;

class ControlChannel {
 public:
  static constexpr size_t kMaxMessageBytes = 1 << 20;
  static constexpr size_t kMaxDescriptors = 8;
  static constexpr size_t kMaxQueuedEvents = 65536;  // beyond it, log events are dropped

  ControlChannel(const asio::any_io_executor& executor, UniqueFd fd);
  ControlChannel(const ControlChannel&) = delete;
  ControlChannel& operator=(const ControlChannel&) = delete;

  // Sends {"event":"ready"}, then applies messages to `proxy` until hutchd closes the socket.
  asio::awaitable<void> run(EgressProxy& proxy);

  // {"event":"log","entry":...}
  void sendLog(const LogEntry& entry);
  // {"event":"error","message":...}
  void sendError(const std::string& message);

  // One message with its descriptors, applied to `proxy` (errors become error events).
  void handle(EgressProxy& proxy, std::string_view text, std::vector<UniqueFd> fds);

 private:
  void send(const nlohmann::json& event);
  asio::awaitable<void> flush();

  asio::posix::stream_descriptor socket_;
  std::deque<std::string> outbox_;
  bool writing_ = false;
  bool closed_ = false;
  uint64_t dropped_ = 0;
};

}  // namespace hutch::egress::proxy

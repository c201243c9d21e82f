// BoxAgent: how every face (the API, the E2B façade, MCP, published ports) acts inside a running
// box. It is the box's AgentClient together with who is asking (observe::Actor), and the one
// place where what is done in a box is seen: every exec and file operation through it is
// published as an event and written to the audit log with its actor, and a command's time limit
// (the request's, or the box's --max-exec-time) is enforced here. The methods are AgentClient's
// (guest/agent_client.h documents them); what they add is in this header.
#pragma once

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "base/result.h"
#include "box/box.h"
#include "guest/agent_client.h"
#include "observe/audit_log.h"
#include "observe/event_bus.h"

namespace hutch::box {

namespace asio = boost::asio;

// Where what happens in boxes is reported. Both may be absent (tests, --no-audit).
struct ActivitySinks {
  observe::EventBus* events = nullptr;
  observe::AuditLog* audit = nullptr;

  // Appends an audit record of `type` about `subject` by `actor` (nothing without an audit
  // log). A failure is logged, never returned: it must not fail the operation, but must be seen.
  void record(std::string type, const observe::Actor& actor, const observe::Subject& subject,
              nlohmann::json data) const;
  // The same for an operation's outcome: data gets "ok" and, when it failed, "error" ({code,
  // message}).
  void record(std::string type, const observe::Actor& actor, const observe::Subject& subject,
              nlohmann::json data, const Result<>& outcome) const;
};

struct ExecLimits {
  // The command is killed (SIGKILL to its process group) when it runs longer; zero: no limit.
  std::chrono::milliseconds timeout{0};
};

class BoxAgent {
 public:
  // What the box's idle clock learns from what is done through the agent.
  struct Hooks {
    std::function<void()> touch;        // at the start and end of everything
    std::function<void(int)> sessions;  // +1 when an exec session opens, -1 when it ends
  };

  BoxAgent(Box box, std::shared_ptr<guest::AgentClient> client, observe::Actor actor,
           ActivitySinks sinks, std::chrono::milliseconds max_exec_time, Hooks hooks);

  const Box& box() const { return box_; }
  const observe::Actor& actor() const { return actor_; }
  const std::shared_ptr<guest::AgentClient>& client() const { return client_; }

  // Starts a process (AgentClient::exec), publishing exec.started and, when it ends,
  // exec.ended, with the matching audit records. The time limit is the shorter of
  // limits.timeout and the box's max exec time (detached processes have none); when it passes,
  // exec.timeout is published and the process is killed.
  asio::awaitable<Result<std::shared_ptr<guest::ExecSession>>> exec(proto::ExecRequest request,
                                                                    ExecLimits limits = {});

  asio::awaitable<Result<proto::FileInfo>> stat(proto::FileStatRequest request);
  asio::awaitable<Result<proto::FileList>> listDir(proto::FileListRequest request);
  asio::awaitable<Result<proto::FileMkdirResult>> makeDir(proto::FileMkdirRequest request);
  asio::awaitable<Result<proto::FileInfo>> move(proto::FileMoveRequest request);
  asio::awaitable<Result<>> remove(proto::FileRemoveRequest request);
  asio::awaitable<Result<std::shared_ptr<guest::FileReader>>> openRead(
      proto::FileReadRequest request);
  asio::awaitable<Result<std::shared_ptr<guest::FileWriter>>> openWrite(
      proto::FileWriteRequest request);
  asio::awaitable<Result<std::shared_ptr<guest::FileWatch>>> watch(proto::WatchRequest request);
  asio::awaitable<Result<std::shared_ptr<guest::TcpStream>>> connect(
      uint16_t port, std::string address = "127.0.0.1",
      std::chrono::milliseconds timeout = std::chrono::seconds(15));
  asio::awaitable<Result<proto::ProcessList>> listProcesses(std::chrono::milliseconds timeout);
  asio::awaitable<Result<>> signalProcess(std::string id, int signo,
                                          std::chrono::milliseconds timeout);
  asio::awaitable<Result<proto::ServiceList>> listServices(std::chrono::milliseconds timeout);

  // A connection into the box that lasts (an SSH connection, ssh/): while the returned hold
  // lives it counts as work for idle pause, as an open exec does. `kind` names its events and
  // audit records: KIND.session.started and KIND.session.ended are published, and
  // KIND.session.start and KIND.session.end written, with `data` (who, from where), the
  // session's id (`session_id`, also in the hold) and, at the end, its duration.
  struct SessionHold {
    std::string id;
    virtual ~SessionHold() = default;
  };
  std::unique_ptr<SessionHold> openSession(const std::string& kind, nlohmann::json data);

 private:
  // One audit record (and nothing else) for a file operation: its path(s), user, outcome.
  void fileOp(const std::string& op, nlohmann::json data, const Result<>& outcome);
  void audit(std::string type, nlohmann::json data);

  Box box_;
  std::shared_ptr<guest::AgentClient> client_;
  observe::Actor actor_;
  ActivitySinks sinks_;
  std::chrono::milliseconds max_exec_time_;
  Hooks hooks_;
  void touch() const {
    if (hooks_.touch) hooks_.touch();
  }
};

}  // namespace hutch::box

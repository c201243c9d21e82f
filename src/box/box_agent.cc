#include "box/box_agent.h"

#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <csignal>

namespace hutch::box {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// "KEY=VALUE" -> "KEY": the audit log keeps which variables were set, never their values.
json envNames(const std::vector<std::string>& env) {
  json names = json::array();
  for (const std::string& kv : env) names.push_back(kv.substr(0, kv.find('=')));
  return names;
}

json errorJson(const Error& e) {
  return json{{"code", std::string(errcName(e.code()))}, {"message", e.message()}};
}

// Where one exec reports to, kept by its session's observer and its timer.
struct ExecRecord {
  ActivitySinks sinks;
  observe::Actor actor;
  observe::Subject subject;
  json request;  // exec_id, argv, user, cwd, env names, tty
  Clock::time_point started;
  std::shared_ptr<asio::steady_timer> timer;
  BoxAgent::Hooks hooks;

  void audit(const std::string& type, json data) const {
    sinks.record(type, actor, subject, std::move(data));
  }
  void publish(const std::string& type, const json& data) const {
    if (sinks.events) sinks.events->publish(type, subject, data);
  }
};

}  // namespace

void ActivitySinks::record(std::string type, const observe::Actor& actor,
                           const observe::Subject& subject, json data) const {
  if (!audit) return;
  observe::AuditEntry entry{.type = type,
                            .actor = actor,
                            .box_id = subject.box_id,
                            .box_name = subject.box_name,
                            .owner_id = subject.owner_id,
                            .data = std::move(data)};
  if (auto written = audit->append(std::move(entry)); !written) {
    spdlog::error("audit: {} of box {} not recorded: {}", type, subject.box_id,
                  written.error().describe());
  }
}

void ActivitySinks::record(std::string type, const observe::Actor& actor,
                           const observe::Subject& subject, json data,
                           const Result<>& outcome) const {
  data["ok"] = outcome.has_value();
  if (!outcome) data["error"] = errorJson(outcome.error());
  record(std::move(type), actor, subject, std::move(data));
}

BoxAgent::BoxAgent(Box box, std::shared_ptr<guest::AgentClient> client, observe::Actor actor,
                   ActivitySinks sinks, std::chrono::milliseconds max_exec_time, Hooks hooks)
    : box_(std::move(box)),
      client_(std::move(client)),
      actor_(std::move(actor)),
      sinks_(sinks),
      max_exec_time_(max_exec_time),
      hooks_(std::move(hooks)) {}

void BoxAgent::audit(std::string type, json data) {
  touch();
  sinks_.record(std::move(type), actor_, observe::subjectOf(box_), std::move(data));
}

void BoxAgent::fileOp(const std::string& op, json data, const Result<>& outcome) {
  touch();
  sinks_.record("file." + op, actor_, observe::subjectOf(box_), std::move(data), outcome);
}

asio::awaitable<Result<std::shared_ptr<guest::ExecSession>>> BoxAgent::exec(
    proto::ExecRequest request, ExecLimits limits) {
  auto record = std::make_shared<ExecRecord>();
  record->sinks = sinks_;
  record->actor = actor_;
  record->subject = observe::subjectOf(box_);
  record->hooks = hooks_;
  record->request = json{{"exec_id", randomId()},
                         {"argv", request.argv},
                         {"user", request.user},
                         {"cwd", request.cwd},
                         {"env", envNames(request.env)},
                         {"tty", request.tty},
                         {"login_shell", request.login_shell},
                         {"detach", request.detach}};
  const bool detach = request.detach;
  touch();
  auto session = co_await client_->exec(std::move(request));
  if (!session) {
    json data = record->request;
    data["error"] = errorJson(session.error());
    record->audit("exec.start", data);
    record->publish("exec.failed", data);
    co_return session;
  }
  record->started = Clock::now();
  {
    json data = record->request;
    data["pid"] = (*session)->pid();
    data["actor"] = observe::actorJson(actor_);
    if (detach) data["process_id"] = (*session)->detachedId();
    record->audit("exec.start", data);
    record->publish("exec.started", data);
  }
  if (detach) co_return session;
  if (hooks_.sessions) hooks_.sessions(1);

  std::chrono::milliseconds limit = limits.timeout;
  if (max_exec_time_.count() > 0 && (limit.count() == 0 || max_exec_time_ < limit)) {
    limit = max_exec_time_;
  }
  if (limit.count() > 0) {
    record->timer = std::make_shared<asio::steady_timer>(client_->executor(), limit);
    std::weak_ptr<guest::ExecSession> weak = *session;
    auto timer = record->timer;
    auto expire = [](std::shared_ptr<asio::steady_timer> timer,
                     std::weak_ptr<guest::ExecSession> weak, std::shared_ptr<ExecRecord> record,
                     std::chrono::milliseconds limit) -> asio::awaitable<void> {
      boost::system::error_code ec;
      co_await timer->async_wait(asio::redirect_error(asio::use_awaitable, ec));
      auto session = weak.lock();
      if (ec || !session || session->finished()) co_return;
      json data{{"exec_id", record->request["exec_id"]}, {"limit_ms", limit.count()}};
      record->publish("exec.timeout", data);
      (void)session->killForTimeout();
    };
    // The record only weakly refers to the session: the session owns its observer, which
    // holds the record.
    asio::co_spawn(client_->executor(), expire(timer, weak, record, limit), asio::detached);
  }
  (*session)->onFinished([record](const guest::ExecSession::Summary& s) {
    if (record->timer) record->timer->cancel();
    json data = record->request;
    data["duration_ms"] =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - record->started)
            .count();
    data["bytes_in"] = s.bytes_in;
    data["bytes_out"] = s.bytes_out;
    data["timed_out"] = s.timed_out;
    if (s.exit_status && s.exit_status->code) data["exit_code"] = *s.exit_status->code;
    if (s.exit_status && s.exit_status->signal) data["signal"] = *s.exit_status->signal;
    if (s.error) data["error"] = errorJson(*s.error);
    record->audit("exec.end", data);
    // The event is about the outcome: the request's details are in exec.started.
    for (const char* k : {"argv", "user", "cwd", "env", "tty", "login_shell", "detach"}) {
      data.erase(k);
    }
    record->publish("exec.ended", data);
    if (record->hooks.sessions) record->hooks.sessions(-1);
    if (record->hooks.touch) record->hooks.touch();
  });
  co_return session;
}

asio::awaitable<Result<proto::FileInfo>> BoxAgent::stat(proto::FileStatRequest request) {
  json data{{"path", request.path}, {"user", request.user}};
  auto r = co_await client_->stat(std::move(request));
  fileOp("stat", std::move(data), r ? ok() : fail(r.error()));
  co_return r;
}

asio::awaitable<Result<proto::FileList>> BoxAgent::listDir(proto::FileListRequest request) {
  json data{{"path", request.path}, {"user", request.user}, {"depth", request.depth}};
  auto r = co_await client_->listDir(std::move(request));
  if (r) data["entries"] = r->entries.size();
  fileOp("list", std::move(data), r ? ok() : fail(r.error()));
  co_return r;
}

asio::awaitable<Result<proto::FileMkdirResult>> BoxAgent::makeDir(proto::FileMkdirRequest request) {
  json data{{"path", request.path}, {"user", request.user}};
  auto r = co_await client_->makeDir(std::move(request));
  fileOp("mkdir", std::move(data), r ? ok() : fail(r.error()));
  co_return r;
}

asio::awaitable<Result<proto::FileInfo>> BoxAgent::move(proto::FileMoveRequest request) {
  json data{{"from", request.from}, {"to", request.to}, {"user", request.user}};
  auto r = co_await client_->move(std::move(request));
  fileOp("move", std::move(data), r ? ok() : fail(r.error()));
  co_return r;
}

asio::awaitable<Result<>> BoxAgent::remove(proto::FileRemoveRequest request) {
  json data{{"path", request.path}, {"user", request.user}, {"recursive", request.recursive}};
  auto r = co_await client_->remove(std::move(request));
  fileOp("remove", std::move(data), r);
  co_return r;
}

asio::awaitable<Result<std::shared_ptr<guest::FileReader>>> BoxAgent::openRead(
    proto::FileReadRequest request) {
  json data{{"path", request.path}, {"user", request.user}};
  auto r = co_await client_->openRead(std::move(request));
  if (r) data["size"] = (*r)->info().size;
  fileOp("read", std::move(data), r ? ok() : fail(r.error()));
  co_return r;
}

asio::awaitable<Result<std::shared_ptr<guest::FileWriter>>> BoxAgent::openWrite(
    proto::FileWriteRequest request) {
  json data{{"path", request.path}, {"user", request.user}};
  auto r = co_await client_->openWrite(std::move(request));
  fileOp("write", std::move(data), r ? ok() : fail(r.error()));
  co_return r;
}

asio::awaitable<Result<std::shared_ptr<guest::FileWatch>>> BoxAgent::watch(
    proto::WatchRequest request) {
  json data{{"path", request.path}, {"user", request.user}, {"recursive", request.recursive}};
  auto r = co_await client_->watch(std::move(request));
  fileOp("watch", std::move(data), r ? ok() : fail(r.error()));
  co_return r;
}

asio::awaitable<Result<std::shared_ptr<guest::TcpStream>>> BoxAgent::connect(
    uint16_t port, std::string address, std::chrono::milliseconds timeout) {
  touch();
  co_return co_await client_->connect(port, std::move(address), timeout);
}

asio::awaitable<Result<proto::ProcessList>> BoxAgent::listProcesses(
    std::chrono::milliseconds timeout) {
  touch();
  co_return co_await client_->listProcesses(timeout);
}

asio::awaitable<Result<>> BoxAgent::signalProcess(std::string id, int signo,
                                                  std::chrono::milliseconds timeout) {
  json data{{"process_id", id}, {"signal", signo}};
  auto r = co_await client_->signalProcess(std::move(id), signo, timeout);
  data["ok"] = r.has_value();
  if (!r) data["error"] = errorJson(r.error());
  audit("process.signal", std::move(data));
  co_return r;
}

asio::awaitable<Result<proto::ServiceList>> BoxAgent::listServices(
    std::chrono::milliseconds timeout) {
  touch();
  co_return co_await client_->listServices(timeout);
}

namespace {

// Ends the session when dropped: the idle clock forgets it, KIND.session.ended is published.
struct Hold final : BoxAgent::SessionHold {
  ActivitySinks sinks;
  observe::Actor actor;
  observe::Subject subject;
  BoxAgent::Hooks hooks;
  std::string kind;
  json data;
  Clock::time_point started;

  ~Hold() override {
    data["duration_ms"] =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
    sinks.record(kind + ".session.end", actor, subject, data);
    if (sinks.events) sinks.events->publish(kind + ".session.ended", subject, data);
    if (hooks.sessions) hooks.sessions(-1);
    if (hooks.touch) hooks.touch();
  }
};

}  // namespace

std::unique_ptr<BoxAgent::SessionHold> BoxAgent::openSession(const std::string& kind, json data) {
  auto hold = std::make_unique<Hold>();
  hold->id = randomId();
  hold->sinks = sinks_;
  hold->actor = actor_;
  hold->subject = observe::subjectOf(box_);
  hold->hooks = hooks_;
  hold->kind = kind;
  hold->started = Clock::now();
  data["session_id"] = hold->id;
  data["actor"] = observe::actorJson(actor_);
  hold->data = data;
  touch();
  if (hooks_.sessions) hooks_.sessions(1);
  sinks_.record(kind + ".session.start", actor_, hold->subject, data);
  if (sinks_.events) sinks_.events->publish(kind + ".session.started", hold->subject, data);
  return hold;
}

}  // namespace hutch::box

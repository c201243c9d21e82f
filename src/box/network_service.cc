#include "box/network_service.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/generic/seq_packet_protocol.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>

#include "base/fault.h"
#include "sys/files.h"
#include "sys/proc_fs.h"
#include "sys/spawn.h"

namespace hutch::box {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr size_t kMaxMessage = 1 << 20;
constexpr int kControlFd = 3;

}  // namespace

struct NetworkService::Attached {
  uint32_t index = 0;
  net::Listeners listeners;
  json message;              // the last "box" message, sent again to a restarted hutch-egress
  observe::Subject subject;  // for its events and audit records
  // egress.refused events: at most kRefusedPerWindow per window, the rest counted.
  std::chrono::steady_clock::time_point window_start;
  unsigned refused_in_window = 0;
  uint64_t suppressed = 0;
  std::vector<int> fds() const {
    std::vector<int> out = {listeners.explicit_proxy.get(), listeners.transparent.get(),
                            listeners.dns.get()};
    if (listeners.drops) out.push_back(listeners.drops.get());
    return out;
  }
};

// The control socket to one hutch-egress: messages out (with descriptors), events in.
class NetworkService::Link : public std::enable_shared_from_this<Link> {
 public:
  Link(const asio::any_io_executor& loop, UniqueFd fd) : socket_(loop) {
    socket_.assign(asio::generic::seq_packet_protocol(AF_UNIX, 0), fd.release());
  }

  // Blocking on a full socket buffer only (messages are small, hutch-egress reads promptly).
  Result<> send(const json& message, const std::vector<int>& fds) {
    std::string text = message.dump();
    if (text.size() > kMaxMessage) {
      return fail(Errc::kInvalidArgument, "A control message for hutch-egress is over 1 MiB");
    }
    iovec iov{text.data(), text.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    std::vector<char> control(CMSG_SPACE(sizeof(int) * std::max<size_t>(fds.size(), 1)));
    if (!fds.empty()) {
      msg.msg_control = control.data();
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
      cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
      cmsg->cmsg_level = SOL_SOCKET;
      cmsg->cmsg_type = SCM_RIGHTS;
      cmsg->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      std::memcpy(CMSG_DATA(cmsg), fds.data(), sizeof(int) * fds.size());
    }
    int fd = socket_.native_handle();
    for (int tries = 0; tries < 50; ++tries) {
      if (::sendmsg(fd, &msg, MSG_NOSIGNAL) >= 0) return ok();
      if (errno == EINTR) continue;
      if (errno != EAGAIN) return fail(sysError("Cannot talk to hutch-egress", errno));
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 100);
    }
    return fail(Errc::kUnavailable, "hutch-egress does not read its control socket");
  }

  // Reads events until the socket closes; then calls down(why).
  static asio::awaitable<void> run(std::shared_ptr<Link> self,
                                   std::function<void(const json&)> event,
                                   std::function<void(std::string)> down) {
    std::vector<char> buffer(kMaxMessage);
    std::string why = "its control socket closed";
    while (self->socket_.is_open()) {
      boost::system::error_code ec;
      asio::socket_base::message_flags flags = 0;
      size_t n = co_await self->socket_.async_receive(
          asio::buffer(buffer), flags, asio::redirect_error(asio::use_awaitable, ec));
      if (ec || n == 0) {
        if (ec && ec != asio::error::eof) why = ec.message();
        break;
      }
      json message =
          json::parse(buffer.begin(), buffer.begin() + static_cast<long>(n), nullptr, false);
      if (!message.is_object()) {
        spdlog::warn("hutch-egress sent a message that is not a JSON object");
        continue;
      }
      event(message);
    }
    if (!self->closed_) down(why);
  }

  void close() {
    closed_ = true;
    boost::system::error_code ec;
    socket_.close(ec);
  }

 private:
  asio::generic::seq_packet_protocol::socket socket_;
  bool closed_ = false;
};

NetworkService::NetworkService(asio::any_io_executor loop, net::BoxNetworks networks,
                               net::SecretStore& secrets, NetworkConfig config)
    : loop_(std::move(loop)),
      networks_(std::move(networks)),
      secrets_(secrets),
      config_(std::move(config)) {}

NetworkService::~NetworkService() {
  stop();
}

Result<> NetworkService::start() {
  std::error_code ec;
  fs::create_directories(config_.state_dir / "logs", ec);
  if (ec) {
    return fail(Errc::kInternal,
                "Cannot create " + (config_.state_dir / "logs").string() + ": " + ec.message());
  }
  ::chmod(config_.state_dir.c_str(), 0700);
  // One left running by an earlier hutchd holds sockets of boxes we are about to serve again.
  if (auto old = sys::readFile(config_.state_dir / "egress.pid"); old) {
    pid_t pid = 0;
    std::from_chars(old->data(), old->data() + old->size(), pid);
    auto cmdline = pid > 1 ? sys::readFile(fmt::format("/proc/{}/cmdline", pid)) : old;
    if (pid > 1 && cmdline && cmdline->find("hutch-egress") != std::string::npos) {
      spdlog::info("Stopping hutch-egress pid {} left by an earlier hutchd", pid);
      ::kill(pid, SIGKILL);
    }
  }
  return spawnEgress();
}

void NetworkService::stop() {
  stopping_ = true;
  if (link_) link_->close();
  link_.reset();
  if (egress_pid_ > 0) {
    ::kill(egress_pid_, SIGTERM);
    for (int i = 0; i < 100 && ::waitpid(egress_pid_, nullptr, WNOHANG) == 0; ++i) ::usleep(10000);
    ::kill(egress_pid_, SIGKILL);
    ::waitpid(egress_pid_, nullptr, WNOHANG);
    egress_pid_ = -1;
    fault::setEgressPid(0);
  }
}

Result<> NetworkService::spawnEgress() {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    return fail(sysError("Cannot make hutch-egress's control socket", errno));
  }
  UniqueFd ours(pair[0]);
  UniqueFd theirs(pair[1]);
  auto log = sys::openForAppend(config_.state_dir / "egress.log");
  if (!log) return fail(log.error().withContext("Cannot start hutch-egress"));
  sys::SpawnOptions options;
  options.argv = {config_.egress_binary.string(), "--control-fd", std::to_string(kControlFd)};
  if (config_.egress_user) {
    options.argv.push_back("--user");
    options.argv.push_back(
        fmt::format("{}:{}", config_.egress_user->first, config_.egress_user->second));
  }
  if (!config_.upstream_ca.empty()) {
    options.argv.push_back("--upstream-ca");
    options.argv.push_back(config_.upstream_ca.string());
  }
  if (!config_.resolv_conf.empty()) {
    options.argv.push_back("--resolv-conf");
    options.argv.push_back(config_.resolv_conf.string());
  }
  options.fds = {{log->get(), 1}, {log->get(), 2}, {theirs.get(), kControlFd}};
  options.new_session = true;
  auto pid = sys::spawn(options);
  if (!pid) return fail(pid.error().withContext("Cannot start hutch-egress"));
  egress_pid_ = *pid;
  fault::setEgressPid(*pid);
  (void)sys::writeFileAtomic(config_.state_dir / "egress.pid", std::to_string(*pid) + "\n");
  link_ = std::make_shared<Link>(loop_, std::move(ours));
  auto event = [this](const json& e) { onEvent(e); };
  auto down = [this](const std::string& why) { onLinkDown(why); };
  asio::co_spawn(loop_, Link::run(link_, event, down), asio::detached);
  spdlog::info("hutch-egress started (pid {})", *pid);
  return ok();
}

void NetworkService::onLinkDown(const std::string& why) {
  int status = 0;
  std::string how = "is gone";
  if (egress_pid_ > 0) {
    ::kill(egress_pid_, SIGKILL);
    if (::waitpid(egress_pid_, &status, 0) == egress_pid_) {
      how = WIFSIGNALED(status) ? fmt::format("was killed by signal {}", WTERMSIG(status))
                                : fmt::format("exited with status {}", WEXITSTATUS(status));
    }
    egress_pid_ = -1;
    fault::setEgressPid(0);
  }
  link_.reset();
  if (stopping_) return;
  spdlog::error("hutch-egress {} ({}); boxes have no network until it is back", how, why);
  if (activity_.events) {
    activity_.events->publish("egress.died", {}, {{"reason", fmt::format("{} ({})", how, why)}});
  }
  if (!restart_pending_) {
    restart_pending_ = true;
    asio::co_spawn(loop_, restartLater(), asio::detached);
  }
}

asio::awaitable<void> NetworkService::restartLater() {
  asio::steady_timer timer(loop_, std::chrono::seconds(1));
  boost::system::error_code ec;
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  restart_pending_ = false;
  if (stopping_) co_return;
  if (auto started = spawnEgress(); !started) {
    spdlog::error("{}", started.error().describe());
    restart_pending_ = true;
    asio::co_spawn(loop_, restartLater(), asio::detached);
    co_return;
  }
  spdlog::info("hutch-egress is back: serving {} box(es) again", attached_.size());
  // Every attached box again, with the sockets hutchd kept.
  for (auto& [id, attached] : attached_) {
    if (auto sent = link_->send(attached->message, attached->fds()); !sent) {
      spdlog::warn("box={} {}", id, sent.error().describe());
    }
  }
}

void NetworkService::onEvent(const json& event) {
  std::string kind = event.value("event", "");
  if (kind == "log" && event.contains("entry") && event["entry"].is_object()) {
    const json& entry = event["entry"];
    std::string box = entry.value("box", "");
    if (box.empty() || box.find('/') != std::string::npos) return;
    std::ofstream out(logPath(box), std::ios::app);
    out << entry.dump() << '\n';
    report(entry);
  } else if (kind == "ready") {
    spdlog::debug("hutch-egress ready");
  } else if (kind == "error") {
    spdlog::warn("hutch-egress: {}", event.value("message", "(no message)"));
  }
}

namespace {

constexpr unsigned kRefusedPerWindow = 20;
constexpr auto kRefusedWindow = std::chrono::seconds(10);

// hutch-egress is hutch's own, but it handles what boxes send: read its fields defensively.
template <class T>
T field(const json& j, const char* name, T fallback) {
  auto it = j.find(name);
  if (it == j.end()) return fallback;
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    return fallback;
  }
}

}  // namespace

void NetworkService::report(const json& entry) {
  const std::string box = field<std::string>(entry, "box", "");
  auto it = attached_.find(box);
  Attached* attached = it == attached_.end() ? nullptr : it->second.get();
  const bool allowed = field<std::string>(entry, "decision", "") == "allow";
  if (metrics_) {
    metrics_->egress(box, allowed, field<uint64_t>(entry, "bytes_up", 0),
                     field<uint64_t>(entry, "bytes_down", 0));
  }
  const observe::Subject subject = attached ? attached->subject : observe::Subject{.box_id = box};
  if (!allowed && activity_.events && attached) {
    auto now = std::chrono::steady_clock::now();
    if (now - attached->window_start > kRefusedWindow) {
      attached->window_start = now;
      attached->refused_in_window = 0;
    }
    if (++attached->refused_in_window > kRefusedPerWindow) {
      ++attached->suppressed;  // a box that floods its wall does not flood the event log
    } else {
      json data{{"proto", field<std::string>(entry, "proto", "")},
                {"host", field<std::string>(entry, "host", "")},
                {"port", field<int64_t>(entry, "port", 0)},
                {"address", field<std::string>(entry, "address", "")},
                {"reason", field<std::string>(entry, "reason", "")}};
      if (attached->suppressed) data["suppressed_before"] = std::exchange(attached->suppressed, 0);
      activity_.events->publish("egress.refused", subject, data);
    }
  }
  auto secrets = field<std::vector<std::string>>(entry, "secrets", {});
  if (!secrets.empty()) {
    activity_.record("secret.use", {.key_id = "", .key_name = "hutch-egress"}, subject,
                     {{"secrets", secrets},
                      {"domain", field<std::string>(entry, "host", "")},
                      {"port", field<int64_t>(entry, "port", 0)},
                      {"requests", field<std::vector<std::string>>(entry, "requests", {})},
                      {"bytes_up", field<uint64_t>(entry, "bytes_up", 0)},
                      {"bytes_down", field<uint64_t>(entry, "bytes_down", 0)}});
  }
}

Result<std::string> NetworkService::policyFor(const std::string& requested,
                                              const fs::path& template_dir) const {
  std::string text = requested;
  std::string source = "the requested policy";
  if (text.empty()) {
    fs::path file = template_dir / "network-policy.json";
    if (auto own = sys::readFile(file); own) {
      text = *own;
      source = file.string();
    } else {
      text = config_.default_policy;
      source = "hutchd's default policy";
    }
  }
  auto policy = egress::parsePolicyText(text, config_.etc_apt);
  if (!policy) return fail(policy.error().withContext("Bad network policy (" + source + ")"));
  return egress::toJson(*policy).dump();
}

Result<std::vector<BoxSecret>> NetworkService::secretsFor(const std::vector<std::string>& names,
                                                          const std::string& owner_id) const {
  std::vector<BoxSecret> out;
  net::SecretStore owned = secrets_.forOwner(owner_id);
  for (const std::string& name : names) {
    HUTCH_TRY(net::Secret secret, owned.get(name));
    for (const auto& have : out) {
      if (have.name == name) {
        return fail(Errc::kInvalidArgument, fmt::format("Secret '{}' is named twice", name));
      }
    }
    out.push_back({secret.name, net::makePlaceholder(secret.name)});
  }
  return out;
}

egress::BoxRegistryFiles NetworkService::registryFiles(const Box& box) {
  auto policy = egress::parsePolicy(nlohmann::json::parse(box.network_policy, nullptr, false));
  if (!policy || policy->allow.empty()) return {};
  auto allowed = [&](const egress::Registry& r) {
    return egress::decide(*policy, r.host, r.port).allowed;
  };
  auto npm = egress::hostRegistries("npm");
  auto pypi = egress::hostRegistries("pypi");
  return egress::boxRegistryFiles(npm ? *npm : std::vector<egress::Registry>{},
                                  pypi ? *pypi : std::vector<egress::Registry>{}, allowed,
                                  egress::hostRegistryCa());
}

std::vector<std::string> NetworkService::environment(const Box& box) {
  std::vector<std::string> env;
  for (const auto& s : box.secrets) env.push_back(s.name + "=" + s.placeholder);
  return env;
}

Result<fs::path> NetworkService::prepare(uint32_t index) const {
  return networks_.prepare(index);
}

void NetworkService::release(uint32_t index) const {
  if (auto gone = networks_.release(index); !gone) {
    spdlog::warn("Cannot delete network namespace {}: {}", networks_.nameFor(index),
                 gone.error().describe());
  }
}

void NetworkService::removeOrphans(const std::vector<uint32_t>& keep) const {
  networks_.removeOrphans(keep);
}

void NetworkService::setGuestParams(std::map<std::string, std::string>& params) {
  params["ip"] = net::kGuestAddress;
  params["gw"] = net::kGateway;
  params["dns"] = net::kGateway;
}

std::string NetworkService::snapshotNetwork() {
  return std::string("virtio-net ") + net::kGuestAddress;
}

fs::path NetworkService::logPath(const std::string& box_id) const {
  return config_.state_dir / "logs" / (box_id + ".ndjson");
}

fs::path NetworkService::caDir(const std::string& box_id) const {
  return config_.state_dir / "boxes" / box_id;
}

Result<CaPem> NetworkService::boxCa(const std::string& box_id) {
  fs::path dir = caDir(box_id);
  auto cert = sys::readFile(dir / "ca.crt");
  auto key = sys::readFile(dir / "ca.key");
  if (cert && key) return CaPem{*cert, *key};
  if (!config_.make_ca) return fail(Errc::kUnsupported, "This hutchd cannot make box CAs");
  HUTCH_TRY(CaPem made, config_.make_ca(box_id));
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail(Errc::kInternal, "Cannot create " + dir.string() + ": " + ec.message());
  HUTCH_TRY_VOID(sys::writeFileAtomic(dir / "ca.key", made.key, 0600));
  HUTCH_TRY_VOID(sys::writeFileAtomic(dir / "ca.crt", made.cert, 0644));
  return made;
}

Result<std::string> NetworkService::caCert(const std::string& box_id) {
  HUTCH_TRY(CaPem ca, boxCa(box_id));
  return ca.cert;
}

Result<> NetworkService::inheritCa(const std::string& parent_id, const std::string& child_id) {
  HUTCH_TRY(CaPem ca, boxCa(parent_id));
  fs::path dir = caDir(child_id);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail(Errc::kInternal, "Cannot create " + dir.string() + ": " + ec.message());
  HUTCH_TRY_VOID(sys::writeFileAtomic(dir / "ca.key", ca.key, 0600));
  HUTCH_TRY_VOID(sys::writeFileAtomic(dir / "ca.crt", ca.cert, 0644));
  return ok();
}

Result<json> NetworkService::boxMessage(const Box& box) {
  json policy = json::parse(box.network_policy.empty() ? "{}" : box.network_policy, nullptr, false);
  if (!policy.is_object()) {
    return fail(Errc::kInternal, fmt::format("Box {} has a corrupt network policy", box.name));
  }
  json message = {{"op", "box"}, {"id", box.id}, {"policy", policy}};
  json secrets = json::array();
  for (const BoxSecret& bound : box.secrets) {
    auto secret = secrets_.forOwner(bound.owner.value_or(box.owner.id)).get(bound.name);
    if (!secret) {
      spdlog::warn("box={} secret {} is gone from the host: not injected", box.id, bound.name);
      continue;
    }
    // One stored before today's checks (a domain of "*", say) would make hutch-egress refuse
    // the whole box: left out instead, with the reason.
    if (auto valid = net::validateSecret(*secret); !valid) {
      spdlog::warn("box={} secret {} is not injected: {}; set it again with hutch secret set",
                   box.id, bound.name, valid.error().message());
      continue;
    }
    secrets.push_back({{"name", secret->name},
                       {"value", secret->value},
                       {"domains", secret->domains},
                       {"header", secret->header},
                       {"format", secret->format},
                       {"placeholder", bound.placeholder}});
  }
  message["secrets"] = secrets;
  // Every box has its CA (hutch-egress wants one); it is installed in the box only when the
  // box has secrets, the only time hutch-egress intercepts.
  HUTCH_TRY(CaPem ca, boxCa(box.id));
  message["ca"] = {{"cert", ca.cert}, {"key", ca.key}};
  return message;
}

Result<> NetworkService::attach(const Box& box) {
  if (box.uid_index < 0) {
    return fail(Errc::kInternal, fmt::format("Box {} has no uid index", box.name));
  }
  auto index = static_cast<uint32_t>(box.uid_index);
  HUTCH_TRY(json message, boxMessage(box));
  auto attached = std::make_unique<Attached>();
  attached->index = index;
  HUTCH_TRY(attached->listeners, networks_.listeners(index));
  if (attached->listeners.drops_error) {
    spdlog::warn("box={} its dropped packets will not be logged: {}", box.id,
                 attached->listeners.drops_error->describe());
  }
  attached->message = std::move(message);
  attached->subject = observe::subjectOf(box);
  Attached& a = *attached;
  attached_[box.id] = std::move(attached);
  if (!link_) {
    return fail(Errc::kUnavailable,
                "hutch-egress is not running (it restarts by itself): the box has no network yet");
  }
  return link_->send(a.message, a.fds());
}

Result<> NetworkService::updatePolicy(const Box& box) {
  json policy = json::parse(box.network_policy, nullptr, false);
  if (!policy.is_object()) {
    return fail(Errc::kInternal, fmt::format("Box {} has a corrupt network policy", box.name));
  }
  auto it = attached_.find(box.id);
  if (it == attached_.end()) return ok();  // taken up when it next runs
  it->second->message["policy"] = policy;
  if (!link_) return ok();  // sent with the box when hutch-egress is back
  return link_->send({{"op", "policy"}, {"id", box.id}, {"policy", policy}}, {});
}

void NetworkService::detach(const std::string& box_id) {
  if (attached_.erase(box_id) == 0) return;
  if (link_) (void)link_->send({{"op", "remove"}, {"id", box_id}}, {});
}

void NetworkService::forget(const std::string& box_id) {
  detach(box_id);
  std::error_code ec;
  fs::remove_all(caDir(box_id), ec);
  fs::remove(logPath(box_id), ec);
}

void NetworkService::forgetAllBut(const std::set<std::string>& known) {
  std::set<std::string> gone;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(config_.state_dir / "boxes", ec)) {
    if (!known.contains(entry.path().filename().string())) gone.insert(entry.path().filename());
  }
  for (const auto& entry : fs::directory_iterator(config_.state_dir / "logs", ec)) {
    if (entry.path().extension() != ".ndjson") continue;
    if (!known.contains(entry.path().stem().string())) gone.insert(entry.path().stem());
  }
  for (const std::string& id : gone) {
    spdlog::info("Removing the egress files of box {} (no box record)", id);
    forget(id);
  }
}

Result<NetworkService::LogPage> NetworkService::log(const std::string& box_id, uint64_t after,
                                                    size_t limit) const {
  LogPage page;
  page.next = after;
  std::ifstream in(logPath(box_id));
  std::string line;
  uint64_t n = 0;
  while (std::getline(in, line)) {
    if (++n <= after) continue;
    if (page.entries.size() >= limit) break;
    json entry = json::parse(line, nullptr, false);
    page.next = n;
    if (entry.is_object()) page.entries.push_back(std::move(entry));
  }
  return page;
}

}  // namespace hutch::box

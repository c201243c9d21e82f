#include "egress/dns.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cerrno>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

namespace hutch::egress {

namespace {

using asio::ip::udp;
using boost::system::error_code;

constexpr size_t kMaxNameBytes = 255;  // wire form, with the length octets and the root label
constexpr size_t kMaxDatagram = 65535;

uint16_t read16(std::span<const uint8_t> p, size_t at) {
  return static_cast<uint16_t>((p[at] << 8) | p[at + 1]);
}

void write16(std::vector<uint8_t>& p, size_t at, uint16_t v) {
  p[at] = static_cast<uint8_t>(v >> 8);
  p[at + 1] = static_cast<uint8_t>(v & 0xff);
}

int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

char lower(uint8_t c) {
  return static_cast<char>((c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c);
}

// The name for the log: lower case, bytes outside printable ASCII written as \xNN (the log is
// JSON, which takes only UTF-8).
std::string logName(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (char c : name) {
    auto b = static_cast<uint8_t>(c);
    if (b < 0x20 || b > 0x7e || b == '\\') {
      out += fmt::format("\\x{:02x}", b);
    } else {
      out.push_back(lower(b));
    }
  }
  return out;
}

// The same question (name compared without case, type and class exactly): length octets are
// below 64, so lowering letters never changes them.
bool sameQuestion(std::span<const uint8_t> a, std::span<const uint8_t> b, size_t end) {
  if (a.size() < end || b.size() < end) return false;
  for (size_t i = kDnsHeaderBytes; i < end; ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

}  // namespace

Result<DnsQuery> parseDnsQuery(std::span<const uint8_t> packet) {
  auto bad = [](std::string what) {
    return fail(Errc::kProtocol, "Malformed DNS query: " + std::move(what));
  };
  if (packet.size() < kDnsHeaderBytes) {
    return bad(fmt::format("{} bytes, shorter than the 12-byte header", packet.size()));
  }
  DnsQuery q;
  q.id = read16(packet, 0);
  if (packet[2] & 0x80) return bad("it is a response (QR set)");
  q.opcode = (packet[2] >> 3) & 0x0f;
  uint16_t qdcount = read16(packet, 4);
  if (qdcount != 1) return bad(fmt::format("{} questions (QDCOUNT must be 1)", qdcount));
  size_t at = kDnsHeaderBytes;
  for (;;) {
    if (at >= packet.size()) return bad("the question's name runs past the end");
    uint8_t len = packet[at];
    if ((len & 0xc0) == 0xc0) return bad("a compression pointer in the question's name");
    if (len & 0xc0) return bad(fmt::format("a reserved label type 0x{:02x}", len & 0xc0));
    if (at + 1 + len - kDnsHeaderBytes > kMaxNameBytes) {
      return bad("the question's name is longer than 255 bytes");
    }
    if (len == 0) {
      ++at;
      break;
    }
    if (at + 1 + len > packet.size()) return bad("a label runs past the end");
    std::string_view label(reinterpret_cast<const char*>(packet.data() + at + 1), len);
    if (label.find('.') != std::string_view::npos) return bad("a label contains '.'");
    if (!q.name.empty()) q.name += '.';
    q.name += label;
    at += 1 + len;
  }
  if (at + 4 > packet.size()) return bad("no room for the question's type and class");
  q.qtype = read16(packet, at);
  q.qclass = read16(packet, at + 2);
  q.question_end = at + 4;
  return q;
}

std::vector<uint8_t> buildDnsReply(std::span<const uint8_t> packet, const DnsQuery& query,
                                   uint8_t rcode) {
  std::vector<uint8_t> reply(packet.begin(), packet.begin() + query.question_end);
  write16(reply, 0, query.id);
  reply[2] = static_cast<uint8_t>(0x80 | (query.opcode << 3) | (packet[2] & 0x01));  // QR, RD
  reply[3] = static_cast<uint8_t>(0x80 | (rcode & 0x0f));                            // RA
  write16(reply, 4, 1);
  write16(reply, 6, 0);
  write16(reply, 8, 0);
  write16(reply, 10, 0);
  return reply;
}

Result<std::vector<udp::endpoint>> nameserversFrom(const std::filesystem::path& resolv_conf) {
  std::ifstream in(resolv_conf);
  if (!in) {
    int err = errno;
    return fail(Errc::kNotFound,
                fmt::format("Cannot read the nameservers from {}: pass a readable resolv.conf",
                            resolv_conf.string()),
                err);
  }
  std::vector<udp::endpoint> out;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line.substr(0, line.find_first_of("#;")));
    std::string key;
    std::string addr;
    if (!(words >> key >> addr) || key != "nameserver") continue;
    error_code ec;
    auto address = asio::ip::make_address(addr, ec);
    if (!ec) out.emplace_back(address, 53);
  }
  if (out.empty()) {
    return fail(Errc::kNotFound,
                fmt::format("{} names no nameserver: add a \"nameserver ADDRESS\" line",
                            resolv_conf.string()));
  }
  return out;
}

std::string endpointText(const udp::endpoint& endpoint) {
  if (endpoint.address().is_v6()) {
    return fmt::format("[{}]:{}", endpoint.address().to_string(), endpoint.port());
  }
  return fmt::format("{}:{}", endpoint.address().to_string(), endpoint.port());
}

// --- the resolver --------------------------------------------------------------------------

// One question being forwarded: its upstream socket and the timer of the current try. Shared
// with the timer's handler, which may run after the question's coroutine has moved on.
struct Flight {
  explicit Flight(const asio::any_io_executor& ex) : socket(ex), timer(ex) {}
  udp::socket socket;
  asio::steady_timer timer;
  bool timed_out = false;
};

struct DnsResolver::State {
  State(asio::io_context& io, std::vector<udp::endpoint> ups, PolicySource p, std::string box,
        LogSink l, Options o)
      : socket(io),
        upstreams(std::move(ups)),
        policy(std::move(p)),
        box_id(std::move(box)),
        log(std::move(l)),
        options(o),
        random(std::random_device{}()) {}

  udp::socket socket;
  std::vector<udp::endpoint> upstreams;
  PolicySource policy;
  std::string box_id;
  LogSink log;
  Options options;
  std::mt19937 random;
  std::set<std::shared_ptr<Flight>> flights;
  size_t in_flight = 0;
  bool stopped = false;

  LogEntry entry(std::string host) const {
    LogEntry e;
    e.box = box_id;
    e.time_ms = nowMs();
    e.proto = "dns";
    e.host = std::move(host);
    return e;
  }
  void emit(const LogEntry& e) const {
    if (!stopped && log) log(e);
  }
};

namespace {

using State = DnsResolver::State;

asio::awaitable<void> sendTo(std::shared_ptr<State> s, std::vector<uint8_t> packet,
                             udp::endpoint to) {
  if (s->stopped) co_return;
  error_code ec;
  auto buffer = asio::buffer(packet);
  co_await s->socket.async_send_to(buffer, to, asio::redirect_error(asio::use_awaitable, ec));
  // A box that went away cannot be answered; nothing else to do.
}

// Tries one upstream: sends `query` (with a fresh random ID) and waits for the answer to it.
// Returns the answer, or an empty vector when this upstream failed or stayed silent.
asio::awaitable<std::vector<uint8_t>> ask(std::shared_ptr<State> s, std::vector<uint8_t> query,
                                          size_t question_end, udp::endpoint upstream) {
  auto flight = std::make_shared<Flight>(s->socket.get_executor());
  s->flights.insert(flight);
  struct Unregister {
    std::shared_ptr<State> s;
    std::shared_ptr<Flight> f;
    ~Unregister() {
      error_code ignored;
      f->timer.cancel(ignored);
      f->socket.close(ignored);
      s->flights.erase(f);
    }
  } unregister{s, flight};

  error_code ec;
  flight->socket.open(upstream.protocol(), ec);
  if (!ec) flight->socket.connect(upstream, ec);  // only the upstream's datagrams get in
  if (ec) co_return std::vector<uint8_t>{};
  uint16_t id = static_cast<uint16_t>(s->random());
  write16(query, 0, id);
  auto out = asio::buffer(query);
  co_await flight->socket.async_send(out, asio::redirect_error(asio::use_awaitable, ec));
  if (ec || s->stopped) co_return std::vector<uint8_t>{};

  flight->timer.expires_after(s->options.upstream_timeout);
  flight->timer.async_wait([flight](error_code timer_ec) {
    if (timer_ec) return;
    flight->timed_out = true;
    error_code ignored;
    flight->socket.cancel(ignored);
  });
  std::vector<uint8_t> answer(kMaxDatagram);
  for (;;) {
    auto in = asio::buffer(answer);
    size_t n =
        co_await flight->socket.async_receive(in, asio::redirect_error(asio::use_awaitable, ec));
    // Timed out, stopped, or refused (ICMP port unreachable): this upstream is done.
    if (ec || s->stopped || flight->timed_out) co_return std::vector<uint8_t>{};
    std::span<const uint8_t> got(answer.data(), n);
    if (n < kDnsHeaderBytes || read16(got, 0) != id || !(got[2] & 0x80) ||
        !sameQuestion(got, query, question_end)) {
      continue;  // not the answer to this question
    }
    answer.resize(n);
    co_return answer;
  }
}

asio::awaitable<void> forward(std::shared_ptr<State> s, std::vector<uint8_t> packet, DnsQuery query,
                              udp::endpoint client, LogEntry entry) {
  ++s->in_flight;
  struct Done {
    State* s;
    ~Done() { --s->in_flight; }
  } done{s.get()};

  std::vector<std::string> tried;
  for (const udp::endpoint& upstream : s->upstreams) {
    std::vector<uint8_t> answer = co_await ask(s, packet, query.question_end, upstream);
    if (s->stopped) co_return;
    if (!answer.empty()) {
      write16(answer, 0, query.id);
      entry.address = endpointText(upstream);
      s->emit(entry);
      co_await sendTo(s, std::move(answer), client);
      co_return;
    }
    tried.push_back(endpointText(upstream));
  }
  entry.reason = fmt::format("no nameserver answered (tried {}); check the host's resolv.conf",
                             fmt::join(tried, ", "));
  s->emit(entry);
  co_await sendTo(s, buildDnsReply(packet, query, kDnsServFail), client);
}

// Decides on one datagram from the box: answers it at once, hands it to forward(), or drops it.
asio::awaitable<void> handle(std::shared_ptr<State> s, std::vector<uint8_t> packet,
                             udp::endpoint client) {
  auto query = parseDnsQuery(packet);
  if (!query) {
    LogEntry e = s->entry("");
    e.reason = query.error().message();
    s->emit(e);
    co_return;  // dropped: a malformed query gets no answer
  }
  LogEntry e = s->entry(logName(query->name));
  if (query->opcode != 0) {
    e.reason = fmt::format("unsupported DNS opcode {} (only QUERY is answered)", query->opcode);
    s->emit(e);
    co_await sendTo(s, buildDnsReply(packet, *query, kDnsNotImp), client);
    co_return;
  }
  Decision d = decideName(s->policy ? s->policy() : Policy{}, query->name);
  e.allowed = d.allowed;
  e.reason = d.reason;
  if (!d.allowed) {
    s->emit(e);
    co_await sendTo(s, buildDnsReply(packet, *query, s->options.denied_rcode), client);
    co_return;
  }
  if (s->in_flight >= s->options.max_in_flight) {
    e.reason = fmt::format("{}, but {} questions are already in flight: answered SERVFAIL",
                           d.reason, s->in_flight);
    s->emit(e);
    co_await sendTo(s, buildDnsReply(packet, *query, kDnsServFail), client);
    co_return;
  }
  asio::co_spawn(s->socket.get_executor(),
                 forward(s, std::move(packet), std::move(*query), client, std::move(e)),
                 asio::detached);
}

asio::awaitable<void> serve(std::shared_ptr<State> s) {
  std::vector<uint8_t> buffer(kMaxDatagram);
  for (;;) {
    udp::endpoint client;
    error_code ec;
    auto in = asio::buffer(buffer);
    size_t n = co_await s->socket.async_receive_from(in, client,
                                                     asio::redirect_error(asio::use_awaitable, ec));
    if (s->stopped || ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor) {
      co_return;
    }
    if (ec) continue;  // a transient error (an ICMP error queued on the socket): keep serving
    std::vector<uint8_t> packet(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(n));
    co_await handle(s, std::move(packet), client);
  }
}

}  // namespace

Result<std::unique_ptr<DnsResolver>> DnsResolver::create(asio::io_context& io, UniqueFd socket,
                                                         std::vector<udp::endpoint> upstreams,
                                                         PolicySource policy, std::string box_id,
                                                         LogSink log, Options options) {
  if (upstreams.empty()) {
    return fail(Errc::kInvalidArgument,
                "The DNS resolver needs at least one upstream nameserver: check the host's "
                "resolv.conf");
  }
  int type = 0;
  socklen_t len = sizeof type;
  if (!socket || getsockopt(socket.get(), SOL_SOCKET, SO_TYPE, &type, &len) != 0 ||
      type != SOCK_DGRAM) {
    return fail(Errc::kInvalidArgument, "The DNS resolver's socket must be a bound UDP socket");
  }
  sockaddr_storage local{};
  len = sizeof local;
  if (getsockname(socket.get(), reinterpret_cast<sockaddr*>(&local), &len) != 0 ||
      (local.ss_family != AF_INET && local.ss_family != AF_INET6)) {
    return fail(Errc::kInvalidArgument,
                "The DNS resolver's socket must be a bound IPv4 or IPv6 UDP socket");
  }
  auto state = std::make_shared<State>(io, std::move(upstreams), std::move(policy),
                                       std::move(box_id), std::move(log), options);
  error_code ec;
  state->socket.assign(local.ss_family == AF_INET ? udp::v4() : udp::v6(), socket.get(), ec);
  if (ec) {
    return fail(Errc::kInternal, "Cannot use the DNS resolver's socket: " + ec.message(),
                ec.value());
  }
  socket.release();
  asio::co_spawn(io, serve(state), asio::detached);
  return std::unique_ptr<DnsResolver>(new DnsResolver(std::move(state)));
}

DnsResolver::~DnsResolver() {
  stop();
}

void DnsResolver::stop() {
  if (state_->stopped) return;
  state_->stopped = true;
  error_code ignored;
  state_->socket.close(ignored);
  for (const auto& flight : state_->flights) {
    flight->timer.cancel(ignored);
    flight->socket.close(ignored);
  }
}

udp::endpoint DnsResolver::localEndpoint() const {
  error_code ec;
  return state_->socket.local_endpoint(ec);
}

}  // namespace hutch::egress

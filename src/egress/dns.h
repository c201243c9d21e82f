// The DNS resolver of a box: answers only the names its policy allows.
//
// A question for an allowed name is forwarded, as the box sent it, to the host's nameservers
// and the answer relayed back; any other question is answered REFUSED at once. Every question
// is logged (proto "dns"). Only UDP: a box's DNS over TCP meets the transparent listener, which
// has no name to decide on and denies it.
//
// Why REFUSED and not NXDOMAIN for a denied name: REFUSED says what happened ("this server will
// not answer that, by policy", RFC 1035 4.1.1); it is never cached as "the name does not exist",
// so a name allowed a moment later resolves at once; and tools print "Temporary failure in name
// resolution" rather than claiming the name is unknown everywhere. Options::denied_rcode can
// switch to NXDOMAIN.
#pragma once

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "egress/log_entry.h"
#include "egress/policy.h"

namespace hutch::egress {

namespace asio = boost::asio;

// Response codes (RFC 1035 4.1.1).
inline constexpr uint8_t kDnsNoError = 0;
inline constexpr uint8_t kDnsFormErr = 1;
inline constexpr uint8_t kDnsServFail = 2;
inline constexpr uint8_t kDnsNxDomain = 3;
inline constexpr uint8_t kDnsNotImp = 4;
inline constexpr uint8_t kDnsRefused = 5;

inline constexpr uint16_t kDnsTypeA = 1;
inline constexpr uint16_t kDnsTypeAaaa = 28;
inline constexpr uint16_t kDnsClassIn = 1;

inline constexpr size_t kDnsHeaderBytes = 12;

// The header and first question of a DNS query.
struct DnsQuery {
  uint16_t id = 0;
  uint8_t opcode = 0;  // 0 = QUERY
  // The question's name as sent (case kept), labels joined by '.', no trailing dot; "" for the
  // root. Bytes other than letters, digits, '-' and '_' are kept: decideName() refuses them.
  std::string name;
  uint16_t qtype = 0;
  uint16_t qclass = 0;
  size_t question_end = 0;  // offset just past the first question (its QCLASS)
  bool operator==(const DnsQuery&) const = default;
};

// Parses the header and the first question of a query. Errors (kProtocol, message says what is
// wrong): shorter than a header, a response (QR set), QDCOUNT other than 1, a label running past
// the end, a compression pointer or reserved label type in the question (a question's name is
// never compressed), a label containing '.', a name over 255 bytes, no room for QTYPE and QCLASS.
Result<DnsQuery> parseDnsQuery(std::span<const uint8_t> packet);

// A reply to `query` (parsed from `packet`) that carries only `rcode`: the ID, opcode, RD bit and
// first question copied; QR and RA set; no answer, authority or additional records.
std::vector<uint8_t> buildDnsReply(std::span<const uint8_t> packet, const DnsQuery& query,
                                   uint8_t rcode);

// The nameservers of a resolv.conf ("nameserver ADDR" lines, IPv4 or IPv6 with an optional
// "%zone"), port 53, in file order. kNotFound when the file cannot be read or names none.
Result<std::vector<asio::ip::udp::endpoint>> nameserversFrom(
    const std::filesystem::path& resolv_conf);

// "10.0.0.1:53", "[2001:db8::1]:53".
std::string endpointText(const asio::ip::udp::endpoint& endpoint);

// One box's resolver. Single-threaded: create, use and destroy it on the io_context's thread,
// and destroy it before the io_context.
class DnsResolver {
 public:
  struct Options {
    std::chrono::milliseconds upstream_timeout{2000};  // per nameserver tried
    uint8_t denied_rcode = kDnsRefused;
    size_t max_in_flight = 256;  // questions being forwarded; more are answered SERVFAIL
  };
  using PolicySource = std::function<Policy()>;  // the box's policy now; called per question
  using LogSink = std::function<void(const LogEntry&)>;

  // Serves queries arriving on `socket` (an already bound UDP socket, IPv4 or IPv6, typically
  // made by hutchd inside the box's network namespace) from the moment `io` runs. Questions
  // allowed by `policy()` go to `upstreams` in order, each tried for upstream_timeout, from a
  // fresh ephemeral socket per question (so answers never mix). kInvalidArgument when the socket
  // is not a bound UDP socket or there are no upstreams.
  static Result<std::unique_ptr<DnsResolver>> create(asio::io_context& io, UniqueFd socket,
                                                     std::vector<asio::ip::udp::endpoint> upstreams,
                                                     PolicySource policy, std::string box_id,
                                                     LogSink log, Options options);
  static Result<std::unique_ptr<DnsResolver>> create(asio::io_context& io, UniqueFd socket,
                                                     std::vector<asio::ip::udp::endpoint> upstreams,
                                                     PolicySource policy, std::string box_id,
                                                     LogSink log) {
    return create(io, std::move(socket), std::move(upstreams), std::move(policy), std::move(box_id),
                  std::move(log), Options{});
  }

  ~DnsResolver();  // stop()
  DnsResolver(const DnsResolver&) = delete;
  DnsResolver& operator=(const DnsResolver&) = delete;

  // Closes the box's socket and every upstream socket; questions in flight are dropped without
  // a reply or a log entry. Nothing of the resolver is left on the io_context afterwards.
  void stop();

  asio::ip::udp::endpoint localEndpoint() const;

  struct State;

 private:
  explicit DnsResolver(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;  // shared with the coroutines, which may outlive this object
};

}  // namespace hutch::egress

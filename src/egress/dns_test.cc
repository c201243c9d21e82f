#include "egress/dns.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <charconv>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>

namespace hutch::egress {
namespace {

using namespace std::chrono_literals;
using asio::ip::udp;
using boost::system::error_code;
using Bytes = std::vector<uint8_t>;
namespace fs = std::filesystem;

void put16(Bytes& p, uint16_t v) {
  p.push_back(static_cast<uint8_t>(v >> 8));
  p.push_back(static_cast<uint8_t>(v & 0xff));
}
uint16_t get16(const Bytes& p, size_t at) {
  return static_cast<uint16_t>((p[at] << 8) | p[at + 1]);
}

// A standard query (RD set) for `name`, labels split at '.'.
Bytes query(uint16_t id, std::string_view name, uint16_t qtype = kDnsTypeA, bool edns = false) {
  Bytes p;
  put16(p, id);
  p.push_back(0x01);  // RD
  p.push_back(0x00);
  put16(p, 1);
  put16(p, 0);
  put16(p, 0);
  put16(p, edns ? 1 : 0);
  size_t start = 0;
  while (start < name.size()) {
    size_t end = name.find('.', start);
    if (end == std::string_view::npos) end = name.size();
    p.push_back(static_cast<uint8_t>(end - start));
    p.insert(p.end(), name.begin() + start, name.begin() + end);
    start = end + 1;
  }
  p.push_back(0);
  put16(p, qtype);
  put16(p, kDnsClassIn);
  if (edns) {
    for (uint8_t b : {0x00, 0x00, 0x29, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}) {
      p.push_back(b);
    }
  }
  return p;
}

// A header with QDCOUNT 1 followed by `question` bytes.
Bytes withQuestion(std::initializer_list<uint8_t> question) {
  Bytes p;
  put16(p, 0x1234);
  put16(p, 0x0100);  // RD
  put16(p, 1);
  for (int i = 0; i < 3; ++i) put16(p, 0);
  for (uint8_t b : question) p.push_back(b);
  return p;
}

std::string parseError(const Bytes& packet) {
  auto q = parseDnsQuery(packet);
  EXPECT_FALSE(q);
  if (q) return "";
  EXPECT_EQ(q.error().code(), Errc::kProtocol);
  return q.error().message();
}

// --- messages ------------------------------------------------------------------------------

TEST(DnsMessage, ParsesAQuery) {
  Bytes p = query(0xbeef, "WWW.Example.test", kDnsTypeAaaa, true);
  auto q = parseDnsQuery(p);
  ASSERT_TRUE(q) << q.error().message();
  EXPECT_EQ(q->id, 0xbeef);
  EXPECT_EQ(q->opcode, 0);
  EXPECT_EQ(q->name, "WWW.Example.test");
  EXPECT_EQ(q->qtype, kDnsTypeAaaa);
  EXPECT_EQ(q->qclass, kDnsClassIn);
  EXPECT_EQ(q->question_end, 12u + 18u + 4u);
}

TEST(DnsMessage, RootAndOpcode) {
  auto root = parseDnsQuery(withQuestion({0, 0, 2, 0, 1}));
  ASSERT_TRUE(root) << root.error().message();
  EXPECT_EQ(root->name, "");
  EXPECT_EQ(root->qtype, 2);
  Bytes notify = query(1, "a.test");
  notify[2] = 4 << 3;  // NOTIFY
  EXPECT_EQ(parseDnsQuery(notify)->opcode, 4);
}

TEST(DnsMessage, Malformed) {
  EXPECT_NE(parseError({}).find("shorter than the 12-byte header"), std::string::npos);
  EXPECT_NE(parseError(Bytes(11, 0)).find("shorter than the 12-byte header"), std::string::npos);
  Bytes response = query(1, "a.test");
  response[2] |= 0x80;
  EXPECT_NE(parseError(response).find("response"), std::string::npos);
  Bytes none = query(1, "a.test");
  none[5] = 0;
  EXPECT_NE(parseError(none).find("0 questions"), std::string::npos);
  Bytes two = query(1, "a.test");
  two[5] = 2;
  EXPECT_NE(parseError(two).find("2 questions"), std::string::npos);
  // The name stops before its end: no root label.
  EXPECT_NE(parseError(withQuestion({1, 'a'})).find("runs past the end"), std::string::npos);
  EXPECT_NE(parseError(withQuestion({})).find("runs past the end"), std::string::npos);
  // A label longer than what is left.
  EXPECT_NE(parseError(withQuestion({5, 'a', 'b'})).find("label runs past the end"),
            std::string::npos);
  // Length 64 and up are label types, not lengths.
  EXPECT_NE(parseError(withQuestion({0x40, 'a'})).find("reserved label type 0x40"),
            std::string::npos);
  EXPECT_NE(parseError(withQuestion({0x80, 'a'})).find("reserved label type 0x80"),
            std::string::npos);
  // Compression pointers: to the header, to itself (a loop), after a label.
  EXPECT_NE(parseError(withQuestion({0xc0, 0x00, 0, 1, 0, 1})).find("compression pointer"),
            std::string::npos);
  EXPECT_NE(parseError(withQuestion({0xc0, 0x0c, 0, 1, 0, 1})).find("compression pointer"),
            std::string::npos);
  EXPECT_NE(parseError(withQuestion({1, 'a', 0xc0, 0x0e, 0, 1, 0, 1})).find("compression pointer"),
            std::string::npos);
  // No room for QTYPE and QCLASS.
  EXPECT_NE(parseError(withQuestion({1, 'a', 0, 0, 1, 0})).find("type and class"),
            std::string::npos);
  // A '.' inside a label would let "a.b" + "test" pass for the name "a.b.test".
  EXPECT_NE(parseError(withQuestion({3, 'a', '.', 'b', 4, 't', 'e', 's', 't', 0, 0, 1, 0, 1}))
                .find("contains '.'"),
            std::string::npos);
}

TEST(DnsMessage, NameLength) {
  // Four 63-byte labels and the root: 4 * 64 + 1 = 257 bytes, over 255.
  std::string label(63, 'a');
  std::string name = label + "." + label + "." + label + "." + label;
  EXPECT_NE(parseError(query(1, name)).find("longer than 255"), std::string::npos);
  // 255 exactly: three 63-byte labels, one 61-byte label and the root.
  name = label + "." + label + "." + label + "." + std::string(61, 'b');
  auto q = parseDnsQuery(query(1, name));
  ASSERT_TRUE(q) << q.error().message();
  EXPECT_EQ(q->name, name);
}

TEST(DnsMessage, Reply) {
  Bytes p = query(0x4242, "denied.test", kDnsTypeA, true);
  auto q = parseDnsQuery(p);
  ASSERT_TRUE(q);
  Bytes r = buildDnsReply(p, *q, kDnsRefused);
  ASSERT_EQ(r.size(), q->question_end);  // no OPT record copied
  EXPECT_EQ(get16(r, 0), 0x4242);
  EXPECT_EQ(r[2], 0x81);  // QR, opcode 0, RD copied
  EXPECT_EQ(r[3], 0x85);  // RA, REFUSED
  EXPECT_EQ(get16(r, 4), 1);
  EXPECT_EQ(get16(r, 6), 0);
  EXPECT_EQ(get16(r, 8), 0);
  EXPECT_EQ(get16(r, 10), 0);
  EXPECT_TRUE(std::equal(r.begin() + 12, r.end(), p.begin() + 12));
  p[2] = 0;  // no RD
  EXPECT_EQ(buildDnsReply(p, *q, kDnsNxDomain)[2], 0x80);
  EXPECT_EQ(buildDnsReply(p, *q, kDnsNxDomain)[3], 0x83);
}

// --- resolv.conf ---------------------------------------------------------------------------

class TempFile {
 public:
  explicit TempFile(std::string_view text) {
    std::string tmpl = (fs::temp_directory_path() / "hutch-dns-test-XXXXXX").string();
    int fd = mkstemp(tmpl.data());
    ::close(fd);
    path_ = tmpl;
    std::ofstream(path_) << text;
  }
  ~TempFile() {
    std::error_code ec;
    fs::remove(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

TEST(DnsNameservers, FromResolvConf) {
  TempFile conf(
      "# generated\n"
      "search example.test\n"
      "nameserver 192.0.2.53\n"
      "  nameserver\t2001:db8::53   # the second\n"
      "; nameserver 192.0.2.99\n"
      "nameserver not-an-address\n"
      "options edns0\n"
      "nameserver 127.0.0.53\n");
  auto ns = nameserversFrom(conf.path());
  ASSERT_TRUE(ns) << ns.error().message();
  ASSERT_EQ(ns->size(), 3u);
  EXPECT_EQ(endpointText((*ns)[0]), "192.0.2.53:53");
  EXPECT_EQ(endpointText((*ns)[1]), "[2001:db8::53]:53");
  EXPECT_EQ(endpointText((*ns)[2]), "127.0.0.53:53");
}

TEST(DnsNameservers, NoneOrMissing) {
  TempFile conf("search example.test\n# nameserver 192.0.2.1\n");
  auto ns = nameserversFrom(conf.path());
  ASSERT_FALSE(ns);
  EXPECT_EQ(ns.error().code(), Errc::kNotFound);
  EXPECT_NE(ns.error().message().find("names no nameserver"), std::string::npos);
  auto missing = nameserversFrom("/nonexistent/resolv.conf");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code(), Errc::kNotFound);
  EXPECT_NE(missing.error().message().find("/nonexistent/resolv.conf"), std::string::npos);
}

// --- the resolver over loopback ------------------------------------------------------------

udp::endpoint loopback(uint16_t port = 0) {
  return {asio::ip::make_address_v4("127.0.0.1"), port};
}

// A UDP socket bound to 127.0.0.1 on an ephemeral port, as hutchd would hand it over.
UniqueFd boundUdpSocket() {
  UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  return fd;
}

// The address the fake upstream gives a name: 192.0.2.N for "hostN.<anything>", else 192.0.2.1.
asio::ip::address_v4 addressFor(std::string_view name) {
  unsigned n = 1;
  if (name.starts_with("host") || name.starts_with("Host")) {
    std::from_chars(name.data() + 4, name.data() + name.size(), n);
  }
  return asio::ip::make_address_v4("192.0.2." + std::to_string(n));
}

// An upstream nameserver on 127.0.0.1. kAnswer answers every question with one A record
// (addressFor); it holds the answers until `batch` questions arrived and then answers them in
// reverse order. kSilent never answers.
class FakeUpstream {
 public:
  enum class Mode { kAnswer, kSilent };
  FakeUpstream(asio::io_context& io, Mode mode, size_t batch = 1)
      : socket_(io, loopback()), endpoint_(socket_.local_endpoint()), mode_(mode), batch_(batch) {
    asio::co_spawn(io, serve(), asio::detached);
  }
  udp::endpoint endpoint() const { return endpoint_; }
  void stop() {
    error_code ignored;
    socket_.close(ignored);
  }
  std::vector<std::string> names;  // the questions received, in order

 private:
  asio::awaitable<void> serve() {
    std::vector<std::pair<Bytes, udp::endpoint>> held;
    for (;;) {
      Bytes buffer(4096);
      udp::endpoint from;
      error_code ec;
      auto in = asio::buffer(buffer);
      size_t n = co_await socket_.async_receive_from(in, from,
                                                     asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
      buffer.resize(n);
      auto q = parseDnsQuery(buffer);
      EXPECT_TRUE(q) << "the resolver forwarded a malformed query";
      if (!q) continue;
      names.push_back(q->name);
      if (mode_ == Mode::kSilent) continue;
      held.emplace_back(answer(buffer, *q), from);
      if (held.size() < batch_) continue;
      for (auto it = held.rbegin(); it != held.rend(); ++it) {
        auto out = asio::buffer(it->first);
        co_await socket_.async_send_to(out, it->second,
                                       asio::redirect_error(asio::use_awaitable, ec));
      }
      held.clear();
    }
  }

  static Bytes answer(const Bytes& query, const DnsQuery& q) {
    Bytes a(query.begin(), query.begin() + static_cast<std::ptrdiff_t>(q.question_end));
    a[2] = 0x81;
    a[3] = 0x80;
    a[7] = 1;   // ANCOUNT
    a[11] = 0;  // no OPT record back
    for (uint8_t b : {0xc0, 0x0c, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x3c, 0x00, 0x04}) {
      a.push_back(b);
    }
    auto ip = addressFor(q.name).to_bytes();
    a.insert(a.end(), ip.begin(), ip.end());
    return a;
  }

  udp::socket socket_;
  udp::endpoint endpoint_;
  Mode mode_;
  size_t batch_;
};

struct Answer {
  uint16_t id = 0;
  uint8_t rcode = 0xff;
  uint16_t ancount = 0;
  std::string address;  // of the last record, when it is an A record
  Bytes bytes;
};

Answer readAnswer(Bytes bytes) {
  Answer a;
  if (bytes.size() < 12) return a;
  a.id = get16(bytes, 0);
  a.rcode = bytes[3] & 0x0f;
  a.ancount = get16(bytes, 6);
  if (a.ancount > 0 && bytes.size() >= 16) {
    asio::ip::address_v4::bytes_type ip;
    std::copy(bytes.end() - 4, bytes.end(), ip.begin());
    a.address = asio::ip::make_address_v4(ip).to_string();
  }
  a.bytes = std::move(bytes);
  return a;
}

class DnsResolverTest : public ::testing::Test {
 protected:
  DnsResolverTest() : client(io, loopback()) {}

  void start(std::vector<udp::endpoint> upstreams, DnsResolver::Options options = {}) {
    auto r = DnsResolver::create(
        io, boundUdpSocket(), std::move(upstreams), [this] { return policy; }, "box-1",
        [this](const LogEntry& e) { logs.push_back(e); }, options);
    ASSERT_TRUE(r) << r.error().message();
    resolver = std::move(*r);
    resolver_endpoint = resolver->localEndpoint();
  }

  FakeUpstream& upstream(FakeUpstream::Mode mode, size_t batch = 1) {
    upstreams.push_back(std::make_unique<FakeUpstream>(io, mode, batch));
    return *upstreams.back();
  }

  // Runs `body` on the io_context, then stops the resolver and the upstreams; io.run() returns
  // only once nothing is left on it. A generous watchdog turns a hang into a failure.
  void run(asio::awaitable<void> body) {
    asio::steady_timer watchdog(io, 30s);
    watchdog.async_wait([this](error_code ec) {
      if (ec) return;
      ADD_FAILURE() << "the test did not finish; stopping";
      io.stop();
    });
    std::exception_ptr failure;
    bool finished = false;
    asio::co_spawn(io, std::move(body), [&](std::exception_ptr e) {
      failure = std::move(e);
      finished = true;
      watchdog.cancel();
      if (resolver) resolver->stop();
      for (auto& u : upstreams) u->stop();
      error_code ignored;
      client.close(ignored);
    });
    io.run();
    EXPECT_TRUE(finished);
    if (failure) std::rethrow_exception(failure);
  }

  asio::awaitable<void> send(Bytes packet) {
    auto out = asio::buffer(packet);
    co_await client.async_send_to(out, resolver_endpoint, asio::use_awaitable);
  }
  asio::awaitable<Answer> receive() {
    Bytes buffer(4096);
    auto in = asio::buffer(buffer);
    size_t n = co_await client.async_receive(in, asio::use_awaitable);
    buffer.resize(n);
    co_return readAnswer(std::move(buffer));
  }
  asio::awaitable<Answer> ask(Bytes packet) {
    co_await send(std::move(packet));
    co_return co_await receive();
  }

  asio::io_context io;
  udp::socket client;
  Policy policy{{Rule{"allowed.test", {}}, Rule{"*.allowed.test", {443}}},
                {Rule{"bad.allowed.test", {}}}};
  std::vector<LogEntry> logs;
  std::vector<std::unique_ptr<FakeUpstream>> upstreams;
  std::unique_ptr<DnsResolver> resolver;
  udp::endpoint resolver_endpoint;
};

TEST_F(DnsResolverTest, AnswersAllowedAndRefusesDenied) {
  FakeUpstream& up = upstream(FakeUpstream::Mode::kAnswer);
  start({up.endpoint()});
  Answer allowed, denied, ip;
  auto body = [&]() -> asio::awaitable<void> {
    allowed = co_await ask(query(0x1111, "Host7.Allowed.Test", kDnsTypeA, true));
    denied = co_await ask(query(0x2222, "bad.allowed.test"));
    ip = co_await ask(query(0x3333, "10.0.0.1"));
  };
  run(body());

  EXPECT_EQ(allowed.id, 0x1111);
  EXPECT_EQ(allowed.rcode, kDnsNoError);
  EXPECT_EQ(allowed.ancount, 1);
  EXPECT_EQ(allowed.address, "192.0.2.7");
  EXPECT_EQ(denied.id, 0x2222);
  EXPECT_EQ(denied.rcode, kDnsRefused);
  EXPECT_EQ(denied.ancount, 0);
  EXPECT_EQ(ip.rcode, kDnsRefused);
  EXPECT_EQ(up.names, std::vector<std::string>{"Host7.Allowed.Test"});  // sent as asked

  ASSERT_EQ(logs.size(), 3u);
  EXPECT_EQ(logs[0].box, "box-1");
  EXPECT_EQ(logs[0].proto, "dns");
  EXPECT_EQ(logs[0].host, "host7.allowed.test");
  EXPECT_EQ(logs[0].port, 0);
  EXPECT_TRUE(logs[0].allowed);
  EXPECT_EQ(logs[0].reason, "allowed by *.allowed.test");
  EXPECT_EQ(logs[0].address, endpointText(up.endpoint()));
  EXPECT_GT(logs[0].time_ms, 0);
  EXPECT_FALSE(logs[1].allowed);
  EXPECT_EQ(logs[1].host, "bad.allowed.test");
  EXPECT_EQ(logs[1].reason, "denied by bad.allowed.test");
  EXPECT_EQ(logs[1].address, "");
  EXPECT_FALSE(logs[2].allowed);
  EXPECT_EQ(logs[2].reason, "raw IP address");
}

TEST_F(DnsResolverTest, NxdomainWhenConfigured) {
  FakeUpstream& up = upstream(FakeUpstream::Mode::kAnswer);
  DnsResolver::Options options;
  options.denied_rcode = kDnsNxDomain;
  start({up.endpoint()}, options);
  Answer denied;
  auto body = [&]() -> asio::awaitable<void> { denied = co_await ask(query(7, "other.test")); };
  run(body());
  EXPECT_EQ(denied.rcode, kDnsNxDomain);
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_EQ(logs[0].reason, "no allow rule matches");
}

TEST_F(DnsResolverTest, PolicyIsReadPerQuestion) {
  FakeUpstream& up = upstream(FakeUpstream::Mode::kAnswer);
  start({up.endpoint()});
  Answer before, after;
  auto body = [&]() -> asio::awaitable<void> {
    before = co_await ask(query(1, "allowed.test"));
    policy = Policy{};
    after = co_await ask(query(2, "allowed.test"));
  };
  run(body());
  EXPECT_EQ(before.rcode, kDnsNoError);
  EXPECT_EQ(after.rcode, kDnsRefused);
}

TEST_F(DnsResolverTest, ConcurrentQuestionsGetTheirOwnAnswers) {
  constexpr int kQuestions = 6;
  // The upstream answers only once all questions are in, last one first.
  FakeUpstream& up = upstream(FakeUpstream::Mode::kAnswer, kQuestions);
  start({up.endpoint()});
  std::map<uint16_t, Answer> answers;
  auto body = [&]() -> asio::awaitable<void> {
    for (int i = 0; i < kQuestions; ++i) {
      Bytes q = query(static_cast<uint16_t>(100 + i), "host" + std::to_string(i) + ".allowed.test");
      co_await send(q);
    }
    for (int i = 0; i < kQuestions; ++i) {
      Answer a = co_await receive();
      answers[a.id] = a;
    }
  };
  run(body());
  ASSERT_EQ(answers.size(), static_cast<size_t>(kQuestions));
  for (int i = 0; i < kQuestions; ++i) {
    const Answer& a = answers[static_cast<uint16_t>(100 + i)];
    EXPECT_EQ(a.rcode, kDnsNoError);
    EXPECT_EQ(a.address, "192.0.2." + std::to_string(i)) << "question " << i;
  }
  EXPECT_EQ(logs.size(), static_cast<size_t>(kQuestions));
}

TEST_F(DnsResolverTest, SilentUpstreamFallsOverToTheNext) {
  FakeUpstream& silent = upstream(FakeUpstream::Mode::kSilent);
  FakeUpstream& good = upstream(FakeUpstream::Mode::kAnswer);
  DnsResolver::Options options;
  options.upstream_timeout = 200ms;
  start({silent.endpoint(), good.endpoint()}, options);
  Answer a;
  auto body = [&]() -> asio::awaitable<void> { a = co_await ask(query(9, "host3.allowed.test")); };
  run(body());
  EXPECT_EQ(a.id, 9);
  EXPECT_EQ(a.rcode, kDnsNoError);
  EXPECT_EQ(a.address, "192.0.2.3");
  EXPECT_EQ(silent.names, std::vector<std::string>{"host3.allowed.test"});
  EXPECT_EQ(good.names, std::vector<std::string>{"host3.allowed.test"});
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_EQ(logs[0].address, endpointText(good.endpoint()));
}

TEST_F(DnsResolverTest, ClosedUpstreamPortFallsOverToTheNext) {
  uint16_t closed_port = 0;
  {
    udp::socket s(io, loopback());
    closed_port = s.local_endpoint().port();
  }
  FakeUpstream& good = upstream(FakeUpstream::Mode::kAnswer);
  start({loopback(closed_port), good.endpoint()});
  Answer a;
  auto body = [&]() -> asio::awaitable<void> { a = co_await ask(query(10, "allowed.test")); };
  run(body());
  EXPECT_EQ(a.rcode, kDnsNoError);
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_EQ(logs[0].address, endpointText(good.endpoint()));
}

TEST_F(DnsResolverTest, NoUpstreamAnswersServfail) {
  FakeUpstream& one = upstream(FakeUpstream::Mode::kSilent);
  FakeUpstream& two = upstream(FakeUpstream::Mode::kSilent);
  DnsResolver::Options options;
  options.upstream_timeout = 100ms;
  start({one.endpoint(), two.endpoint()}, options);
  Answer a;
  auto body = [&]() -> asio::awaitable<void> { a = co_await ask(query(11, "allowed.test")); };
  run(body());
  EXPECT_EQ(a.id, 11);
  EXPECT_EQ(a.rcode, kDnsServFail);
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_TRUE(logs[0].allowed);
  EXPECT_NE(logs[0].reason.find("no nameserver answered"), std::string::npos) << logs[0].reason;
  EXPECT_NE(logs[0].reason.find(endpointText(two.endpoint())), std::string::npos);
}

TEST_F(DnsResolverTest, MalformedPacketsAreDroppedAndLogged) {
  FakeUpstream& up = upstream(FakeUpstream::Mode::kAnswer);
  start({up.endpoint()});
  Answer after;
  auto body = [&]() -> asio::awaitable<void> {
    Bytes short_packet = {1, 2, 3};
    co_await send(short_packet);
    Bytes pointer = withQuestion({0xc0, 0x0c, 0, 1, 0, 1});
    co_await send(pointer);
    Bytes response = query(5, "allowed.test");
    response[2] |= 0x80;
    co_await send(response);
    // Still serving: this one is answered, and only it.
    after = co_await ask(query(6, "allowed.test"));
  };
  run(body());
  EXPECT_EQ(after.id, 6);
  EXPECT_EQ(after.rcode, kDnsNoError);
  ASSERT_EQ(logs.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(logs[i].allowed);
    EXPECT_EQ(logs[i].host, "");
    EXPECT_NE(logs[i].reason.find("Malformed DNS query"), std::string::npos) << logs[i].reason;
  }
  EXPECT_TRUE(logs[3].allowed);
  EXPECT_EQ(up.names, std::vector<std::string>{"allowed.test"});
}

TEST_F(DnsResolverTest, OddNamesAndOpcodesAreRefused) {
  FakeUpstream& up = upstream(FakeUpstream::Mode::kAnswer);
  policy = Policy{{Rule{"*", {}}}, {}};
  start({up.endpoint()});
  Answer odd, notify;
  auto body = [&]() -> asio::awaitable<void> {
    odd = co_await ask(query(1, std::string("a\x01\xff") + ".test"));
    Bytes n = query(2, "allowed.test");
    n[2] = 4 << 3;
    notify = co_await ask(n);
  };
  run(body());
  EXPECT_EQ(odd.rcode, kDnsRefused);
  EXPECT_EQ(notify.rcode, kDnsNotImp);
  ASSERT_EQ(logs.size(), 2u);
  EXPECT_EQ(logs[0].reason, "invalid host name");
  EXPECT_EQ(logs[0].host, "a\\x01\\xff.test");
  EXPECT_NO_THROW(toJson(logs[0]).dump());
  EXPECT_NE(logs[1].reason.find("opcode 4"), std::string::npos);
  EXPECT_TRUE(up.names.empty());
}

TEST_F(DnsResolverTest, StopWithQuestionsInFlight) {
  FakeUpstream& silent = upstream(FakeUpstream::Mode::kSilent);
  start({silent.endpoint()});  // the default 2 s timeout: stop() must not wait for it
  auto body = [&]() -> asio::awaitable<void> {
    co_await send(query(1, "allowed.test"));
    // Wait until the question reached the upstream, then stop with it in flight.
    asio::steady_timer tick(io);
    while (silent.names.empty()) {
      tick.expires_after(1ms);
      co_await tick.async_wait(asio::use_awaitable);
    }
    resolver->stop();
  };
  run(body());
  EXPECT_TRUE(logs.empty());  // dropped without a log entry
}

TEST(DnsResolverCreate, Errors) {
  asio::io_context io;
  auto none = DnsResolver::create(
      io, boundUdpSocket(), {}, [] { return Policy{}; }, "b", [](const LogEntry&) {});
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code(), Errc::kInvalidArgument);
  EXPECT_NE(none.error().message().find("upstream"), std::string::npos);

  UniqueFd tcp(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  auto stream = DnsResolver::create(
      io, std::move(tcp), {loopback(53)}, [] { return Policy{}; }, "b", [](const LogEntry&) {});
  ASSERT_FALSE(stream);
  EXPECT_EQ(stream.error().code(), Errc::kInvalidArgument);
  EXPECT_NE(stream.error().message().find("UDP"), std::string::npos);

  auto invalid = DnsResolver::create(
      io, UniqueFd(), {loopback(53)}, [] { return Policy{}; }, "b", [](const LogEntry&) {});
  ASSERT_FALSE(invalid);
  EXPECT_EQ(invalid.error().code(), Errc::kInvalidArgument);
}

}  // namespace
}  // namespace hutch::egress

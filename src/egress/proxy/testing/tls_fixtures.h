// Test helpers: real ClientHellos from OpenSSL, in-process stand-in upstreams (HTTP, HTTPS,
// echo) on loopback, and a synchronous box-side client.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "egress/log_entry.h"
#include "egress/proxy/asio.h"
#include "egress/proxy/ca.h"

namespace hutch::egress::proxy::testing {

// The bytes an OpenSSL client sends first: a ClientHello naming `sni` ("" for none).
// max_version: 0 = OpenSSL's default (TLS 1.3), or TLS1_2_VERSION.
std::vector<uint8_t> clientHello(const std::string& sni, int max_version = 0);

// An io_context running on its own thread until destroyed; run() executes a function on it and
// waits for the result.
class IoThread {
 public:
  IoThread();
  ~IoThread();
  asio::io_context& io() { return io_; }
  void run(std::function<void()> f);

 private:
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::thread thread_;
};

// What a stand-in upstream saw.
struct SeenRequest {
  std::string method;
  std::string target;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
};

// An HTTP(S) server on 127.0.0.1:ephemeral answering every request with 200, the body
// "upstream saw <target>", and the request's Authorization and Host headers echoed back as
// X-Echo-Authorization and X-Echo-Host. TLS when `tls` is given.
class StandInServer {
 public:
  StandInServer(asio::io_context& io, std::shared_ptr<ssl::context> tls);
  ~StandInServer();
  uint16_t port() const { return port_; }
  std::vector<SeenRequest> seen();
  int connections() const { return connections_.load(); }

  struct State;

 private:
  std::shared_ptr<State> state_;
  uint16_t port_ = 0;
  std::atomic<int>& connections_;
};

// A TCP echo server on 127.0.0.1:ephemeral.
class EchoServer {
 public:
  explicit EchoServer(asio::io_context& io);
  ~EchoServer();
  uint16_t port() const { return port_; }

 private:
  std::shared_ptr<tcp::acceptor> acceptor_;
  uint16_t port_ = 0;
};

// Collects log entries from any thread; waitFor() blocks until one matches.
class LogCollector {
 public:
  void add(const LogEntry& e);
  std::function<void(const LogEntry&)> sink() {
    return [this](const LogEntry& e) { add(e); };
  }
  // The first entry (in arrival order) matching `match`, waiting up to 5 s; nullopt on timeout.
  std::optional<LogEntry> waitFor(const std::function<bool(const LogEntry&)>& match);
  std::vector<LogEntry> all();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<LogEntry> entries_;
};

// A TLS client context trusting only `ca_pem`.
std::shared_ptr<ssl::context> clientContextTrusting(const std::string& ca_pem);

// A temporary file holding `text`, removed on destruction.
class TempFile {
 public:
  explicit TempFile(const std::string& text);
  ~TempFile();
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace hutch::egress::proxy::testing

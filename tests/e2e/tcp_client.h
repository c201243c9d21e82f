// Plain blocking TCP clients on the host, for tests of published ports.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace hutch::e2e {

// A port nothing listens on right now (bound to 127.0.0.1:0, then closed).
uint16_t freePort();
// A connected socket to 127.0.0.1:port, or -1.
int connectLocal(uint16_t port);
// Sends all of `data`, shuts down our sending side, and reads until end-of-file, with one
// thread per direction. nullopt if the connection failed or was reset.
std::optional<std::string> roundTrip(uint16_t port, const std::string& data);
// GET path over HTTP/1.0; the whole answer (status line, headers, body), or nullopt.
std::optional<std::string> httpGet(uint16_t port, const std::string& path);
// Retries httpGet until the answer contains `needle` or the timeout passes.
std::optional<std::string> waitForHttp(uint16_t port, const std::string& path,
                                       const std::string& needle,
                                       std::chrono::seconds timeout = std::chrono::seconds(60));
// A listening socket on 127.0.0.1:port (to make a port busy), or -1.
int listenLocal(uint16_t port);

}  // namespace hutch::e2e

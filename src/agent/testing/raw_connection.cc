#include "agent/testing/raw_connection.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>

#include "proto/messages.h"

namespace hutch::agent::testing {

Result<> RawConnection::sendBytes(const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd_.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail(sysError("write", errno));
    done += static_cast<size_t>(n);
  }
  return ok();
}

Result<proto::Frame> RawConnection::read(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    HUTCH_TRY(auto frame, decoder_.next());
    if (frame) return std::move(*frame);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return fail(Errc::kTimeout, "No frame from the agent");
    pollfd p{fd_.get(), POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    char buffer[65536];
    const ssize_t n = ::read(fd_.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail(Errc::kUnavailable, "The agent closed the connection");
    decoder_.feed(std::span<const char>(buffer, static_cast<size_t>(n)));
  }
}

Result<> RawConnection::handshake() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    HUTCH_TRY_VOID(send(proto::makeFrame(proto::FrameType::kHello, 0, proto::Hello{1, "test"})));
    while (true) {
      auto frame = read(std::chrono::milliseconds(200));
      if (!frame) {
        if (frame.error().code() == Errc::kTimeout) break;  // resend
        return fail(frame.error());
      }
      if (frame->type == proto::FrameType::kHelloAck) return ok();
    }
  }
  return fail(Errc::kTimeout, "No kHelloAck from the agent");
}

}  // namespace hutch::agent::testing

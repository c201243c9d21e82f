#include "cli/exec_io.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>
#include <thread>

#include "base/unique_fd.h"
#include "proto/frame.h"
#include "proto/messages.h"

namespace hutch::cli {

namespace {

constexpr uint32_t kStream = 1;
constexpr size_t kInputChunk = size_t{256} * 1024;

bool writeAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool sendAll(int sock, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(sock, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Copies `in` into kStdin frames, then sends kStdinEof. Runs on its own thread: the connection is
// only written here and only read by the caller's thread. Returns early once `stop` is readable
// or the connection is shut down.
void pumpInput(int sock, int in, int stop) {
  std::string buf(kInputChunk, '\0');
  std::string frame;
  while (true) {
    pollfd fds[2] = {{in, POLLIN, 0}, {stop, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    ssize_t n = ::read(in, buf.data(), buf.size());
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;
    frame.clear();
    proto::encodeFrame(proto::FrameType::kStdin, kStream,
                       std::string_view(buf.data(), static_cast<size_t>(n)), frame);
    if (!sendAll(sock, frame)) return;
  }
  frame.clear();
  proto::encodeFrame(proto::FrameType::kStdinEof, kStream, {}, frame);
  sendAll(sock, frame);
}

// Reads frames until the command's exit (or error) frame.
Result<int> relayOutput(int sock, const std::string& leftover, const ExecFds& fds) {
  proto::FrameDecoder decoder;
  decoder.feed(leftover);
  std::string buf(size_t{256} * 1024, '\0');
  while (true) {
    auto next = decoder.next();
    if (!next) return fail(next.error().withContext("Bad exec stream from hutchd"));
    if (!*next) {
      ssize_t n = ::read(sock, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        return fail(Errc::kUnavailable,
                    "The connection to hutchd closed before the command finished");
      }
      decoder.feed(std::span<const char>(buf.data(), static_cast<size_t>(n)));
      continue;
    }
    const proto::Frame& frame = **next;
    switch (frame.type) {
      case proto::FrameType::kStdout:
      case proto::FrameType::kStderr: {
        int fd = frame.type == proto::FrameType::kStdout ? fds.out : fds.err;
        if (fd >= 0 && !writeAll(fd, frame.payload)) {
          return fail(sysError("Cannot pass on the command's output", errno));
        }
        break;
      }
      case proto::FrameType::kExit: {
        HUTCH_TRY(proto::ExitStatus status, proto::decodeMessage<proto::ExitStatus>(frame.payload));
        return status.signal ? 128 + *status.signal : status.code.value_or(1);
      }
      case proto::FrameType::kError: {
        HUTCH_TRY(proto::ErrorMessage message,
                  proto::decodeMessage<proto::ErrorMessage>(frame.payload));
        return fail(message.toError());
      }
      default: break;  // kStarted and anything newer: nothing to do
    }
  }
}

}  // namespace

Result<int> runExecFds(const ApiClient& client, const std::string& box,
                       const std::vector<std::string>& argv, const std::string& user,
                       const ExecFds& fds) {
  proto::ExecRequest request;
  request.argv = argv;
  request.user = user;
  request.pipe_stdin = fds.in >= 0;
  HUTCH_TRY_VOID(proto::validate(request));
  HUTCH_TRY(UpgradedStream stream,
            client.upgrade("/v1/boxes/" + box + "/exec",
                           nlohmann::json::parse(proto::encodeMessage(request))));
  int sock = stream.fd.get();
  UniqueFd stop(::eventfd(0, EFD_CLOEXEC));
  if (!stop) return fail(sysError("Cannot create an eventfd", errno));

  std::thread pump;
  if (fds.in >= 0) pump = std::thread(pumpInput, sock, fds.in, stop.get());
  Result<int> result = relayOutput(sock, stream.leftover, fds);
  if (pump.joinable()) {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(stop.get(), &one, sizeof one);
    ::shutdown(sock, SHUT_RDWR);  // unblocks a send waiting for room
    pump.join();
  }
  return result;
}

}  // namespace hutch::cli

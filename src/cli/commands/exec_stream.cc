#include "cli/commands/exec_stream.h"

#include <fmt/format.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>
#include <thread>

#include "proto/frame.h"
#include "proto/messages.h"

namespace hutch::cli {

namespace {

constexpr uint32_t kStream = 1;

bool writeAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool sendFrame(int fd, proto::FrameType type, std::string payload = {}) {
  std::string bytes = proto::encodeFrame({type, kStream, std::move(payload)});
  return writeAll(fd, bytes.data(), bytes.size());
}

// Copies our stdin into kStdin frames, then sends kStdinEof. Runs on its own thread; the socket
// is only written here and only read by the main thread.
void pumpStdin(int sock) {
  std::string buf(64 * 1024, '\0');
  while (true) {
    ssize_t n = ::read(STDIN_FILENO, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (!sendFrame(sock, proto::FrameType::kStdin, buf.substr(0, static_cast<size_t>(n)))) return;
  }
  sendFrame(sock, proto::FrameType::kStdinEof);
}

}  // namespace

Result<int> runExec(const ApiClient& client, const std::string& box, const ExecOptions& options) {
  proto::ExecRequest request{options.argv, options.env,         options.cwd,
                             options.user, options.interactive, false};
  HUTCH_TRY_VOID(proto::validate(request));
  HUTCH_TRY(UpgradedStream stream,
            client.upgrade("/v1/boxes/" + box + "/exec",
                           nlohmann::json::parse(proto::encodeMessage(request))));
  int sock = stream.fd.get();

  std::thread stdin_thread;
  if (options.interactive) stdin_thread = std::thread(pumpStdin, sock);
  auto finish = [&](Result<int> result) {
    if (stdin_thread.joinable()) {
      ::shutdown(sock, SHUT_RDWR);  // unblocks a pending write; the read of stdin may linger
      stdin_thread.detach();
    }
    return result;
  };

  proto::FrameDecoder decoder;
  decoder.feed(stream.leftover);
  std::string buf(256 * 1024, '\0');
  while (true) {
    auto next = decoder.next();
    if (!next) return finish(fail(next.error().withContext("Bad exec stream from hutchd")));
    if (!*next) {
      ssize_t n = ::read(sock, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        return finish(fail(Errc::kUnavailable,
                           "The connection to hutchd closed before the command finished"));
      }
      decoder.feed(std::span<const char>(buf.data(), static_cast<size_t>(n)));
      continue;
    }
    const proto::Frame& frame = **next;
    switch (frame.type) {
      case proto::FrameType::kStdout:
        writeAll(STDOUT_FILENO, frame.payload.data(), frame.payload.size());
        break;
      case proto::FrameType::kStderr:
        writeAll(STDERR_FILENO, frame.payload.data(), frame.payload.size());
        break;
      case proto::FrameType::kExit: {
        auto status = proto::decodeMessage<proto::ExitStatus>(frame.payload);
        if (!status) return finish(fail(status.error()));
        return finish(status->signal ? 128 + *status->signal : status->code.value_or(1));
      }
      case proto::FrameType::kError: {
        auto message = proto::decodeMessage<proto::ErrorMessage>(frame.payload);
        if (!message) return finish(fail(message.error()));
        Error e = message->toError();
        if (e.code() == Errc::kNotFound || e.code() == Errc::kInvalidArgument) {
          fmt::print(stderr, "hutch: {}\n", e.message());
          return finish(e.code() == Errc::kNotFound ? 127 : 126);
        }
        return finish(fail(e));
      }
      default: break;  // kStarted and anything newer: nothing to do
    }
  }
}

}  // namespace hutch::cli

#include "guest/byte_channel.h"

#include <sys/un.h>

#include <algorithm>

namespace hutch::guest {

namespace asio = boost::asio;

asio::awaitable<Result<ByteChannel>> connectUnix(asio::any_io_executor executor, std::string path,
                                                 std::chrono::steady_clock::time_point deadline) {
  if (path.empty() || path.size() >= sizeof(sockaddr_un::sun_path)) {
    co_return fail(Errc::kInvalidArgument,
                   "Socket path \"" + path + "\" is empty or longer than a unix socket allows");
  }
  const asio::generic::stream_protocol::endpoint endpoint{
      asio::local::stream_protocol::endpoint(path)};
  auto delay = std::chrono::milliseconds(10);
  while (true) {
    ByteChannel socket(executor);
    boost::system::error_code ec;
    co_await socket.async_connect(endpoint, asio::redirect_error(asio::use_awaitable, ec));
    if (!ec) co_return socket;
    const bool not_yet = ec == asio::error::connection_refused ||
                         ec == boost::system::errc::no_such_file_or_directory ||
                         ec == asio::error::try_again;
    if (!not_yet) {
      co_return fail(Errc::kUnavailable, "Cannot connect to " + path + ": " + ec.message());
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      co_return fail(Errc::kTimeout,
                     "Timed out connecting to " + path + " (last error: " + ec.message() + ")");
    }
    asio::steady_timer timer(executor, std::min(deadline, now + delay));
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    delay = std::min(delay * 2, std::chrono::milliseconds(200));
  }
}

}  // namespace hutch::guest

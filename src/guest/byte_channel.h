// ByteChannel: the connected byte stream between the host and a box's agent. Today a unix socket
// that QEMU serves for the box's virtio-serial port; later possibly vsock. Anything that is a
// connected stream socket fits, which is why the client takes the generic socket type.
#pragma once

#include <chrono>
#include <string>

#include "base/result.h"
#include "guest/asio.h"

namespace hutch::guest {

using ByteChannel = boost::asio::generic::stream_protocol::socket;

// Connects to the unix socket at path, retrying while it does not exist yet or refuses
// connections (QEMU creates and listens on it a moment after it starts). kTimeout when the
// deadline passes, kUnavailable for other errors.
boost::asio::awaitable<Result<ByteChannel>> connectUnix(
    boost::asio::any_io_executor executor, std::string path,
    std::chrono::steady_clock::time_point deadline);

}  // namespace hutch::guest

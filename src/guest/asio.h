// The Boost.Asio pieces the guest link uses, included in one place: Boost 1.74's awaitable.hpp
// uses std::exchange without including <utility>, so <utility> must come first. Include this
// header instead of <boost/asio/...> directly.
#pragma once

// clang-format off
#include <utility>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
// clang-format on

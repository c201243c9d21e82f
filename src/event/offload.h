// Runs blocking work on the worker pool and resumes the calling coroutine on its own executor
// (the event loop) with the result. The work must not touch loop-owned state.
#pragma once

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <type_traits>

namespace hutch::event {

// Deliberately not a coroutine lambda on the pool: lambda captures of a coroutine live in the
// lambda object, not the frame, which is a use-after-free waiting to happen.
template <class F>
boost::asio::awaitable<std::invoke_result_t<F>> offload(boost::asio::thread_pool& pool, F work) {
  namespace asio = boost::asio;
  using R = std::invoke_result_t<F>;
  auto loop = co_await asio::this_coro::executor;
  co_return co_await asio::async_initiate<decltype(asio::use_awaitable), void(R)>(
      [&pool, loop](auto handler, F fn) {
        asio::post(pool, [handler = std::move(handler), fn = std::move(fn), loop]() mutable {
          R result = fn();
          asio::post(loop, [handler = std::move(handler), result = std::move(result)]() mutable {
            std::move(handler)(std::move(result));
          });
        });
      },
      asio::use_awaitable, std::move(work));
}

}  // namespace hutch::event

// Runs blocking work on the worker pool and resumes the calling coroutine on its own executor
// (the event loop) with the result. The work must not touch loop-owned state.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <type_traits>

namespace hutch::event {

template <class F>
boost::asio::awaitable<std::invoke_result_t<F>> offload(boost::asio::thread_pool& pool, F work) {
  using R = std::invoke_result_t<F>;
  co_return co_await boost::asio::co_spawn(
      pool.get_executor(), [work = std::move(work)]() mutable -> boost::asio::awaitable<R> {
        co_return work();
      },
      boost::asio::use_awaitable);
}

}  // namespace hutch::event

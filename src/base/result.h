// Result<T>: a value or an Error. tl::expected until the toolchain has std::expected.
#pragma once

#include <tl/expected.hpp>

#include "base/error.h"

namespace hutch {

template <class T = void>
using Result = tl::expected<T, Error>;

inline tl::unexpected<Error> fail(Errc code, std::string message, int sys_errno = 0) {
  return tl::unexpected<Error>(Error(code, std::move(message), sys_errno));
}

inline tl::unexpected<Error> fail(Error error) {
  return tl::unexpected<Error>(std::move(error));
}

inline Result<> ok() {
  return {};
}

}  // namespace hutch

// Propagates an error: HUTCH_TRY(auto x, parse(y)); or HUTCH_TRY_VOID(doThing());
#define HUTCH_CONCAT_INNER(a, b) a##b
#define HUTCH_CONCAT(a, b) HUTCH_CONCAT_INNER(a, b)
#define HUTCH_TRY_IMPL(tmp, decl, expr)           \
  auto tmp = (expr);                              \
  if (!tmp) return ::tl::unexpected(tmp.error()); \
  decl = std::move(*tmp)
#define HUTCH_TRY(decl, expr) HUTCH_TRY_IMPL(HUTCH_CONCAT(hutch_try_, __LINE__), decl, expr)
#define HUTCH_TRY_VOID(expr)                                        \
  do {                                                              \
    auto hutch_try_v = (expr);                                      \
    if (!hutch_try_v) return ::tl::unexpected(hutch_try_v.error()); \
  } while (0)

// The same inside coroutines (co_return instead of return).
#define HUTCH_CO_TRY_IMPL(tmp, decl, expr)           \
  auto tmp = (expr);                                 \
  if (!tmp) co_return ::tl::unexpected(tmp.error()); \
  decl = std::move(*tmp)
#define HUTCH_CO_TRY(decl, expr) HUTCH_CO_TRY_IMPL(HUTCH_CONCAT(hutch_try_, __LINE__), decl, expr)
#define HUTCH_CO_TRY_VOID(expr)                                        \
  do {                                                                 \
    auto hutch_try_v = (expr);                                         \
    if (!hutch_try_v) co_return ::tl::unexpected(hutch_try_v.error()); \
  } while (0)

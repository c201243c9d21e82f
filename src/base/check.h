// HUTCH_CHECK: a broken invariant is a bug; abort with a message. World errors use Result.
#pragma once

#include <cstdio>
#include <cstdlib>

#define HUTCH_CHECK(cond)                                                                    \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "hutch: check failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)

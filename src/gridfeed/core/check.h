// GRIDFEED_CHECK: aborts on a broken invariant (a bug), in every build type.
// Never used to validate input; input errors are Status values.
#pragma once

#include <cstdio>
#include <cstdlib>

#define GRIDFEED_CHECK(cond)                                                                    \
  do {                                                                                          \
    if (!(cond)) {                                                                              \
      std::fprintf(stderr, "gridfeed: CHECK failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                             \
    }                                                                                           \
  } while (0)

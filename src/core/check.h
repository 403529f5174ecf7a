// Internal helpers to raise detinfer::Error with a formatted message.
#pragma once

#include <sstream>
#include <string>
#include <utility>

#include "detinfer/error.h"

namespace detinfer {

template <typename... Args>
std::string str_cat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

template <typename... Args>
[[noreturn]] void fail(ErrorCode code, Args&&... args) {
  throw Error(code, str_cat(std::forward<Args>(args)...));
}

}  // namespace detinfer

// Checks an internal invariant; a failure is a bug in detinfer, reported as kInternal
// (never abort()).
#define DETINFER_INTERNAL_CHECK(cond)                                             \
  do {                                                                            \
    if (!(cond))                                                                  \
      ::detinfer::fail(::detinfer::ErrorCode::kInternal, __FILE__, ":", __LINE__, \
                       ": internal check failed: ", #cond);                       \
  } while (0)

// Test helper: a gate that holds the engine thread inside a token callback until the test
// opens it (waits on a condition, never on a timer).
#pragma once

#include <condition_variable>
#include <mutex>

#include "detinfer/generation.h"

namespace detinfer::testing {

// Blocks the engine thread inside a token callback until released.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false;
  bool open = false;
  TokenCallback callback() {
    return [this](const TokenEvent&) {
      std::unique_lock<std::mutex> lk(mu);
      entered = true;
      cv.notify_all();
      cv.wait(lk, [&] { return open; });
      return true;
    };
  }
  void wait_entered() {
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [&] { return entered; });
  }
  void release() {
    std::lock_guard<std::mutex> lk(mu);
    open = true;
    cv.notify_all();
  }
};

}  // namespace detinfer::testing

// Requests that outlive the call that made them: Stream (an iterator of token deltas fed
// by the engine thread) and Request (a submitted request that a Python thread waits on).
// Neither touches Python from the engine's thread: the engine's TokenCallback only pushes
// C++ values under a mutex, and the Python side waits with the GIL released.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "detinfer/session.h"

namespace detinfer_py {

// One generated token as a stream yields it.
struct TokenDelta {
  std::int32_t token = 0;
  std::string text;  // may be empty (held back); the concatenation is the sequence's text
  std::int32_t sample_index = 0;
  std::int32_t step = 0;
  std::optional<float> logprob;             // set when config.logprobs > 0
  std::vector<detinfer::TokenLogprob> top;  // top-N when config.logprobs > 0
};

class Stream {
 public:
  // Submits at once (invalid input throws here, before anything runs).
  Stream(detinfer::DeterministicSession& session, const detinfer::Prompt& prompt,
         const detinfer::GenerationConfig& config);
  ~Stream();  // cancels a request still running and waits for it
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Blocks (call without the GIL) until the next delta; nullopt once the request has
  // finished and every delta was taken. Rethrows the request's Error.
  std::optional<TokenDelta> next();
  void cancel() const { handle_.cancel(); }
  // The whole result once next() returned nullopt.
  const std::optional<detinfer::GenerationResult>& result() const { return result_; }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<TokenDelta> queue;
    bool done = false;
    std::optional<detinfer::GenerationResult> result;
    std::exception_ptr error;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
  detinfer::RequestHandle handle_;
  std::thread waiter_;  // waits for the request's future, then wakes next()
  std::optional<detinfer::GenerationResult> result_;
};

class Request {
 public:
  explicit Request(detinfer::RequestHandle handle) : handle_(std::move(handle)) {}
  std::uint64_t id() const { return handle_.id(); }
  void cancel() const { handle_.cancel(); }
  // Blocks (call without the GIL) until the request finishes; rethrows its Error. May be
  // called again: later calls return the same result.
  detinfer::GenerationResult wait();

 private:
  std::mutex mu_;
  detinfer::RequestHandle handle_;
  std::optional<detinfer::GenerationResult> result_;
  std::exception_ptr error_;
};

}  // namespace detinfer_py

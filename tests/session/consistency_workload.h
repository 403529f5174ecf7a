// The Thinking Machines experiment in miniature, shared by the consistency test (canonical
// mode: one output, asserted) and bench_consistency (both modes: the count is reported).
#pragma once

#include <atomic>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "detinfer/session.h"
#include "session/tiny_session.h"

namespace detinfer::testing {

// Submits one greedy `max_new_tokens`-token request `runs` times in random waves amid
// random background traffic from two threads; returns the number of distinct outputs.
inline std::size_t distinct_outputs(NumericsMode mode, int runs, std::int32_t max_new_tokens) {
  // One kernel thread for fast mode: libtorch's intra-op pool thrashes on a loaded
  // 2-core machine; canonical mode uses two.
  SessionOptions o = tiny_options(mode == NumericsMode::kFast ? 1 : 2);
  o.mode = mode;
  o.max_batch = 32;
  DeterministicSession s = DeterministicSession::open(tiny_model_dir(), o);
  const std::int32_t vocab = static_cast<std::int32_t>(s.vocab_size());
  std::atomic<bool> stop{false};
  std::vector<std::thread> background;
  for (int t = 0; t < 2; ++t) {
    background.emplace_back([&, t] {
      TestRng rng{321, static_cast<std::uint64_t>(t)};
      while (!stop.load()) {
        std::vector<RequestHandle> hs;
        for (std::uint32_t i = 0, n = 1 + rng.next(4); i < n; ++i) {
          hs.push_back(s.submit(random_ids(rng, 48, vocab), random_config(rng)));
        }
        for (auto& h : hs) h.get();
      }
    });
  }
  GenerationConfig c;
  c.max_new_tokens = max_new_tokens;
  c.ignore_eos = true;
  const std::string prompt = "Tell me about reproducible inference.";
  std::set<std::vector<std::int32_t>> outputs;
  TestRng wave{17, 0};
  for (int done = 0; done < runs;) {
    std::vector<RequestHandle> hs;
    for (std::uint32_t i = 0, n = 1 + wave.next(10); i < n && done < runs; ++i, ++done) {
      hs.push_back(s.submit(prompt, c));
      std::this_thread::sleep_for(std::chrono::microseconds(wave.next(500)));
    }
    for (auto& h : hs) outputs.insert(h.get().sequences[0].tokens);
  }
  stop.store(true);
  for (auto& t : background) t.join();
  return outputs.size();
}

}  // namespace detinfer::testing

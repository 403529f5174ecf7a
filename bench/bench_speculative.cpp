// bench_speculative: decode speed with speculative decoding against plain decoding, batch 1,
// one session (same threads), caches off, at controlled acceptance rates
// (docs/speculative.md, docs/performance.md). A plain greedy run past eos gives the
// reference continuation; a replay drafter then proposes that continuation with each
// drafted token replaced by a wrong one with probability 1 - p, for each --accept p (in
// percent; Philox keyed by position, so the corruption is fixed). Each speculative run is
// checked to give the reference tokens and digest bit for bit. Plain and speculative runs
// are interleaved; medians of --repeats. Prints the same-run ratio per p, the measured
// accepted/drafted fraction and the n-gram drafter's own figures on the same prompt.
//   bench_speculative [--model DIR | --shape tiny|qwen05b] [--tokens 128] [--prompt-tokens 32]
//                     [--draft-tokens 4] [--threads 0] [--repeats 3] [--accept 0,50,70,90,100]
// Without --model the shape is generated (random weights) into $TMPDIR.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "detinfer/philox.h"
#include "detinfer/session.h"
#include "session/session_internal.h"
#include "shape_model.h"

namespace {

struct Args {
  std::string model;
  std::string shape = "tiny";
  std::int32_t tokens = 128;
  std::int32_t prompt_tokens = 32;
  std::int32_t draft_tokens = 4;
  std::int32_t threads = 0;
  std::int32_t repeats = 3;
  std::vector<std::int32_t> accept = {0, 50, 70, 90, 100};
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const std::string v = argv[i + 1];
    if (k == "--model") a.model = v;
    if (k == "--shape") a.shape = v;
    if (k == "--tokens") a.tokens = std::max(2, std::atoi(v.c_str()));
    if (k == "--prompt-tokens") a.prompt_tokens = std::max(1, std::atoi(v.c_str()));
    if (k == "--draft-tokens") a.draft_tokens = std::atoi(v.c_str());
    if (k == "--threads") a.threads = std::atoi(v.c_str());
    if (k == "--repeats") a.repeats = std::max(1, std::atoi(v.c_str()));
    if (k == "--accept") {
      a.accept.clear();
      std::stringstream in(v);
      std::string item;
      while (std::getline(in, item, ',')) a.accept.push_back(std::atoi(item.c_str()));
    }
  }
  return a;
}

std::string model_dir(const Args& a) {
  return detinfer_bench::shape_model_dir(a.model, a.shape, "bench-spec-");
}

using detinfer_bench::median;

struct Timed {
  double seconds = 0;
  detinfer::GenerationResult result;
  std::int64_t drafted = 0;
  std::int64_t accepted = 0;
};

// One request straight to the session's engine (caches and observers off), timed.
Timed run(detinfer::DeterministicSession& s, const std::vector<std::int32_t>& prompt,
          const detinfer::GenerationConfig& c,
          decltype(detinfer::engine::EngineRequest::drafter) d) {
  detinfer::engine::Engine& engine = *detinfer::SessionInternals::of(s).engine;
  detinfer::engine::EngineRequest r;
  r.prompt = prompt;
  r.config = c;
  r.use_caches = false;
  r.observed = false;
  r.drafter = std::move(d);
  const detinfer::engine::EngineStats before = engine.stats();
  const auto t0 = std::chrono::steady_clock::now();
  Timed t;
  t.result = engine.submit(std::move(r)).get();
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const detinfer::engine::EngineStats after = engine.stats();
  t.drafted = after.draft_tokens - before.draft_tokens;
  t.accepted = after.accepted_draft_tokens - before.accepted_draft_tokens;
  return t;
}

decltype(detinfer::engine::EngineRequest::drafter) replay(std::vector<std::int32_t> ref,
                                                          std::int32_t accept_percent) {
  return [ref = std::move(ref), accept_percent](std::int32_t, const std::vector<std::int32_t>& gen,
                                                std::int32_t max, std::vector<std::int32_t>& out) {
    for (std::size_t p = gen.size(); p < ref.size() && out.size() < std::size_t(max); ++p) {
      const bool right =
          detinfer::philox_bits(11, 0, p, 0) % 100 < static_cast<std::uint32_t>(accept_percent);
      out.push_back(right ? ref[p] : (ref[p] + 1) % 250);
    }
  };
}

bool same(const detinfer::GenerationResult& a, const detinfer::GenerationResult& b) {
  return a.sequences[0].tokens == b.sequences[0].tokens &&
         a.sequences[0].step_digests == b.sequences[0].step_digests;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    auto session = detinfer::DeterministicSession::open(model_dir(a),
                                                        detinfer_bench::batch1_options(a.threads));
    const std::vector<std::int32_t> prompt = detinfer_bench::bench_prompt(a.prompt_tokens);
    const detinfer::GenerationConfig plain = detinfer_bench::greedy_past_eos(a.tokens);
    const Timed ref = run(session, prompt, plain, {});
    detinfer::GenerationConfig spec = plain;
    spec.draft_tokens = a.draft_tokens;
    std::printf("threads %d, prompt %d, tokens %d, draft_tokens %d, repeats %d\n",
                session.threads(), a.prompt_tokens, a.tokens, a.draft_tokens, a.repeats);
    for (std::int32_t p : a.accept) {
      std::vector<double> tp, ts;
      Timed last;
      for (std::int32_t r = 0; r < a.repeats; ++r) {
        tp.push_back(run(session, prompt, plain, {}).seconds);
        last = run(session, prompt, spec, replay(ref.result.sequences[0].tokens, p));
        ts.push_back(last.seconds);
        if (!same(ref.result, last.result)) {
          std::fprintf(stderr, "bench_speculative: output differs from plain decoding\n");
          return 1;
        }
      }
      const double mp = median(tp), ms = median(ts);
      std::printf(
          "accept %3d%%: plain %.3f s (%.1f tok/s), speculative %.3f s (%.1f tok/s), "
          "accepted/drafted %lld/%lld = %.2f; same-run ratio plain/speculative %.2fx\n",
          p, mp, a.tokens / mp, ms, a.tokens / ms, static_cast<long long>(last.accepted),
          static_cast<long long>(last.drafted),
          last.drafted > 0 ? static_cast<double>(last.accepted) / last.drafted : 0.0, mp / ms);
    }
    // The n-gram drafter itself on this prompt (random weights: its acceptance is whatever
    // the model's repetitions give).
    const Timed ng = run(session, prompt, spec, {});
    if (!same(ref.result, ng.result)) {
      std::fprintf(stderr, "bench_speculative: n-gram output differs from plain decoding\n");
      return 1;
    }
    std::printf("ngram drafter: %.3f s, accepted/drafted %lld/%lld; plain/ngram %.2fx\n",
                ng.seconds, static_cast<long long>(ng.accepted), static_cast<long long>(ng.drafted),
                ref.seconds / ng.seconds);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_speculative: %s\n", e.what());
    return 2;
  }
}

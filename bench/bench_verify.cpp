// bench_verify: how long DeterministicSession::verify takes for a transcript against how
// long generating it took, batch 1, one session (same threads), caches off. Greedy
// decoding past eos for --tokens tokens after a --prompt-tokens prompt; medians of
// --repeats runs of each, interleaved. Prints one line per measurement and the same-run
// ratio generate/verify.
//   bench_verify [--model DIR | --shape tiny|qwen05b] [--tokens 256] [--prompt-tokens 32]
//                [--threads 0] [--repeats 3] [--weights native|q8_0|q4_k_m|...] [--verifies 1]
// --verifies N verifies each generated transcript N times (a session's first verify pays
// its first-call costs; N > 1 shows the steady pass in the median).
// --weights quantizes on load (SessionOptions::weights) for both runs. Without --model the shape is
// generated (random weights) into $TMPDIR.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "detinfer/session.h"
#include "shape_model.h"

namespace {

struct Args {
  std::string model;
  std::string shape = "tiny";
  std::int32_t tokens = 256;
  std::int32_t prompt_tokens = 32;
  std::int32_t threads = 0;
  std::int32_t repeats = 3;
  std::int32_t verifies = 1;  // verify passes per generation (all count in the verify median)
  std::string weights = "native";
  double temperature = 0;  // > 0: seeded sampling (top_k 40, seed 7) instead of greedy
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const std::string v = argv[i + 1];
    if (k == "--model") a.model = v;
    if (k == "--shape") a.shape = v;
    if (k == "--tokens") a.tokens = std::atoi(v.c_str());
    if (k == "--prompt-tokens") a.prompt_tokens = std::atoi(v.c_str());
    if (k == "--threads") a.threads = std::atoi(v.c_str());
    if (k == "--repeats") a.repeats = std::max(1, std::atoi(v.c_str()));
    if (k == "--weights") a.weights = v;
    if (k == "--verifies") a.verifies = std::max(1, std::atoi(v.c_str()));
    if (k == "--temperature") a.temperature = std::atof(v.c_str());
  }
  return a;
}

std::string model_dir(const Args& a) {
  return detinfer_bench::shape_model_dir(a.model, a.shape, "bench-verify-");
}

using detinfer_bench::median;

template <class F>
double seconds(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    detinfer::SessionOptions so = detinfer_bench::batch1_options(a.threads);
    so.weights = a.weights;
    auto session = detinfer::DeterministicSession::open(model_dir(a), so);
    const std::vector<std::int32_t> prompt = detinfer_bench::bench_prompt(a.prompt_tokens);
    detinfer::GenerationConfig c = detinfer_bench::greedy_past_eos(a.tokens);
    if (a.temperature > 0) {
      c.temperature = static_cast<float>(a.temperature);
      c.top_k = 40;
      c.seed = 7;
    }
    std::vector<double> gen, ver;
    detinfer::Transcript t;
    for (std::int32_t r = 0; r < a.repeats; ++r) {
      detinfer::GenerationResult res;
      gen.push_back(seconds([&] { res = session.generate(detinfer::Prompt(prompt), c); }));
      t = detinfer::Transcript::from_json(res.transcript_json);
      for (std::int32_t k = 0; k < a.verifies; ++k) {
        detinfer::VerifyResult v;
        ver.push_back(seconds([&] { v = session.verify(t); }));
        if (!v.verified) {
          std::fprintf(stderr, "bench_verify: not verified: %s\n", v.message.c_str());
          return 1;
        }
        std::printf("run %d: generate %.3f s, verify %.3f s\n", r, gen.back(), ver.back());
      }
    }
    const double g = median(gen), v = median(ver);
    std::printf(
        "weights %s, temperature %g, threads %d, prompt %d, tokens %d, repeats %d: generate "
        "median %.3f s "
        "(%.1f tok/s), verify median %.3f s; same-run ratio generate/verify %.2fx\n",
        a.weights.c_str(), a.temperature, session.threads(), a.prompt_tokens, a.tokens, a.repeats,
        g, a.tokens / g, v, g / v);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_verify: %s\n", e.what());
    return 2;
  }
}

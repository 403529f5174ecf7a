// Decode throughput of the engine through the public session API (see engine.cmake).
//   bench_engine [DIR] [--threads N] [--tokens N] [--fast-tokens N (0: canonical only)]
//                [--batch N] [--fast-batch]
// --fast-batch also runs the batch in fast mode (libtorch) and reports its ratio.
#include <sys/stat.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "detinfer/session.h"
#include "devtools/model_tools.h"
#include "qwen05b_shape.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// CPU seconds used by the whole process (all threads) so far.
double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Throughput {
  double wall_tps = 0;  // tokens per wall second
  double cpu_tps = 0;   // tokens per CPU second of the process: robust on a busy machine
};

// Qwen2.5-0.5B: hidden 896, intermediate 4864, 24 layers, 14 heads, 2 KV heads, vocab
// 151936, tied embeddings, bf16 (the same model bench_model generates).
void ensure_model(const std::string& dir) {
  struct stat st {};
  if (::stat((dir + "/model.safetensors").c_str(), &st) == 0 && st.st_size > 900000000) return;
  const detinfer::devtools::TinyModelOptions o = detinfer_bench::qwen05b_bf16_options(dir);
  detinfer::devtools::make_tiny_model(o);
}

std::vector<std::int32_t> prompt_ids(int i) {
  std::vector<std::int32_t> p;
  for (int t = 0; t < 16; ++t) p.push_back(1000 + 37 * i + 11 * t);
  return p;
}

// Decode tokens/s over the window where all `batch` sequences are past their first
// token: tokens streamed after the last first-token time / window length (wall and
// process CPU time).
Throughput decode_tps(detinfer::DeterministicSession& s, int batch, int tokens) {
  detinfer::GenerationConfig c;
  c.max_new_tokens = tokens;
  c.ignore_eos = true;
  std::mutex mu;
  struct Stamp {
    Clock::time_point wall;
    double cpu;
  };
  std::vector<Stamp> first(batch), stamps;
  std::vector<bool> seen(batch, false);
  std::vector<detinfer::RequestHandle> hs;
  for (int i = 0; i < batch; ++i) {
    hs.push_back(s.submit(prompt_ids(i), c, [&, i](const detinfer::TokenEvent&) {
      std::lock_guard<std::mutex> lk(mu);
      const Stamp now{Clock::now(), process_cpu_seconds()};
      if (!seen[i]) {
        seen[i] = true;
        first[i] = now;
      } else {
        stamps.push_back(now);
      }
      return true;
    }));
  }
  for (auto& h : hs) h.get();
  Stamp start = first[0];
  for (const auto& f : first) {
    if (f.wall > start.wall) start = f;
  }
  Stamp end = start;
  std::int64_t n = 0;
  for (const auto& t : stamps) {
    if (t.wall > start.wall) {
      ++n;
      if (t.wall > end.wall) end = t;
    }
  }
  return {n / seconds(start.wall, end.wall), n / (end.cpu - start.cpu)};
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "/tmp/detinfer-bench-qwen05b";
  int threads = 0, tokens = 32, fast_tokens = 8, batch = 16;
  bool fast_batch = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::atoi(argv[++i]) : 0; };
    if (a == "--threads") {
      threads = next();
    } else if (a == "--tokens") {
      tokens = next();
    } else if (a == "--fast-tokens") {
      fast_tokens = next();
    } else if (a == "--batch") {
      batch = next();
    } else if (a == "--fast-batch") {
      fast_batch = true;
    } else if (!a.empty() && a[0] == '-') {  // not a directory: say how to call it
      std::fprintf(stderr,
                   "usage: bench_engine [DIR] [--threads N] [--tokens N] [--fast-tokens N] "
                   "[--batch N] [--fast-batch]\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    } else {
      dir = a;
    }
  }
  ensure_model(dir);
  detinfer::SessionOptions o;
  o.threads = threads;
  o.max_batch = batch;
  Throughput b1, bn, fast1;
  {
    auto s = detinfer::DeterministicSession::open(dir, o);
    decode_tps(s, 1, 4);  // warm-up
    b1 = decode_tps(s, 1, tokens);
    bn = decode_tps(s, batch, tokens);
    std::printf(
        "canonical, %d threads: batch-1 decode %.2f tok/s (%.2f per CPU-s); %d concurrent: "
        "%.2f tok/s aggregate (%.2f per CPU-s): %.2fx batch-1 wall, %.2fx per CPU-s\n",
        s.threads(), b1.wall_tps, b1.cpu_tps, batch, bn.wall_tps, bn.cpu_tps,
        bn.wall_tps / b1.wall_tps, bn.cpu_tps / b1.cpu_tps);
  }
  if (fast_tokens > 0) {  // --fast-tokens 0: canonical only
    o.mode = detinfer::NumericsMode::kFast;
    auto s = detinfer::DeterministicSession::open(dir, o);
    decode_tps(s, 1, 2);  // warm-up
    fast1 = decode_tps(s, 1, fast_tokens);
    std::printf(
        "fast, %d threads: batch-1 decode %.2f tok/s (%.2f per CPU-s); canonical / fast = "
        "%.2f wall, %.2f per CPU-s\n",
        s.threads(), fast1.wall_tps, fast1.cpu_tps, b1.wall_tps / fast1.wall_tps,
        b1.cpu_tps / fast1.cpu_tps);
    if (fast_batch) {
      const Throughput fn = decode_tps(s, batch, fast_tokens);
      std::printf(
          "fast, %d concurrent: %.2f tok/s aggregate (%.2f per CPU-s): %.2fx fast batch-1 wall, "
          "%.2fx per CPU-s\n",
          batch, fn.wall_tps, fn.cpu_tps, fn.wall_tps / fast1.wall_tps, fn.cpu_tps / fast1.cpu_tps);
    }
  }
  return 0;
}

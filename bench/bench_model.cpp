// bench_model [DIR] [--reps N] [--skip-load]: see bench/model.cmake. Prints one line per figure.
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "devtools/model_tools.h"
#include "model/model.h"
#include "qwen05b_shape.h"

namespace {

using Clock = std::chrono::steady_clock;
using detinfer::NumericsMode;
using detinfer::model::KvCachePool;
using detinfer::model::Model;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

const char* mode_name(NumericsMode m) { return m == NumericsMode::kFast ? "fast" : "canonical"; }

// Qwen2.5-0.5B: hidden 896, intermediate 4864, 24 layers, 14 heads, 2 KV heads, vocab
// 151936, tied embeddings, bf16.
void ensure_model(const std::string& dir) {
  struct stat st {};
  if (::stat((dir + "/model.safetensors").c_str(), &st) == 0 && st.st_size > 900000000) return;
  const detinfer::devtools::TinyModelOptions o = detinfer_bench::qwen05b_bf16_options(dir);
  const auto t0 = Clock::now();
  detinfer::devtools::make_tiny_model(o);
  std::printf("generated %s in %.1f s\n", dir.c_str(), since(t0));
}

struct LoadFigures {
  double load_s = 0, fingerprint_s = 0;
  long rss_kb = 0;
  std::int64_t weight_bytes = 0, resident_bytes = 0;
};

// Loads the model in a child process so that ru_maxrss is the load's own peak.
LoadFigures load_in_child(const std::string& dir, NumericsMode mode) {
  int fds[2];
  if (::pipe(fds) != 0) std::abort();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    LoadFigures f;
    {
      const auto m = detinfer::model::Model::load(dir, {mode, 1, {}});
      f.load_s = m->load_stats().load_seconds;
      f.fingerprint_s = m->load_stats().fingerprint_seconds;
      f.weight_bytes = m->weight_bytes();
      f.resident_bytes = m->resident_bytes();
      rusage ru{};
      ::getrusage(RUSAGE_SELF, &ru);
      f.rss_kb = ru.ru_maxrss;
    }
    if (::write(fds[1], &f, sizeof f) != sizeof f) ::_exit(1);
    ::_exit(0);
  }
  ::close(fds[1]);
  LoadFigures f;
  if (::read(fds[0], &f, sizeof f) != sizeof f) std::fprintf(stderr, "child failed\n");
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return f;
}

// Plain sequential read of `buf` split into `threads` contiguous parts (GB/s).
double read_bandwidth(const std::vector<std::uint64_t>& buf, int threads) {
  std::vector<double> runs;
  for (int rep = 0; rep < 5; ++rep) {
    std::vector<std::uint64_t> sinks(static_cast<std::size_t>(threads) * 8, 0);
    const auto t0 = Clock::now();
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([&, t] {
        const std::size_t lo = buf.size() * t / threads, hi = buf.size() * (t + 1) / threads;
        std::uint64_t a = 0, b = 0, c = 0, d = 0;
        for (std::size_t i = lo; i + 4 <= hi; i += 4) {
          a ^= buf[i];
          b ^= buf[i + 1];
          c ^= buf[i + 2];
          d ^= buf[i + 3];
        }
        sinks[static_cast<std::size_t>(t) * 8] = a ^ b ^ c ^ d;
      });
    }
    for (auto& t : ts) t.join();
    const double s = since(t0);
    if (sinks[0] == 42) std::printf(" ");
    runs.push_back(static_cast<double>(buf.size() * 8) / s / 1e9);
  }
  return median(runs);
}

struct SpeedFigures {
  double prefill_tps = 0, decode_tps = 0;
  std::int64_t decode_bytes = 0;  // weight bytes read per decode token
};

SpeedFigures measure_speed(const std::string& dir, NumericsMode mode, int threads, int reps) {
  const auto model = detinfer::model::Model::load(dir, {mode, threads, {}});
  const auto& c = model->config();
  // Per decode token every linear's weights are read once; the embedding row gather is
  // negligible. Canonical keeps a copy of the embedding table besides the packed lm_head.
  SpeedFigures f;
  f.decode_bytes = model->resident_bytes();
  if (mode == NumericsMode::kCanonical) f.decode_bytes -= c.vocab_size * c.hidden_size * 2;
  constexpr int kPrompt = 64, kDecode = 16;
  detinfer::model::KvCachePool kv(c, 16, std::int64_t{256} << 20);
  std::vector<std::int32_t> table;
  for (int b = 0; b < (kPrompt + kDecode) / 16 + 1; ++b) table.push_back(kv.allocate());
  std::vector<double> prefill, decode;
  for (int rep = 0; rep < reps; ++rep) {
    detinfer::model::SequenceStep st;
    for (int i = 0; i < kPrompt; ++i) st.tokens.push_back((i * 7919 + rep) % 151000);
    st.block_table = table;
    std::vector<float> logits;
    auto t0 = Clock::now();
    model->forward({st}, kv, logits);
    prefill.push_back(kPrompt / since(t0));
    t0 = Clock::now();
    for (int i = 0; i < kDecode; ++i) {
      detinfer::model::SequenceStep d;
      d.tokens = {static_cast<std::int32_t>(i * 31 + 5)};
      d.start_pos = kPrompt + i;
      d.block_table = table;
      logits.clear();
      model->forward({d}, kv, logits);
    }
    decode.push_back(kDecode / since(t0));
  }
  f.prefill_tps = median(prefill);
  f.decode_tps = median(decode);
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "/tmp/detinfer-bench-qwen05b";
  int reps = 3;
  bool skip_load = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--skip-load") == 0) {
      skip_load = true;
    } else if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else {
      dir = argv[i];
    }
  }
  ensure_model(dir);
  for (NumericsMode mode : {NumericsMode::kCanonical, NumericsMode::kFast}) {
    if (skip_load) break;
    std::vector<double> load, fp;
    LoadFigures f;
    for (int rep = 0; rep < reps; ++rep) {
      f = load_in_child(dir, mode);
      load.push_back(f.load_s);
      fp.push_back(f.fingerprint_s);
    }
    const double kept = static_cast<double>(f.resident_bytes);
    std::printf(
        "load %-9s: %.2f s (median of %d), fingerprint %.3f s = %.1f%% of the rest of the load; "
        "peak RSS %.0f MB; weights %.0f MB, kept in memory %.0f MB; RSS / kept = %.2f, "
        "RSS / (weights + kept) = %.2f\n",
        mode_name(mode), median(load), reps, median(fp),
        100.0 * median(fp) / (median(load) - median(fp)), f.rss_kb / 1024.0,
        f.weight_bytes / 1048576.0, kept / 1048576.0, f.rss_kb * 1024.0 / kept,
        f.rss_kb * 1024.0 / (static_cast<double>(f.weight_bytes) + kept));
    std::fflush(stdout);
  }
  std::vector<std::uint64_t> buf((std::size_t{1} << 30) / 8);
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = i * 0x9e3779b97f4a7c15ull;
  double bw[3] = {0, read_bandwidth(buf, 1), read_bandwidth(buf, 2)};
  buf = {};
  std::printf("read bandwidth: %.1f GB/s (1 thread), %.1f GB/s (2 threads)\n", bw[1], bw[2]);
  const char* only = std::getenv("DETINFER_BENCH_MODE");  // "canonical" or "fast": one mode
  for (NumericsMode mode : {NumericsMode::kCanonical, NumericsMode::kFast}) {
    if (only != nullptr && std::strcmp(only, mode_name(mode)) != 0) continue;
    for (int threads : {1, 2}) {
      const SpeedFigures s = measure_speed(dir, mode, threads, reps);
      const double limit = bw[threads] * 1e9 / static_cast<double>(s.decode_bytes);
      std::printf(
          "%-9s %d thread(s): prefill %.1f tok/s (64-token prompt), decode %.2f tok/s; decode "
          "reads %.0f MB/token, bandwidth limit %.2f tok/s, decode / limit = %.2f\n",
          mode_name(mode), threads, s.prefill_tps, s.decode_tps, s.decode_bytes / 1048576.0, limit,
          s.decode_tps / limit);
      std::fflush(stdout);
    }
  }
  return 0;
}

// bench_decode [--quick] [--reps N] [--dir DIR]: the end-to-end decode figures of issue 18
// (docs/performance.md, "Decode at the limit"): batch-1 decode vs the read-bandwidth bound
// (the probe of read_probe.h)
// at 1 and 2 threads for the Qwen2.5-0.5B and SmolLM-135M shapes (bf16, f32), the per-step
// work outside the forward pass, decode at contexts 512/2048/8192 with the attention
// share, and prefill of 512 tokens. Run by scripts/perf-figures.sh. Every figure is a
// ratio of things measured in the same repetition (interleaved), median of the reps.
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "decode/sampler.h"
#include "detinfer/fingerprint.h"
#include "devtools/model_tools.h"
#include "model/model.h"
#include "model/model_config.h"
#include "qwen05b_shape.h"
#include "read_probe.h"

namespace {

using detinfer::model::KvCachePool;
using detinfer::model::Model;
using detinfer::model::SequenceStep;
using Clock = std::chrono::steady_clock;
using detinfer_bench::ReadProbe;
using detinfer_bench::time_it;
using detinfer_bench::Timed;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Shape {
  const char* name;
  detinfer::devtools::TinyModelOptions opt;
};

Shape qwen05b(const std::string& dir, detinfer::core::DType dt) {
  detinfer::devtools::TinyModelOptions o = detinfer_bench::qwen05b_bf16_options(dir);
  o.dtype = dt;
  return {"0.5B", o};
}

// SmolLM-135M: hidden 576, intermediate 1536, 30 layers, 9 heads, 3 KV heads, vocab
// 49152, tied embeddings.
Shape smol135m(const std::string& dir, detinfer::core::DType dt) {
  detinfer::devtools::TinyModelOptions o;
  o.arch = detinfer::devtools::TinyArch::kLlama;
  o.dtype = dt;
  o.hidden = 576;
  o.intermediate = 1536;
  o.layers = 30;
  o.heads = 9;
  o.kv_heads = 3;
  o.vocab = 49152;
  o.max_positions = 8192;
  o.tie_word_embeddings = true;
  o.seed = 1;
  o.out_dir = dir;
  return {"135M", o};
}

void ensure_model(const detinfer::devtools::TinyModelOptions& o) {
  struct stat st {};
  if (::stat((o.out_dir + "/config.json").c_str(), &st) == 0) return;
  const auto t0 = Clock::now();
  detinfer::devtools::make_tiny_model(o);
  std::fprintf(stderr, "generated %s in %.1f s\n", o.out_dir.c_str(),
               std::chrono::duration<double>(Clock::now() - t0).count());
}

// One loaded model with a KV pool and a sequence whose context can be set.
struct Runner {
  std::unique_ptr<detinfer::model::Model> model;
  std::unique_ptr<detinfer::model::KvCachePool> kv;
  std::vector<std::int32_t> table;
  std::vector<float> logits;

  Runner(const std::string& dir, int threads, std::int64_t max_context,
         detinfer::core::DType kv_dtype = detinfer::core::DType::kF32) {
    detinfer::model::ModelOptions options{detinfer::NumericsMode::kCanonical, threads, {}};
    options.kv_dtype = kv_dtype;
    model = detinfer::model::Model::load(dir, options);
    const auto& c = model->config();
    const std::int64_t blocks = max_context / 16 + 2;
    kv = std::make_unique<detinfer::model::KvCachePool>(c, 16, blocks * 16 * kv_bytes_per_token(),
                                                        nullptr, kv_dtype);
    for (std::int64_t b = 0; b < blocks; ++b) table.push_back(kv->allocate());
  }
  std::int64_t kv_bytes_per_token() const {
    const auto& c = model->config();
    return c.num_layers * 2 * c.num_kv_heads * c.head_dim * 4;
  }
  // One decode step of one sequence at position `pos` (keys 0..pos are read; the KV
  // rows beyond what was written are the pool's zeros: attention's cost does not depend
  // on the values).
  void step(std::int64_t pos, std::int32_t token) {
    detinfer::model::SequenceStep s;
    s.tokens = {token};
    s.start_pos = pos;
    s.block_table = table;
    logits.clear();
    model->forward({s}, *kv, logits);
  }
  // A prompt of n tokens in chunks of `chunk` (the engine's prefill_chunk_tokens).
  void prefill_chunked(std::int64_t n, std::int64_t chunk) {
    for (std::int64_t c0 = 0; c0 < n; c0 += chunk) {
      detinfer::model::SequenceStep s;
      for (std::int64_t i = c0; i < std::min(n, c0 + chunk); ++i)
        s.tokens.push_back(static_cast<std::int32_t>(i * 7 + 3));
      s.start_pos = c0;
      s.block_table = table;
      logits.clear();
      model->forward({s}, *kv, logits);
    }
  }
  void prefill(std::int64_t n) {
    detinfer::model::SequenceStep s;
    for (std::int64_t i = 0; i < n; ++i) s.tokens.push_back(static_cast<std::int32_t>(i * 7 + 3));
    s.block_table = table;
    logits.clear();
    model->forward({s}, *kv, logits);
  }
};

// Mean seconds per decode step over `steps` steps from position `pos`.
Timed decode_steps(Runner& r, std::int64_t pos, int steps) {
  const Timed t = time_it([&] {
    for (int i = 0; i < steps; ++i) r.step(pos + i, static_cast<std::int32_t>(i * 31 + 5));
  });
  return {t.wall / steps, t.cpu / steps};
}

// Per-step work outside the forward pass (what the engine does with the logits row of
// a greedy sample without logprobs): token choice + the step digest.
double per_step_work_seconds(const std::vector<float>& row) {
  detinfer::GenerationConfig config;
  config.temperature = 0.0f;
  const std::vector<std::int32_t> prompt = {1, 2, 3}, generated;
  std::uint64_t sink = 0;
  const Timed t = time_it([&] {
    for (int i = 0; i < 20; ++i) {
      const auto c =
          detinfer::decode::choose_token(config, row.data(), static_cast<std::int64_t>(row.size()),
                                         prompt, generated, 0, 0, static_cast<std::uint64_t>(i));
      sink += static_cast<std::uint64_t>(c.token) + detinfer::logits_digest(row.data(), row.size());
    }
  });
  if (sink == 42) std::printf(" ");
  return t.cpu / 20;
}

struct Args {
  int reps = 3;
  bool quick = false;         // 135M only, no context sweep (a smoke run)
  bool context = false;       // the long-context table only
  bool long_prefill = false;  // the long-prompt prefill table only
  bool long_decode = false;   // the long-context decode table only (bf16 KV; --kv-f32: f32)
  bool kv_f32 = false;
  bool probe = false;  // --probe: each probe shape's bandwidth at 1 and 2 threads, then exit
  std::string only;    // --only SUBSTR: the bound rows whose "name dtype" contain it, no sweep
  std::string dir = "/tmp/detinfer-bench-decode";
  int profile_steps = 0;  // > 0: only run this many 0.5B bf16 steps (for perf/callgrind)
  int threads = 1;        // of the profile run
};

void bound_table(const Shape& s, ReadProbe& probe, const Args& a) {
  ensure_model(s.opt);
  const char* dt = s.opt.dtype == detinfer::core::DType::kBF16 ? "bf16" : "f32";
  Runner r1(s.opt.out_dir, 1, 64), r2(s.opt.out_dir, 2, 64);
  const double bytes = static_cast<double>(r1.model->decode_read_bytes() +
                                           24 * r1.kv_bytes_per_token());  // context ~24
  const int steps = s.opt.hidden > 600 ? 6 : 16;
  r1.step(0, 1);
  r2.step(0, 1);
  std::vector<double> f1, f2, f1cpu, f2cpu, speedup, work, gbs1, gbs2, probe1, probe2;
  for (int rep = 0; rep < a.reps; ++rep) {
    const Timed t1 = decode_steps(r1, 16, steps);
    const Timed b1 = probe.bandwidth(1);
    const Timed t2 = decode_steps(r2, 16, steps);
    const Timed b2 = probe.bandwidth(2);
    f1.push_back(bytes / t1.wall / b1.wall);
    f1cpu.push_back(bytes / t1.cpu / b1.cpu);
    f2.push_back(bytes / t2.wall / b2.wall);
    f2cpu.push_back(bytes / (t2.cpu / 2) / b2.cpu);
    speedup.push_back(t1.wall / t2.wall);
    gbs1.push_back(bytes / t1.wall / 1e9);
    gbs2.push_back(bytes / t2.wall / 1e9);
    probe1.push_back(b1.wall / 1e9);
    probe2.push_back(b2.wall / 1e9);
    work.push_back(per_step_work_seconds(r1.logits) / t1.cpu);
  }
  std::printf(
      "| %s %s | %.0f MB | %.3f (cpu %.3f) | %.3f (cpu %.3f) | %.2f | %.1f / %.1f | %.1f / %.1f | "
      "%.2f%% |\n",
      s.name, dt, bytes / 1e6, median(f1), median(f1cpu), median(f2), median(f2cpu),
      median(speedup), median(gbs1), median(probe1), median(gbs2), median(probe2),
      100 * median(work));
  std::fflush(stdout);
}

void context_table(const Shape& s, ReadProbe& probe, const Args& a) {
  ensure_model(s.opt);
  for (int threads : {1, 2}) {
    Runner r(s.opt.out_dir, threads, 8192 + 64);
    r.step(0, 1);
    for (std::int64_t ctx : {512, 2048, 8192}) {
      std::vector<double> share, kvfrac, tps;
      for (int rep = 0; rep < a.reps; ++rep) {
        // Short and long steps alternate, so both see the same machine.
        Timed base, t;
        for (int i = 0; i < 3; ++i) {
          const Timed b1 = decode_steps(r, 16 + i, 1), t1 = decode_steps(r, ctx - 1 + i, 1);
          base = {base.wall + b1.wall / 3, base.cpu + b1.cpu / 3};
          t = {t.wall + t1.wall / 3, t.cpu + t1.cpu / 3};
        }
        const Timed b = probe.bandwidth(threads);
        // One thread: CPU time (robust to other load); two: wall time.
        const double step = threads == 1 ? t.cpu : t.wall;
        const double attn = std::max(1e-9, threads == 1 ? t.cpu - base.cpu : t.wall - base.wall);
        const double bw = threads == 1 ? b.cpu : b.wall;
        share.push_back(attn / step);
        // KV bytes the step reads beyond the short step's, per second of that extra time.
        kvfrac.push_back(static_cast<double>((ctx - 16) * r.kv_bytes_per_token()) / attn / bw);
        tps.push_back(1.0 / t.wall);
      }
      std::printf("| %s, %d thread%s | %lld | %.2f | %.0f%% | %.2f |\n", s.name, threads,
                  threads > 1 ? "s (wall)" : " (CPU time)", static_cast<long long>(ctx),
                  median(tps), 100 * median(share), median(kvfrac));
      std::fflush(stdout);
    }
  }
}

// Decode at long contexts (issue 32): one sequence, 2 threads, bf16 (or f32) KV, steps at
// 128, 2048, 8192 and 16384 alternating (3 steps each per rep), after a 16384-token
// prefill has written every KV row (unwritten pool memory would be the kernel's shared
// zero page, always in cache, hiding what the KV reads cost); the
// bound is the probe's bandwidth (2 threads, same rep) over the weights + the KV bytes a
// step reads; "vs 128" is the step time over the 128-token step's.
void long_decode_table(const Shape& s, ReadProbe& probe, const Args& a) {
  ensure_model(s.opt);
  const std::int64_t ctxs[] = {128, 2048, 8192, 16384};
  Runner r(s.opt.out_dir, 2, 16384 + 64,
           a.kv_f32 ? detinfer::core::DType::kF32 : detinfer::core::DType::kBF16);
  const Timed fill = time_it([&] { r.prefill_chunked(16384, 256); });
  std::printf("(16384-token prefill in chunks of 256: %.1f tok/s)\n\n", 16384 / fill.wall);
  const double kv_token = static_cast<double>(r.kv_bytes_per_token()) / (a.kv_f32 ? 1 : 2);
  std::vector<double> step[4], frac[4], rel[4];
  for (int rep = 0; rep < a.reps; ++rep) {
    double t[4];
    for (int i = 0; i < 4; ++i) t[i] = decode_steps(r, ctxs[i] - 1, 3).wall;
    const double bw = probe.bandwidth(2).wall;
    for (int i = 0; i < 4; ++i) {
      const double bytes = static_cast<double>(r.model->decode_read_bytes()) +
                           kv_token * static_cast<double>(ctxs[i]);
      step[i].push_back(t[i]);
      frac[i].push_back(bytes / bw / t[i]);
      rel[i].push_back(t[i] / t[0]);
    }
  }
  for (int i = 0; i < 4; ++i)
    std::printf("| %lld | %.1f | %.2f | %.2f |\n", static_cast<long long>(ctxs[i]),
                1e3 * median(step[i]), median(frac[i]), median(rel[i]));
}

// Long prompts (issue 32): a 512-token and an 8192-token prompt prefilled in chunks of 256
// with a bf16 KV pool, alternating, 2 threads; tokens per wall second and per CPU second
// (the process's, robust to other load on the cores) and the 8192 / 512 ratios.
void long_prefill_table(const Shape& s, const Args& a) {
  ensure_model(s.opt);
  Runner r(s.opt.out_dir, 2, 8192 + 64, detinfer::core::DType::kBF16);
  r.prefill_chunked(256, 256);
  std::vector<double> wall[2], cpu[2];
  const std::int64_t lens[2] = {512, 8192};
  for (int rep = 0; rep < a.reps; ++rep) {
    for (int i = 0; i < 2; ++i) {
      const Timed t = time_it([&] { r.prefill_chunked(lens[i], 256); });
      wall[i].push_back(static_cast<double>(lens[i]) / t.wall);
      cpu[i].push_back(static_cast<double>(lens[i]) / t.cpu);
      std::printf("| rep %d | %lld | %.1f | %.1f |\n", rep, static_cast<long long>(lens[i]),
                  wall[i].back(), cpu[i].back());
      std::fflush(stdout);
    }
  }
  std::printf("| median | 8192 / 512 | %.2f | %.2f |\n", median(wall[1]) / median(wall[0]),
              median(cpu[1]) / median(cpu[0]));
}

void prefill_table(const Shape& s, const Args& a) {
  ensure_model(s.opt);
  Runner r1(s.opt.out_dir, 1, 600), r2(s.opt.out_dir, 2, 600);
  r1.prefill(16);
  r2.prefill(16);
  const auto& c = r1.model->config();
  // Linear flops per token (2 per weight) incl. lm_head for the one logits row.
  const double per_tok =
      2.0 * static_cast<double>(c.num_layers) *
      static_cast<double>(c.hidden_size * (c.num_heads + 2 * c.num_kv_heads) * c.head_dim +
                          c.num_heads * c.head_dim * c.hidden_size +
                          3 * c.hidden_size * c.intermediate_size);
  std::vector<double> tps1, tps2, gf1cpu;
  for (int rep = 0; rep < a.reps; ++rep) {
    const Timed t1 = time_it([&] { r1.prefill(512); });
    const Timed t2 = time_it([&] { r2.prefill(512); });
    tps1.push_back(512 / t1.wall);
    tps2.push_back(512 / t2.wall);
    gf1cpu.push_back(512 * per_tok / t1.cpu / 1e9);
  }
  std::printf("| %s bf16, prefill 512 | %.1f | %.1f | %.2f | %.1f |\n", s.name, median(tps1),
              median(tps2), median(tps2) / median(tps1), median(gf1cpu));
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      a.quick = true;
    } else if (std::strcmp(argv[i], "--context") == 0) {
      a.context = true;
    } else if (std::strcmp(argv[i], "--long-decode") == 0) {
      a.long_decode = true;
    } else if (std::strcmp(argv[i], "--kv-f32") == 0) {
      a.kv_f32 = true;
    } else if (std::strcmp(argv[i], "--long-prefill") == 0) {
      a.long_prefill = true;
    } else if (std::strcmp(argv[i], "--probe") == 0) {
      a.probe = true;
    } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      a.only = argv[++i];
    } else if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      a.reps = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--profile-steps") == 0 && i + 2 < argc) {
      a.profile_steps = std::max(1, std::atoi(argv[++i]));
      a.threads = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
      a.dir = argv[++i];
    } else {
      std::fprintf(
          stderr,
          "usage: bench_decode [--quick | --context | --long-prefill | --long-decode [--kv-f32]] "
          "[--only SUBSTR] "
          "[--probe] "
          "[--reps N] [--dir DIR] "
          "[--profile-steps N THREADS]\n");
      return 2;
    }
  }
  ::mkdir(a.dir.c_str(), 0755);
  if (a.profile_steps > 0) {  // load, then decode steps only (a profiler's window)
    const Shape s = qwen05b(a.dir + "/05b-bf16", detinfer::core::DType::kBF16);
    ensure_model(s.opt);
    Runner r(s.opt.out_dir, a.threads, a.profile_steps + 64);
    std::fprintf(stderr, "loaded; decoding %d steps\n", a.profile_steps);
    const Timed t = decode_steps(r, 0, a.profile_steps);
    std::printf("%.1f ms per step (wall), %.1f ms CPU\n", 1e3 * t.wall, 1e3 * t.cpu);
    return 0;
  }
  if (a.long_prefill) {
    std::printf(
        "prefill in chunks of 256, bf16 KV, 2 threads (0.5B bf16)\n\n"
        "| run | prompt tokens | tok/s (wall) | tok/s per CPU-s |\n| --- | --- | --- | --- |\n");
    long_prefill_table(qwen05b(a.dir + "/05b-bf16", detinfer::core::DType::kBF16), a);
    return 0;
  }
  ReadProbe probe;
  if (a.long_decode) {
    std::printf(
        "decode at long contexts, %s KV, 2 threads (0.5B bf16), median of %d\n\n"
        "| context | step ms | vs bound | vs 128 |\n| --- | --- | --- | --- |\n",
        a.kv_f32 ? "f32" : "bf16", a.reps);
    long_decode_table(qwen05b(a.dir + "/05b-bf16", detinfer::core::DType::kBF16), probe, a);
    return 0;
  }
  if (a.probe) {  // each shape, best of 5 passes, 1 and 2 threads alternating, per rep
    for (int rep = 0; rep < a.reps; ++rep) {
      for (int threads : {1, 2}) {
        for (const auto& s : probe.each_shape(threads, 5)) {
          std::printf("| %d | %s | %.1f | %.1f |\n", threads, s.name, s.bandwidth.wall / 1e9,
                      s.bandwidth.cpu / 1e9);
        }
      }
    }
    return 0;
  }
  if (!a.context)
    std::printf(
        "decode batch 1 vs the read-bandwidth bound (bytes a step reads / step time, over the\n"
        "probe's bandwidth in the same repetition), median of %d:\n\n"
        "| shape | bytes/step | 1 thread | 2 threads | 2 vs 1 thread speed | GB/s 1 thread: "
        "decode / probe | 2 threads | per-step work |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- |\n",
        a.reps);
  std::vector<Shape> shapes = {smol135m(a.dir + "/135m-bf16", detinfer::core::DType::kBF16),
                               smol135m(a.dir + "/135m-f32", detinfer::core::DType::kF32)};
  if (!a.quick) {
    shapes.insert(shapes.begin(), {qwen05b(a.dir + "/05b-bf16", detinfer::core::DType::kBF16),
                                   qwen05b(a.dir + "/05b-f32", detinfer::core::DType::kF32)});
  }
  if (!a.context) {
    for (const Shape& s : shapes) {
      const std::string name =
          std::string(s.name) + (s.opt.dtype == detinfer::core::DType::kBF16 ? " bf16" : " f32");
      if (name.find(a.only) != std::string::npos) bound_table(s, probe, a);
    }
  }
  if (a.quick || !a.only.empty()) return 0;
  std::printf(
      "\ndecode at long context (0.5B bf16): attention share = (step(ctx) - step(16)) / "
      "step(ctx);\nKV fraction = KV bytes read beyond 16 tokens / that time / probe bandwidth\n\n"
      "| model, threads | context | tok/s | attention share | KV fraction |\n"
      "| --- | --- | --- | --- | --- |\n");
  context_table(shapes[0], probe, a);
  if (a.context) return 0;
  std::printf(
      "\nprefill of 512 tokens in one forward (0.5B bf16)\n\n"
      "| what | tok/s 1 thread | tok/s 2 threads | 2 vs 1 | linear GFLOP per CPU-s, 1 thread |\n"
      "| --- | --- | --- | --- | --- |\n");
  prefill_table(shapes[0], a);
  return 0;
}

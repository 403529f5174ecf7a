// Paged-KV attention dispatch. A task is (row, kv head, range of 64-key chunks) and
// computes every query head of that kv head's group: its scores and maxima, then its
// chunks' denominator and numerator partials (kernels/cpu/attention_simd.h). When the
// rows x kv heads are at least the threads, a task covers all of its row's keys and folds
// its chunks itself; otherwise the chunks are split over tasks in three parallel
// regions (scores, partials, fold). Either way the maxima and the chunk partials are
// folded in the spec's order, so the bits do not depend on the split.
#include <algorithm>
#include <limits>
#include <memory>
#include <vector>

#include "core/check.h"
#include "core/thread_pool.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/thread_scratch.h"
#include "kernels/kernels.h"
#include "kernels/reference/tanh_hd.h"

namespace detinfer::kernels {
namespace {

constexpr std::int64_t kChunk = 64;
// A split task gets at least this many keys (eight chunks): below, the two extra
// synchronizations cost more than the parallelism gains.
constexpr std::int64_t kMinKeysPerPart = 512;

// The spec's max_value(score): score[0] when it is NaN, else the largest non-NaN score
// (mx: the NaN-ignoring maxima of `parts` key ranges, part-major).
void fold_max(const float* S, std::int64_t lds, std::int64_t G, const float* mx, std::int64_t parts,
              float* m) {
  for (std::int64_t g = 0; g < G; ++g) {
    float best = -std::numeric_limits<float>::infinity();
    for (std::int64_t p = 0; p < parts; ++p) best = mx[p * G + g] > best ? mx[p * G + g] : best;
    const float first = S[g * lds];
    m[g] = first != first ? first : best;
  }
}

struct Job {
  const float* q;
  std::int64_t ldq;
  const std::int64_t* num_keys;
  std::int64_t group, d, kv_heads;
  const PagedKvView* kv;
  const std::int64_t* off;
  float scale;
  float* out;
  std::int64_t ldo;
  std::int64_t lds;  // score row stride
  // AttentionMask: a row's keys are [first(r), num_keys[r]), renumbered from 0 (its
  // offsets start at off + first(r)), so the kernels fold them from the first visible key.
  const std::int64_t* first_keys;
  float softcap;
  // K transposed once for all rows (kv head h at kt + h * kt_stride), or null.
  const float* kt;
  std::int64_t kt_stride;

  std::int64_t first(std::int64_t r) const { return first_keys != nullptr ? first_keys[r] : 0; }
  cpu::AttnHeads heads(std::int64_t pair) const {
    const std::int64_t r = pair / kv_heads, h = pair % kv_heads;
    return cpu::AttnHeads{q + r * ldq + h * group * d,
                          group,
                          h,
                          kv,
                          off + first(r),
                          scale,
                          kt != nullptr ? kt + h * kt_stride : nullptr};
  }
  // heads(pair) for the first of `task_heads` consecutive kv heads of a row that one task
  // runs in turns over the same keys (it prefetches their token rows), else for a later one.
  cpu::AttnHeads heads(std::int64_t pair, std::int64_t i, std::int64_t task_heads) const {
    cpu::AttnHeads a = heads(pair);
    if (i == 0) a.prefetch_heads = task_heads;
    return a;
  }
  float* out_of(std::int64_t pair) const {
    return out + (pair / kv_heads) * ldo + (pair % kv_heads) * group * d;
  }
  std::int64_t keys(std::int64_t pair) const {
    return num_keys[pair / kv_heads] - first(pair / kv_heads);
  }
  // Soft-capping of the scores [j0, j1) the kernel just wrote, in place, and their
  // NaN-ignoring maxima again (mx[g]) over the capped values.
  void cap(float* S, std::int64_t j0, std::int64_t j1, float* mx) const {
    if (softcap <= 0.0f) return;
    for (std::int64_t g = 0; g < group; ++g) {
      float best = -std::numeric_limits<float>::infinity();
      for (std::int64_t j = j0; j < j1; ++j) {
        const float s = explog::softcap_f32(S[g * lds + j], softcap);
        S[g * lds + j] = s;
        best = s > best ? s : best;
      }
      mx[g] = best;
    }
  }
};

// Pairs [p0, p1) of one row (consecutive kv heads) with all of their keys: scores, max,
// partials folded in place. The kv heads take turns every kStep keys, so a token's K
// (then V) row, all kv heads of it, is read while it is in cache.
constexpr std::int64_t kStep = 256;

void attend_heads(const Job& job, std::int64_t p0, std::int64_t p1, float* S, float* kt,
                  float* stats) {
  const cpu::IsaKernels& isa = cpu::active_kernels();
  const std::int64_t G = job.group, d = job.d, nk = job.keys(p0), n = p1 - p0;
  float *mx = stats, *m = stats + n * G, *den = stats + 2 * n * G, *tmp = stats + 3 * n * G;
  for (std::int64_t i = 0; i < n; ++i)
    std::fill(job.out_of(p0 + i), job.out_of(p0 + i) + G * d, 0.0f);
  if (nk == 0) return;
  std::fill(mx, mx + n * G, -std::numeric_limits<float>::infinity());
  for (std::int64_t j = 0; j < nk; j += kStep) {
    for (std::int64_t i = 0; i < n; ++i) {
      isa.attn_scores(job.heads(p0 + i, i, n), j, std::min(nk, j + kStep), S + i * G * job.lds,
                      job.lds, tmp, kt);
      job.cap(S + i * G * job.lds, j, std::min(nk, j + kStep), tmp);
      for (std::int64_t g = 0; g < G; ++g)
        mx[i * G + g] = tmp[g] > mx[i * G + g] ? tmp[g] : mx[i * G + g];
    }
  }
  for (std::int64_t i = 0; i < n; ++i)
    fold_max(S + i * G * job.lds, job.lds, G, mx + i * G, 1, m + i * G);
  std::fill(den, den + n * G, 0.0f);
  for (std::int64_t j = 0; j < nk; j += kStep) {
    for (std::int64_t i = 0; i < n; ++i)
      isa.attn_partials(job.heads(p0 + i, i, n), S + i * G * job.lds, job.lds, m + i * G, j,
                        std::min(nk, j + kStep), den + i * G, 0, job.out_of(p0 + i), 0);
  }
  for (std::int64_t i = 0; i < n; ++i) {
    float* out = job.out_of(p0 + i);
    for (std::int64_t g = 0; g < G; ++g)
      for (std::int64_t c = 0; c < d; ++c) out[g * d + c] = out[g * d + c] / den[i * G + g];
  }
}

// Rows from which a call transposes K once for all of them (a prefill chunk), unless the
// transposed copy would pass kMaxTransposedFloats (binary32, all kv heads).
constexpr std::int64_t kTransposeOnceRows = 8;
constexpr std::int64_t kMaxTransposedFloats = std::int64_t{16} << 20;  // 64 MiB

std::int64_t round_up(std::int64_t n, std::int64_t m) { return (n + m - 1) / m * m; }

// job.kt for keys [0, keys) of every kv head, in 256-key pieces over the pool.
void transpose_k_once(const Job& job, std::int64_t keys, float* kt, core::ThreadPool* pool) {
  const cpu::IsaKernels& isa = cpu::active_kernels();
  const std::int64_t pieces = (keys + kStep - 1) / kStep;
  auto body = [&](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t h = t / pieces, j = t % pieces * kStep;
      const cpu::AttnHeads a = job.heads(h);  // row 0's kv head h (first key 0 in every row)
      isa.attn_transpose_k(a, j, std::min(keys, j + kStep), kt + h * job.kt_stride);
    }
  };
  if (pool != nullptr) {
    pool->parallel_for(job.kv_heads * pieces, 1, body);
  } else {
    body(0, job.kv_heads * pieces);
  }
}

// The calling thread's scratch floats (run_split's, or a run_whole task's): a
// cpu::ThreadScratch, kept for the thread's next call.
std::size_t scratch_bytes(std::int64_t floats) {
  return static_cast<std::size_t>(floats) * sizeof(float);
}

// Tasks of `per` consecutive kv heads of a row (per divides kv_heads). A prefill's rows
// have more keys the later they are, so the rows go out in 8 ranges per thread, claimed
// as threads free up, rather than one range each (measured: an 8192-row prompt in one
// step left the first thread 1/4 of the attention work).
void run_whole(const Job& job, std::int64_t pairs, std::int64_t per, core::ThreadPool* pool) {
  auto body = [&](std::int64_t t0, std::int64_t t1) {
    const std::int64_t G = job.group;
    // The kernels write every scratch float before reading it.
    const cpu::ThreadScratch held(scratch_bytes(
        per * G * job.lds + cpu::attention_scratch_floats(job.d, job.group) + 4 * per * G));
    float* S = held.as<float>();
    float* scratch = S + per * G * job.lds;
    float* stats = scratch + cpu::attention_scratch_floats(job.d, job.group);
    for (std::int64_t t = t0; t < t1; ++t)
      attend_heads(job, t * per, (t + 1) * per, S, scratch, stats);
  };
  const std::int64_t tasks = pairs / per;
  if (pool != nullptr && tasks > 1) {
    pool->parallel_for(tasks, 1, body, 8 * pool->num_threads());
  } else {
    body(0, tasks);
  }
}

// The first of a row's `chunks` chunks in key range `part` of `parts` (run_split's ranges).
std::int64_t range_begin(std::int64_t chunks, std::int64_t part, std::int64_t parts) {
  return chunks * part / parts;
}

// run_split's partials: the first key range's chunks folded in place as they are computed
// (the spec's s = +0; s = s + p from the first chunk on), every later range's chunks one
// by one, then folded on by fold_split.
struct SplitPartials {
  float* acc_num;  // pair p's first-range sums at acc_num + p * G * d (from +0)
  float* acc_den;  // ... at acc_den + p * G
  float* dp;       // chunk c (pair-major, max_chunks per pair): den at dp + c * G
  float* np;       // ... and num at np + c * G * d
  std::int64_t max_chunks;

  static std::int64_t floats(std::int64_t pairs, std::int64_t G, std::int64_t d,
                             std::int64_t max_chunks) {
    return pairs * G * (d + 1) * (max_chunks + 1);
  }
  // The layout over `floats` floats from base.
  static SplitPartials at(float* base, std::int64_t pairs, std::int64_t G, std::int64_t d,
                          std::int64_t max_chunks) {
    SplitPartials sp;
    sp.dp = base;
    sp.np = sp.dp + pairs * max_chunks * G;
    sp.acc_num = sp.np + pairs * max_chunks * G * d;
    sp.acc_den = sp.acc_num + pairs * G * d;
    sp.max_chunks = max_chunks;
    return sp;
  }
};

// run_split's fold: from the first range's sums, s = s + p for each later chunk in order;
// out = num / den.
void fold_split(const Job& job, std::int64_t pairs, std::int64_t parts, const SplitPartials& sp,
                core::ThreadPool& pool) {
  const std::int64_t G = job.group, d = job.d;
  const cpu::IsaKernels& isa = cpu::active_kernels();
  pool.parallel_for(pairs * G, 1, [&](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t pair = t / G, g = t % G, nk = job.keys(pair);
      const std::int64_t chunks = (nk + kChunk - 1) / kChunk;
      float* out = job.out_of(pair) + g * d;
      if (chunks == 0) {
        std::fill(out, out + d, 0.0f);
        continue;
      }
      const float* first = sp.acc_num + (pair * G + g) * d;
      std::copy(first, first + d, out);
      float den = sp.acc_den[pair * G + g];
      for (std::int64_t i = range_begin(chunks, 1, parts); i < chunks; ++i) {
        const std::int64_t chunk = pair * sp.max_chunks + i;
        den = den + sp.dp[chunk * G + g];
        isa.add(out, sp.np + (chunk * G + g) * d, out, d);
      }
      for (std::int64_t c = 0; c < d; ++c) out[c] = out[c] / den;
    }
  });
}

// Units of `per` consecutive kv heads of one row (per divides kv_heads), their chunks split
// into `parts` key ranges: three parallel regions (scores, partials, fold). A task is
// (unit, part) and runs the unit's kv heads in turns every kStep keys, so with per =
// kv_heads it streams whole token rows of its key range (at batch 1 the threads split the
// keys, not the kv heads: two threads reading alternate halves of the same rows each pull
// the whole rows through their caches).
void run_split(const Job& job, std::int64_t pairs, std::int64_t per, std::int64_t parts,
               core::ThreadPool& pool) {
  const std::int64_t G = job.group, d = job.d, lds = job.lds;
  const std::int64_t max_chunks = lds / kChunk - 1;  // chunks of the longest row
  const std::int64_t tasks = pairs / per * parts;
  // Every float of these is written before it is read (each chunk by the task owning it,
  // the first range's sums zeroed by the first range's task).
  const std::int64_t scores = pairs * G * lds, maxima = pairs * parts * G;
  const cpu::ThreadScratch held(
      scratch_bytes(scores + maxima + SplitPartials::floats(pairs, G, d, max_chunks)));
  float* S = held.as<float>();
  float* mx = S + scores;
  const SplitPartials sp = SplitPartials::at(mx + maxima, pairs, G, d, max_chunks);
  const cpu::IsaKernels& isa = cpu::active_kernels();
  // Task t: pairs [p0, p0 + per), part t % parts: chunks [c0, ...), keys [j0, j1).
  auto range = [&](std::int64_t t, std::int64_t* p0, std::int64_t* c0, std::int64_t* j0,
                   std::int64_t* j1) {
    const std::int64_t part = t % parts;
    *p0 = t / parts * per;
    const std::int64_t nk = job.keys(*p0), chunks = (nk + kChunk - 1) / kChunk;
    *c0 = range_begin(chunks, part, parts);
    *j0 = *c0 * kChunk;
    *j1 = std::min(nk, range_begin(chunks, part + 1, parts) * kChunk);
  };
  auto S_of = [&](std::int64_t pair) { return S + pair * G * lds; };
  pool.parallel_for(tasks, 1, [&](std::int64_t t0, std::int64_t t1) {
    const std::unique_ptr<float[]> buf(
        new float[static_cast<std::size_t>(cpu::attention_scratch_floats(d, G) + G)]);
    float* tmp = buf.get() + cpu::attention_scratch_floats(d, G);
    for (std::int64_t t = t0; t < t1; ++t) {
      std::int64_t p0, c0, j0, j1;
      range(t, &p0, &c0, &j0, &j1);
      const std::int64_t part = t % parts;
      for (std::int64_t i = 0; i < per; ++i) {
        float* m = &mx[static_cast<std::size_t>(((p0 + i) * parts + part) * G)];
        std::fill(m, m + G, -std::numeric_limits<float>::infinity());
        if (part != 0) continue;
        std::fill(sp.acc_num + (p0 + i) * G * d, sp.acc_num + (p0 + i + 1) * G * d, 0.0f);
        std::fill(sp.acc_den + (p0 + i) * G, sp.acc_den + (p0 + i + 1) * G, 0.0f);
      }
      for (std::int64_t j = j0; j < j1; j += kStep) {
        const std::int64_t je = std::min(j1, j + kStep);
        for (std::int64_t i = 0; i < per; ++i) {
          float* m = &mx[static_cast<std::size_t>(((p0 + i) * parts + part) * G)];
          isa.attn_scores(job.heads(p0 + i, i, per), j, je, S_of(p0 + i), lds, tmp, buf.get());
          job.cap(S_of(p0 + i), j, je, tmp);
          for (std::int64_t g = 0; g < G; ++g) m[g] = tmp[g] > m[g] ? tmp[g] : m[g];
        }
      }
    }
  });
  pool.parallel_for(tasks, 1, [&](std::int64_t t0, std::int64_t t1) {
    std::vector<float> m(static_cast<std::size_t>(per * G));
    for (std::int64_t t = t0; t < t1; ++t) {
      std::int64_t p0, c0, j0, j1;
      range(t, &p0, &c0, &j0, &j1);
      if (j0 >= j1) continue;
      const bool first = t % parts == 0;  // in place (strides 0), else chunk by chunk
      for (std::int64_t i = 0; i < per; ++i)
        fold_max(S_of(p0 + i), lds, G, &mx[static_cast<std::size_t>((p0 + i) * parts * G)], parts,
                 &m[static_cast<std::size_t>(i * G)]);
      for (std::int64_t j = j0; j < j1; j += kStep) {
        const std::int64_t je = std::min(j1, j + kStep);
        for (std::int64_t i = 0; i < per; ++i) {
          const std::int64_t chunk = (p0 + i) * max_chunks + j / kChunk;
          isa.attn_partials(job.heads(p0 + i, i, per), S_of(p0 + i), lds, m.data() + i * G, j, je,
                            first ? sp.acc_den + (p0 + i) * G : sp.dp + chunk * G, first ? 0 : G,
                            first ? sp.acc_num + (p0 + i) * G * d : sp.np + chunk * G * d,
                            first ? 0 : G * d);
        }
      }
    }
  });
  fold_split(job, pairs, parts, sp, pool);
}

// Row offsets of tokens 0..max_keys-1, shared by every row and head (no divisions in the
// kernels' inner loops). The blocks before the first key any row sees are not read (a
// sliding window's released blocks are -1 there).
std::vector<std::int64_t> key_offsets(const PagedKvView& kv, std::int64_t max_keys,
                                      std::int64_t min_first) {
  const std::int64_t kv_stride = kv.num_kv_heads * kv.head_dim;
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(max_keys));
  const std::int64_t first_block = min_first / kv.block_size;
  for (std::int64_t b = first_block, t = b * kv.block_size; t < max_keys; ++b) {
    const std::int64_t block = kv.block_table[b];
    if (block < 0) fail(ErrorCode::kInvalidArgument, "attention: block_table[", b, "] = ", block);
    const std::int64_t end = std::min(max_keys, t + kv.block_size);
    for (std::int64_t row = block * kv.block_size; t < end; ++t, ++row)
      offsets[static_cast<std::size_t>(t)] = row * kv_stride;
  }
  return offsets;
}

}  // namespace

void attention(const float* q, std::int64_t ldq, std::int64_t rows, const std::int64_t* num_keys,
               std::int64_t num_heads, const PagedKvView& kv, float scale, float* out,
               std::int64_t ldo, core::ThreadPool* pool) {
  attention(q, ldq, rows, num_keys, AttentionMask{}, num_heads, kv, scale, out, ldo, pool);
}

void attention(const float* q, std::int64_t ldq, std::int64_t rows, const std::int64_t* num_keys,
               const AttentionMask& mask, std::int64_t num_heads, const PagedKvView& kv,
               float scale, float* out, std::int64_t ldo, core::ThreadPool* pool) {
  if (rows <= 0) return;
  if (!(mask.softcap >= 0.0f) || mask.softcap == std::numeric_limits<float>::infinity())
    fail(ErrorCode::kInvalidArgument, "attention: softcap ", mask.softcap);
  if (kv.num_kv_heads <= 0 || kv.head_dim <= 0 || kv.block_size <= 0 || num_heads <= 0 ||
      num_heads % kv.num_kv_heads != 0)
    fail(ErrorCode::kInvalidArgument, "attention: num_heads=", num_heads,
         " num_kv_heads=", kv.num_kv_heads, " head_dim=", kv.head_dim,
         " block_size=", kv.block_size);
  if (kv.kv_dtype != core::DType::kF32 && kv.kv_dtype != core::DType::kBF16 &&
      kv.kv_dtype != core::DType::kF16)
    fail(ErrorCode::kInvalidArgument, "attention: kv_dtype ", static_cast<int>(kv.kv_dtype),
         " is not f32, bf16 or f16");
  std::int64_t max_keys = 0, max_visible = 0, max_first = 0;
  std::int64_t min_first = std::numeric_limits<std::int64_t>::max();
  for (std::int64_t r = 0; r < rows; ++r) {
    if (num_keys[r] < 0 || num_keys[r] > kv.num_blocks * kv.block_size)
      fail(ErrorCode::kInvalidArgument, "attention: row ", r, " has ", num_keys[r],
           " keys but the block table covers ", kv.num_blocks * kv.block_size);
    max_keys = std::max(max_keys, num_keys[r]);
    if (mask.first_keys != nullptr && (mask.first_keys[r] < 0 || mask.first_keys[r] > num_keys[r]))
      fail(ErrorCode::kInvalidArgument, "attention: row ", r, " has first key ", mask.first_keys[r],
           " outside [0, ", num_keys[r], "]");
    const std::int64_t first = mask.first_keys != nullptr ? mask.first_keys[r] : 0;
    min_first = std::min(min_first, first);
    max_first = std::max(max_first, first);
    max_visible = std::max(max_visible, num_keys[r] - first);
  }
  const std::int64_t d = kv.head_dim;
  const std::vector<std::int64_t> offsets = key_offsets(kv, max_keys, min_first);
  // Score rows: every chunk plus room for the kernels' last partial vector.
  const std::int64_t lds = (max_keys + kChunk - 1) / kChunk * kChunk + kChunk;
  Job job{q,
          ldq,
          num_keys,
          num_heads / kv.num_kv_heads,
          d,
          kv.num_kv_heads,
          &kv,
          offsets.data(),
          scale,
          out,
          ldo,
          lds,
          mask.first_keys,
          mask.softcap,
          nullptr,
          0};
  const int threads = pool != nullptr ? pool->num_threads() : 1;
  std::unique_ptr<float[]> kt;
  // (The scalar kernels read K row by row: no copy for them.)
  if (rows >= kTransposeOnceRows && max_first == 0 && active_isa() != Isa::kScalar &&
      kv.num_kv_heads * round_up(max_keys, 16) * d <= kMaxTransposedFloats) {
    job.kt_stride = round_up(max_keys, 16) * d;
    kt.reset(new float[static_cast<std::size_t>(kv.num_kv_heads * job.kt_stride)]);
    job.kt = kt.get();
    transpose_k_once(job, max_keys, kt.get(), pool);
  }
  const std::int64_t pairs = rows * kv.num_kv_heads;
  // Fewer rows than threads: split each row's keys (all of its kv heads in one task, whole
  // token rows streamed) when they are long enough; else its kv heads.
  const std::int64_t parts = std::min((threads + rows - 1) / rows, max_visible / kMinKeysPerPart);
  if (pool != nullptr && rows < threads && parts >= 2) {
    run_split(job, pairs, kv.num_kv_heads, parts, *pool);
  } else {
    // A row's kv heads in one task when there are no more threads than rows.
    const std::int64_t per = rows >= threads ? kv.num_kv_heads : 1;
    run_whole(job, pairs, per, pool);
  }
}

}  // namespace detinfer::kernels

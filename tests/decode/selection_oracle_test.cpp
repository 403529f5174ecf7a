// The O(n) selection of top_p and of the draw (decode::DescendingWalk) against the
// implementation it replaced, kept here as the oracle: a binary heap over the same order,
// and apply_warpers / draw_index / the sampling path of choose_token written over it.
// Every comparison is bitwise (token ids, logit and logprob bits), on random
// distributions with fixed seeds: ties, -inf, -0, tiny and near-1 top_p, top_k = 1,
// min_p edge values and the 151,936-token vocabulary.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "decode/sampler.h"
#include "decode/sampling_workspace.h"
#include "detinfer/philox.h"
#include "kernels/kernels.h"

namespace detinfer::decode {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// --- the oracle: the heap-based implementation as it was ---------------------------

class HeapWalk {
 public:
  HeapWalk(const std::vector<float>& values, const std::vector<std::int32_t>& ids)
      : values_(values), ids_(ids), heap_(values.size()), size_(values.size()) {
    std::iota(heap_.begin(), heap_.end(), std::size_t{0});
    std::make_heap(heap_.begin(), heap_.end(),
                   [this](std::size_t a, std::size_t b) { return before(a, b); });
  }
  bool done() const { return size_ == 0; }
  std::size_t next() {
    std::pop_heap(heap_.begin(), heap_.begin() + static_cast<std::ptrdiff_t>(size_),
                  [this](std::size_t a, std::size_t b) { return before(a, b); });
    return heap_[--size_];
  }

 private:
  bool before(std::size_t a, std::size_t b) const {
    if (values_[a] != values_[b]) return values_[a] < values_[b];
    return ids_[a] > ids_[b];
  }
  const std::vector<float>& values_;
  const std::vector<std::int32_t>& ids_;
  std::vector<std::size_t> heap_;
  std::size_t size_;
};

Candidates keep_if(const Candidates& c, const std::vector<char>& keep) {
  Candidates out;
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (keep[i]) {
      out.ids.push_back(c.ids[i]);
      out.logits.push_back(c.logits[i]);
    }
  }
  return out;
}

Candidates oracle_warpers(const GenerationConfig& config, const float* row, std::int64_t vocab) {
  Candidates c;
  const float t = config.temperature;
  for (std::int64_t i = 0; i < vocab; ++i) {
    c.ids.push_back(static_cast<std::int32_t>(i));
    c.logits.push_back(t == 1.0f ? row[i] : row[i] / t);
  }
  if (config.top_k > 0 && config.top_k < vocab) {
    std::vector<float> sorted = c.logits;
    std::nth_element(sorted.begin(), sorted.begin() + (config.top_k - 1), sorted.end(),
                     std::greater<float>());
    const float threshold = sorted[config.top_k - 1];
    std::vector<char> keep(c.size());
    for (std::size_t i = 0; i < c.size(); ++i) keep[i] = c.logits[i] >= threshold;
    c = keep_if(c, keep);
  }
  if (config.top_p < 1.0f && c.size() > 1) {
    const std::vector<float> p = candidate_probs(c);
    std::vector<char> keep(c.size(), 0);
    float cum = 0.0f;
    for (HeapWalk walk(p, c.ids); !walk.done();) {
      const std::size_t i = walk.next();
      keep[i] = 1;
      cum = cum + p[i];
      if (cum >= config.top_p) break;
    }
    c = keep_if(c, keep);
  }
  if (config.min_p > 0.0f && c.size() > 1) {
    const std::vector<float> p = candidate_probs(c);
    const float threshold = config.min_p * *std::max_element(p.begin(), p.end());
    std::vector<char> keep(c.size());
    for (std::size_t i = 0; i < c.size(); ++i) keep[i] = p[i] >= threshold;
    c = keep_if(c, keep);
  }
  return c;
}

std::size_t oracle_draw(const Candidates& c, std::uint64_t seed, std::uint64_t stream,
                        std::uint64_t step) {
  const std::vector<float> p = candidate_probs(c);
  const float u = philox_uniform(seed, stream, step, 0);
  float cum = 0.0f;
  std::size_t last = 0;
  for (HeapWalk walk(p, c.ids); !walk.done();) {
    last = walk.next();
    cum = cum + p[last];
    if (cum > u) return last;
  }
  return last;
}

// top_logprobs as it was: a partial sort of the finite entries.
std::vector<TokenLogprob> oracle_top(const std::vector<float>& lp,
                                     const std::vector<std::int32_t>& ids, std::int32_t n) {
  std::vector<TokenLogprob> out;
  if (n <= 0) return out;
  std::vector<std::size_t> idx;
  for (std::size_t i = 0; i < lp.size(); ++i) {
    if (std::isfinite(lp[i])) idx.push_back(i);
  }
  const auto better = [&](std::size_t a, std::size_t b) {
    return lp[a] != lp[b] ? lp[a] > lp[b] : ids[a] < ids[b];
  };
  const std::size_t k = std::min<std::size_t>(static_cast<std::size_t>(n), idx.size());
  std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(), better);
  for (std::size_t j = 0; j < k; ++j) out.push_back({ids[idx[j]], lp[idx[j]]});
  return out;
}

// choose_token as it was (greedy and sampling, with the mask) over the oracle: the row
// copied, penalized and masked, full log-softmax rows.
TokenChoice oracle_choose(const GenerationConfig& config, const float* raw, std::int64_t vocab,
                          const std::vector<std::int32_t>& generated, std::uint64_t seed,
                          std::uint64_t step, const std::vector<std::uint8_t>* allowed = nullptr) {
  std::vector<float> row(raw, raw + vocab);
  apply_penalties(config, {}, generated, row.data(), vocab);
  for (std::int64_t i = 0; allowed != nullptr && i < vocab; ++i) {
    if ((*allowed)[static_cast<std::size_t>(i)] == 0) row[static_cast<std::size_t>(i)] = -kInf;
  }
  Candidates c;
  std::size_t i = 0;
  if (config.temperature == 0.0f) {
    c.logits = row;
    c.ids.resize(row.size());
    std::iota(c.ids.begin(), c.ids.end(), 0);
    i = static_cast<std::size_t>(kernels::argmax(row.data(), vocab));
  } else {
    c = oracle_warpers(config, row.data(), vocab);
    if (allowed != nullptr) {
      std::vector<char> keep(c.size());
      for (std::size_t j = 0; j < c.size(); ++j) keep[j] = (*allowed)[c.ids[j]] != 0;
      c = keep_if(c, keep);
    }
    i = oracle_draw(c, seed, config.first_sample_index, step);
  }
  std::vector<float> lp(c.size());
  kernels::log_softmax(c.logits.data(), lp.data(), static_cast<std::int64_t>(c.size()));
  TokenChoice t;
  t.token = c.ids[i];
  t.logprob = lp[i];
  if (config.logprobs > 0) t.top = oracle_top(lp, c.ids, config.logprobs);
  return t;
}

// --- random distributions -------------------------------------------------------------

std::uint32_t bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float uniform(std::uint64_t seed, std::uint64_t i, std::uint32_t lane = 0) {
  return philox_uniform(seed, 7, i, lane);
}

enum class Shape { kGaussian, kWide, kTies, kNegInf, kPeaked, kFlat };
constexpr Shape kShapes[] = {Shape::kGaussian, Shape::kWide,   Shape::kTies,
                             Shape::kNegInf,   Shape::kPeaked, Shape::kFlat};

// Logits of one random row; the shape decides ties, -inf entries and spread.
std::vector<float> random_row(Shape shape, std::int64_t vocab, std::uint64_t seed) {
  std::vector<float> row(static_cast<std::size_t>(vocab));
  for (std::int64_t i = 0; i < vocab; ++i) {
    const float u = uniform(seed, static_cast<std::uint64_t>(i));
    // Box-Muller from two uniforms (test data only).
    const float g = std::sqrt(-2.0f * std::log(std::max(u, 1e-30f))) *
                    std::cos(6.2831853f * uniform(seed, static_cast<std::uint64_t>(i), 1));
    float& x = row[static_cast<std::size_t>(i)];
    switch (shape) {
      case Shape::kGaussian:
        x = 3.0f * g;
        break;
      case Shape::kWide:
        x = 40.0f * u - 20.0f;
        break;
      case Shape::kTies:
        x = std::floor(u * 6.0f) * 0.75f;  // six distinct values
        break;
      case Shape::kNegInf:
        x = u < 0.6f ? -kInf : 2.0f * g;
        break;
      case Shape::kPeaked:
        x = g + (i % 997 == 3 ? 12.0f : 0.0f);
        break;
      case Shape::kFlat:
        x = 0.05f * g;
        break;
    }
  }
  if (shape == Shape::kNegInf) row[static_cast<std::size_t>(seed % vocab)] = 1.0f;  // one finite
  return row;
}

struct Warpers {
  float temperature;
  std::int32_t top_k;
  float top_p;
  float min_p;
};

std::vector<Warpers> warper_grid(std::int64_t vocab) {
  const auto k_big = static_cast<std::int32_t>(std::max<std::int64_t>(1, vocab - 1));
  return {
      {1.0f, 0, 0.9f, 0.0f},  {0.7f, 0, 0.95f, 0.0f},     {1.0f, 0, 1e-6f, 0.0f},
      {1.0f, 0, 0.0f, 0.0f},  {1.3f, 0, 0.999999f, 0.0f}, {1.0f, 1, 1.0f, 0.0f},
      {1.0f, 1, 0.5f, 0.3f},  {0.9f, 50, 0.9f, 0.0f},     {1.0f, k_big, 0.8f, 0.0f},
      {1.0f, 0, 1.0f, 0.05f}, {1.0f, 0, 1.0f, 1.0f},      {1.0f, 0, 1.0f, 1e-7f},
      {1.0f, 0, 0.6f, 0.5f},  {2.0f, 40, 0.97f, 0.01f},   {0.5f, 0, 1.0f, 0.0f},
  };
}

GenerationConfig config_of(const Warpers& w) {
  GenerationConfig c;
  c.temperature = w.temperature;
  c.top_k = w.top_k;
  c.top_p = w.top_p;
  c.min_p = w.min_p;
  return c;
}

void expect_same_candidates(const Candidates& got, const Candidates& want) {
  ASSERT_EQ(got.ids, want.ids);
  ASSERT_EQ(got.logits.size(), want.logits.size());
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(bits(got.logits[i]), bits(want.logits[i]));
}

void expect_same_choice(const TokenChoice& got, const TokenChoice& want) {
  ASSERT_EQ(got.token, want.token);
  ASSERT_EQ(bits(got.logprob), bits(want.logprob));
  ASSERT_EQ(got.top.size(), want.top.size());
  for (std::size_t i = 0; i < got.top.size(); ++i) {
    ASSERT_EQ(got.top[i].token, want.top[i].token);
    ASSERT_EQ(bits(got.top[i].logprob), bits(want.top[i].logprob));
  }
}

// The settings that stress the walk most, for the full vocabulary (where the heap oracle
// itself is slow): a wide and a tiny nucleus, top_k = 1, vocab - 1 and min_p.
std::vector<Warpers> large_vocab_grid(std::int64_t vocab) {
  const std::vector<Warpers> all = warper_grid(vocab);
  return {all[0], all[2], all[4], all[5], all[8], all[9]};
}

// The given warper settings and several draws of one row, against the oracle.
void check_row(const std::vector<float>& row, std::uint64_t seed, int draws,
               const std::vector<Warpers>& grid) {
  const auto vocab = static_cast<std::int64_t>(row.size());
  for (const Warpers& w : grid) {
    GenerationConfig c = config_of(w);
    SCOPED_TRACE(testing::Message()
                 << "vocab " << vocab << " seed " << seed << " t " << w.temperature << " k "
                 << w.top_k << " p " << w.top_p << " min_p " << w.min_p);
    const Candidates got = apply_warpers(c, row.data(), vocab);
    const Candidates want = oracle_warpers(c, row.data(), vocab);
    expect_same_candidates(got, want);
    for (int d = 0; d < draws; ++d) {
      const auto step = static_cast<std::uint64_t>(d);
      ASSERT_EQ(draw_index(got, seed, d % 3, step), oracle_draw(want, seed, d % 3, step));
    }
    c.logprobs = 5;
    c.first_sample_index = static_cast<std::uint32_t>(seed % 4);
    c.repetition_penalty = 1.1f;
    const std::vector<std::int32_t> generated = {0, static_cast<std::int32_t>(vocab / 2)};
    expect_same_choice(choose_token(c, row.data(), vocab, {}, generated, seed, 0, seed % 11),
                       oracle_choose(c, row.data(), vocab, generated, seed, seed % 11));
  }
}

TEST(SelectionOracle, SmallAndMediumVocabulariesMatchTheHeapImplementation) {
  std::uint64_t seed = 1;
  for (const std::int64_t vocab : {1, 2, 3, 7, 64, 65, 300, 4099}) {
    for (const Shape shape : kShapes) {
      check_row(random_row(shape, vocab, seed), seed, 8, warper_grid(vocab));
      ++seed;
    }
  }
}

TEST(SelectionOracle, FullQwenVocabularyMatchesTheHeapImplementation) {
  constexpr std::int64_t kVocab = 151936;
  std::uint64_t seed = 1000;
  for (const Shape shape : kShapes) {
    check_row(random_row(shape, kVocab, seed), seed, 2, large_vocab_grid(kVocab));
    ++seed;
  }
}

// One workspace through choices of every kind (greedy and sampling, each warper, top
// logprobs 0 / 5 / 20, penalties, a mask), its vocabulary growing and shrinking between
// calls: each choice equals the oracle's and that of a fresh workspace, bit for bit, so
// nothing carries over from one call to the next.
TEST(SelectionOracle, OneWorkspaceReusedAcrossVocabulariesAndModesMatchesTheOracle) {
  SamplingWorkspace ws;
  std::uint64_t seed = 500;
  for (const std::int64_t vocab : {4099, 7, 20000, 1, 300, 20000, 65, 2, 3, 4099}) {
    std::vector<Warpers> grid = warper_grid(vocab);
    grid.push_back({0.0f, 0, 1.0f, 0.0f});  // greedy
    for (std::size_t g = 0; g < grid.size(); ++g, ++seed) {
      const std::vector<float> row = random_row(kShapes[seed % 6], vocab, seed);
      GenerationConfig c = config_of(grid[g]);
      c.logprobs = g % 3 == 0 ? 0 : g % 3 == 1 ? 5 : 20;
      c.repetition_penalty = g % 2 == 0 ? 1.0f : 1.2f;
      // Every third token masked, never the row's argmax (a finite logit stays allowed).
      std::vector<std::uint8_t> mask(static_cast<std::size_t>(vocab));
      for (std::size_t i = 0; i < mask.size(); ++i) mask[i] = i % 3 != 1;
      mask[static_cast<std::size_t>(kernels::argmax(row.data(), vocab))] = 1;
      const std::vector<std::uint8_t>* allowed = g % 4 == 3 ? &mask : nullptr;
      const std::vector<std::int32_t> generated = {0, static_cast<std::int32_t>(vocab / 2)};
      SCOPED_TRACE(testing::Message() << "vocab " << vocab << " seed " << seed << " setting " << g
                                      << (allowed != nullptr ? " masked" : ""));
      const TokenChoice got =
          choose_token(c, row.data(), vocab, {}, generated, seed, 0, seed % 5, ws, allowed);
      expect_same_choice(got,
                         oracle_choose(c, row.data(), vocab, generated, seed, seed % 5, allowed));
      expect_same_choice(
          got, choose_token(c, row.data(), vocab, {}, generated, seed, 0, seed % 5, allowed));
    }
  }
}

// The walk alone, on raw values the warpers never produce: negative values, -0 next to
// +0, infinities, denormals, heavy ties, and ids out of order (the CUDA draw tests pass
// shuffled candidates).
TEST(SelectionOracle, WalkOrderEqualsTheHeapOnAnyValuesAndIds) {
  const float specials[] = {0.0f, -0.0f, kInf, -kInf, 1e-40f, -1e-40f, 1.0f, -1.0f, 0.5f};
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    const std::size_t n = 1 + static_cast<std::size_t>(seed * 3571 % 20000);
    std::vector<float> v(n);
    std::vector<std::int32_t> ids(n);
    for (std::size_t i = 0; i < n; ++i) {
      const float u = uniform(seed, i);
      v[i] = seed % 4 == 0   ? specials[static_cast<std::size_t>(u * 9.0f) % 9]
             : seed % 4 == 1 ? std::floor(u * 4.0f) - 2.0f
                             : 10.0f * u - 5.0f;
      ids[i] = static_cast<std::int32_t>(i * 2 + 1);
    }
    if (seed % 2 == 0) {  // a fixed shuffle of the ids
      for (std::size_t i = n - 1; i > 0; --i) {
        std::swap(ids[i], ids[static_cast<std::size_t>(uniform(seed, i, 2) * (i + 1)) % (i + 1)]);
      }
    }
    HeapWalk want(v, ids);
    DescendingWalk got(v, ids);
    for (std::size_t k = 0; k < n; ++k) {
      ASSERT_FALSE(got.done());
      ASSERT_EQ(got.next(), want.next()) << "seed " << seed << " at " << k;
    }
    EXPECT_TRUE(got.done());
  }
}

}  // namespace
}  // namespace detinfer::decode

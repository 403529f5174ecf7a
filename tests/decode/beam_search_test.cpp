#include "decode/beam_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "decode/logits_processor.h"
#include "detinfer/hash.h"
#include "kernels/kernels.h"

namespace detinfer::decode {
namespace {

constexpr std::int64_t kVocab = 16;

// A fake model whose logits are coarse (multiples of 0.5 in [-2, 2]) so that ties are
// frequent. Pure function of the token sequence.
std::vector<float> fake_logits(const std::vector<std::int32_t>& seq, std::uint64_t salt) {
  std::vector<float> row(kVocab);
  for (std::int64_t t = 0; t < kVocab; ++t) {
    std::vector<std::int32_t> key = seq;
    key.push_back(static_cast<std::int32_t>(t));
    const std::uint64_t h = xxh3_64(key.data(), key.size() * sizeof(std::int32_t), salt);
    row[t] = static_cast<float>(h % 9) * 0.5f - 2.0f;
  }
  return row;
}

std::vector<std::int32_t> concat(std::vector<std::int32_t> a, const std::vector<std::int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

struct RefHyp {
  float score;
  std::vector<std::int32_t> tokens;
};

// A straightforward transliteration of transformers' beam search for one batch entry:
// num_beams copies with initial scores {0, -1e9, ...}, a full sort of every
// (beam, token) candidate, BeamHypotheses as a plain list.
std::vector<RefHyp> reference_beam_search(const GenerationConfig& cfg,
                                          const std::vector<std::int32_t>& eos,
                                          const std::vector<std::int32_t>& prompt,
                                          std::uint64_t salt) {
  const int nb = cfg.num_beams;
  std::vector<std::vector<std::int32_t>> beams(nb);
  std::vector<float> scores(nb, -1e9f);
  scores[0] = 0.0f;
  std::vector<RefHyp> hyps;
  float worst = 1e9f;
  const auto add = [&](std::vector<std::int32_t> toks, float sum, std::int64_t len) {
    const float score = sum / BeamSearch::length_power(len, cfg.length_penalty);
    if (static_cast<int>(hyps.size()) < nb || score > worst) {
      hyps.push_back({score, std::move(toks)});
      if (static_cast<int>(hyps.size()) > nb) {
        std::vector<std::pair<float, std::size_t>> s;
        for (std::size_t i = 0; i < hyps.size(); ++i) s.push_back({hyps[i].score, i});
        std::sort(s.begin(), s.end());
        hyps.erase(hyps.begin() + static_cast<long>(s[0].second));
        worst = s[1].first;
      } else {
        worst = std::min(score, worst);
      }
    }
  };
  struct Cand {
    float score;
    std::int32_t token;
    int beam;
  };
  bool done = false;
  std::int64_t cur = 0;
  for (; cur < cfg.max_new_tokens && !done;) {
    std::vector<Cand> all;
    for (int b = 0; b < nb; ++b) {
      const std::vector<float> row = fake_logits(concat(prompt, beams[b]), salt);
      std::vector<float> lp(kVocab);
      kernels::log_softmax(row.data(), lp.data(), kVocab);
      apply_penalties(cfg, prompt, beams[b], lp.data(), kVocab);
      for (std::int32_t t = 0; t < kVocab; ++t) all.push_back({lp[t] + scores[b], t, b});
    }
    std::sort(all.begin(), all.end(), [](const Cand& a, const Cand& b) {
      if (a.score != b.score) return a.score > b.score;
      if (a.token != b.token) return a.token < b.token;
      return a.beam < b.beam;
    });
    const std::size_t k = std::max<std::size_t>(2, 1 + eos.size()) * nb;
    std::vector<std::vector<std::int32_t>> next;
    std::vector<float> next_scores;
    for (std::size_t rank = 0; rank < k; ++rank) {
      const Cand& c = all[rank];
      if (std::count(eos.begin(), eos.end(), c.token)) {
        if (rank >= static_cast<std::size_t>(nb)) continue;
        add(concat(beams[c.beam], {c.token}), c.score, cur);
      } else {
        next.push_back(concat(beams[c.beam], {c.token}));
        next_scores.push_back(c.score);
      }
      if (static_cast<int>(next.size()) == nb) break;
    }
    if (static_cast<int>(hyps.size()) >= nb) {
      done = cfg.early_stopping ||
             worst >= all[0].score / BeamSearch::length_power(cur, cfg.length_penalty);
    }
    beams = next;
    scores = next_scores;
    ++cur;
  }
  if (!done) {
    for (int b = 0; b < nb; ++b)
      add(beams[b], scores[b], static_cast<std::int64_t>(beams[b].size()));
  }
  std::stable_sort(hyps.begin(), hyps.end(),
                   [](const RefHyp& a, const RefHyp& b) { return a.score < b.score; });
  std::vector<RefHyp> out;
  for (int j = 0; j < cfg.num_return_sequences; ++j) out.push_back(hyps[hyps.size() - 1 - j]);
  return out;
}

std::vector<BeamSearch::Hypothesis> run_beam_search(const GenerationConfig& cfg,
                                                    const std::vector<std::int32_t>& eos,
                                                    const std::vector<std::int32_t>& prompt,
                                                    std::uint64_t salt) {
  BeamSearch bs(cfg, eos, kVocab);
  while (!bs.done() && bs.length() < cfg.max_new_tokens) {
    std::vector<std::vector<float>> rows;
    std::vector<const float*> ptrs;
    std::vector<std::uint64_t> digests;
    for (const auto& beam : bs.beams()) {
      rows.push_back(fake_logits(concat(prompt, beam.tokens), salt));
      digests.push_back(xxh3_64(rows.back().data(), rows.back().size() * sizeof(float)));
    }
    for (const auto& r : rows) ptrs.push_back(r.data());
    const std::vector<int> parents = bs.step(ptrs, digests, prompt);
    if (!bs.done()) {
      EXPECT_EQ(parents.size(), static_cast<std::size_t>(cfg.num_beams));
    }
  }
  return bs.finalize();
}

TEST(BeamSearch, EqualsReferenceIncludingTies) {
  int configs = 0;
  for (int nb : {2, 3, 4}) {
    for (float lp : {1.0f, 0.0f, -0.5f, 2.0f}) {
      for (bool early : {false, true}) {
        for (int eos_count : {1, 2}) {
          for (std::uint64_t salt = 0; salt < 4; ++salt) {
            GenerationConfig cfg;
            cfg.num_beams = nb;
            cfg.num_return_sequences = (salt % 2) ? nb : 1;
            cfg.length_penalty = lp;
            cfg.early_stopping = early;
            cfg.max_new_tokens = 6;
            cfg.repetition_penalty = salt == 3 ? 1.3f : 1.0f;
            std::vector<std::int32_t> eos = {0};
            if (eos_count == 2) eos.push_back(5);
            const std::vector<std::int32_t> prompt = {3, static_cast<std::int32_t>(salt), 7};
            const auto got = run_beam_search(cfg, eos, prompt, salt * 31 + nb);
            const auto want = reference_beam_search(cfg, eos, prompt, salt * 31 + nb);
            ASSERT_EQ(got.size(), want.size());
            for (std::size_t i = 0; i < got.size(); ++i) {
              EXPECT_EQ(got[i].beam.tokens, want[i].tokens) << "config " << configs << " hyp " << i;
              EXPECT_EQ(got[i].score, want[i].score) << "config " << configs << " hyp " << i;
              EXPECT_EQ(got[i].beam.step_digests.size(), got[i].beam.tokens.size());
              EXPECT_EQ(got[i].beam.logprobs.size(), got[i].beam.tokens.size());
            }
            ++configs;
          }
        }
      }
    }
  }
  EXPECT_EQ(configs, 192);
}

TEST(BeamSearch, TiesAreBrokenByTokenIdThenBeam) {
  // Uniform logits: every candidate ties, so the lowest token ids win, from beam 0.
  GenerationConfig cfg;
  cfg.num_beams = 2;
  cfg.num_return_sequences = 2;
  cfg.max_new_tokens = 2;
  BeamSearch bs(cfg, {}, 8);
  const std::vector<float> flat(8, 0.0f);
  auto parents = bs.step({flat.data()}, {1}, {});
  EXPECT_EQ(parents, (std::vector<int>{0, 0}));
  EXPECT_EQ(bs.beams()[0].tokens, (std::vector<std::int32_t>{0}));
  EXPECT_EQ(bs.beams()[1].tokens, (std::vector<std::int32_t>{1}));
  parents = bs.step({flat.data(), flat.data()}, {2, 3}, {});
  // Scores tie across beams; token 0 of beam 0 then token 0 of beam 1.
  EXPECT_EQ(parents, (std::vector<int>{0, 1}));
  EXPECT_EQ(bs.beams()[1].tokens, (std::vector<std::int32_t>{1, 0}));
  EXPECT_EQ(bs.beams()[1].step_digests, (std::vector<std::uint64_t>{1, 3}));
}

TEST(BeamSearch, LengthPowerDefinition) {
  EXPECT_EQ(BeamSearch::length_power(5, 1.0f), 5.0f);
  EXPECT_EQ(BeamSearch::length_power(5, 0.0f), 1.0f);
  EXPECT_EQ(BeamSearch::length_power(0, 1.0f), 1.0f);
  EXPECT_NEAR(BeamSearch::length_power(4, 0.5f), 2.0f, 1e-6f);
}

}  // namespace
}  // namespace detinfer::decode

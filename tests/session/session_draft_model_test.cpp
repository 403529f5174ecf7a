// Speculative decoding with a draft model (docs/speculative.md, "The draft-model
// drafter"): a second tiny model with the same tokenizer drafts, and every output (tokens,
// text, step digests, logprobs, finish reason, score) is bitwise the output without it,
// whatever the draft model proposes; the drafter proposes the draft model's own greedy
// continuation and gives its KV back; mismatched or missing draft models are errors
// naming the field.
#include <gtest/gtest.h>

#include <future>
#include <map>
#include <string>
#include <vector>

#include "detinfer/error.h"
#include "detinfer/session.h"
#include "detinfer/tokenizer.h"
#include "devtools/model_tools.h"
#include "kernels/quant.h"
#include "session/draft_model.h"
#include "session/tiny_session.h"

namespace detinfer {
namespace {

using testing::expect_identical;
using testing::tiny_model_dir;
using testing::tiny_options;

// A smaller model with the target's tokenizer (same vocabulary, other weights and depth).
std::string other_draft_dir() {
  static const std::string dir = [] {
    devtools::TinyModelOptions o;
    o.out_dir = testing::test_tmp_path("draft-model-", std::to_string(getpid()));
    o.seed = 7;
    o.layers = 1;
    o.hidden = 32;
    o.intermediate = 64;
    o.heads = 2;
    o.kv_heads = 1;
    devtools::make_tiny_model(o);
    return o.out_dir;
  }();
  return dir;
}

SessionOptions with_draft(const std::string& draft_dir, std::int32_t threads = 1) {
  SessionOptions o = tiny_options(threads);
  o.cache.prefix.enabled = false;
  o.draft_model_path = draft_dir;
  return o;
}

// Greedy, seeded and n = 2 (with a stop string).
std::vector<GenerationConfig> configs() {
  std::vector<GenerationConfig> cs = testing::greedy_seeded_and_n2(32);
  cs[2].stop_strings = {"e t"};
  return cs;
}

GenerationConfig drafting(GenerationConfig c, std::int32_t k) {
  c.draft_tokens = k;
  c.draft_with_model = true;
  return c;
}

const char* const kPrompt = "a draft model proposes, the target disposes";

TEST(SessionDraftModel, TheTargetAsItsOwnDraftHasEveryGreedyDraftAccepted) {
  auto s = DeterministicSession::open(tiny_model_dir(), with_draft(tiny_model_dir()));
  GenerationConfig greedy = configs()[0];
  const GenerationResult plain = s.generate(kPrompt, greedy);
  const GenerationResult spec = s.generate(kPrompt, drafting(greedy, 4));
  expect_identical(plain, spec, "greedy, self-draft");
  const SessionStats st = s.stats();
  EXPECT_GT(st.draft_tokens, 0);
  // Canonical numerics: the draft model's greedy choice is the target's, bit for bit.
  EXPECT_EQ(st.accepted_draft_tokens, st.draft_tokens);
  // Counted as the draft model's, not the n-gram drafter's (stats and /metrics series).
  EXPECT_EQ(st.model_drafts.drafted, st.draft_tokens);
  EXPECT_EQ(st.model_drafts.accepted, st.accepted_draft_tokens);
  EXPECT_EQ(st.ngram_drafts.drafted, 0);
  const std::string m = s.metrics_text();
  EXPECT_EQ(testing::metric(m, "detinfer_speculative_draft_tokens_total{drafter=\"model\"}"),
            static_cast<double>(st.draft_tokens));
  EXPECT_EQ(testing::metric(m, "detinfer_speculative_acceptance_ratio{drafter=\"model\"}"), 1.0);
  EXPECT_EQ(testing::metric(m, "detinfer_speculative_draft_tokens_total{drafter=\"ngram\"}"), 0.0);
}

TEST(SessionDraftModel, AnotherDraftModelChangesNoOutput) {
  for (const std::int32_t threads : {1, 2}) {
    auto s = DeterministicSession::open(tiny_model_dir(), with_draft(other_draft_dir(), threads));
    for (const GenerationConfig& plain : configs()) {
      const GenerationResult ref = s.generate(kPrompt, plain);
      for (const std::int32_t k : {1, 3, 8}) {
        expect_identical(ref, s.generate(kPrompt, drafting(plain, k)),
                         "threads " + std::to_string(threads) + " k " + std::to_string(k));
      }
    }
    EXPECT_GT(s.stats().draft_tokens, 0);
  }
}

// The model's own GGUF file, its weights quantized to q8_0: a draft whose tokenizer comes
// from GGUF metadata, not from the folder's tokenizer.json bytes, with the same ids.
std::string gguf_self_draft() {
  static const std::string path = [] {
    const std::string out =
        testing::test_tmp_path("draft-self-q8_0-", std::to_string(getpid())) + ".gguf";
    devtools::GgufConvertOptions g;
    g.quantize = kernels::QuantFormat::kQ8_0;
    devtools::write_gguf_model(tiny_model_dir(), out, g);
    return out;
  }();
  return path;
}

TEST(SessionDraftModel, TheModelsQuantizedGgufDraftsForItsFolderAndChangesNoOutput) {
  auto s = DeterministicSession::open(tiny_model_dir(), with_draft(gguf_self_draft()));
  for (const GenerationConfig& plain : configs()) {
    const GenerationResult ref = s.generate(kPrompt, plain);
    for (const std::int32_t k : {1, 4}) {
      expect_identical(ref, s.generate(kPrompt, drafting(plain, k)), "k " + std::to_string(k));
    }
  }
  const SessionStats st = s.stats();
  EXPECT_GT(st.model_drafts.drafted, 0);
  // The q8_0 copy agrees with the target on most greedy choices, not all.
  EXPECT_GT(st.model_drafts.accepted, 0);
}

TEST(SessionDraftModel, ConcurrentDraftNgramAndPlainRequestsGiveTheirSoloOutputs) {
  auto s = DeterministicSession::open(tiny_model_dir(), with_draft(other_draft_dir()));
  std::vector<GenerationConfig> cs;
  for (const GenerationConfig& c : configs()) {
    cs.push_back(c);
    cs.push_back(drafting(c, 4));
    GenerationConfig ngram = c;
    ngram.draft_tokens = 3;
    cs.push_back(ngram);
  }
  std::vector<GenerationResult> solo;
  for (const GenerationConfig& c : cs) solo.push_back(s.generate(kPrompt, c));
  std::vector<RequestHandle> handles;
  for (const GenerationConfig& c : cs) handles.push_back(s.submit(kPrompt, c));
  for (std::size_t i = 0; i < cs.size(); ++i) {
    expect_identical(solo[i], handles[i].get(), "batched request " + std::to_string(i));
  }
}

TEST(SessionDraftModel, DraftingWithoutADraftModelIsRefusedNamingTheField) {
  auto s = DeterministicSession::open(tiny_model_dir(), tiny_options());
  try {
    s.generate(kPrompt, drafting(configs()[0], 4));
    FAIL() << "a draft_with_model request ran without a draft model";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.field(), "draft_with_model");
  }
  // draft_with_model without draft_tokens drafts nothing: not an error.
  GenerationConfig off = configs()[0];
  off.draft_with_model = true;
  EXPECT_NO_THROW(s.generate(kPrompt, off));
}

TEST(SessionDraftModel, AMismatchedOrMissingDraftModelIsAnErrorNamingTheField) {
  devtools::TinyModelOptions o;
  o.out_dir = testing::test_tmp_path("draft-other-vocab-", std::to_string(getpid()));
  o.vocab = 300;  // another tokenizer
  devtools::make_tiny_model(o);
  const std::string gguf = o.out_dir + ".gguf";  // the same, through GGUF metadata
  devtools::write_gguf_model(o.out_dir, gguf);
  for (const std::string& dir : {o.out_dir, gguf, std::string("/nonexistent/draft")}) {
    try {
      DeterministicSession::open(tiny_model_dir(), with_draft(dir));
      FAIL() << "opened with draft model " << dir;
    } catch (const Error& e) {
      EXPECT_EQ(e.field(), "draft_model_path") << e.what();
      EXPECT_NE(std::string(e.what()).find("draft_model_path"), std::string::npos) << e.what();
    }
  }
}

// The tokenizer of a model folder, loaded once per folder (DraftModel::open compares the
// draft's with it).
const Tokenizer& tokenizer_of(const std::string& dir) {
  static std::map<std::string, Tokenizer> loaded;
  auto it = loaded.find(dir);
  if (it == loaded.end()) it = loaded.emplace(dir, Tokenizer::load(dir)).first;
  return it->second;
}

// The session's greedy continuation of `prompt`: n tokens, past eos.
std::vector<std::int32_t> greedy_tokens(DeterministicSession& s,
                                        const std::vector<std::int32_t>& prompt, std::int32_t n) {
  GenerationConfig greedy;
  greedy.max_new_tokens = n;
  greedy.ignore_eos = true;
  return s.generate(Prompt(prompt), greedy).sequences[0].tokens;
}

// The drafter on its own: it proposes the draft model's greedy continuation (checked
// against the draft model run as a session), keeps K/V across calls, survives a rejected
// draft (the text then differs from what it drafted) and gives every block back.
TEST(DraftModel, ProposesItsGreedyContinuationAndReleasesItsBlocks) {
  const std::string dir = other_draft_dir();
  auto reference = DeterministicSession::open(dir, tiny_options());
  const std::vector<std::int32_t> prompt = reference.encode(kPrompt);
  const std::vector<std::int32_t> cont = greedy_tokens(reference, prompt, 12);

  model::ModelOptions mo;
  const model::ModelConfig target = model::Model::load(dir, mo)->config();
  auto draft = session::DraftModel::open(
      dir, mo, &tokenizer_of(dir), target,
      [](const model::ModelConfig&) { return std::int64_t{1} << 20; }, 16);
  const std::int64_t capacity = draft->kv_capacity_blocks();
  {
    session::Drafter d = draft->drafter(prompt);
    std::vector<std::int32_t> out;
    d(0, {}, 4, out);
    EXPECT_EQ(out, std::vector<std::int32_t>(cont.begin(), cont.begin() + 4));
    // Two tokens accepted, then a token the draft did not propose: it drafts on from there.
    std::vector<std::int32_t> generated(cont.begin(), cont.begin() + 2);
    generated.push_back((cont[2] + 1) % static_cast<std::int32_t>(target.vocab_size));
    out.clear();
    d(0, generated, 3, out);
    std::vector<std::int32_t> text = prompt;
    text.insert(text.end(), generated.begin(), generated.end());
    EXPECT_EQ(out, greedy_tokens(reference, text, 3));
    // A second sample of the same request keeps its own state.
    out.clear();
    d(1, {}, 2, out);
    EXPECT_EQ(out, std::vector<std::int32_t>(cont.begin(), cont.begin() + 2));
    EXPECT_LT(draft->kv_free_blocks(), capacity);
  }
  EXPECT_EQ(draft->kv_free_blocks(), capacity);
}

// A draft model whose every layer slides (Mistral, window 8) keeps only the blocks its
// window still sees: a pool of 6 blocks of 4 tokens drafts the model's own greedy
// continuation at every step of a 90-token text (23 blocks without the release), and
// gives every block back.
TEST(DraftModel, AWindowedDraftModelHoldsOnlyItsWindow) {
  devtools::TinyModelOptions o;
  o.arch = devtools::TinyArch::kMistral;
  o.out_dir = testing::test_tmp_path("draft-window-", std::to_string(getpid()));
  o.layers = 2;
  o.max_positions = 256;
  o.sliding_window = 8;
  o.seed = 29;
  devtools::make_tiny_model(o);
  auto reference = DeterministicSession::open(o.out_dir, tiny_options());
  const std::vector<std::int32_t> prompt = reference.encode(kPrompt);
  const std::vector<std::int32_t> cont = greedy_tokens(reference, prompt, 90);

  model::ModelOptions mo;
  const model::ModelConfig target = model::Model::load(o.out_dir, mo)->config();
  const std::int64_t block_bytes =
      2 * target.num_layers * target.num_kv_heads * target.head_dim * 4 * 4;  // f32 KV
  auto draft = session::DraftModel::open(
      o.out_dir, mo, &tokenizer_of(o.out_dir), target,
      [&](const model::ModelConfig&) { return 6 * block_bytes; }, 4);
  ASSERT_EQ(draft->kv_capacity_blocks(), 6);
  {
    session::Drafter d = draft->drafter(prompt);
    std::vector<std::int32_t> out;
    for (std::size_t g = 0; g + 4 <= cont.size(); g += 3) {  // 3 of 4 drafts accepted
      out.clear();
      d(0, std::vector<std::int32_t>(cont.begin(), cont.begin() + g), 4, out);
      ASSERT_EQ(out, std::vector<std::int32_t>(cont.begin() + g, cont.begin() + g + 4))
          << "after " << g << " generated tokens";
    }
  }
  EXPECT_EQ(draft->kv_free_blocks(), 6);
}

// docs/speculative.md: a draft it cannot make is an empty draft, never an error: the text
// past the draft model's context, or a pool too small for the text.
TEST(DraftModel, ADraftItCannotMakeIsEmpty) {
  devtools::TinyModelOptions o;
  o.out_dir = testing::test_tmp_path("draft-short-context-", std::to_string(getpid()));
  o.max_positions = 16;
  devtools::make_tiny_model(o);
  model::ModelOptions mo;
  const model::ModelConfig target = model::Model::load(tiny_model_dir(), mo)->config();
  const std::vector<std::int32_t> prompt(20, 65);  // 20 tokens: past the 16 positions
  auto short_context = session::DraftModel::open(
      o.out_dir, mo, &tokenizer_of(tiny_model_dir()), target,
      [](const model::ModelConfig&) { return std::int64_t{1} << 20; }, 16);
  std::vector<std::int32_t> out;
  short_context->drafter(prompt)(0, {}, 4, out);
  EXPECT_TRUE(out.empty());
  // One block of 4 tokens: the 20-token text does not fit; the block stays free.
  auto tiny_pool = session::DraftModel::open(
      tiny_model_dir(), mo, &tokenizer_of(tiny_model_dir()), target,
      [](const model::ModelConfig&) { return std::int64_t{0}; }, 4);
  ASSERT_EQ(tiny_pool->kv_capacity_blocks(), 1);
  tiny_pool->drafter(prompt)(0, {}, 4, out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(tiny_pool->kv_free_blocks(), 1);
  // The same pool drafts for a text that fits.
  tiny_pool->drafter({65})(0, {}, 2, out);
  EXPECT_EQ(out.size(), 2u);
}

}  // namespace
}  // namespace detinfer

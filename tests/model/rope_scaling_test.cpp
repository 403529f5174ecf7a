// rope_scaling types beyond llama3 (issue 29, item 7): linear, dynamic, yarn and longrope.
// A tiny random model (f32 weights) with each type matches a float64 forward pass of
// transformers' semantics (reference_rope.h) within 1e-5 relative L2 over 40 positions,
// and differs from it once the scaling is dropped (so the test fails if the scaling were
// ignored); canonical logits stay bitwise invariant to chunking and threads; hostile
// rope_scaling blocks are clear errors.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "detinfer/error.h"
#include "devtools/model_tools.h"
#include "model/model.h"
#include "model/model_config.h"
#include "model/model_test_util.h"
#include "model/prefill_logits.h"
#include "model/reference_forward.h"
#include "model/rope_math.h"
#include "model/rope_table.h"

namespace detinfer::model {
namespace {

using nlohmann::json;
using testing::ReferenceModel;
using testing::rel_l2;

// A tiny llama (f32, head_dim 16, 2048 positions) whose config.json gets `scaling`.
std::string scaled_model(const std::string& name, const json& scaling) {
  const std::string dir = testing::scratch_dir("rope-" + name);
  devtools::TinyModelOptions o =
      testing::tiny_options(devtools::TinyArch::kLlama, core::DType::kF32, dir, 7);
  o.llama3_rope_scaling = false;
  devtools::make_tiny_model(o);
  std::ifstream in(dir + "/config.json");
  json c = json::parse(in);
  c["rope_scaling"] = scaling;
  std::ofstream(dir + "/config.json") << c.dump(2);
  return dir;
}

struct Variant {
  const char* name;
  json scaling;
  bool changes_logits;  // false: the type equals default RoPE within the context (dynamic)
};

std::vector<double> short_factors() {
  std::vector<double> f;
  for (int i = 0; i < 8; ++i) f.push_back(1.0 + 0.9 * i);  // 1 .. 7.3, one per dimension pair
  return f;
}

std::vector<Variant> variants() {
  const json longrope = {{"rope_type", "longrope"},
                         {"short_factor", short_factors()},
                         {"long_factor", std::vector<double>(8, 20.0)},
                         {"original_max_position_embeddings", 512}};
  return {
      {"linear", {{"rope_type", "linear"}, {"factor", 4.0}}, true},
      {"dynamic", {{"type", "dynamic"}, {"factor", 4.0}}, false},
      {"yarn",
       {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 16}},
       true},
      {"yarn_untruncated",
       {{"rope_type", "yarn"},
        {"factor", 8.0},
        {"beta_fast", 8.0},
        {"beta_slow", 0.5},
        {"truncate", false},
        {"original_max_position_embeddings", 32}},
       true},
      {"yarn_mscale",
       {{"rope_type", "yarn"},
        {"factor", 8.0},
        {"mscale", 1.0},
        {"mscale_all_dim", 0.5},
        {"original_max_position_embeddings", 16}},
       true},
      {"yarn_attention_factor",
       {{"rope_type", "yarn"},
        {"factor", 2.0},
        {"attention_factor", 1.3},
        {"original_max_position_embeddings", 64}},
       true},
      {"longrope", longrope, true},
  };
}

class RopeScalingVsReference : public ::testing::TestWithParam<Variant> {};

TEST_P(RopeScalingVsReference, FortyPositionsWithin1e5AndTheScalingMatters) {
  const Variant v = GetParam();
  const std::string dir = scaled_model(v.name, v.scaling);
  const ReferenceModel ref(dir);
  const ReferenceModel unscaled(dir, /*ignore_rope_scaling=*/true);
  const auto tokens = testing::test_tokens(40, ref.vocab());
  const auto want = ref.logits(tokens);
  const auto without = unscaled.logits(tokens);
  const std::vector<float> got = testing::prefill_logits(dir, tokens, tokens.size());
  double worst = 0, worst_without = 0;
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    const float* row = got.data() + t * static_cast<std::size_t>(ref.vocab());
    worst = std::max(worst, rel_l2(row, want[t]));
    worst_without = std::max(worst_without, rel_l2(row, without[t]));
  }
  RecordProperty("worst_rel_l2", std::to_string(worst));
  EXPECT_LE(worst, 1e-5) << v.name;
  if (v.changes_logits) {
    EXPECT_GT(worst_without, 1e-3) << v.name << ": dropping the scaling changes nothing";
  } else {
    EXPECT_LE(worst_without, 1e-5) << v.name;
  }
  // Canonical bits do not depend on chunking or threads.
  EXPECT_EQ(testing::prefill_logits(dir, tokens, 1), got) << v.name << ": token by token";
  EXPECT_EQ(testing::prefill_logits(dir, tokens, 7, 2), got)
      << v.name << ": chunks of 7, 2 threads";
}

INSTANTIATE_TEST_SUITE_P(Types, RopeScalingVsReference, ::testing::ValuesIn(variants()),
                         [](const ::testing::TestParamInfo<Variant>& i) { return i.param.name; });

ErrorCode code_of(const json& scaling) {
  const std::string dir = scaled_model("hostile", scaling);
  try {
    load_model_config(dir);
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("config.json"), std::string::npos) << e.message();
    return e.code();
  }
  ADD_FAILURE() << "accepted " << scaling.dump();
  return ErrorCode::kInternal;
}

TEST(RopeScaling, HostileBlocksAreClearErrors) {
  EXPECT_EQ(code_of({{"rope_type", "ntk-by-parts"}, {"factor", 2.0}}), ErrorCode::kUnsupported);
  EXPECT_EQ(code_of({{"rope_type", "linear"}}), ErrorCode::kCorrupt);  // no factor
  EXPECT_EQ(code_of({{"rope_type", "linear"}, {"factor", 0.0}}), ErrorCode::kCorrupt);
  EXPECT_EQ(code_of({{"rope_type", "linear"}, {"factor", "4"}}), ErrorCode::kCorrupt);
  EXPECT_EQ(code_of({{"rope_type", "yarn"}, {"factor", 0.5}}), ErrorCode::kCorrupt);
  EXPECT_EQ(code_of({{"rope_type", "yarn"}, {"factor", 4.0}, {"beta_fast", -1.0}}),
            ErrorCode::kCorrupt);
  EXPECT_EQ(code_of({{"rope_type", "yarn"}, {"factor", 4.0}, {"truncate", 1}}),
            ErrorCode::kCorrupt);
  EXPECT_EQ(
      code_of({{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 0}}),
      ErrorCode::kCorrupt);
  json longrope = {{"rope_type", "longrope"},
                   {"short_factor", std::vector<double>(7, 1.0)},
                   {"long_factor", std::vector<double>(8, 1.0)}};
  EXPECT_EQ(code_of(longrope), ErrorCode::kCorrupt);  // 7 entries for 8 dimension pairs
  longrope["short_factor"] = std::vector<double>(8, 0.0);
  EXPECT_EQ(code_of(longrope), ErrorCode::kCorrupt);  // a factor of 0
  longrope.erase("long_factor");
  longrope["short_factor"] = std::vector<double>(8, 1.0);
  EXPECT_EQ(code_of(longrope), ErrorCode::kCorrupt);  // long_factor missing
  EXPECT_EQ(code_of({{"rope_type", "linear"}, {"factor", 2.0}, {"partial_rotary_factor", 0.5}}),
            ErrorCode::kUnsupported);
}

TEST(RopeScaling, LongropeLimitsTheContextToTheOriginalLength) {
  const json scaling = {{"rope_type", "longrope"},
                        {"short_factor", short_factors()},
                        {"long_factor", std::vector<double>(8, 20.0)},
                        {"original_max_position_embeddings", 512}};
  const ModelConfig c = load_model_config(scaled_model("longrope-ctx", scaling));
  EXPECT_EQ(c.max_position_embeddings, 512);
  EXPECT_EQ(c.rope_scaling.factor, 2048.0 / 512.0);  // derived: max / original
  EXPECT_DOUBLE_EQ(RopeTable(c).attention_factor(),
                   std::sqrt(1.0 + std::log(4.0) / std::log(512.0)));
}

TEST(RopeScaling, EachMemberReachesTheCanonicalConfigText) {
  const json yarn = {
      {"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 16}};
  const std::string base = canonical_config_text(load_model_config(scaled_model("fp0", yarn)));
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, json>>{{"factor", 8.0},
                                                 {"original_max_position_embeddings", 32},
                                                 {"beta_fast", 16.0},
                                                 {"beta_slow", 2.0},
                                                 {"mscale", 1.0},
                                                 {"mscale_all_dim", 1.0},
                                                 {"truncate", false},
                                                 {"attention_factor", 1.5}}) {
    json other = yarn;
    other[key] = value;
    EXPECT_NE(canonical_config_text(load_model_config(scaled_model("fp1", other))), base) << key;
  }
}

TEST(RopeMath, LogIsTheCorrectlyRoundedValueNearlyEverywhere) {
  std::mt19937_64 gen(29);
  int off_by_one_ulp = 0;
  for (int i = 0; i < 20000; ++i) {
    const double x = std::ldexp(1.0 + static_cast<double>(gen() >> 11) * 0x1p-53,
                                static_cast<int>(gen() % 119) - 60);
    const double got = rope_math::log(x), want = std::log(x);
    if (got != want) {
      ++off_by_one_ulp;
      EXPECT_EQ(std::nextafter(want, got), got) << x;  // glibc's log is within 1 ulp
    }
  }
  EXPECT_LE(off_by_one_ulp, 40);  // glibc's log is not always correctly rounded
  EXPECT_EQ(rope_math::log(1.0), 0.0);
  EXPECT_EQ(rope_math::log(0.5), -std::log(2.0));
}

}  // namespace
}  // namespace detinfer::model

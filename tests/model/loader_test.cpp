// Loader robustness: every malformed safetensors file, index or config is a clear
// detinfer::Error (never a crash or an out-of-bounds read).
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "detinfer/error.h"
#include "devtools/safetensors_writer.h"
#include "model/model.h"
#include "model/model_test_util.h"
#include "model/safetensors_header.h"
#include "model/tensor_store.h"

namespace detinfer {
namespace {

using testing::read_bytes;
using testing::scratch_dir;
using testing::tiny_options;
using testing::write_bytes;

std::string le64(std::uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<std::size_t>(i)] = static_cast<char>(v >> (8 * i));
  return s;
}

std::string raw_file(const std::string& header, const std::string& data) {
  return le64(header.size()) + header + data;
}

// Parses `bytes` as a whole file; returns the error code (or nothing) and message.
struct Outcome {
  bool ok = false;
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
};

Outcome parse(const std::string& bytes) {
  Outcome o;
  try {
    model::parse_safetensors_header(reinterpret_cast<const std::uint8_t*>(bytes.data()),
                                    bytes.size(), bytes.size(), "test.safetensors");
    o.ok = true;
  } catch (const Error& e) {
    o.code = e.code();
    o.message = e.message();
  }
  return o;
}

void expect_error(const std::string& bytes, ErrorCode code, const std::string& needle) {
  const Outcome o = parse(bytes);
  ASSERT_FALSE(o.ok) << "accepted: " << needle;
  EXPECT_EQ(o.code, code) << o.message;
  EXPECT_NE(o.message.find("test.safetensors"), std::string::npos) << o.message;
  EXPECT_NE(o.message.find(needle), std::string::npos) << o.message;
}

const std::string kData(32, '\x01');

TEST(SafetensorsHeader, AcceptsAValidHeader) {
  const std::string h =
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"F32","shape":[2,2],"data_offsets":[16,32]},)"
      R"("a":{"dtype":"BF16","shape":[8],"data_offsets":[0,16]}})";
  const auto bytes = raw_file(h, kData);
  const model::SafetensorsHeader hdr = model::parse_safetensors_header(
      reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), bytes.size(), "x");
  ASSERT_EQ(hdr.tensors.size(), 2u);
  EXPECT_EQ(hdr.tensors[0].name, "a");
  EXPECT_EQ(hdr.tensors[1].shape, (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(hdr.data_offset, 8 + h.size());
  EXPECT_EQ(hdr.metadata.at("format"), "pt");
}

TEST(SafetensorsHeader, RejectsBadLengths) {
  expect_error("", ErrorCode::kCorrupt, "shorter than");
  expect_error("abc", ErrorCode::kCorrupt, "shorter than");
  expect_error(le64(0) + "{}", ErrorCode::kCorrupt, "header length is 0");
  expect_error(le64(~0ull) + "{}", ErrorCode::kCorrupt, "exceeds");
  expect_error(le64(model::kMaxSafetensorsHeaderBytes + 1) + "{}", ErrorCode::kCorrupt, "exceeds");
  expect_error(le64(1000) + "{}", ErrorCode::kCorrupt, "past the end of the file");
}

TEST(SafetensorsHeader, RejectsBadJson) {
  expect_error(raw_file("{\"a\":", ""), ErrorCode::kCorrupt, "not valid JSON");
  expect_error(raw_file("[1,2]", ""), ErrorCode::kCorrupt, "not a JSON object");
  expect_error(raw_file(std::string(50, '[') + std::string(50, ']'), ""), ErrorCode::kCorrupt,
               "nested deeper");
  expect_error(raw_file(R"({"a":5})", ""), ErrorCode::kCorrupt, "not a JSON object");
  expect_error(raw_file(R"({"a":{"dtype":"F32","shape":[1]}})", "1234"), ErrorCode::kCorrupt,
               "data_offsets");
  expect_error(raw_file(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "1234"),
               ErrorCode::kCorrupt, "shape");
  expect_error(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", "1234"),
               ErrorCode::kCorrupt, "unknown field");
  expect_error(raw_file(R"({"__metadata__":{"k":1}})", ""), ErrorCode::kCorrupt, "__metadata__");
}

TEST(SafetensorsHeader, RejectsBadDtypes) {
  expect_error(raw_file(R"({"w":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", kData),
               ErrorCode::kUnsupported, "I64");
  expect_error(raw_file(R"({"w":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", kData),
               ErrorCode::kUnsupported, "'w'");
  expect_error(raw_file(R"({"w":{"dtype":"Q9","shape":[1],"data_offsets":[0,8]}})", kData),
               ErrorCode::kCorrupt, "unknown dtype");
}

TEST(SafetensorsHeader, RejectsBadRanges) {
  // Shape x dtype does not match the byte range.
  expect_error(raw_file(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", kData),
               ErrorCode::kCorrupt, "shape x dtype needs 12");
  // Out of range.
  expect_error(raw_file(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[24,40]}})", kData),
               ErrorCode::kCorrupt, "past the end of the data section");
  expect_error(raw_file(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", kData),
               ErrorCode::kCorrupt, "begin > end");
  // Overlap.
  expect_error(raw_file(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                        R"("b":{"dtype":"F32","shape":[4],"data_offsets":[12,28]}})",
                        kData),
               ErrorCode::kCorrupt, "overlap");
  // Overlap hidden behind an empty tensor in offset order.
  expect_error(raw_file(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                        R"("b":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)"
                        R"("c":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                        kData),
               ErrorCode::kCorrupt, "overlap");
  // A shape whose byte count overflows 64 bits.
  expect_error(
      raw_file(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,4]}})",
               kData),
      ErrorCode::kCorrupt, "impossibly large");
}

// --- whole folders -----------------------------------------------------------------

std::string make_model(const std::string& name, std::int64_t shards = 1) {
  const std::string dir = scratch_dir(name);
  devtools::TinyModelOptions o = tiny_options(devtools::TinyArch::kQwen2, core::DType::kBF16, dir);
  o.shards = shards;
  devtools::make_tiny_model(o);
  return dir;
}

Outcome load(const std::string& dir) {
  Outcome o;
  try {
    model::Model::load(dir, {});
    o.ok = true;
  } catch (const Error& e) {
    o.code = e.code();
    o.message = e.message();
  }
  return o;
}

void expect_load_error(const std::string& dir, ErrorCode code, const std::string& needle) {
  const Outcome o = load(dir);
  ASSERT_FALSE(o.ok) << "loaded: " << needle;
  EXPECT_EQ(o.code, code) << o.message;
  EXPECT_NE(o.message.find(needle), std::string::npos) << o.message;
}

// Rewrites dir/model.safetensors after `edit` changes its tensors.
void rewrite(const std::string& dir,
             const std::function<void(
                 std::map<std::string, std::pair<devtools::TensorEntry, std::string>>&)>& edit) {
  std::map<std::string, std::pair<devtools::TensorEntry, std::string>> t;
  {
    const model::TensorStore store = model::TensorStore::open(dir);
    for (const auto& [name, ref] : store.tensors()) {
      t[name] = {devtools::TensorEntry{name, ref.info->dtype, ref.info->shape},
                 std::string(reinterpret_cast<const char*>(ref.data()), ref.info->size())};
    }
  }
  edit(t);
  std::vector<devtools::TensorEntry> entries;
  for (const auto& [name, e] : t) entries.push_back(e.first);
  devtools::write_safetensors(dir + "/model.safetensors", entries,
                              [&](const devtools::TensorEntry& e, std::vector<std::uint8_t>& out) {
                                const std::string& b = t.at(e.name).second;
                                out.assign(b.begin(), b.end());
                              });
}

TEST(ModelLoader, TruncatedFilesAreCorrupt) {
  const std::string dir = make_model("trunc");
  const std::string full = read_bytes(dir + "/model.safetensors");
  for (std::size_t len : {std::size_t{0}, std::size_t{5}, std::size_t{8}, std::size_t{40},
                          full.size() / 2, full.size() - 1}) {
    write_bytes(dir + "/model.safetensors", full.substr(0, len));
    const Outcome o = load(dir);
    ASSERT_FALSE(o.ok) << len;
    EXPECT_EQ(o.code, ErrorCode::kCorrupt) << o.message;
    EXPECT_NE(o.message.find("model.safetensors"), std::string::npos) << o.message;
  }
}

TEST(ModelLoader, MissingTensorIsNamed) {
  const std::string dir = make_model("missing");
  rewrite(dir, [](auto& t) { t.erase("model.layers.1.mlp.up_proj.weight"); });
  expect_load_error(dir, ErrorCode::kNotFound, "model.layers.1.mlp.up_proj.weight");
}

TEST(ModelLoader, WrongShapeIsNamed) {
  const std::string dir = make_model("shape");
  rewrite(dir, [](auto& t) {
    auto& e = t.at("model.layers.0.self_attn.k_proj.weight");
    std::swap(e.first.shape[0], e.first.shape[1]);
  });
  expect_load_error(dir, ErrorCode::kCorrupt, "model.layers.0.self_attn.k_proj.weight");
}

TEST(ModelLoader, UnsupportedDtypeIsNamed) {
  const std::string dir = make_model("dtype");
  const std::string h =
      R"({"model.embed_tokens.weight":{"dtype":"I8","shape":[4],"data_offsets":[0,4]}})";
  write_bytes(dir + "/model.safetensors", raw_file(h, "abcd"));
  expect_load_error(dir, ErrorCode::kUnsupported, "model.embed_tokens.weight");
}

TEST(ModelLoader, UnalignedTensorsLoadAndComputeTheSame) {
  const std::string dir = make_model("align");
  const std::vector<std::int32_t> tokens{1, 2, 3, 4};
  const auto before = devtools::compute_logits({dir, tokens});
  // Re-frame the same data with a header of odd length: every tensor is misaligned.
  const std::string full = read_bytes(dir + "/model.safetensors");
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | static_cast<unsigned char>(full[static_cast<std::size_t>(i)]);
  std::string header = full.substr(8, n);
  while (header.back() == ' ') header.pop_back();
  if ((8 + header.size()) % 2 == 0) header += ' ';
  write_bytes(dir + "/model.safetensors", raw_file(header, full.substr(8 + n)));
  const auto after = devtools::compute_logits({dir, tokens});
  EXPECT_EQ(before.model_fingerprint, after.model_fingerprint);
  ASSERT_EQ(before.logits.size(), after.logits.size());
  EXPECT_EQ(0, std::memcmp(before.logits.data(), after.logits.data(), before.logits.size() * 4));
}

TEST(ModelLoader, ShardedLoadsAndMissingShardIsNamed) {
  const std::string single = make_model("single");
  const std::string dir = make_model("sharded", 3);
  EXPECT_EQ(load(dir).ok, true) << load(dir).message;
  const std::vector<std::int32_t> tokens{5, 6, 7};
  const auto a = devtools::compute_logits({single, tokens});
  const auto b = devtools::compute_logits({dir, tokens});
  EXPECT_EQ(a.model_fingerprint, b.model_fingerprint);  // sharding does not matter
  EXPECT_EQ(0, std::memcmp(a.logits.data(), b.logits.data(), a.logits.size() * 4));
  std::remove((dir + "/model-00002-of-00003.safetensors").c_str());
  expect_load_error(dir, ErrorCode::kNotFound, "model-00002-of-00003.safetensors");
}

TEST(ModelLoader, IndexErrors) {
  const std::string dir = make_model("index", 2);
  const std::string index_path = dir + "/model.safetensors.index.json";
  const std::string original = read_bytes(index_path);
  auto index = nlohmann::json::parse(original);
  index["weight_map"]["model.norm.weight"] = "model-00001-of-00002.safetensors";
  index["weight_map"]["model.layers.0.input_layernorm.weight"] = "model-00002-of-00002.safetensors";
  write_bytes(index_path, index.dump());
  EXPECT_FALSE(load(dir).ok);  // tensors mapped to shards that do not hold them
  index = nlohmann::json::parse(original);
  index["weight_map"]["model.norm.weight"] = "../escape.safetensors";
  write_bytes(index_path, index.dump());
  expect_load_error(dir, ErrorCode::kCorrupt, "not a file name");
  write_bytes(index_path, "{not json");
  expect_load_error(dir, ErrorCode::kCorrupt, "model.safetensors.index.json");
}

TEST(ModelLoader, MissingFiles) {
  const std::string dir = make_model("nofiles");
  std::remove((dir + "/model.safetensors").c_str());
  expect_load_error(dir, ErrorCode::kNotFound, "model.safetensors");
  std::remove((dir + "/config.json").c_str());
  expect_load_error(dir, ErrorCode::kNotFound, "config.json");
}

// A decode step reads every linear (lm_head included) but only one row of an embedding
// table that is not also the lm_head: decode_read_bytes counts exactly that.
TEST(ModelLoader, DecodeReadBytesCountOneEmbeddingRow) {
  struct Case {
    devtools::TinyArch arch;  // kLlama: untied embedding; kQwen2: tied
    core::DType dtype;
    NumericsMode mode;
  };
  for (const Case& c :
       {Case{devtools::TinyArch::kLlama, core::DType::kBF16, NumericsMode::kCanonical},
        Case{devtools::TinyArch::kQwen2, core::DType::kBF16, NumericsMode::kCanonical},
        Case{devtools::TinyArch::kLlama, core::DType::kF32, NumericsMode::kFast},
        Case{devtools::TinyArch::kQwen2, core::DType::kF32, NumericsMode::kFast}}) {
    if (c.mode == NumericsMode::kFast && !DETINFER_TEST_WITH_TORCH) continue;  // no libtorch
    const std::string dir = scratch_dir("readbytes");
    devtools::make_tiny_model(tiny_options(c.arch, c.dtype, dir));
    model::ModelOptions options;
    options.mode = c.mode;
    const auto m = model::Model::load(dir, options);
    const model::ModelConfig& cfg = m->config();
    // An untied embedding is a table of its own (canonical: the stored dtype, bf16 here;
    // fast: widened to f32). A tied one is the lm_head itself: canonical reads its rows
    // back from the packed lm_head, fast mode shares the f32 tensor.
    const std::int64_t esize = c.mode == NumericsMode::kCanonical ? 2 : 4;
    const bool table_only = !cfg.tie_word_embeddings;
    const std::int64_t table = cfg.vocab_size * cfg.hidden_size * esize;
    const std::int64_t want =
        table_only ? m->resident_bytes() - table + cfg.hidden_size * esize : m->resident_bytes();
    EXPECT_EQ(m->decode_read_bytes(), want)
        << "arch " << static_cast<int>(c.arch) << " mode " << static_cast<int>(c.mode);
    EXPECT_LT(m->decode_read_bytes(), m->resident_bytes() + 1);
  }
}

}  // namespace
}  // namespace detinfer

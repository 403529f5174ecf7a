// Helpers of the GGUF model tests: a tiny model written as GGUF, and a copy of a GGUF file
// with its metadata or tensors edited (hostile files made from a good one).
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "detinfer/error.h"
#include "devtools/gguf_writer.h"
#include "devtools/model_tools.h"
#include "model/gguf.h"
#include "model/gguf_model.h"
#include "model/mapped_file.h"
#include "model/model.h"
#include "model_test_util.h"

namespace detinfer::testing {

// A tiny model folder (no rope scaling) and its GGUF (`splits` shards) under one scratch dir.
struct TinyGguf {
  std::string hf_dir;
  std::string gguf;  // the file (or first shard)
  std::vector<std::string> files;
};

inline TinyGguf tiny_gguf(devtools::TinyArch arch, core::DType dtype, const std::string& name,
                          std::int64_t splits = 1, std::uint64_t seed = 1) {
  const std::string dir = scratch_dir(name);
  devtools::TinyModelOptions o = tiny_options(arch, dtype, dir + "/hf", seed);
  o.llama3_rope_scaling = false;  // GGUF stores llama3 scaling as rope_freqs (refused)
  devtools::make_tiny_model(o);
  TinyGguf t;
  t.hf_dir = o.out_dir;
  std::filesystem::create_directories(dir + "/gguf");
  t.files = devtools::write_gguf_model(t.hf_dir, dir + "/gguf/model.gguf", splits);
  t.gguf = t.files.front();
  return t;
}

// One tensor of a GGUF file being copied.
struct GgufTensorCopy {
  std::string name;
  std::vector<std::uint64_t> dims;
  std::uint32_t type = 0;
  std::vector<std::uint8_t> data;
};

// Metadata edits: a value to write (by its writer call) or nullptr to drop the key.
using MetaWriter = std::function<void(devtools::GgufWriter&, const std::string& key)>;
struct GgufEdits {
  std::map<std::string, MetaWriter> metadata;  // replaces (or adds) a key; nullptr drops it
  std::function<void(std::vector<GgufTensorCopy>&)> tensors;  // edits the tensor list
};

inline MetaWriter set_u32(std::uint32_t v) {
  return [v](devtools::GgufWriter& w, const std::string& k) { w.add_u32(k, v); };
}
inline MetaWriter set_f32(float v) {
  return [v](devtools::GgufWriter& w, const std::string& k) { w.add_f32(k, v); };
}
inline MetaWriter set_string(const std::string& v) {
  return [v](devtools::GgufWriter& w, const std::string& k) { w.add_string(k, v); };
}

// Copies the GGUF file `in` to `out` with `edits` applied (the file holds only string,
// u32, i32, f32 and bool values and string, i32 and f32 arrays, as write_gguf_model writes
// them, and bool arrays).
inline void copy_gguf(const std::string& in, const std::string& out, const GgufEdits& edits) {
  const model::MappedFile file(in);
  const model::GgufFile f = model::parse_gguf(file.data(), file.size(), in);
  devtools::GgufWriter w;
  for (const auto& [key, v] : f.metadata) {
    const auto e = edits.metadata.find(key);
    if (e != edits.metadata.end()) continue;
    if (v.type == model::GgufType::kString) w.add_string(key, v.s);
    if (v.type == model::GgufType::kU32) w.add_u32(key, static_cast<std::uint32_t>(v.u));
    if (v.type == model::GgufType::kI32) w.add_i32(key, static_cast<std::int32_t>(v.i));
    if (v.type == model::GgufType::kF32) w.add_f32(key, static_cast<float>(v.f));
    if (v.type == model::GgufType::kBool) w.add_bool(key, v.u != 0);
    if (v.type == model::GgufType::kArray && v.element == model::GgufType::kString)
      w.add_string_array(key, v.strings);
    if (v.type == model::GgufType::kArray && v.element == model::GgufType::kI32)
      w.add_i32_array(key, std::vector<std::int32_t>(v.ints.begin(), v.ints.end()));
    if (v.type == model::GgufType::kArray && v.element == model::GgufType::kBool)
      w.add_bool_array(key, std::vector<bool>(v.uints.begin(), v.uints.end()));
    if (v.type == model::GgufType::kArray && v.element == model::GgufType::kF32)
      w.add_f32_array(key, std::vector<float>(v.floats.begin(), v.floats.end()));
  }
  for (const auto& [key, write] : edits.metadata) {
    if (write) write(w, key);
  }
  std::vector<GgufTensorCopy> tensors;
  for (const model::GgufTensor& t : f.tensors) {
    const std::uint8_t* p = file.data() + f.data_offset + t.offset;
    tensors.push_back({t.name, t.dims, t.type, std::vector<std::uint8_t>(p, p + t.bytes)});
  }
  if (edits.tensors) edits.tensors(tensors);
  for (auto& t : tensors) w.add_tensor(t.name, t.dims, t.type, std::move(t.data));
  w.write(out + ".tmp");  // `in` may be `out`, still mapped
  std::rename((out + ".tmp").c_str(), out.c_str());
}

// The tensor `name` of `tensors` (nullptr when absent).
inline GgufTensorCopy* tensor_named(std::vector<GgufTensorCopy>& tensors, const std::string& name) {
  for (auto& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

inline std::vector<float> logits_of(const std::string& model, std::size_t n = 12) {
  devtools::LogitsRequest r;
  r.model_dir = model;
  r.tokens = test_tokens(n, 512);
  return devtools::compute_logits(r).logits;
}

inline model::ModelConfig config_of(const std::string& path) {
  return model::gguf_model_config(*model::GgufModel::open(path));
}

// The GGUF file's config equals the folder's (canonical text) and its logits over
// `positions` tokens are bitwise equal to the folder's.
inline void expect_same_model(const TinyGguf& t, std::size_t positions = 40) {
  EXPECT_EQ(model::canonical_config_text(config_of(t.gguf)),
            model::canonical_config_text(model::load_model_config(t.hf_dir)));
  const std::vector<float> hf = logits_of(t.hf_dir, positions);
  const std::vector<float> g = logits_of(t.gguf, positions);
  ASSERT_EQ(hf.size(), g.size());
  EXPECT_EQ(std::memcmp(hf.data(), g.data(), hf.size() * sizeof(float)), 0);
}

// Loading `path` is Error(code) naming `field` ("" = not checked), its message holding
// `message`.
inline void expect_refused(const std::string& path, ErrorCode code, const std::string& field,
                           const std::string& message) {
  try {
    model::Model::load(path, {});
    FAIL() << "loaded " << path;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    if (!field.empty()) {
      EXPECT_EQ(e.field(), field) << e.what();
    }
    EXPECT_NE(e.message().find(message), std::string::npos) << e.what();
  }
}

// A copy of the GGUF file `in` with `e` applied, under the scratch dir `dir`.
inline std::string edited(const std::string& in, const GgufEdits& e,
                          const std::string& dir = "g-arch-hostile") {
  const std::string out = scratch_dir(dir) + "/m.gguf";
  copy_gguf(in, out, e);
  return out;
}

inline GgufEdits tensor_edit(std::function<void(std::vector<GgufTensorCopy>&)> f) {
  GgufEdits e;
  e.tensors = std::move(f);
  return e;
}

}  // namespace detinfer::testing

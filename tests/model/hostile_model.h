// The model tests' hostile-checkpoint helpers: edit a tiny model's config.json or rewrite
// its safetensors file, and expect a clear error from loading it.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "detinfer/error.h"
#include "devtools/safetensors_writer.h"
#include "model/model.h"
#include "model/model_config.h"
#include "model/tensor_store.h"

namespace detinfer::testing {

// Rewrites model.safetensors (f32) through `edit`, which may drop (return false) or
// reshape a tensor: its data are then the original's first elements, zero-padded.
inline void rewrite_weights(const std::string& dir,
                            const std::function<bool(devtools::TensorEntry&)>& edit) {
  std::vector<std::pair<devtools::TensorEntry, std::vector<std::uint8_t>>> kept;
  {
    const model::TensorStore store = model::TensorStore::open(dir);
    for (const auto& [name, ref] : store.tensors()) {
      devtools::TensorEntry e{name, ref.info->dtype, ref.info->shape};
      if (!edit(e)) continue;
      std::int64_t n = 4;
      for (const std::int64_t d : e.shape) n *= d;
      std::vector<std::uint8_t> bytes(static_cast<std::size_t>(n), 0);
      std::memcpy(bytes.data(), ref.data(), std::min<std::size_t>(bytes.size(), ref.info->size()));
      kept.push_back({e, std::move(bytes)});
    }
  }
  std::vector<devtools::TensorEntry> entries;
  for (const auto& k : kept) entries.push_back(k.first);
  devtools::write_safetensors(dir + "/model.safetensors", entries,
                              [&](const devtools::TensorEntry& e, std::vector<std::uint8_t>& b) {
                                for (const auto& k : kept) {
                                  if (k.first.name == e.name) b = k.second;
                                }
                              });
}

// The code of the error loading dir's config.json after `edit`; the message must name
// `field`.
inline ErrorCode config_error(const std::string& dir,
                              const std::function<void(nlohmann::json&)>& edit,
                              const std::string& field) {
  std::ifstream in(dir + "/config.json");
  nlohmann::json c = nlohmann::json::parse(in);
  edit(c);
  std::ofstream(dir + "/config.json") << c.dump();
  try {
    model::load_model_config(dir);
  } catch (const Error& e) {
    EXPECT_NE(e.message().find(field), std::string::npos) << e.message();
    return e.code();
  }
  ADD_FAILURE() << "accepted " << c.dump();
  return ErrorCode::kInternal;
}

// The error loading the model in dir after rewrite_weights(dir, edit).
inline Error load_error(const std::string& dir,
                        const std::function<bool(devtools::TensorEntry&)>& edit) {
  rewrite_weights(dir, edit);
  try {
    model::Model::load(dir, {});
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "a broken checkpoint in " << dir << " loaded";
  return Error(ErrorCode::kInternal, "accepted");
}

}  // namespace detinfer::testing

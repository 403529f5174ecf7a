// The tiny Gemma 2 / Gemma 3 models the float64 reference tests use (gemma_test.cpp,
// tests/cuda/cuda_invariant_gemma_emulation_test.cpp): f32 weights, a window of 8, head
// dims and scales that make every Gemma feature change the logits.
#pragma once

#include <string>

#include "devtools/model_tools.h"
#include "model/model_test_util.h"

namespace detinfer::testing {

inline devtools::TinyModelOptions gemma_reference_options(devtools::TinyArch arch,
                                                          const std::string& dir) {
  devtools::TinyModelOptions o = tiny_options(arch, core::DType::kF32, dir, 7);
  o.tie_word_embeddings = true;
  o.sliding_window = 8;
  o.hidden = 48;  // heads * head_dim != hidden; sqrt(48) is not a float
  o.head_dim = 16;
  o.query_pre_attn_scalar = 24.0;  // scale 24^-0.5, not head_dim^-0.5
  if (arch == devtools::TinyArch::kGemma2) {
    o.attn_logit_softcapping = 2.0;  // small enough that capping changes the scores
    o.final_logit_softcapping = 3.0;
  } else {
    o.layers = 3;  // pattern 3: layers 0 and 1 slide, layer 2 is global
    o.sliding_window_pattern = 3;
    o.rope_theta = 1e6;
    o.rope_local_base_freq = 100.0;
    o.linear_rope_factor = 4.0;  // global layers only
  }
  return o;
}

}  // namespace detinfer::testing

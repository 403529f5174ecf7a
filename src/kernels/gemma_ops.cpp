// The Gemma elementwise ops (numerics spec v1, docs/numerics.md "tanh"): scalar loops
// over the one host/device definition (kernels/reference/tanh_hd.h), so every ISA and
// thread count gives the same bits.
#include "kernels/kernels.h"
#include "kernels/reference/tanh_hd.h"

namespace detinfer::kernels {

float tanh_f32(float x) { return explog::tanh_f32(x); }

void gelu_tanh_mul(const float* g, const float* u, float* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = explog::gelu_tanh_f32(g[i]) * u[i];
}

void softcap(float* x, float cap, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) x[i] = explog::softcap_f32(x[i], cap);
}

}  // namespace detinfer::kernels

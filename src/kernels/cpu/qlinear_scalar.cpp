// The scalar quantized panel kernel: ref::quant_linear's operations over the packed layout,
// and the quantized kernel dispatch.
#include <cstring>

#include "core/check.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/qlinear.h"
#include "kernels/reference/quant_reference.h"

namespace detinfer::kernels::cpu {
namespace {

// Block b of column l of panel p as ref::decode_block gave it, read back from the panels.
ref::BlockScales block_scales(const QuantPacked& w, std::int64_t p, std::int64_t b,
                              std::int64_t l) {
  const std::int64_t at = qd_index(w.nb, p, b, l), atd = qdm_index(w, p, b, l);
  ref::BlockScales s;
  s.d = f16_to_f32(w.d[atd]);
  if (w.ext)
    for (int h = 0; h < 2; ++h) s.s[h] = packed_sub_scale(w, at, h);
  if (w.has_min) {
    s.dm = f16_to_f32(w.dm[atd]);
    for (int h = 0; h < 2; ++h) s.m[h] = packed_sub_min(w, at, h);
  }
  return s;
}

void qlinear_ref_panels(const QuantPacked& w, const QuantRows& x, float* y, std::int64_t ldy,
                        std::int64_t p0, std::int64_t p1) {
  const std::int8_t* xq = x.q;
  const float* xd = x.d;
  const std::int32_t* xs = x.xs;
  const std::int64_t m = x.m;
  for (std::int64_t p = p0; p < p1; ++p) {
    for (std::int64_t l = 0; l < kPanel && p * kPanel + l < w.n; ++l) {
      const std::int64_t j = p * kPanel + l;
      for (std::int64_t r = 0; r < m; ++r) {
        float s = 0.0f;
        for (std::int64_t b = 0; b < w.nb; ++b) {
          std::int8_t wq[ref::kQuantBlock];
          for (std::int64_t i = 0; i < ref::kQuantBlock; ++i)
            wq[i] = static_cast<std::int8_t>(packed_weight(w, p, b, l, i));
          const ref::BlockScales bs = block_scales(w, p, b, l);
          s = s + ref::block_value_scaled(bs, w.has_min, xd[r * w.nb + b], wq,
                                          xq + r * w.k + b * ref::kQuantBlock,
                                          w.has_min ? xs + r * 2 * w.nb + 2 * b : nullptr);
        }
        y[r * ldy + j] = w.bias != nullptr ? s + w.bias[j] : s;
      }
    }
  }
}

void quantize_acts_ref(const float* x, std::int64_t ldx, std::int64_t m, std::int64_t k,
                       std::int8_t* q, float* d, std::int32_t* xs) {
  for (std::int64_t r = 0; r < m; ++r) {
    ref::quantize_act_row(x + r * ldx, k, q + r * k, d + r * (k / ref::kQuantBlock));
    if (xs != nullptr) ref::act_half_sums(q + r * k, k, xs + r * (k / 16));
  }
}

}  // namespace

QLinearFn qlinear_scalar() { return qlinear_ref_panels; }
QuantizeActsFn quantize_acts_scalar() { return quantize_acts_ref; }

QuantizeActsFn quantize_acts_for(Isa isa) {
  return isa == Isa::kScalar ? quantize_acts_scalar() : quantize_acts_avx2();
}

bool qlinear_reads_shifted(Isa isa) { return isa == Isa::kAvx512 && cpu_has_avx512_vnni(); }

void shift_rows(const std::int8_t* q, std::int64_t n, std::int8_t* u) {
  // Eight bytes at a time (the compiler's baseline ISA has no byte vectors to spare).
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t v;
    std::memcpy(&v, q + i, 8);
    v ^= 0x8080808080808080u;
    std::memcpy(u + i, &v, 8);
  }
  for (; i < n; ++i) u[i] = static_cast<std::int8_t>(static_cast<std::uint8_t>(q[i]) ^ 0x80u);
}

bool cpu_has_avx512_vnni() {
  static const bool has = __builtin_cpu_supports("avx512vnni") != 0;
  return has;
}

QLinearFn qlinear_for(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return qlinear_scalar();
    case Isa::kAvx2:
      return qlinear_avx2();
    case Isa::kAvx512:
      return qlinear_avx512(cpu_has_avx512_vnni());
  }
  fail(ErrorCode::kInternal, "qlinear_for: unknown ISA");
}

}  // namespace detinfer::kernels::cpu

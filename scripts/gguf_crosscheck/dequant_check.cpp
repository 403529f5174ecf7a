// Outside CI (scripts/gguf-crosscheck.sh): detinfer's decoding of every ggml block type it
// loads against llama.cpp's own dequantize_row_* (from a libggml-base.so, e.g. the prebuilt
// one of npm node-llama-cpp), on random blocks with random finite binary16 scales. llama.cpp
// computes `d * sc` then `* q` then `- m` in binary32 (two or three roundings); detinfer's
// decoded weight is exact but for one rounding of the min term, so the two agree to within
// one ulp-scale error of the weight: reported as the largest |difference| / (|d * sc * q| +
// |dmin * m|) and the count of bit-identical weights.
// Build: g++ -std=c++17 -O1 -I src -I include -I tests/kernels dequant_check.cpp
//   BUILD/src/libdetinfer.a -ldl
#include <dlfcn.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "kernels/reference/quant_blocks.h"
#include "quant_test_util.h"  // tests/kernels: random blocks, random finite scales

using detinfer::kernels::QuantFormat;
using Dequant = void (*)(const void*, float*, std::int64_t);

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: dequant_check LIBGGML_BASE_SO\n");
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW);
  if (lib == nullptr) {
    std::fprintf(stderr, "%s\n", dlerror());
    return 2;
  }
  const std::pair<QuantFormat, const char*> fns[] = {
      {QuantFormat::kQ8_0, "dequantize_row_q8_0"}, {QuantFormat::kQ4_0, "dequantize_row_q4_0"},
      {QuantFormat::kQ5_0, "dequantize_row_q5_0"}, {QuantFormat::kQ4_1, "dequantize_row_q4_1"},
      {QuantFormat::kQ5_1, "dequantize_row_q5_1"}, {QuantFormat::kQ2_K, "dequantize_row_q2_K"},
      {QuantFormat::kQ3_K, "dequantize_row_q3_K"}, {QuantFormat::kQ4_K, "dequantize_row_q4_K"},
      {QuantFormat::kQ5_K, "dequantize_row_q5_K"}, {QuantFormat::kQ6_K, "dequantize_row_q6_K"}};
  int bad = 0;
  for (const auto& [f, name] : fns) {
    const auto fn = reinterpret_cast<Dequant>(dlsym(lib, name));
    if (fn == nullptr) {
      std::printf("%s: not exported\n", name);
      continue;
    }
    const auto info = detinfer::kernels::quant_format_info(f);
    const std::int64_t k = 256 * 64;
    const std::vector<std::uint8_t> w =
        detinfer::kernels::testing::random_blocks(f, k / info.block_elems, 1);
    std::vector<float> ours(static_cast<std::size_t>(k)), theirs(ours.size());
    detinfer::kernels::dequantize_row(f, w.data(), k, ours.data());
    fn(w.data(), theirs.data(), k);
    double worst = 0;
    std::int64_t same = 0;
    for (std::int64_t b = 0; b < k / 32; ++b) {
      std::int8_t q[32];
      const auto s = detinfer::kernels::ref::decode_block(f, w.data(), b, q);
      for (int i = 0; i < 32; ++i) {
        const std::int64_t e = b * 32 + i;
        const double mag = std::fabs(static_cast<double>(s.d) * s.s[i / 16] * q[i]) +
                           std::fabs(static_cast<double>(s.dm) * s.m[i / 16]);
        const double diff = std::fabs(static_cast<double>(ours[e]) - theirs[e]);
        same += std::memcmp(&ours[e], &theirs[e], 4) == 0;
        if (mag > 0) worst = std::max(worst, diff / mag);
        if (mag == 0 && diff != 0) worst = 1;
      }
    }
    const bool ok = worst <= std::ldexp(1.0, -22);
    bad += !ok;
    std::printf("%s: %lld weights, %lld bit-identical, worst |diff| / magnitude %.3g (%s)\n",
                info.name, static_cast<long long>(k), static_cast<long long>(same), worst,
                ok ? "ok" : "MISMATCH");
  }
  return bad == 0 ? 0 : 1;
}

// The RoPE table is built without the C library (model/rope_math.h) and must keep the
// bits of the table built before with glibc's std::pow / std::cos / std::sin (numerics
// spec v1): every float cos/sin entry, positions 0..131071, of every (theta, head_dim,
// rope scaling) that the supported model families and the tiny test models use. The
// double inverse frequencies agree too, except one that glibc's pow misrounds (below);
// the float entries still agree there.
#include "model/rope_table.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "model/model_config.h"
#include "model/rope_math.h"

namespace detinfer {
namespace {

// The table as numerics spec v1 first defined it, with glibc: the comparison baseline.
std::vector<double> glibc_inv_freq(const model::ModelConfig& c) {
  const double pi = 3.14159265358979323846;
  std::vector<double> out;
  for (std::int64_t i = 0; i < c.head_dim / 2; ++i) {
    const double exponent = static_cast<double>(2 * i) / static_cast<double>(c.head_dim);
    double f = 1.0 / std::pow(c.rope_theta, exponent);
    if (c.rope_scaling.type == "llama3") {
      const model::RopeScaling& s = c.rope_scaling;
      const double old_ctx = static_cast<double>(s.original_max_position_embeddings);
      const double low_wavelen = old_ctx / s.low_freq_factor;
      const double high_wavelen = old_ctx / s.high_freq_factor;
      const double wavelen = 2.0 * pi / f;
      if (wavelen > low_wavelen) {
        f = f / s.factor;
      } else if (!(wavelen < high_wavelen)) {
        const double smooth =
            (old_ctx / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        f = (1.0 - smooth) * f / s.factor + smooth * f;
      }
    }
    out.push_back(f);
  }
  return out;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }
bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

model::ModelConfig rope_config(double theta, std::int64_t head_dim, double llama3_factor = 0,
                               std::int64_t original_context = 8192) {
  model::ModelConfig c;
  c.rope_theta = theta;
  c.head_dim = head_dim;
  if (llama3_factor > 0) {
    c.rope_scaling.type = "llama3";
    c.rope_scaling.factor = llama3_factor;
    c.rope_scaling.low_freq_factor = 1.0;
    c.rope_scaling.high_freq_factor = 4.0;
    c.rope_scaling.original_max_position_embeddings = original_context;
  }
  return c;
}

// Llama 2/3/3.1/3.2 (llama3 scaling factor 8 and 32), Mistral, Qwen2/2.5 (0.5B: d 64),
// Qwen3, SmolLM/SmolLM2 (theta 10000 and 100000), and the tiny models (d 8..32).
std::vector<model::ModelConfig> supported_configs() {
  std::vector<model::ModelConfig> v;
  for (double theta : {10000.0, 100000.0, 500000.0, 1000000.0}) {
    for (std::int64_t d : {64, 128}) v.push_back(rope_config(theta, d));
  }
  v.push_back(rope_config(500000.0, 128, 8.0));
  v.push_back(rope_config(500000.0, 128, 32.0));
  v.push_back(rope_config(500000.0, 64, 32.0));
  for (std::int64_t d : {8, 16, 32}) v.push_back(rope_config(10000.0, d));
  // Tiny llamas with llama3_rope_scaling (original context = max_positions / 4).
  for (std::int64_t d : {8, 16, 32}) v.push_back(rope_config(10000.0, d, 8.0, 512));
  return v;
}

std::string describe(const model::ModelConfig& c) {
  std::ostringstream os;
  os << "theta " << c.rope_theta << " d " << c.head_dim << " scaling '" << c.rope_scaling.type
     << "' x" << c.rope_scaling.factor;
  return os.str();
}

// glibc 2.36's pow(1e6, 66/128) is 0x1.363c0445ac06ep+10, one ulp below the correctly
// rounded 0x1.363c0445ac06fp+10 (the exact value, 1240.9377607517195661..., lies 0.002 ulp
// above the midpoint); rope_math::pow gives the correctly rounded one, so this inverse
// frequency differs in its last bit. Every other one is the same double.
bool known_glibc_misrounding(const model::ModelConfig& c, std::size_t i) {
  return c.rope_theta == 1000000.0 && c.head_dim == 128 && i == 33;
}

TEST(RopeTable, InverseFrequenciesEqualGlibcPowForEverySupportedConfig) {
  for (const model::ModelConfig& c : supported_configs()) {
    const model::RopeTable table(c);
    const std::vector<double> want = glibc_inv_freq(c);
    ASSERT_EQ(table.inv_freq().size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
      if (known_glibc_misrounding(c, i) && c.rope_scaling.type.empty()) {
        EXPECT_EQ(model::rope_math::pow(1000000.0, 66.0 / 128.0), 0x1.363c0445ac06fp+10);
        continue;  // glibc's may be either; the float table entries are compared below
      }
      EXPECT_TRUE(same_bits(table.inv_freq()[i], want[i]))
          << describe(c) << " i " << i << ": " << table.inv_freq()[i] << " vs glibc " << want[i];
    }
  }
}

// Counts entries, positions 0..131071, whose float cos or sin (as RopeTable computes
// them: the table's own inverse frequencies, rope_math::sincos_f) differs from glibc's
// (glibc's inverse frequencies, std::cos / std::sin). Every 499th entry also checks the
// fast path of sincos_f against the accurate sincos.
std::int64_t sweep_mismatches(const model::ModelConfig& c, std::string* first) {
  const std::vector<double> inv = model::RopeTable(c).inv_freq();
  const std::vector<double> ginv = glibc_inv_freq(c);
  std::int64_t bad = 0, entry = 0;
  for (std::int64_t p = 0; p < 131072; ++p) {
    for (std::size_t i = 0; i < inv.size(); ++i, ++entry) {
      const double angle = static_cast<double>(p) * inv[i];
      const double gangle = static_cast<double>(p) * ginv[i];
      float s = 0, co = 0;
      model::rope_math::sincos_f(angle, &s, &co);
      bool ok = same_bits(co, static_cast<float>(std::cos(gangle))) &&
                same_bits(s, static_cast<float>(std::sin(gangle)));
      if (entry % 499 == 0) {
        double ds = 0, dc = 0;
        model::rope_math::sincos(angle, &ds, &dc);
        ok = ok && same_bits(s, static_cast<float>(ds)) && same_bits(co, static_cast<float>(dc));
      }
      if (!ok && bad++ == 0) {
        std::ostringstream os;
        os << describe(c) << " pos " << p << " i " << i << " angle " << angle;
        *first = os.str();
      }
    }
  }
  return bad;
}

TEST(RopeTable, CosSinEqualGlibcOverEveryPositionOfEverySupportedConfig) {
  const std::vector<model::ModelConfig> configs = supported_configs();
  std::vector<std::int64_t> bad(configs.size(), 0);
  std::vector<std::string> first(configs.size());
  // Two workers over the configs; each config's count is its own, so the split is free.
  auto work = [&](std::size_t w) {
    for (std::size_t k = w; k < configs.size(); k += 2)
      bad[k] = sweep_mismatches(configs[k], &first[k]);
  };
  std::thread other(work, 1);
  work(0);
  other.join();
  for (std::size_t k = 0; k < configs.size(); ++k) {
    EXPECT_EQ(bad[k], 0) << describe(configs[k]) << ", first at " << first[k];
  }
}

TEST(RopeTable, TableRowsAreTheRoundedSinCos) {
  const model::ModelConfig c = rope_config(1000000.0, 64);
  model::RopeTable table(c);
  table.ensure(3000);
  const std::vector<double> inv = glibc_inv_freq(c);
  for (std::int64_t p = 0; p < 3000; ++p) {
    for (std::int64_t i = 0; i < table.half(); ++i) {
      const double angle = static_cast<double>(p) * inv[static_cast<std::size_t>(i)];
      ASSERT_TRUE(same_bits(table.cos(p)[i], static_cast<float>(std::cos(angle)))) << p << " " << i;
      ASSERT_TRUE(same_bits(table.sin(p)[i], static_cast<float>(std::sin(angle)))) << p << " " << i;
    }
  }
}

// Exactly representable results and the edges of the quadrant reduction.
TEST(RopeMath, ExactValuesAndQuadrants) {
  EXPECT_EQ(model::rope_math::pow(10000.0, 0.0), 1.0);
  EXPECT_EQ(model::rope_math::pow(10000.0, 0.5), 100.0);
  EXPECT_EQ(model::rope_math::pow(10000.0, 0.25), 10.0);
  EXPECT_EQ(model::rope_math::pow(1.0, 0.75), 1.0);
  EXPECT_EQ(model::rope_math::pow(1024.0, 0.1), 2.0);
  double s = 1, c = 0;
  model::rope_math::sincos(0.0, &s, &c);
  EXPECT_TRUE(same_bits(s, 0.0));
  EXPECT_EQ(c, 1.0);
  // Arguments near multiples of pi/4 and pi/2 (quadrant boundaries) and large ones.
  for (double x : {0.7853981633974483, 1.5707963267948966, 3.141592653589793, 4.71238898038469,
                   6.283185307179586, 355.0, 103993.0, 131071.0, 1e9, 1099511627776.0}) {
    model::rope_math::sincos(x, &s, &c);
    EXPECT_TRUE(same_bits(s, std::sin(x))) << x << ": " << s << " vs " << std::sin(x);
    EXPECT_TRUE(same_bits(c, std::cos(x))) << x << ": " << c << " vs " << std::cos(x);
  }
}

}  // namespace
}  // namespace detinfer

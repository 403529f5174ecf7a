// The result-cache key covers every output-affecting GenerationConfig field: flipping any
// one field of the table (core/generation_fields.h) changes canonical_generation_config,
// and each flip gives a different key.
#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "cache/result_codec.h"
#include "core/generation_fields.h"

namespace detinfer {
namespace {

// A new member of GenerationConfig must be added to the field table: this size changes.
static_assert(sizeof(GenerationConfig) == 192,
              "GenerationConfig changed: add the new member to core/generation_fields.h and "
              "update this size");

// Another valid value of the same field.
struct FlipField {
  template <typename T>
  void operator()(const core::FieldSpec&, T& v) const {
    if constexpr (std::is_same_v<T, bool>) {
      v = !v;
    } else if constexpr (std::is_arithmetic_v<T>) {
      v = static_cast<T>(v + 1);
    } else if constexpr (std::is_same_v<T, std::optional<std::uint64_t>>) {
      v = *v + 1;
    } else if constexpr (std::is_same_v<T, std::optional<std::vector<std::int32_t>>>) {
      v = std::vector<std::int32_t>{1, 2};
    } else if constexpr (std::is_same_v<T, ResponseFormat>) {
      v.type = ResponseFormatType::kJsonObject;
    } else {
      v.push_back("stop");
    }
  }
};

GenerationConfig flipped(const GenerationConfig& base, std::size_t index) {
  GenerationConfig c = base;
  std::size_t i = 0;
  core::for_each_field(c, [&](const core::FieldSpec& f, auto& v) {
    if (i++ == index) FlipField{}(f, v);
  });
  return c;
}

TEST(ResultKeyFields, EveryOutputAffectingFieldChangesTheKey) {
  GenerationConfig base;
  base.seed = 42;
  const std::string base_key = cache::canonical_generation_config(base);
  std::vector<std::string> names;
  std::vector<bool> affects;
  core::for_each_field(base, [&](const core::FieldSpec& f, const auto&) {
    names.push_back(f.key);
    affects.push_back(f.affects_output);
  });
  ASSERT_EQ(names.size(), core::kGenerationFieldCount);
  std::set<std::string> keys{base_key};
  for (std::size_t i = 0; i < names.size(); ++i) {
    SCOPED_TRACE(names[i]);
    const GenerationConfig c = flipped(base, i);
    const std::string key = cache::canonical_generation_config(c);
    if (affects[i]) {
      EXPECT_NE(key, base_key);
      EXPECT_TRUE(keys.insert(key).second) << "two flips share a key";
    } else {
      EXPECT_EQ(key, base_key);
    }
  }
  // first_sample_index is the field version 1 of the key left out.
  GenerationConfig other = base;
  other.first_sample_index = 3;
  EXPECT_NE(cache::canonical_generation_config(other), base_key);
}

TEST(ResultKeyFields, SetsAndSignedZerosDoNotChangeTheKey) {
  GenerationConfig a;
  a.seed = 1;
  a.stop_token_ids = std::vector<std::int32_t>{3, 1, 3};
  a.stop_strings = {"b", "a", "b"};
  a.presence_penalty = -0.0f;
  GenerationConfig b = a;
  b.stop_token_ids = std::vector<std::int32_t>{1, 3};
  b.stop_strings = {"a", "b"};
  b.presence_penalty = 0.0f;
  EXPECT_EQ(cache::canonical_generation_config(a), cache::canonical_generation_config(b));
  // Unset stop ids (the model's eos) differ from an empty set.
  b.stop_token_ids = std::nullopt;
  GenerationConfig c = b;
  c.stop_token_ids = std::vector<std::int32_t>{};
  EXPECT_NE(cache::canonical_generation_config(b), cache::canonical_generation_config(c));
}

}  // namespace
}  // namespace detinfer

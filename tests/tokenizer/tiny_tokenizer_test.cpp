#include "devtools/tiny_tokenizer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "detinfer/error.h"
#include "detinfer/hash.h"

namespace detinfer {
namespace {

TEST(TinyTokenizer, HasExactlyVocabSizeDistinctIds) {
  for (const std::int64_t v : {259, 300, 512, 1000}) {
    const auto j = nlohmann::json::parse(devtools::make_tiny_tokenizer_json(v));
    std::set<std::int64_t> ids;
    for (const auto& [tok, id] : j["model"]["vocab"].items()) ids.insert(id.get<std::int64_t>());
    for (const auto& t : j["added_tokens"]) ids.insert(t["id"].get<std::int64_t>());
    ASSERT_EQ(static_cast<std::int64_t>(ids.size()), v);
    EXPECT_EQ(*ids.begin(), 0);
    EXPECT_EQ(*ids.rbegin(), v - 1);
    const devtools::TinySpecialIds s = devtools::tiny_special_ids(v);
    EXPECT_EQ(j["added_tokens"][0]["content"], "<|endoftext|>");
    EXPECT_EQ(j["added_tokens"][0]["id"], s.endoftext);
    EXPECT_EQ(j["added_tokens"][2]["content"], "<|im_end|>");
    EXPECT_EQ(j["added_tokens"][2]["id"], s.im_end);
  }
}

TEST(TinyTokenizer, DefaultVocabUsesAllSlotsForMerges) {
  const auto j = nlohmann::json::parse(devtools::make_tiny_tokenizer_json(512));
  EXPECT_EQ(j["model"]["merges"].size(), 512u - 259u);
  EXPECT_EQ(j["added_tokens"].size(), 3u);
  EXPECT_EQ(j["model"]["vocab"]["!"], 0);
  EXPECT_EQ(j["model"]["vocab"]["Ġ"], 220);  // the space byte, as in GPT-2
}

TEST(TinyTokenizer, IsDeterministic) {
  const std::string a = devtools::make_tiny_tokenizer_json(512);
  const std::string b = devtools::make_tiny_tokenizer_json(512);
  EXPECT_EQ(xxh3_128(a), xxh3_128(b));
  EXPECT_FALSE(devtools::make_tiny_tokenizer_config_json().empty());
}

TEST(TinyTokenizer, RejectsTooSmallVocab) {
  EXPECT_THROW(devtools::make_tiny_tokenizer_json(100), Error);
  EXPECT_THROW(devtools::tiny_special_ids(258), Error);
}

}  // namespace
}  // namespace detinfer

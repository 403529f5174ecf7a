// SessionOptions::kv_dtype (docs/numerics.md, "KV storage"): within each setting the
// canonical outputs are invariant to batch composition, prefill chunking, threads, ISA
// and prefix-cache hits; bf16/f16 KV give other bits than f32 KV and other cache keys;
// their logprobs stay close to f32's; bad values are clear errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "detinfer/error.h"
#include "detinfer/fingerprint.h"
#include "detinfer/hash.h"
#include "detinfer/session.h"
#include "kernels/kernels.h"
#include "session/tiny_session.h"

namespace detinfer {
namespace {

using testing::expect_same;
using testing::random_config;
using testing::random_ids;
using testing::TestRng;
using testing::tiny_model_dir;
using testing::tiny_options;

SessionOptions kv_options(KvDType kv, std::int32_t threads = 1) {
  SessionOptions o = tiny_options(threads);
  o.kv_dtype = kv;
  o.cache.prefix.enabled = false;
  return o;
}

GenerationConfig greedy(int n = 12) {
  GenerationConfig c;
  c.max_new_tokens = n;
  c.ignore_eos = true;
  return c;
}

class KvDtypeInvariance : public ::testing::TestWithParam<KvDType> {};

TEST_P(KvDtypeInvariance, ChunkingThreadsIsaBatchAndCacheHits) {
  const KvDType kv = GetParam();
  GenerationConfig sampled = greedy();
  sampled.temperature = 0.9f;
  sampled.seed = 11;
  DeterministicSession base = DeterministicSession::open(tiny_model_dir(), kv_options(kv));
  const std::vector<std::int32_t> prompt = testing::chunk_crossing_prompt(base);
  const GenerationResult want_g = base.generate(prompt, greedy());
  const GenerationResult want_s = base.generate(prompt, sampled);
  base.close();

  for (std::int32_t chunk : {1, 7, 64, 256}) {
    SessionOptions o = kv_options(kv);
    o.prefill_chunk_tokens = chunk;
    DeterministicSession s = DeterministicSession::open(tiny_model_dir(), o);
    expect_same(want_g, s.generate(prompt, greedy()), "chunk " + std::to_string(chunk));
  }
  for (std::int32_t threads : {2, 3}) {
    DeterministicSession s = DeterministicSession::open(tiny_model_dir(), kv_options(kv, threads));
    // With batch mates in flight.
    TestRng rng{5, static_cast<std::uint64_t>(threads)};
    std::vector<RequestHandle> mates;
    for (int i = 0; i < 4; ++i)
      mates.push_back(s.submit(random_ids(rng, 90, static_cast<std::int32_t>(s.vocab_size())),
                               random_config(rng)));
    expect_same(want_g, s.generate(prompt, greedy()), "threads " + std::to_string(threads));
    expect_same(want_s, s.generate(prompt, sampled), "sampled threads " + std::to_string(threads));
    for (auto& m : mates) m.get();
  }
  const kernels::Isa saved = kernels::active_isa();
  for (kernels::Isa isa : {kernels::Isa::kScalar, kernels::Isa::kAvx2, kernels::Isa::kAvx512}) {
    if (!kernels::isa_supported(isa)) continue;
    kernels::set_isa(isa);
    DeterministicSession s = DeterministicSession::open(tiny_model_dir(), kv_options(kv, 2));
    expect_same(want_g, s.generate(prompt, greedy()), kernels::to_string(isa));
  }
  kernels::set_isa(saved);
  // Prefix-cache hits: a cold run publishes, the warm ones restore rounded KV blocks.
  SessionOptions cached = kv_options(kv);
  cached.cache.prefix.enabled = true;
  DeterministicSession s = DeterministicSession::open(tiny_model_dir(), cached);
  const GenerationResult cold = s.generate(prompt, greedy());
  const GenerationResult warm = s.generate(prompt, greedy());
  EXPECT_EQ(cold.cache.prefix_cached_tokens, 0);
  EXPECT_GT(warm.cache.prefix_cached_tokens, 0);
  expect_same(want_g, cold, "cache cold");
  expect_same(want_g, warm, "cache warm");
  expect_same(want_s, s.generate(prompt, sampled), "cache warm sampled");
}

INSTANTIATE_TEST_SUITE_P(HalfKv, KvDtypeInvariance,
                         ::testing::Values(KvDType::kBF16, KvDType::kF16),
                         [](const ::testing::TestParamInfo<KvDType>& i) {
                           return std::string(to_string(i.param));
                         });

// Rounded KV is other numbers: other step digests, another fingerprint, and a prefix cache
// shared through a disk tier never serves one setting's blocks to another.
TEST(KvDtype, DiffersFromF32AndIsKeyedApart) {
  const std::string dir =
      std::string(std::getenv("DETINFER_TEST_TMP") != nullptr ? std::getenv("DETINFER_TEST_TMP")
                                                              : "/tmp") +
      "/kv-dtype-disk-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  auto open = [&](KvDType kv) {
    SessionOptions o = kv_options(kv);
    o.cache.prefix.enabled = true;
    o.cache.prefix.memory.enabled = false;
    o.cache.prefix.disk.directory = dir;
    return DeterministicSession::open(tiny_model_dir(), o);
  };
  std::vector<std::int32_t> prompt;
  GenerationResult f32;
  {
    DeterministicSession s = open(KvDType::kF32);
    prompt = testing::chunk_crossing_prompt(s);
    f32 = s.generate(prompt, greedy());
    EXPECT_EQ(f32.cache.prefix_cached_tokens, 0);
    EXPECT_EQ(f32.fingerprint_json.find("kv_dtype"), std::string::npos)
        << "the f32 default keeps the fingerprint bytes it had";
  }
  for (KvDType kv : {KvDType::kBF16, KvDType::kF16}) {
    DeterministicSession s = open(kv);
    const GenerationResult r = s.generate(prompt, greedy());
    EXPECT_EQ(r.cache.prefix_cached_tokens, 0) << to_string(kv) << " was served f32 KV blocks";
    EXPECT_NE(r.sequences[0].step_digests, f32.sequences[0].step_digests) << to_string(kv);
    EXPECT_NE(r.fingerprint_json.find(std::string("\"kv_dtype\":\"") + to_string(kv) + "\""),
              std::string::npos)
        << r.fingerprint_json;
  }
  {
    DeterministicSession s = open(KvDType::kF32);  // the disk tier does share within f32
    const GenerationResult again = s.generate(prompt, greedy());
    EXPECT_GT(again.cache.prefix_cached_tokens, 0);
    expect_same(f32, again, "f32 from disk");
  }
  {
    DeterministicSession s = open(KvDType::kBF16);  // and within bf16
    EXPECT_GT(s.generate(prompt, greedy()).cache.prefix_cached_tokens, 0);
  }
  std::filesystem::remove_all(dir);
}

// 16-bit storage is what the option is for: the same kv_budget_bytes holds twice the
// blocks, the footprint counts 2 bytes per element, and the prefix-cache tiers (memory and
// disk) keep entries of half the f32 size; a disk hit restores them to the same bits as a
// miss.
TEST(KvDtype, HalfStorageDoublesCapacityAndHalvesCacheEntries) {
  const std::string base =
      std::string(std::getenv("DETINFER_TEST_TMP") != nullptr ? std::getenv("DETINFER_TEST_TMP")
                                                              : "/tmp") +
      "/kv-dtype-size-" + std::to_string(::getpid());
  struct Seen {
    std::int64_t capacity, per_token, mem_bytes, mem_entries, disk_bytes, disk_entries;
  };
  std::map<KvDType, Seen> seen;
  for (KvDType kv : {KvDType::kF32, KvDType::kBF16, KvDType::kF16}) {
    const std::string dir = base + "-" + to_string(kv);
    std::filesystem::remove_all(dir);
    SessionOptions o = kv_options(kv);
    o.cache.prefix.enabled = true;
    o.cache.prefix.disk.directory = dir;
    std::vector<std::int32_t> prompt;
    GenerationResult miss;
    {
      DeterministicSession plain = DeterministicSession::open(tiny_model_dir(), kv_options(kv));
      prompt = testing::chunk_crossing_prompt(plain);
      miss = plain.generate(prompt, greedy());
    }
    Seen& v = seen[kv];
    {
      DeterministicSession s = DeterministicSession::open(tiny_model_dir(), o);
      expect_same(miss, s.generate(prompt, greedy()), std::string(to_string(kv)) + " cold");
      v.capacity = s.stats().kv_blocks_capacity;
      v.per_token = s.footprint().kv_bytes_per_token;
      const CacheStats cs = s.cache_stats();
      v.mem_bytes = cs.prefix.memory.bytes;
      v.mem_entries = cs.prefix.memory.entries;
      v.disk_bytes = cs.prefix.disk.bytes;
      v.disk_entries = cs.prefix.disk.entries;
    }
    o.cache.prefix.memory.enabled = false;  // only the disk tier can serve
    DeterministicSession s = DeterministicSession::open(tiny_model_dir(), o);
    const GenerationResult hit = s.generate(prompt, greedy());
    EXPECT_GT(hit.cache.prefix_cached_tokens, 0) << to_string(kv);
    expect_same(miss, hit, std::string(to_string(kv)) + " disk hit");
    std::filesystem::remove_all(dir);
  }
  const Seen& f = seen[KvDType::kF32];
  ASSERT_GT(f.mem_entries, 0);
  ASSERT_GT(f.disk_entries, 0);
  const std::int64_t block_payload = f.per_token * tiny_options().kv_block_size;
  EXPECT_EQ(f.mem_bytes, f.mem_entries * block_payload);
  for (KvDType kv : {KvDType::kBF16, KvDType::kF16}) {
    const Seen& h = seen[kv];
    EXPECT_EQ(h.capacity, 2 * f.capacity) << to_string(kv);
    EXPECT_EQ(2 * h.per_token, f.per_token) << to_string(kv);
    EXPECT_EQ(h.mem_entries, f.mem_entries) << to_string(kv);
    EXPECT_EQ(2 * h.mem_bytes, f.mem_bytes) << to_string(kv);
    // Disk entries carry a header of the same size: the payloads differ by half.
    EXPECT_EQ(h.disk_entries, f.disk_entries) << to_string(kv);
    EXPECT_EQ(f.disk_bytes - h.disk_bytes, f.disk_entries * block_payload / 2) << to_string(kv);
  }
}

// Accuracy: the first generated token's logprobs with bf16 / f16 KV are within a small
// tolerance of f32 KV's (same prompt, all top-5 entries compared).
TEST(KvDtype, LogprobsCloseToF32) {
  GenerationConfig c = greedy(1);
  c.logprobs = 5;
  DeterministicSession f = DeterministicSession::open(tiny_model_dir(), kv_options(KvDType::kF32));
  TestRng rng{9, 3};
  std::vector<std::vector<std::int32_t>> prompts;
  for (int i = 0; i < 4; ++i)
    prompts.push_back(random_ids(rng, 120, static_cast<std::int32_t>(f.vocab_size())));
  std::vector<GenerationResult> want;
  for (const auto& p : prompts) want.push_back(f.generate(p, c));
  for (KvDType kv : {KvDType::kBF16, KvDType::kF16}) {
    const float tol = kv == KvDType::kBF16 ? 0.05f : 0.01f;
    DeterministicSession s = DeterministicSession::open(tiny_model_dir(), kv_options(kv));
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      const GenerationResult got = s.generate(prompts[i], c);
      const auto& a = want[i].sequences[0].logprobs[0].top;
      const auto& b = got.sequences[0].logprobs[0].top;
      ASSERT_EQ(a.size(), b.size());
      int compared = 0;
      for (std::size_t k = 0; k < a.size(); ++k) {
        for (const auto& e : b) {
          if (e.token != a[k].token) continue;
          EXPECT_NEAR(e.logprob, a[k].logprob, tol) << to_string(kv) << " prompt " << i;
          ++compared;
        }
      }
      EXPECT_GE(compared, 3) << to_string(kv) << " prompt " << i << ": top-5 sets differ";
    }
  }
}

// The bits of each kv_dtype are pinned: 16-bit storage (2 bytes per element, widened
// exactly on read) gives the digests that rounding into f32 slots gave before it, and the
// f32 default is unchanged. Chain digests of a greedy and a sampled run of the 70-token
// prompt (prefill chunks crossing a 64-key chunk), recorded before the storage change.
TEST(KvDtype, GoldenDigests) {
  const std::pair<KvDType, const char*> want[] = {{KvDType::kF32, "54deb808b025cca3"},
                                                  {KvDType::kBF16, "fd79cc7295596827"},
                                                  {KvDType::kF16, "fa48163129a20f17"}};
  for (const auto& [kv, hex] : want) {
    DeterministicSession s = DeterministicSession::open(tiny_model_dir(), kv_options(kv, 2));
    GenerationConfig sampled = greedy(20);
    sampled.temperature = 0.9f;
    sampled.seed = 11;
    std::vector<std::uint64_t> steps =
        s.generate(testing::chunk_crossing_prompt(s), greedy(20)).sequences[0].step_digests;
    const GenerationResult more = s.generate(testing::chunk_crossing_prompt(s), sampled);
    const auto& d = more.sequences[0].step_digests;
    steps.insert(steps.end(), d.begin(), d.end());
    EXPECT_EQ(hex64(chain_digest(steps)), hex) << to_string(kv);
  }
}

TEST(KvDtype, BadValuesAreClearErrors) {
  try {
    parse_kv_dtype("f8");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.field(), "kv_dtype");
  }
  EXPECT_EQ(parse_kv_dtype("bf16"), KvDType::kBF16);
  EXPECT_EQ(parse_kv_dtype("f16"), KvDType::kF16);
  EXPECT_EQ(parse_kv_dtype("f32"), KvDType::kF32);
  SessionOptions fast = kv_options(KvDType::kBF16);
  fast.mode = NumericsMode::kFast;
  try {
    DeterministicSession::open(tiny_model_dir(), fast);
    FAIL() << "fast mode accepted kv_dtype bf16";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_EQ(e.field(), "kv_dtype");
  }
  SessionOptions bad = kv_options(static_cast<KvDType>(9));
  try {
    DeterministicSession::open(tiny_model_dir(), bad);
    FAIL() << "kv_dtype 9 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.field(), "kv_dtype");
  }
}

}  // namespace
}  // namespace detinfer

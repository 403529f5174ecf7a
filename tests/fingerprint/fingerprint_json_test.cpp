// RunFingerprint JSON: round trips, digests, strict validation, hostile input.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "detinfer/error.h"
#include "fingerprint/fingerprint_test_util.h"

namespace detinfer {
namespace {

using nlohmann::json;
using testing::at_level;
using testing::make_fingerprint;

// Expects from_json to throw Error with `code` and a message containing `needle`.
void expect_rejected(const std::string& text, ErrorCode code, const std::string& needle) {
  try {
    RunFingerprint::from_json(text);
    ADD_FAILURE() << "accepted: " << text.substr(0, 200);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(e.message().find(needle), std::string::npos) << e.what();
  }
}

std::string mutate(const RunFingerprint& fp, const std::function<void(json&)>& f) {
  json j = json::parse(fp.to_json());
  f(j);
  return j.dump();
}

TEST(FingerprintDigests, MatchTheirDefinitions) {
  const auto row = testing::random_logits(3, 0, 151936 / 16);
  EXPECT_EQ(logits_digest(row.data(), row.size()), xxh3_64(row.data(), row.size() * 4));
  // chain_1 = xxh3_64(le64(0) || le64(d0)), chain_2 = xxh3_64(le64(chain_1) || le64(d1)).
  const std::uint64_t d0 = 0x0123456789abcdefull, d1 = 0xfedcba9876543210ull;
  unsigned char buf[16];
  auto le = [&](std::uint64_t a, std::uint64_t b) {
    for (int i = 0; i < 8; ++i) {
      buf[i] = static_cast<unsigned char>(a >> (8 * i));
      buf[8 + i] = static_cast<unsigned char>(b >> (8 * i));
    }
    return xxh3_64(buf, 16);
  };
  const std::uint64_t c1 = le(0, d0);
  EXPECT_EQ(chain_digest(0, d0), c1);
  EXPECT_EQ(chain_digest({d0, d1}), le(c1, d1));
  EXPECT_EQ(chain_digest(std::vector<std::uint64_t>{}), 0u);
  // Order matters.
  EXPECT_NE(chain_digest({d0, d1}), chain_digest({d1, d0}));
  const std::vector<std::int32_t> prompt = {1, 70000, 3};
  unsigned char p[12];
  for (int i = 0; i < 3; ++i) {
    for (int k = 0; k < 4; ++k) p[4 * i + k] = static_cast<unsigned char>(prompt[i] >> (8 * k));
  }
  EXPECT_EQ(prompt_hash(prompt), xxh3_64(p, 12));
}

TEST(FingerprintJson, RoundTripsEveryLevelExactly) {
  for (RecordLevel level : {RecordLevel::kFinal, RecordLevel::kSteps, RecordLevel::kLogits}) {
    const RunFingerprint fp = at_level(make_fingerprint(11), level);
    const std::string text = fp.to_json();
    EXPECT_EQ(text.find('\n'), std::string::npos) << "one line";
    const RunFingerprint back = RunFingerprint::from_json(text);
    EXPECT_EQ(back.to_json(), text) << to_string(level);
    EXPECT_EQ(back.to_json(2), fp.to_json(2));
    EXPECT_EQ(back.request.seed, fp.request.seed);
    EXPECT_EQ(back.request.config.temperature, 0.7f);  // float survives exactly
    EXPECT_EQ(back.request.config.top_p, 0.9f);
    EXPECT_EQ(back.request_key(), fp.request_key());
    ASSERT_EQ(back.sequences.size(), 2u);
    EXPECT_EQ(back.sequences[1].tokens, fp.sequences[1].tokens);
    EXPECT_EQ(back.sequences[1].finish_reason, FinishReason::kStop);
    EXPECT_TRUE(same_output(fp, back));
    if (level == RecordLevel::kLogits) {
      ASSERT_EQ(back.sequences[0].logits.size(), 6u);
      EXPECT_EQ(std::memcmp(back.sequences[0].logits[3].data(), fp.sequences[0].logits[3].data(),
                            fp.sequences[0].logits[3].size() * 4),
                0);
    }
  }
}

TEST(FingerprintJson, OptionalPartsRoundTrip) {
  RunFingerprint fp = at_level(make_fingerprint(5), RecordLevel::kSteps);
  fp.set_prompt({4, 5, 6}, /*store_tokens=*/false);
  fp.request.config.stop_token_ids.reset();
  fp.device.gpu = FingerprintGpu{"NVIDIA H200", "9.0", "550.54"};
  fp.numerics.device = "cuda";
  fp.environment.env_vars.clear();
  const RunFingerprint back = RunFingerprint::from_json(fp.to_json());
  EXPECT_FALSE(back.request.prompt_tokens.has_value());
  EXPECT_EQ(back.request.prompt_length, 3);
  EXPECT_FALSE(back.request.config.stop_token_ids.has_value());
  ASSERT_TRUE(back.device.gpu.has_value());
  EXPECT_EQ(back.device.gpu->compute_capability, "9.0");
  EXPECT_EQ(back.to_json(), fp.to_json());
}

TEST(FingerprintJson, CacheUsageIsNotPartOfTheRequestKeyOrOutput) {
  const RunFingerprint a = make_fingerprint(2);
  RunFingerprint b = a;
  b.cache.prefix_cached_tokens = 1000;
  b.cache.result_cache_hit = true;
  EXPECT_EQ(a.request_key(), b.request_key());
  EXPECT_TRUE(same_output(a, b));
  RunFingerprint c = a;
  c.request.seed ^= 1;
  EXPECT_NE(a.request_key(), c.request_key());
}

TEST(FingerprintJson, UnknownSchemaVersionIsUnsupported) {
  const RunFingerprint fp = make_fingerprint(1);
  expect_rejected(mutate(fp, [](json& j) { j["schema"] = "detinfer.fingerprint/2"; }),
                  ErrorCode::kUnsupported, "detinfer.fingerprint/2");
  expect_rejected(mutate(fp, [](json& j) { j["schema"] = "something/1"; }), ErrorCode::kCorrupt,
                  "not a detinfer fingerprint schema");
  expect_rejected(mutate(fp, [](json& j) { j.erase("schema"); }), ErrorCode::kCorrupt,
                  ".schema is missing");
}

TEST(FingerprintJson, StrictFieldValidation) {
  const RunFingerprint fp = make_fingerprint(1);
  struct Case {
    std::function<void(json&)> f;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {[](json& j) { j["extra"] = 1; }, ".extra is not part of"},
      {[](json& j) { j["model"]["color"] = "red"; }, ".model.color"},
      {[](json& j) { j["library"].erase("compiler"); }, ".library.compiler is missing"},
      {[](json& j) { j["numerics"]["threads"] = 0; }, ".numerics.threads"},
      {[](json& j) { j["numerics"]["threads"] = 2.5; }, "expected an integer"},
      {[](json& j) { j["numerics"]["mode"] = "turbo"; }, ".numerics.mode"},
      {[](json& j) { j["model"]["fingerprint"] = "xyz"; }, ".model.fingerprint"},
      {[](json& j) { j["tokenizer"]["hash"] = std::string(32, 'A'); }, "lowercase hex"},
      {[](json& j) { j["request"]["seed"] = 5; }, ".request.seed"},
      {[](json& j) { j["request"]["seed"] = "018"; }, "leading zeros"},
      {[](json& j) { j["request"]["seed"] = "18446744073709551616"; }, ".request.seed"},
      {[](json& j) { j["request"]["prompt_tokens"][0] = -1; }, ".request.prompt_tokens[0]"},
      {[](json& j) { j["request"]["prompt_tokens"].push_back(1); }, "do not match"},
      {[](json& j) { j["request"]["config"]["temperature"] = "hot"; },
       ".request.config.temperature"},
      {[](json& j) { j["request"]["config"]["temperature"] = 1e300; }, "float range"},
      {[](json& j) { j["request"]["config"].erase("top_k"); }, ".request.config.top_k is missing"},
      {[](json& j) { j["environment"]["os"] = "Plan 9"; }, ".environment.hash"},
      {[](json& j) { j["environment"]["env_vars"]["X"] = 3; }, ".environment.env_vars.X"},
      {[](json& j) { j["output"]["level"] = "all"; }, ".output.level"},
      {[](json& j) { j["output"]["sequences"][1]["finish_reason"] = "eos"; }, "finish_reason"},
      {[](json& j) { j["output"]["sequences"][0]["step_digests"][2] = "0000000000000000"; },
       ".output.sequences[0].chain_digest"},
      {[](json& j) { j["output"]["sequences"][0]["step_digests"].erase(0); }, "5 digests for 6"},
      {[](json& j) { j["output"]["sequences"][0]["logits"][0] = "abc"; }, "base64"},
      {[](json& j) {
         auto& l = j["output"]["sequences"][0]["logits"];
         std::swap(l[0], l[1]);
       },
       "does not match step_digests[0]"},
      {[](json& j) { j["output"]["sequences"][0]["tokens"] = json::object(); },
       "expected an array"},
      {[](json& j) { j["cache"]["result_cache_hit"] = 1; }, "expected a boolean"},
      {[](json& j) { j["device"]["cpu_flags"][0] = nullptr; }, ".device.cpu_flags[0]"},
  };
  for (const auto& c : cases) expect_rejected(mutate(fp, c.f), ErrorCode::kCorrupt, c.needle);
  // A final-level fingerprint must not carry step digests.
  const RunFingerprint final_fp = at_level(fp, RecordLevel::kFinal);
  expect_rejected(
      mutate(final_fp,
             [](json& j) { j["output"]["sequences"][0]["step_digests"] = json::array(); }),
      ErrorCode::kCorrupt, "step_digests is not part of");
}

TEST(FingerprintJson, MalformedInputIsAnErrorNeverACrash) {
  const std::string text = at_level(make_fingerprint(4, 1, 3, 8), RecordLevel::kLogits).to_json();
  // Every prefix, and every single-byte corruption at a stride, is rejected cleanly.
  for (std::size_t n = 0; n < text.size(); n += 3) {
    EXPECT_THROW(RunFingerprint::from_json(text.substr(0, n)), Error);
  }
  for (std::size_t i = 0; i < text.size(); i += 7) {
    std::string bad = text;
    bad[i] = static_cast<char>(bad[i] ^ 0x5A);
    try {
      RunFingerprint::from_json(bad);
    } catch (const Error&) {
    }
  }
  expect_rejected("", ErrorCode::kCorrupt, "not valid JSON");
  expect_rejected("[]", ErrorCode::kCorrupt, "expected an object");
  expect_rejected("{\"schema\": \"detinfer.fingerprint/1\"} trailing", ErrorCode::kCorrupt,
                  "not valid JSON");
  expect_rejected(std::string(100000, '['), ErrorCode::kCorrupt, "nested deeper");
  // A duplicated key is an error, not "last one wins".
  std::string dup = text;
  dup.insert(1, "\"schema\":\"detinfer.fingerprint/1\",");
  expect_rejected(dup, ErrorCode::kCorrupt, "duplicate key \"schema\"");
  expect_rejected("\"\xff\xfe\"", ErrorCode::kCorrupt, "not valid JSON");
}

TEST(FingerprintJson, LoadsDocumentsAndJsonLines) {
  const char* tmp = std::getenv("DETINFER_TEST_TMP");
  const std::string dir = tmp ? tmp : "/tmp";
  std::system(("mkdir -p '" + dir + "'").c_str());
  const RunFingerprint a = at_level(make_fingerprint(1), RecordLevel::kSteps);
  const RunFingerprint b = at_level(make_fingerprint(2), RecordLevel::kFinal);
  const std::string pretty = dir + "/fp_pretty.json";
  const std::string lines = dir + "/fp_lines.jsonl";
  std::ofstream(pretty) << a.to_json(2) << "\n";
  std::ofstream(lines) << a.to_json() << "\n" << b.to_json() << "\n\n";
  ASSERT_EQ(load_fingerprints(pretty).size(), 1u);
  EXPECT_EQ(load_fingerprints(pretty)[0].to_json(), a.to_json());
  const auto both = load_fingerprints(lines);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[1].to_json(), b.to_json());
  std::ofstream(lines, std::ios::app) << "{\"schema\": 1}\n";
  try {
    load_fingerprints(lines);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("fp_lines.jsonl:4"), std::string::npos) << e.what();
  }
  try {
    load_fingerprints(dir + "/no-such-file.json");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  }
}

TEST(FingerprintHost, GroupsComeFromTheEnvironment) {
  RunFingerprint fp;
  set_host_groups(fp);
  const EnvironmentInfo env = collect_environment();
  EXPECT_EQ(fp.library.version, env.library_version);
  EXPECT_EQ(fp.device.cpu_model, env.cpu_model);
  EXPECT_EQ(fp.environment.glibc_version, env.glibc_version);
  EXPECT_EQ(fp.numerics.spec_version, env.numerics_spec_version);
  ::setenv("DETINFER_CPU_ISA", "scalar", 1);
  ::unsetenv("OMP_NUM_THREADS");
  const auto vars = relevant_env_vars();
  EXPECT_EQ(vars.at("DETINFER_CPU_ISA"), "scalar");
  EXPECT_EQ(vars.count("OMP_NUM_THREADS"), 0u);
  EXPECT_EQ(vars.count("PATH"), 0u);
  RunFingerprint other;
  set_host_groups(other);
  EXPECT_NE(other.environment.hash(), fp.environment.hash());
  ::unsetenv("DETINFER_CPU_ISA");
}

}  // namespace
}  // namespace detinfer

namespace detinfer {
namespace {

// The fuzzer's seeds must stay valid fingerprints, or fuzzing starts from nothing.
TEST(FingerprintJson, FuzzCorpusSeedsAreValid) {
  const std::string dir = std::string(DETINFER_SOURCE_DIR) + "/tools/fuzz_fingerprint/corpus/";
  int levels_seen = 0;
  for (const char* name :
       {"final_line.json", "steps_line.json", "steps_pretty.json", "logits_line.json"}) {
    const auto fps = load_fingerprints(dir + name);
    ASSERT_EQ(fps.size(), 1u) << name;
    levels_seen |= 1 << static_cast<int>(fps[0].level);
  }
  EXPECT_EQ(levels_seen, (1 << 1) | (1 << 2) | (1 << 3));
}

}  // namespace
}  // namespace detinfer

// Runs the real `detinfer generate`.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "common/subprocess.h"
#include "session/tiny_session.h"

namespace detinfer {
namespace {

using testing::cli_path;
using testing::run_shell;

TEST(GenerateCli, JsonIsReproducibleAndHasTheFields) {
  const std::string cmd = cli_path() + " generate --model " + testing::tiny_model_dir() +
                          " --prompt 'Hello, detinfer' --max-new-tokens 12 --ignore-eos --json";
  const auto a = run_shell(cmd + " --threads 1");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const auto j = nlohmann::json::parse(a.out);
  for (const char* f : {"tokens", "text", "seed", "finish_reason", "digest"}) {
    EXPECT_TRUE(j.contains(f)) << f << " missing in " << a.out;
  }
  EXPECT_EQ(j["tokens"].size(), 12u);
  EXPECT_EQ(j["finish_reason"], "length");
  EXPECT_EQ(j["digest"].get<std::string>().size(), 16u);
  const auto b = run_shell(cmd + " --threads 2");
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const auto k = nlohmann::json::parse(b.out);
  EXPECT_EQ(j["tokens"], k["tokens"]);
  EXPECT_EQ(j["digest"], k["digest"]);

  const auto s = run_shell(cmd + " --temperature 0.9 --seed 7 --n 2");
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const auto sj = nlohmann::json::parse(s.out);
  EXPECT_EQ(sj["seed"], 7);
  EXPECT_EQ(sj["sequences"].size(), 2u);
}

TEST(GenerateCli, BadArgumentsFailWithAMessage) {
  const auto r = run_shell(cli_path() + " generate --model " + testing::tiny_model_dir() +
                           " --prompt hi --top-p 1.5 --temperature 1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("top_p"), std::string::npos) << r.err;
  const auto m = run_shell(cli_path() + " generate --model /nonexistent --prompt hi");
  EXPECT_NE(m.exit_code, 0);
  EXPECT_FALSE(m.err.empty());
}

// --speculative ngram|draft / --draft-tokens N / --draft-model DIR (docs/speculative.md):
// the same JSON output (tokens, text, digest) as without, greedy and seeded; bad values
// fail naming them.
TEST(GenerateCli, SpeculativeFlagsChangeNoOutput) {
  const std::string cmd = cli_path() + " generate --model " + testing::tiny_model_dir() +
                          " --prompt 'the cat sat on the mat. the cat sat on the mat. the cat'" +
                          " --max-new-tokens 24 --ignore-eos --json --threads 1";
  for (const std::string sampling : {"", " --temperature 0.7 --seed 3 --logprobs 2"}) {
    const auto plain = run_shell(cmd + sampling);
    ASSERT_EQ(plain.exit_code, 0) << plain.err;
    const auto p = nlohmann::json::parse(plain.out);
    const std::string draft = " --draft-model " + testing::tiny_model_dir();
    for (const std::string& flags :
         {std::string(" --speculative ngram"), std::string(" --draft-tokens 8 --draft-ngram-min 2"),
          std::string(" --draft-tokens 1"), " --speculative draft" + draft,
          " --draft-tokens 3 --draft-with-model" + draft}) {
      const auto spec = run_shell(cmd + sampling + flags);
      ASSERT_EQ(spec.exit_code, 0) << spec.err;
      const auto q = nlohmann::json::parse(spec.out);
      for (const char* f : {"tokens", "text", "digest", "finish_reason", "logprobs"}) {
        EXPECT_EQ(p.value(f, nlohmann::json()), q.value(f, nlohmann::json())) << f << flags;
      }
    }
  }
  const auto bad = run_shell(cmd + " --speculative eagle");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--speculative"), std::string::npos) << bad.err;
  const auto no_model = run_shell(cmd + " --speculative draft");
  EXPECT_NE(no_model.exit_code, 0);
  EXPECT_NE(no_model.err.find("draft_with_model"), std::string::npos) << no_model.err;
  const auto missing = run_shell(cmd + " --speculative draft --draft-model /nonexistent/draft");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("draft_model_path"), std::string::npos) << missing.err;
  const auto big = run_shell(cmd + " --draft-tokens 9");
  EXPECT_NE(big.exit_code, 0);
  EXPECT_NE(big.err.find("draft_tokens"), std::string::npos) << big.err;
  const auto beams = run_shell(cli_path() + " generate --model " + testing::tiny_model_dir() +
                               " --prompt hi --num-beams 2 --draft-tokens 2");
  EXPECT_NE(beams.exit_code, 0);
  EXPECT_NE(beams.err.find("draft_tokens"), std::string::npos) << beams.err;
}

// --json-schema FILE / --response-format json_object: the output follows the schema and
// ends with it; an unsupported keyword fails naming it.
TEST(GenerateCli, JsonSchemaConstrainsTheOutput) {
  const std::string dir = testing::tiny_model_dir();
  const std::string schema = dir + "/cli-schema.json";
  const std::string bad = dir + "/cli-bad-schema.json";
  // Written here, not with a shell redirect: run_shell redirects the command's stdout.
  std::ofstream(schema) << R"({"type": "array", "items": {"type": "integer"}, )"
                        << R"("minItems": 2, "maxItems": 2})";
  std::ofstream(bad) << R"({"type": "string", "multipleOf": 2})";
  const std::string cmd = cli_path() + " generate --model " + dir + " --prompt hi --json";
  const auto r = run_shell(cmd + " --max-new-tokens 80 --json-schema " + schema);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["finish_reason"], "stop") << r.out;
  const auto v = nlohmann::json::parse(j["text"].get<std::string>());
  ASSERT_TRUE(v.is_array() && v.size() == 2) << v;
  EXPECT_TRUE(v[0].is_number_integer() && v[1].is_number_integer()) << v;
  const auto o = run_shell(cmd + " --max-new-tokens 60 --response-format json_object");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(nlohmann::json::parse(o.out)["text"].get<std::string>().substr(0, 1), "{");
  const auto e = run_shell(cmd + " --json-schema " + bad);
  EXPECT_NE(e.exit_code, 0);
  EXPECT_NE(e.err.find("'multipleOf'"), std::string::npos) << e.err;
  const auto f = run_shell(cmd + " --response-format yaml");
  EXPECT_NE(f.exit_code, 0);
  EXPECT_NE(f.err.find("--response-format"), std::string::npos) << f.err;
}

// --device cuda: on a machine without a usable GPU (CI) a clear kUnavailable error and a
// non-zero exit; on a machine with one, the same tokens and digest as the CPU (canonical).
TEST(GenerateCli, CudaDeviceIsUnavailableWithoutAGpuOrEqualsTheCpu) {
  const std::string cmd = cli_path() + " generate --model " + testing::tiny_model_dir() +
                          " --prompt 'Hello, detinfer' --max-new-tokens 8 --ignore-eos --json";
  const auto cpu = run_shell(cmd + " --device cpu");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  const auto gpu = run_shell(cmd + " --device cuda");
  if (gpu.exit_code != 0) {
    EXPECT_NE(gpu.err.find("unavailable: device cuda:0 is unavailable: "), std::string::npos)
        << gpu.err;
    EXPECT_TRUE(gpu.out.empty()) << gpu.out;
  } else {
    const auto c = nlohmann::json::parse(cpu.out);
    const auto g = nlohmann::json::parse(gpu.out);
    EXPECT_EQ(g["tokens"], c["tokens"]);
    EXPECT_EQ(g["digest"], c["digest"]);
  }
  const auto bad = run_shell(cmd + " --device tpu");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("SessionOptions.device 'tpu' is not"), std::string::npos) << bad.err;
  const auto di = run_shell(cmd + " --mode device_invariant");
  EXPECT_NE(di.exit_code, 0);
  EXPECT_NE(di.err.find("unsupported: numerics mode device_invariant needs a CUDA device"),
            std::string::npos)
      << di.err;
}

}  // namespace
}  // namespace detinfer

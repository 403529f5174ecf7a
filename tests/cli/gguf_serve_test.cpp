// `detinfer serve --model FILE.gguf` (docs/gguf.md): text completions and chat completions
// on a GGUF file answer bit for bit what the same model's folder answers (the tokenizer and
// chat template come from the GGUF metadata), and a Q8_0 file (`detinfer quantize`) what
// the folder answers with --weights q8_0.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cli/cli_test_support.h"
#include "cli/http_json.h"

namespace detinfer {
namespace {

using nlohmann::json;
using testing::cli_path;
using testing::post;
using testing::run_shell;
using testing::ServeProcess;

// Per choice: text (completions) or message content (chat), and the digest.
std::vector<std::pair<std::string, std::string>> answers(int port, const std::string& path,
                                                         const json& body) {
  const auto [status, text] = post(port, path, body);
  EXPECT_EQ(status, 200) << text;
  std::vector<std::pair<std::string, std::string>> out;
  const json j = json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("choices")) return out;
  for (std::size_t i = 0; i < j["choices"].size(); ++i) {
    const json& c = j["choices"][i];
    out.emplace_back(c.contains("message") ? c["message"]["content"].get<std::string>()
                                           : c["text"].get<std::string>(),
                     j["detinfer"]["digests"][i].get<std::string>());
  }
  return out;
}

TEST(GgufServe, AnswersWhatTheFolderAnswers) {
  const std::string dir = testing::cli_scratch_dir("gguf-serve");
  auto r = run_shell(cli_path() + " make-tiny-model --arch qwen2 --dtype bf16 --seed 4 --out " +
                     dir + "/hf --gguf " + dir + "/model.gguf");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_shell(cli_path() + " quantize --model " + dir +
                "/hf --type q8_0 --keep-embedding --out " + dir + "/q8.gguf");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json completion = {{"prompt", "The fox and the river"},
                           {"max_tokens", 10},
                           {"temperature", 0.8},
                           {"seed", 3},
                           {"n", 2}};
  const json chat = {{"messages", json::array({{{"role", "system"}, {"content", "Be brief."}},
                                               {{"role", "user"}, {"content", "Name a fox."}}})},
                     {"max_tokens", 10},
                     {"temperature", 0.7},
                     {"seed", 5}};
  struct Pair {
    std::string folder_args, gguf;
  };
  for (const Pair& p : {Pair{"", dir + "/model.gguf"}, Pair{"q8_0", dir + "/q8.gguf"}}) {
    ServeProcess folder, gguf;
    std::vector<std::string> args = {"--threads", "1"};
    if (!p.folder_args.empty()) args.insert(args.end(), {"--weights", p.folder_args});
    ASSERT_TRUE(folder.start(dir + "/hf", args)) << folder.log();
    ASSERT_TRUE(gguf.start(p.gguf, {"--threads", "1"})) << gguf.log();
    const auto a = answers(folder.port(), "/v1/completions", completion);
    ASSERT_EQ(a.size(), 2u);
    EXPECT_EQ(answers(gguf.port(), "/v1/completions", completion), a) << p.gguf;
    const auto c = answers(folder.port(), "/v1/chat/completions", chat);
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(answers(gguf.port(), "/v1/chat/completions", chat), c) << p.gguf;
  }
}

}  // namespace
}  // namespace detinfer

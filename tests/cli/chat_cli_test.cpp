// `detinfer render-template` and `detinfer chat` (--messages --json, and the interactive
// mode driven through a stdin pipe: multi-line input, /save, /reset, /quit).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/cli_test_support.h"

namespace detinfer {
namespace {

using nlohmann::json;
using testing::cli_path;
using testing::run_shell;

class ChatCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = testing::cli_scratch_dir("chat");
    model_ = testing::make_tiny_model_with_cli(dir_ + "/model");
    write("messages.json",
          R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])");
  }
  void SetUp() override { ASSERT_FALSE(model_.empty()) << "detinfer make-tiny-model failed"; }

  static std::string write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  static testing::ProcessResult run(const std::string& args, const std::string& input = "") {
    return run_shell(cli_path() + " " + args + " --model '" + model_ + "'", input);
  }
  static json parse(const std::string& text) {
    const json j = json::parse(text, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "not JSON:\n" << text;
    return j;
  }

  static std::string dir_;
  static std::string model_;
};
std::string ChatCli::dir_;
std::string ChatCli::model_;

TEST_F(ChatCli, RenderTemplatePrintsThePromptExactly) {
  const std::string body =
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n";
  auto r = run("render-template --messages " + dir_ + "/messages.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, body + "<|im_start|>assistant\n");
  r = run("render-template --no-generation-prompt --messages " + dir_ + "/messages.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, body);

  const std::string tmpl = write("t.jinja",
                                 "{{ tools | map(attribute='name') | join(',') }};"
                                 "{{ messages | length }};{{ strftime_now('%Y') }}");
  const std::string tools = write("tools.json", R"([{"name": "a"}, {"name": "b"}])");
  r = run("render-template --chat-template " + tmpl + " --tools " + tools + " --now 0 --messages " +
          dir_ + "/messages.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "a,b;2;1970");
  // An OpenAI-shaped request body works too, its tools included.
  const std::string body_file =
      write("request.json",
            R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"name": "c"}]})");
  r = run("render-template --chat-template " + tmpl + " --now 0 --messages " + body_file);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "c;1;1970");
}

TEST_F(ChatCli, BadMessagesNameTheField) {
  const std::string bad =
      write("bad.json", R"([{"role": "user", "content": "x"}, {"content": 1}])");
  const auto r = run("render-template --messages " + bad);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("messages[1].role"), std::string::npos) << r.err;
}

TEST_F(ChatCli, MessagesJsonEqualsGenerateOnTheRenderedIds) {
  const auto r = run("chat --threads 1 --messages " + dir_ +
                     "/messages.json --json "
                     "--max-new-tokens 8 --temperature 0.7 --seed 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = parse(r.out);
  EXPECT_EQ(j["message"]["role"], "assistant");
  EXPECT_EQ(j["seed"], 3);
  EXPECT_EQ(j["completion_tokens"].get<int>() <= 8, true);
  ASSERT_TRUE(j["fingerprint"].is_object());

  const auto ids = run("render-template --ids --messages " + dir_ + "/messages.json");
  ASSERT_EQ(ids.exit_code, 0) << ids.err;
  std::string id_list = ids.out;
  id_list.pop_back();  // newline
  const auto g =
      run("generate --threads 1 --json --max-new-tokens 8 --temperature 0.7 --seed 3 "
          "--prompt-ids " +
          id_list);
  ASSERT_EQ(g.exit_code, 0) << g.err;
  const json gj = parse(g.out);
  EXPECT_EQ(gj["digest"], j["digest"]);
  EXPECT_EQ(gj["text"], j["message"]["content"]);
}

// --speculative ngram|draft changes no reply (docs/speculative.md): same text and digest,
// greedy and seeded.
TEST_F(ChatCli, SpeculativeFlagsChangeNoReply) {
  const std::string cmd =
      "chat --threads 1 --json --max-new-tokens 12 --messages " + dir_ + "/messages.json";
  for (const std::string sampling : {" --temperature 0", " --temperature 0.7 --seed 3"}) {
    const auto plain = run(cmd + sampling);
    ASSERT_EQ(plain.exit_code, 0) << plain.err;
    const json p = parse(plain.out);
    for (const std::string& flags :
         {std::string(" --speculative ngram"), std::string(" --speculative ngram --draft-tokens 8"),
          " --speculative draft --draft-tokens 2 --draft-model '" + model_ + "'"}) {
      const auto spec = run(cmd + sampling + flags);
      ASSERT_EQ(spec.exit_code, 0) << spec.err;
      const json q = parse(spec.out);
      EXPECT_EQ(q["digest"], p["digest"]) << flags;
      EXPECT_EQ(q["message"], p["message"]) << flags;
    }
  }
  const auto no_model = run(cmd + " --speculative draft");
  EXPECT_NE(no_model.exit_code, 0);
  EXPECT_NE(no_model.err.find("draft_with_model"), std::string::npos) << no_model.err;
}

TEST_F(ChatCli, InteractiveThroughAPipe) {
  const std::string one = dir_ + "/one.json", two = dir_ + "/two.json";
  const std::string input = "Hello\nline one\\\nline two\n/save " + one +
                            "\n/reset\n\"\"\"\nHello\n\"\"\"\n/save " + two + "\n/bogus\n/quit\n";
  const auto r = run("chat --threads 1 --max-new-tokens 6 --system 'Be brief.'", input);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("(saved 2 turns"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(conversation reset)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("unknown command /bogus"), std::string::npos) << r.err;

  const json a = parse(testing::read_file_or_empty(one));
  const json b = parse(testing::read_file_or_empty(two));
  ASSERT_EQ(a["messages"].size(), 5u);  // system, user, assistant, user, assistant
  EXPECT_EQ(a["messages"][3]["content"], "line one\nline two");
  ASSERT_EQ(a["turns"].size(), 2u);
  for (const auto& t : a["turns"]) ASSERT_TRUE(t["fingerprint"].is_object());
  // After /reset the same first message gives the same bits (greedy by the model's
  // generation_config.json: do_sample false).
  ASSERT_EQ(b["turns"].size(), 1u);
  EXPECT_EQ(b["turns"][0]["digest"], a["turns"][0]["digest"]);
  EXPECT_EQ(b["messages"][2]["content"], a["messages"][2]["content"]);
  EXPECT_EQ(b["model_fingerprint"], a["model_fingerprint"]);
  // The replies were streamed to stdout, one per turn.
  const std::string reply = a["messages"][2]["content"];
  EXPECT_EQ(r.out.rfind(reply + "\n", 0), 0u) << r.out;
}

TEST_F(ChatCli, MakeTinyModelCanCarryAChatTemplate) {
  const std::string tmpl =
      write("carried.jinja", "{% for m in messages %}<{{ m.role }}>{% endfor %}");
  const std::string dir = dir_ + "/carrying";
  auto r = run_shell(cli_path() + " make-tiny-model --arch qwen2 --seed 1 --chat-template " + tmpl +
                     " --out '" + dir + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_shell(cli_path() + " render-template --model '" + dir + "' --messages " + dir_ +
                "/messages.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "<system><user>");
}

}  // namespace
}  // namespace detinfer

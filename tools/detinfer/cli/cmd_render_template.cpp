// `detinfer render-template`: prints the prompt the model's chat template makes of a
// conversation (byte-identical to transformers' apply_chat_template), without generating.
#include <iostream>

#include "chat_cli_common.h"
#include "command_registry.h"
#include "detinfer/session.h"

namespace {

struct RenderOptions {
  std::string model;
  std::string messages;
  detinfer_cli::TemplateFlags flags;
  bool ids = false;
};

int run_render(const RenderOptions& o) {
  detinfer::SessionOptions so;
  so.threads = 1;
  so.chat_template_path = o.flags.chat_template;
  so.recorder.level = detinfer::RecordLevel::kOff;
  so.cache.prefix.enabled = false;
  so.max_batch = 1;  // rendering needs no KV: keep the automatic pool small
  detinfer::ChatTemplateOptions to = o.flags.options();
  const std::vector<detinfer::ChatMessage> messages =
      detinfer_cli::read_messages_file(o.messages, &to.tools_json);
  auto session = detinfer::DeterministicSession::open(o.model, so);
  if (o.ids) {
    const std::vector<std::int32_t> ids = session.encode_chat(messages, to);
    for (std::size_t i = 0; i < ids.size(); ++i) std::cout << (i ? "," : "") << ids[i];
    std::cout << "\n";
  } else {
    std::cout << session.apply_chat_template(messages, to);
  }
  return 0;
}

const detinfer_cli::RegisterCommand kRegister(
    "render-template", "Print the prompt a model's chat template makes of a conversation",
    [](CLI::App& sub, int& exit_code) {
      auto o = std::make_shared<RenderOptions>();
      sub.add_option("--model", o->model, "Model folder")->required();
      sub.add_option("--messages", o->messages,
                     "JSON file: a list of messages, or {\"messages\": [...], \"tools\": [...]}")
          ->required();
      o->flags.add(sub);
      sub.add_flag("--ids", o->ids, "Print the token ids (comma-separated) instead of the text");
      sub.callback([o, &exit_code] { exit_code = run_render(*o); });
    });

}  // namespace

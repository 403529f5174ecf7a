// `detinfer quantize`: a Hugging Face model folder written as a GGUF file whose weights are
// quantized (docs/gguf.md, "Writing quantized files"): the blocks SessionOptions::weights
// makes on load, so the file computes what quantizing on load computes.
#include <filesystem>
#include <iostream>

#include "command_registry.h"
#include "detinfer/error.h"
#include "devtools/model_tools.h"
#include "kernels/quant.h"
#include "model/quant_scheme.h"

namespace {
struct QuantizeOptions {
  std::string model;
  std::string type;
  std::string out;
  bool keep_embedding = false;
  bool no_tokenizer = false;
  std::int64_t splits = 1;
};

const detinfer_cli::RegisterCommand kRegister(
    "quantize", "Write a model folder as a GGUF file with quantized weights",
    [](CLI::App& sub, int& exit_code) {
      auto o = std::make_shared<QuantizeOptions>();
      sub.add_option("--model", o->model,
                     "Hugging Face model folder (llama, mistral, qwen2, qwen3; f32/bf16/f16)")
          ->required();
      sub.add_option("--type", o->type,
                     "Weight format of every 2-D weight whose rows are whole blocks, or a "
                     "llama.cpp mix choosing one per tensor: " +
                         detinfer::model::quant_scheme_names() + " (quantized spec v1)")
          ->required();
      sub.add_option("--out", o->out, "The GGUF file to write")->required();
      sub.add_flag("--keep-embedding", o->keep_embedding,
                   "Keep an untied token_embd as stored (as --weights on load does) instead of "
                   "quantizing it (llama.cpp quantizes it)");
      sub.add_flag("--no-tokenizer", o->no_tokenizer,
                   "Do not write the folder's tokenizer, chat template and sampling defaults");
      sub.add_option("--splits", o->splits, "Write this many name-0000N-of-0000M.gguf shards")
          ->capture_default_str();
      sub.callback([o, &exit_code] {
        detinfer::model::QuantScheme q;
        if (!detinfer::model::parse_quant_scheme(o->type, &q)) {
          throw detinfer::Error(detinfer::ErrorCode::kInvalidArgument,
                                "--type: expected " + detinfer::model::quant_scheme_names() +
                                    ", got '" + o->type + "'",
                                "type");
        }
        detinfer::devtools::GgufConvertOptions g;
        g.splits = o->splits;
        g.quantize = q;
        g.quantize_token_embd = !o->keep_embedding;
        g.tokenizer = !o->no_tokenizer;
        const std::filesystem::path parent = std::filesystem::path(o->out).parent_path();
        if (!parent.empty()) std::filesystem::create_directories(parent);
        for (const std::string& f : detinfer::devtools::write_gguf_model(o->model, o->out, g)) {
          std::cerr << "wrote " << f << " (" << o->type << ")\n";
        }
        exit_code = 0;
      });
    });
}  // namespace

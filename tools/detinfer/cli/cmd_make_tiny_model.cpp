// `detinfer make-tiny-model`: writes a deterministic random model (config.json,
// model.safetensors, tokenizer.json) for tests and demos.
#include <filesystem>
#include <iostream>

#include "command_registry.h"
#include "devtools/model_tools.h"

namespace {
struct MakeTinyOptions {
  std::string arch = "llama";
  std::string dtype = "f32";
  std::string chat_template;  // copied to chat_template.jinja ("" = only the ChatML default)
  std::string gguf;           // also write the model as this GGUF file ("" = no)
  std::int64_t gguf_splits = 1;
  std::string gguf_quantize;  // "" = the weights as stored; a model::parse_quant_scheme name
  std::string fused_experts = "none";
  detinfer::devtools::TinyModelOptions model;
};

// --gguf-quantize's check: "" when v names a quantization scheme.
std::string check_scheme(const std::string& v) {
  detinfer::model::QuantScheme s;
  return detinfer::model::parse_quant_scheme(v, &s)
             ? std::string()
             : "expected " + detinfer::model::quant_scheme_names();
}

// The folder just written, as the --gguf file (or shards), quantized with --gguf-quantize.
void write_gguf(const MakeTinyOptions& o, const std::string& dir) {
  const std::filesystem::path parent = std::filesystem::path(o.gguf).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  detinfer::devtools::GgufConvertOptions g;
  g.splits = o.gguf_splits;
  if (!o.gguf_quantize.empty()) {
    detinfer::model::QuantScheme q;
    detinfer::model::parse_quant_scheme(o.gguf_quantize, &q);
    g.quantize = q;
  }
  for (const std::string& f : detinfer::devtools::write_gguf_model(dir, o.gguf, g)) {
    std::cerr << "wrote " << f << "\n";
  }
}

// The options of the Gemma and mixture-of-experts architectures.
void add_family_options(CLI::App& sub, MakeTinyOptions& o) {
  sub.add_option("--num-experts", o.model.num_experts,
                 "qwen3_moe, mixtral: num_experts / num_local_experts")
      ->capture_default_str();
  sub.add_option("--experts-per-tok", o.model.experts_per_tok,
                 "qwen3_moe, mixtral: num_experts_per_tok (top-k)")
      ->capture_default_str();
  sub.add_option("--moe-intermediate", o.model.moe_intermediate,
                 "qwen3_moe, qwen2_moe: moe_intermediate_size (mixtral experts use "
                 "--intermediate)")
      ->capture_default_str();
  sub.add_option("--shared-expert-intermediate", o.model.shared_expert_intermediate,
                 "qwen2_moe: shared_expert_intermediate_size")
      ->capture_default_str();
  sub.add_option("--fused-experts", o.fused_experts,
                 "qwen3_moe, mixtral, qwen2_moe: store the experts fused into 3-D tensors, as "
                 "transformers v5 does (gate_up: mlp.experts.gate_up_proj + down_proj; "
                 "separate: 3-D gate_proj, up_proj, down_proj)")
      ->check(CLI::IsMember({"none", "gate_up", "separate"}))
      ->capture_default_str();
  sub.add_option("--softcap", o.model.attn_logit_softcapping,
                 "gemma2, gemma3: attn_logit_softcapping (0 = null; a gemma2 --gguf needs one)")
      ->capture_default_str();
  sub.add_option("--final-softcap", o.model.final_logit_softcapping,
                 "gemma2, gemma3: final_logit_softcapping (0 = null)")
      ->capture_default_str();
}

const detinfer_cli::RegisterCommand kRegister(
    "make-tiny-model", "Write a small random model (Hugging Face layout) from a seed",
    [](CLI::App& sub, int& exit_code) {
      auto o = std::make_shared<MakeTinyOptions>();
      sub.add_option("--arch", o->arch,
                     "llama | mistral | qwen2 | qwen3 | olmo2 | phi3 | gemma2 | gemma3 | "
                     "qwen3_moe | mixtral | qwen2_moe")
          ->check(CLI::IsMember({"llama", "mistral", "qwen2", "qwen3", "olmo2", "phi3", "gemma2",
                                 "gemma3", "qwen3_moe", "mixtral", "qwen2_moe"}))
          ->capture_default_str();
      add_family_options(sub, *o);
      sub.add_option("--dtype", o->dtype, "Weight dtype: f32 | bf16 | f16")
          ->check(CLI::IsMember({"f32", "bf16", "f16"}))
          ->capture_default_str();
      sub.add_option("--hidden", o->model.hidden, "hidden_size")->capture_default_str();
      sub.add_option("--intermediate", o->model.intermediate, "intermediate_size")
          ->capture_default_str();
      sub.add_option("--layers", o->model.layers, "num_hidden_layers")->capture_default_str();
      sub.add_option("--heads", o->model.heads, "num_attention_heads")->capture_default_str();
      sub.add_option("--kv-heads", o->model.kv_heads, "num_key_value_heads")->capture_default_str();
      sub.add_option("--head-dim", o->model.head_dim, "head_dim (0 = hidden / heads)")
          ->capture_default_str();
      sub.add_option("--vocab", o->model.vocab, "vocab_size (>= 259 also writes tokenizer.json)")
          ->capture_default_str();
      sub.add_option("--max-positions", o->model.max_positions, "max_position_embeddings")
          ->capture_default_str();
      sub.add_option("--rope-theta", o->model.rope_theta, "rope_theta")->capture_default_str();
      sub.add_flag("--llama3-rope-scaling", o->model.llama3_rope_scaling,
                   "llama: add rope_scaling {rope_type: llama3, factor: 8}");
      sub.add_option("--sliding-window", o->model.sliding_window,
                     "mistral, phi3: sliding_window (0 = null)")
          ->capture_default_str();
      sub.add_option("--partial-rotary-factor", o->model.partial_rotary_factor,
                     "phi3: partial_rotary_factor (RoPE on the first int(head_dim * f) dims)")
          ->capture_default_str();
      sub.add_flag("--tie-word-embeddings", o->model.tie_word_embeddings,
                   "Share embed and lm_head");
      sub.add_option("--shards", o->model.shards, "Number of safetensors shards")
          ->capture_default_str();
      sub.add_option("--seed", o->model.seed, "Weights seed")->capture_default_str();
      sub.add_option("--chat-template", o->chat_template,
                     "Jinja file written as chat_template.jinja (default: the ChatML template "
                     "in tokenizer_config.json)");
      sub.add_option("--gguf", o->gguf,
                     "Also write the model as this GGUF file (every --arch; as llama.cpp's "
                     "converter writes it)");
      sub.add_option("--gguf-splits", o->gguf_splits,
                     "Write the GGUF as this many name-0000N-of-0000M.gguf shards")
          ->capture_default_str();
      sub.add_option("--gguf-quantize", o->gguf_quantize,
                     "Store the GGUF's 2-D weights as " + detinfer::model::quant_scheme_names() +
                         " (quantized spec v1; the same blocks as --weights on load)")
          ->check(check_scheme);
      sub.add_option("--out", o->model.out_dir, "Output folder")->required();
      sub.callback([o, &exit_code] {
        detinfer::devtools::TinyModelOptions m = o->model;
        m.arch = detinfer::devtools::parse_tiny_arch(o->arch);
        m.dtype = detinfer::devtools::parse_weight_dtype(o->dtype);
        detinfer::devtools::make_tiny_model(m);
        if (!o->chat_template.empty()) {
          std::filesystem::copy_file(o->chat_template, m.out_dir + "/chat_template.jinja",
                                     std::filesystem::copy_options::overwrite_existing);
        }
        std::cerr << "wrote " << o->arch << " " << o->dtype << " model to " << m.out_dir << "\n";
        if (!o->gguf.empty()) write_gguf(*o, m.out_dir);
        // After the GGUF (llama.cpp's converter reads the per-expert names).
        detinfer::devtools::fuse_expert_tensors(
            m.out_dir, detinfer::devtools::parse_fused_experts(o->fused_experts));
        exit_code = 0;
      });
    });
}  // namespace

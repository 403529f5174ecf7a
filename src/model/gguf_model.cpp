// GGUF model files: locating them (one file, a folder, a split set), mapping and parsing
// them, and the tensors as a TensorSource under Hugging Face names (gguf_model.h).
#include "model/gguf_model.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>
#include <sstream>

#include "core/check.h"
#include "model/gguf_internal.h"
#include "model/rope_config.h"
#include "model/weight_loader.h"

namespace detinfer::model {
namespace {

namespace fs = std::filesystem;

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// "name-0000N-of-0000M.gguf" -> {stem "name", N, M}; N = 0 when `file` is no split name.
struct SplitName {
  std::string stem;
  int no = 0;
  int count = 0;
};

SplitName split_name(const std::string& file) {
  SplitName s;
  constexpr std::size_t kTail = sizeof("-00001-of-00002.gguf") - 1;
  if (file.size() <= kTail || !ends_with(file, ".gguf")) return s;
  const std::string tail = file.substr(file.size() - kTail);
  int no = 0, count = 0;
  char end = 0;
  if (std::sscanf(tail.c_str(), "-%5d-of-%5d.ggu%c", &no, &count, &end) != 3 || end != 'f') {
    return s;
  }
  if (no < 1 || count < 1 || no > count) return s;
  for (const std::size_t i : {std::size_t{1}, std::size_t{10}}) {  // exactly 5 digits each
    for (std::size_t k = 0; k < 5; ++k) {
      if (tail[i + k] < '0' || tail[i + k] > '9') return s;
    }
  }
  return {file.substr(0, file.size() - kTail), no, count};
}

std::string shard_path(const std::string& dir, const SplitName& s, int no) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "-%05d-of-%05d.gguf", no, s.count);
  return (fs::path(dir) / (s.stem + buf)).string();
}

// The whole split set of the shard `path` names, checking every shard exists.
std::vector<std::string> split_set(const std::string& path, const SplitName& s) {
  const std::string dir = fs::path(path).parent_path().string();
  std::vector<std::string> out;
  for (int i = 1; i <= s.count; ++i) {
    const std::string p = shard_path(dir.empty() ? "." : dir, s, i);
    if (!fs::is_regular_file(p)) {
      fail(ErrorCode::kNotFound, "GGUF split shard ", p, " of ", path, " does not exist");
    }
    out.push_back(p);
  }
  return out;
}

std::string layer_name(const std::string& hf, std::size_t at, std::string* rest) {
  const std::size_t dot = hf.find('.', at);
  if (dot == std::string::npos) return "";
  *rest = hf.substr(dot + 1);
  return hf.substr(at, dot - at);
}

}  // namespace

bool is_gguf_model(const std::string& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return ends_with(path, ".gguf");
  if (!fs::is_directory(path, ec) || fs::exists(fs::path(path) / "config.json", ec)) return false;
  for (const auto& e : fs::directory_iterator(path, ec)) {
    if (e.is_regular_file(ec) && ends_with(e.path().filename().string(), ".gguf")) return true;
  }
  return false;
}

std::vector<std::string> gguf_model_files(const std::string& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    const SplitName s = split_name(fs::path(path).filename().string());
    return s.no == 0 ? std::vector<std::string>{path} : split_set(path, s);
  }
  std::vector<std::string> ggufs;
  for (const auto& e : fs::directory_iterator(path, ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file(ec) && ends_with(name, ".gguf")) ggufs.push_back(name);
  }
  std::sort(ggufs.begin(), ggufs.end());
  if (ggufs.empty()) fail(ErrorCode::kNotFound, "no .gguf file in ", path);
  if (ggufs.size() == 1) return {(fs::path(path) / ggufs.front()).string()};
  const SplitName first = split_name(ggufs.front());
  const bool one_set = first.no == 1 && static_cast<std::size_t>(first.count) == ggufs.size() &&
                       std::all_of(ggufs.begin(), ggufs.end(), [&](const std::string& g) {
                         const SplitName s = split_name(g);
                         return s.stem == first.stem && s.count == first.count;
                       });
  if (!one_set) {
    throw Error(ErrorCode::kInvalidArgument,
                str_cat(path, " holds ", ggufs.size(), " .gguf files (", ggufs.front(), ", ",
                        ggufs[1], ", ...) that are not one split set; pass the file to load"),
                "model");
  }
  return split_set((fs::path(path) / ggufs.front()).string(), first);
}

std::string gguf_tensor_name(const std::string& hf, Architecture arch) {
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  if (hf == "lm_head.weight") return "output.weight";
  const std::string prefix = "model.layers.";
  if (hf.compare(0, prefix.size(), prefix) != 0) return "";
  std::string rest;
  const std::string layer = layer_name(hf, prefix.size(), &rest);
  // Norms on the sublayer outputs (OLMo 2, Gemma) and Gemma's MLP input norm: llama.cpp's
  // names.
  if (arch == Architecture::kOlmo2 || arch == Architecture::kGemma2 ||
      arch == Architecture::kGemma3) {
    if (rest == "post_attention_layernorm.weight")
      return "blk." + layer + ".post_attention_norm.weight";
    if (rest == "post_feedforward_layernorm.weight")
      return "blk." + layer + ".post_ffw_norm.weight";
    if (rest == "pre_feedforward_layernorm.weight") return "blk." + layer + ".ffn_norm.weight";
  }
  const std::string moe = gguf_internal::moe_tensor_name(rest, layer);
  if (!moe.empty()) return moe;
  static const std::pair<const char*, const char*> kNames[] = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
      // Phi-3's fused projections: [q | k | v] rows, and [gate | up] rows in ffn_up.
      {"self_attn.qkv_proj.weight", "attn_qkv.weight"},
      {"mlp.gate_up_proj.weight", "ffn_up.weight"},
  };
  for (const auto& [h, g] : kNames) {
    if (rest == h) return "blk." + layer + "." + g;
  }
  return "";
}

std::vector<std::int64_t> llama_qk_row_order(std::int64_t heads, std::int64_t head_dim) {
  // The converter stores row h*head_dim + 2j + i of Hugging Face row h*head_dim + i*half + j
  // (i in {0, 1}, j < half): reshape(heads, 2, half) -> swap the last two axes.
  const std::int64_t half = head_dim / 2;
  std::vector<std::int64_t> order(static_cast<std::size_t>(heads * head_dim));
  for (std::int64_t h = 0; h < heads; ++h) {
    for (std::int64_t i = 0; i < 2; ++i) {
      for (std::int64_t j = 0; j < half; ++j) {
        order[static_cast<std::size_t>(h * head_dim + i * half + j)] = h * head_dim + 2 * j + i;
      }
    }
  }
  return order;
}

}  // namespace detinfer::model

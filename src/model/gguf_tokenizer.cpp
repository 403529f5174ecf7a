// A GGUF file's tokenizer metadata as the equivalent Hugging Face tokenizer.json
// (docs/gguf.md, "Tokenizers").
#include "model/gguf_tokenizer.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <string_view>
#include <unordered_map>

#include "core/check.h"
#include "detinfer/error.h"

namespace detinfer::model {

namespace {
using Json = nlohmann::json;

constexpr char kModel[] = "tokenizer.ggml.model";
constexpr char kPre[] = "tokenizer.ggml.pre";
constexpr char kTokens[] = "tokenizer.ggml.tokens";
constexpr char kTypes[] = "tokenizer.ggml.token_type";
constexpr char kScores[] = "tokenizer.ggml.scores";
constexpr char kMerges[] = "tokenizer.ggml.merges";
constexpr char kAddBos[] = "tokenizer.ggml.add_bos_token";
constexpr char kAddEos[] = "tokenizer.ggml.add_eos_token";
constexpr char kAddSpace[] = "tokenizer.ggml.add_space_prefix";
constexpr char kSpace[] = "\xE2\x96\x81";  // U+2581, SentencePiece's space

template <typename... Args>
[[noreturn]] void corrupt(const std::string& key, Args&&... args) {
  throw Error(ErrorCode::kCorrupt, str_cat("GGUF metadata '", key, "'", args...), key);
}

// The metadata of one vocabulary, checked.
struct Vocab {
  bool spm = false;  // "llama" (SentencePiece-style) rather than "gpt2" (byte-level)
  const std::vector<std::string>* tokens = nullptr;
  std::vector<GgufTokenType> types;
  std::vector<bool> in_model;  // in model.vocab (else only an added token)
  std::optional<std::int32_t> bos, eos, unk, pad;
  bool add_bos = false, add_eos = false, add_space_prefix = false;
  GgufPreTokenizer pre;
};

const std::vector<std::string>& read_tokens(const GgufFile& f) {
  const std::vector<std::string>& t = f.get_array(kTokens, GgufType::kString).strings;
  if (t.empty()) corrupt(kTokens, " is empty");
  if (t.size() > 0x7fffffffu) corrupt(kTokens, " has more than 2^31 - 1 tokens");
  std::unordered_map<std::string_view, std::size_t> seen;
  seen.reserve(t.size());
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t[i].empty()) corrupt(kTokens, "[", i, "] is empty");
    const auto [it, fresh] = seen.emplace(t[i], i);
    if (!fresh) corrupt(kTokens, "[", i, "] '", t[i], "' repeats token ", it->second);
  }
  return t;
}

std::vector<GgufTokenType> read_types(const GgufFile& f, std::size_t n) {
  const GgufValue* v = f.find(kTypes);
  if (v == nullptr) return std::vector<GgufTokenType>(n, GgufTokenType::kNormal);
  GgufValue element;
  element.type = v->element;
  if (v->type != GgufType::kArray || !element.is_integer()) {
    corrupt(kTypes, " is not an array of integers");
  }
  if (v->array_size() != n)
    corrupt(kTypes, " has ", v->array_size(), " entries for ", n, " tokens");
  std::vector<GgufTokenType> types(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t t =
        v->ints.empty() ? static_cast<std::int64_t>(std::min<std::uint64_t>(v->uints[i], 1000))
                        : v->ints[i];
    if (t < 1 || t > 6) corrupt(kTypes, "[", i, "] is ", t, ", not a token type (1..6)");
    types[i] = static_cast<GgufTokenType>(t);
  }
  return types;
}

std::optional<std::int32_t> read_id(const GgufFile& f, const std::string& key, std::size_t n,
                                    std::optional<std::int32_t> fallback) {
  const std::optional<std::uint64_t> id = f.find_uint(key);
  if (!id) return fallback && static_cast<std::size_t>(*fallback) < n ? fallback : std::nullopt;
  if (*id >= n) corrupt(key, " is ", *id, ", outside the vocabulary of ", n, " tokens");
  return static_cast<std::int32_t>(*id);
}

bool is_byte_token(const std::string& t) {
  const auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
  return t.size() == 6 && t.compare(0, 3, "<0x") == 0 && hex(t[3]) && hex(t[4]) && t[5] == '>';
}

Vocab read_vocab(const GgufFile& f) {
  Vocab v;
  const std::string& model = f.get_string(kModel);
  if (model != "gpt2" && model != "llama") {
    throw Error(ErrorCode::kUnsupported,
                str_cat("GGUF metadata '", kModel, "' is '", model,
                        "': detinfer reads the tokenizers 'gpt2' (byte-level BPE) and 'llama' "
                        "(SentencePiece-style BPE)"),
                kModel);
  }
  v.spm = model == "llama";
  v.tokens = &read_tokens(f);
  const std::size_t n = v.tokens->size();
  v.types = read_types(f, n);
  const auto sp = [&](std::int32_t id) {
    return v.spm ? std::optional<std::int32_t>(id) : std::nullopt;
  };
  v.bos = read_id(f, "tokenizer.ggml.bos_token_id", n, sp(1));
  v.eos = read_id(f, "tokenizer.ggml.eos_token_id", n, sp(2));
  v.unk = read_id(f, "tokenizer.ggml.unknown_token_id", n, sp(0));
  v.pad = read_id(f, "tokenizer.ggml.padding_token_id", n, std::nullopt);
  v.add_space_prefix = f.find_bool(kAddSpace).value_or(v.spm);
  if (!v.spm) {
    const std::optional<std::string> pre = f.find_string(kPre);
    if (!pre) {
      throw Error(ErrorCode::kNotFound,
                  str_cat("GGUF metadata '", kPre,
                          "' is missing: a gpt2 vocabulary needs its pre-tokenizer's name"),
                  kPre);
    }
    v.pre = gguf_pre_tokenizer(*pre, v.add_space_prefix);
  }
  v.add_bos = f.find_bool(kAddBos).value_or(v.spm || v.pre.add_bos_default);
  v.add_eos = f.find_bool(kAddEos).value_or(false);
  if (v.add_bos && !v.bos) corrupt(kAddBos, " is true but there is no bos_token_id");
  if (v.add_eos && !v.eos) corrupt(kAddEos, " is true but there is no eos_token_id");
  v.in_model.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const GgufTokenType t = v.types[i];
    if (t == GgufTokenType::kByte && v.spm && !is_byte_token((*v.tokens)[i])) {
      corrupt(kTypes, "[", i, "] is BYTE but token '", (*v.tokens)[i], "' is not <0xNN>");
    }
    v.in_model[i] = (t != GgufTokenType::kControl && t != GgufTokenType::kUserDefined) ||
                    (v.spm && v.unk && *v.unk == static_cast<std::int32_t>(i));
  }
  return v;
}

Json gpt2_merges(const GgufFile& f, const Vocab& v) {
  const std::vector<std::string>& merges = f.get_array(kMerges, GgufType::kString).strings;
  std::unordered_map<std::string_view, std::size_t> index;
  for (std::size_t i = 0; i < v.tokens->size(); ++i) {
    if (v.in_model[i]) index.emplace((*v.tokens)[i], i);
  }
  Json out = Json::array();
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const std::string& m = merges[i];
    const std::size_t sp = m.find(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 == m.size() ||
        m.find(' ', sp + 1) != std::string::npos) {
      corrupt(kMerges, "[", i, "] '", m, "' is not two tokens separated by one space");
    }
    const std::string a = m.substr(0, sp), b = m.substr(sp + 1);
    for (const std::string& t : {a, b, a + b}) {
      if (index.count(t) == 0) {
        corrupt(kMerges, "[", i, "] '", m, "' names '", t,
                "', not a token of the BPE vocabulary (control and user-defined tokens are not)");
      }
    }
    out.push_back({a, b});
  }
  return out;
}

Json spm_merges(const GgufFile& f, const Vocab& v) {
  const GgufValue& s = f.get_array(kScores, GgufType::kF32);
  if (s.floats.size() != v.tokens->size()) {
    corrupt(kScores, " has ", s.floats.size(), " entries for ", v.tokens->size(), " tokens");
  }
  for (std::size_t i = 0; i < s.floats.size(); ++i) {
    if (!std::isfinite(s.floats[i])) corrupt(kScores, "[", i, "] is not finite");
  }
  Json out = Json::array();
  for (auto& [a, b] : gguf_spm_merges(*v.tokens, s.floats, v.in_model)) {
    out.push_back({std::move(a), std::move(b)});
  }
  return out;
}

Json added_tokens(const Vocab& v) {
  Json out = Json::array();
  for (std::size_t i = 0; i < v.tokens->size(); ++i) {
    const GgufTokenType t = v.types[i];
    if (t != GgufTokenType::kControl && t != GgufTokenType::kUserDefined &&
        t != GgufTokenType::kUnknown) {
      continue;
    }
    out.push_back({{"id", i},
                   {"content", (*v.tokens)[i]},
                   {"single_word", false},
                   {"lstrip", false},
                   {"rstrip", false},
                   {"normalized", false},
                   {"special", t != GgufTokenType::kUserDefined}});
  }
  return out;
}

Json replace(const char* from, const char* to) {
  return {{"type", "Replace"}, {"pattern", {{"String", from}}}, {"content", to}};
}

// SentencePiece-style text handling: spaces as U+2581, one prepended (add_space_prefix)
// before each piece of text between added tokens, as llama.cpp and transformers' legacy
// Llama tokenizer do; decoding undoes both and joins <0xNN> bytes.
void spm_components(const Vocab& v, Json& root) {
  if (v.add_space_prefix) {
    root["normalizer"] = {
        {"type", "Sequence"},
        {"normalizers", {{{"type", "Prepend"}, {"prepend", kSpace}}, replace(" ", kSpace)}}};
  } else {
    root["normalizer"] = replace(" ", kSpace);
  }
  root["pre_tokenizer"] = nullptr;
  Json decoders = {replace(kSpace, " "), {{"type", "ByteFallback"}}, {{"type", "Fuse"}}};
  if (v.add_space_prefix) {
    decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  }
  root["decoder"] = {{"type", "Sequence"}, {"decoders", std::move(decoders)}};
}

Json model_json(const GgufFile& f, const Vocab& v) {
  Json vocab = Json::object();
  for (std::size_t i = 0; i < v.tokens->size(); ++i) {
    if (v.in_model[i]) vocab[(*v.tokens)[i]] = i;
  }
  Json m = {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", v.spm && v.unk ? Json((*v.tokens)[*v.unk]) : Json()},
            {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr},
            {"fuse_unk", v.spm},
            {"byte_fallback", v.spm},
            {"ignore_merges", v.pre.ignore_merges}};
  m["vocab"] = std::move(vocab);
  m["merges"] = v.spm ? spm_merges(f, v) : gpt2_merges(f, v);
  return m;
}
}  // namespace

GgufTokenizerJson gguf_tokenizer_json(const GgufFile& file) {
  const Vocab v = read_vocab(file);
  Json root = {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}};
  root["added_tokens"] = added_tokens(v);
  if (v.spm) {
    spm_components(v, root);
  } else {
    root["normalizer"] = Json::parse(v.pre.normalizer_json);
    root["pre_tokenizer"] = Json::parse(v.pre.pre_tokenizer_json);
    root["decoder"] = {{"type", "ByteLevel"},
                       {"add_prefix_space", true},
                       {"trim_offsets", true},
                       {"use_regex", true}};
  }
  root["post_processor"] = nullptr;
  root["model"] = model_json(file, v);

  // transformers' Llama classes rebuild the post-processor from add_bos/add_eos; that is
  // GGUF's rule for every vocabulary.
  Json cfg = {{"tokenizer_class", "LlamaTokenizerFast"},
              {"add_bos_token", v.add_bos},
              {"add_eos_token", v.add_eos}};
  const auto name = [&](const std::optional<std::int32_t>& id) {
    return id ? Json((*v.tokens)[*id]) : Json();
  };
  cfg["bos_token"] = name(v.bos);
  cfg["eos_token"] = name(v.eos);
  cfg["unk_token"] = name(v.unk);
  cfg["pad_token"] = name(v.pad);
  // The chat template(s) as tokenizer_config.json holds them, so that the tokenizer hash
  // covers them as it does for Hugging Face folders.
  const GgufChatTemplates t = gguf_chat_templates(file);
  if (t.named) {
    Json list = Json::array();
    for (const auto& [n, text] : t.templates) list.push_back({{"name", n}, {"template", text}});
    cfg["chat_template"] = std::move(list);
  } else if (!t.templates.empty()) {
    cfg["chat_template"] = t.templates.begin()->second;
  }
  return {root.dump(), cfg.dump()};
}

Tokenizer gguf_tokenizer(const GgufFile& file) {
  const GgufTokenizerJson j = gguf_tokenizer_json(file);
  try {
    return Tokenizer::from_json(j.tokenizer_json, j.tokenizer_config_json);
  } catch (const Error& e) {
    throw Error(e.code(), "GGUF tokenizer metadata: " + e.message(), kTokens);
  }
}

}  // namespace detinfer::model

#include "devtools/gguf_tokenizer_writer.h"

#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/check.h"
#include "detinfer/tokenizer.h"
#include "devtools/tiny_tokenizer.h"
#include "model/gguf_tokenizer.h"

namespace detinfer::devtools {

namespace {
using Json = nlohmann::json;
using model::GgufTokenType;

constexpr char kSpace[] = "\xE2\x96\x81";  // U+2581

Json parse(std::string_view text, const char* name) {
  if (text.empty()) return Json::object();
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {
    fail(ErrorCode::kInvalidArgument, name, ": ", e.what());
  }
}

[[noreturn]] void refuse(const std::string& component, const std::string& why) {
  throw Error(ErrorCode::kUnsupported, str_cat("tokenizer.json: ", component, ": ", why),
              "tokenizer.json: " + component);
}

// A component with the fields that do not change ids or text dropped (ByteLevel's
// trim_offsets only moves offsets).
Json canonical(Json j) {
  if (j.is_object()) {
    if (j.value("type", "") == "ByteLevel") j.erase("trim_offsets");
    for (auto& [k, v] : j.items()) v = canonical(v);
  } else if (j.is_array()) {
    for (auto& v : j) v = canonical(v);
  }
  return j;
}

// add_prefix_space of the first ByteLevel pre-tokenizer (false when there is none).
bool byte_level_prefix_space(const Json& pre) {
  if (!pre.is_object()) return false;
  if (pre.value("type", "") == "ByteLevel") return pre.value("add_prefix_space", false);
  if (pre.contains("pretokenizers")) {
    for (const Json& p : pre["pretokenizers"]) {
      if (p.value("type", "") == "ByteLevel") return p.value("add_prefix_space", false);
    }
  }
  return false;
}

std::pair<std::string, std::string> merge_pair(const Json& m) {
  if (m.is_array()) return {m.at(0).get<std::string>(), m.at(1).get<std::string>()};
  const std::string s = m.get<std::string>();
  const std::size_t sp = s.find(' ');
  return {s.substr(0, sp), s.substr(sp + 1)};
}

bool is_byte_token(const std::string& t) {
  return t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>';
}

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<std::int32_t> types;
  std::vector<bool> in_model;  // the loader's rule: not CONTROL/USER_DEFINED, or the unk
  std::optional<std::int32_t> unk;
};

Vocab read_vocab(const Json& j, const Tokenizer& tok, bool spm) {
  Vocab v;
  const std::int64_t n = tok.vocab_size();
  std::map<std::int64_t, bool> added;  // id -> special
  for (const Json& t : j.value("added_tokens", Json::array())) {
    added[t.at("id").get<std::int64_t>()] = t.value("special", false);
  }
  const Json& unk = j["model"].value("unk_token", Json());
  if (unk.is_string()) v.unk = tok.token_to_id(unk.get<std::string>());
  for (std::int32_t id = 0; id < n; ++id) {
    const std::optional<std::string> t = tok.id_to_token(id);
    if (!t) refuse("model.vocab", str_cat("id ", id, " has no token (GGUF ids have no holes)"));
    GgufTokenType type = GgufTokenType::kNormal;
    const auto a = added.find(id);
    if (v.unk && *v.unk == id) {
      type = GgufTokenType::kUnknown;
    } else if (a != added.end()) {
      type = a->second ? GgufTokenType::kControl : GgufTokenType::kUserDefined;
    } else if (spm && is_byte_token(*t)) {
      type = GgufTokenType::kByte;
    }
    v.tokens.push_back(*t);
    v.types.push_back(static_cast<std::int32_t>(type));
    v.in_model.push_back((type != GgufTokenType::kControl && type != GgufTokenType::kUserDefined) ||
                         (spm && v.unk && *v.unk == id));
  }
  return v;
}

void write_gpt2(GgufWriter& w, const Json& j, const std::string& pre, const Vocab& v) {
  const bool aps = byte_level_prefix_space(j.value("pre_tokenizer", Json()));
  const model::GgufPreTokenizer want = model::gguf_pre_tokenizer(pre, aps);
  if (canonical(j.value("normalizer", Json())) != canonical(Json::parse(want.normalizer_json))) {
    refuse("normalizer", "not the one tokenizer.ggml.pre '" + pre + "' stands for");
  }
  if (canonical(j.value("pre_tokenizer", Json())) !=
      canonical(Json::parse(want.pre_tokenizer_json))) {
    refuse("pre_tokenizer", "not the one tokenizer.ggml.pre '" + pre + "' stands for");
  }
  if (j["model"].value("ignore_merges", false) != want.ignore_merges) {
    refuse("model.ignore_merges", "differs from tokenizer.ggml.pre '" + pre + "'");
  }
  std::vector<std::string> merges;
  for (const Json& m : j["model"]["merges"]) {
    const auto [a, b] = merge_pair(m);
    if (a.find(' ') != std::string::npos || b.find(' ') != std::string::npos) {
      refuse("model.merges", "a merge of tokens with spaces ('" + a + "', '" + b + "')");
    }
    merges.push_back(a + " " + b);
  }
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", pre);
  w.add_string_array("tokenizer.ggml.tokens", v.tokens);
  w.add_i32_array("tokenizer.ggml.token_type", v.types);
  w.add_string_array("tokenizer.ggml.merges", merges);
  w.add_bool("tokenizer.ggml.add_space_prefix", aps);
}

// Scores that rank the merges: the token made by merge k scores -(k + 1), other tokens 0.
// The merges these scores imply must be the tokenizer's own.
std::vector<float> spm_scores(const Json& j, const Vocab& v, const Tokenizer& tok) {
  const Json& merges = j["model"]["merges"];
  std::vector<float> scores(v.tokens.size(), 0.0f);
  std::vector<bool> scored(v.tokens.size(), false);
  std::vector<std::pair<std::string, std::string>> own;
  for (std::size_t k = 0; k < merges.size(); ++k) {
    own.push_back(merge_pair(merges[k]));
    const std::int32_t id = *tok.token_to_id(own.back().first + own.back().second);
    if (!scored[id]) scores[id] = -static_cast<float>(k + 1);
    scored[id] = true;
  }
  const std::vector<double> wide(scores.begin(), scores.end());
  const auto implied = model::gguf_spm_merges(v.tokens, wide, v.in_model);
  for (std::size_t k = 0; k < std::max(implied.size(), own.size()); ++k) {
    if (k >= implied.size() || k >= own.size() || implied[k] != own[k]) {
      refuse("model.merges", str_cat("merge ", k,
                                     " is not the one the vocabulary and scores imply (GGUF's "
                                     "llama vocabularies carry scores, not merges)"));
    }
  }
  return scores;
}

void write_spm(GgufWriter& w, const Json& j, const Vocab& v, const Tokenizer& tok) {
  const Json replace = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpace}};
  const Json legacy = {{"type", "Sequence"},
                       {"normalizers", {{{"type", "Prepend"}, {"prepend", kSpace}}, replace}}};
  const Json& norm = j.value("normalizer", Json());
  if (norm != legacy && norm != replace) {
    refuse("normalizer",
           "GGUF's llama vocabulary has SentencePiece's legacy space handling only "
           "(Prepend U+2581 + Replace ' ')");
  }
  if (!j.value("pre_tokenizer", Json()).is_null()) {
    refuse("pre_tokenizer", "GGUF's llama vocabulary has none (Metaspace is not representable)");
  }
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_string_array("tokenizer.ggml.tokens", v.tokens);
  w.add_f32_array("tokenizer.ggml.scores", spm_scores(j, v, tok));
  w.add_i32_array("tokenizer.ggml.token_type", v.types);
  w.add_bool("tokenizer.ggml.add_space_prefix", norm == legacy);
  if (v.unk) w.add_u32("tokenizer.ggml.unknown_token_id", static_cast<std::uint32_t>(*v.unk));
}

// BOS/EOS: what the post-processor adds around a text (at most one token each side).
void write_specials(GgufWriter& w, const Tokenizer& tok, const Json& cfg,
                    const GgufTokenizerSource& src) {
  const std::vector<std::int32_t> both = tok.encode("", true);
  const std::vector<std::int32_t> with = tok.encode("x", true), bare = tok.encode("x", false);
  std::size_t k = 0;
  while (k <= both.size()) {
    std::vector<std::int32_t> guess(both.begin(), both.begin() + k);
    guess.insert(guess.end(), bare.begin(), bare.end());
    guess.insert(guess.end(), both.begin() + k, both.end());
    if (guess == with) break;
    ++k;
  }
  if (k > both.size() || k > 1 || both.size() - k > 1) {
    refuse("post_processor", "adds more than one token before or after the text");
  }
  std::optional<std::int32_t> bos = tok.bos_token_id(), eos = tok.eos_token_id();
  if (k == 1 && bos && *bos != both[0])
    refuse("post_processor", "adds a BOS that is not bos_token");
  if (k == 1) bos = both[0];
  if (both.size() > k && eos && *eos != both[k]) refuse("post_processor", "adds a non-EOS token");
  if (both.size() > k) eos = both[k];
  // The model's own ids (config.json), where given, as llama.cpp's converter takes them.
  if (src.bos_token_id) bos = src.bos_token_id;
  if (!src.eos_token_ids.empty()) eos = src.eos_token_ids[0];
  if (bos) w.add_u32("tokenizer.ggml.bos_token_id", static_cast<std::uint32_t>(*bos));
  if (eos) w.add_u32("tokenizer.ggml.eos_token_id", static_cast<std::uint32_t>(*eos));
  const char* more[] = {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"};
  if (src.eos_token_ids.size() > 3) refuse("eos_token_ids", "GGUF carries at most 3 stop ids");
  for (std::size_t i = 1; i < src.eos_token_ids.size(); ++i) {
    w.add_u32(more[i - 1], static_cast<std::uint32_t>(src.eos_token_ids[i]));
  }
  const Json pad = cfg.value("pad_token", Json());
  const std::string pad_name =
      pad.is_string() ? pad.get<std::string>()
                      : (pad.is_object() ? pad.value("content", std::string()) : std::string());
  if (const auto id = pad_name.empty() ? std::nullopt : tok.token_to_id(pad_name)) {
    w.add_u32("tokenizer.ggml.padding_token_id", static_cast<std::uint32_t>(*id));
  }
  w.add_bool("tokenizer.ggml.add_bos_token", k == 1);
  w.add_bool("tokenizer.ggml.add_eos_token", both.size() > k);
}

// tokenizer_config.json "chat_template": a string, or a list of {"name", "template"}
// (tokenizer.chat_template.<name>, listed by tokenizer.chat_templates).
void write_chat_templates(GgufWriter& w, const Json& cfg) {
  const Json t = cfg.value("chat_template", Json());
  if (t.is_string()) {
    w.add_string("tokenizer.chat_template", t.get<std::string>());
    return;
  }
  if (!t.is_array()) return;
  std::vector<std::string> names;
  for (const Json& e : t) {
    const std::string name = e.at("name").get<std::string>();
    const std::string text = e.at("template").get<std::string>();
    if (name == "default") {
      w.add_string("tokenizer.chat_template", text);
    } else {
      w.add_string("tokenizer.chat_template." + name, text);
      names.push_back(name);
    }
  }
  if (!names.empty()) w.add_string_array("tokenizer.chat_templates", names);
}

void write_tokenizer(GgufWriter& w, const GgufTokenizerSource& src) {
  const Tokenizer tok = Tokenizer::from_json(src.tokenizer_json, src.tokenizer_config_json);
  const Json j = parse(src.tokenizer_json, "tokenizer.json");
  const Json cfg = parse(src.tokenizer_config_json, "tokenizer_config.json");
  const Json& decoder = j.value("decoder", Json());
  const bool byte_level = decoder.is_object() && decoder.value("type", "") == "ByteLevel";
  const bool spm = !byte_level && j["model"].value("byte_fallback", false);
  if (!byte_level && !spm) {
    refuse("decoder",
           "neither byte-level (ByteLevel decoder) nor SentencePiece-style "
           "(byte_fallback): GGUF's gpt2 and llama vocabularies are those two");
  }
  const Vocab v = read_vocab(j, tok, spm);
  if (spm) {
    write_spm(w, j, v, tok);
  } else {
    write_gpt2(w, j, src.pre, v);
  }
  write_specials(w, tok, cfg, src);
  write_chat_templates(w, cfg);
}
}  // namespace

void add_gguf_tokenizer(GgufWriter& w, const GgufTokenizerSource& src) {
  try {
    write_tokenizer(w, src);
  } catch (const Json::exception& e) {  // a field of another shape than transformers writes
    fail(ErrorCode::kInvalidArgument, "add_gguf_tokenizer: ", e.what());
  }
}

std::vector<std::string> gguf_lossy_added_tokens(std::string_view tokenizer_json) {
  const Json j = parse(tokenizer_json, "tokenizer.json");
  const bool has_normalizer = !j.value("normalizer", Json()).is_null();
  std::vector<std::string> out;
  for (const Json& t : j.value("added_tokens", Json::array())) {
    const bool normalized = t.value("normalized", !t.value("special", false));
    if (t.value("lstrip", false) || t.value("rstrip", false) || t.value("single_word", false) ||
        (normalized && has_normalizer)) {
      out.push_back(t.at("content").get<std::string>());
    }
  }
  return out;
}

void add_tiny_gguf_tokenizer(GgufWriter& w, std::int64_t vocab_size) {
  const std::string json = make_tiny_tokenizer_json(vocab_size);
  const std::string cfg = make_tiny_tokenizer_config_json();
  add_gguf_tokenizer(w, {json, cfg, "smaug-bpe"});
}

}  // namespace detinfer::devtools

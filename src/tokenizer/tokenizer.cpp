#include "detinfer/tokenizer.h"

#include <filesystem>

#include "core/check.h"
#include "core/json_parse.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace detinfer {

using tokenizer::Json;

namespace {
const char kJsonName[] = "tokenizer.json";

// Real tokenizer.json files are under 40 MB and a few levels deep. The depth bound is what
// makes the recursive walks below safe (component builders, Sequence of Sequences, the
// copies and dump() of the hash): none of them can recurse deeper than kMaxJsonDepth.
constexpr core::JsonLimits kTokenizerLimits{/*max_depth=*/64,
                                            /*max_bytes=*/std::size_t{128} << 20,
                                            /*reject_duplicate_keys=*/true};

Json parse_json(std::string_view text, const char* name) {
  Json j = core::parse_json(text, kTokenizerLimits, ErrorCode::kCorrupt, name);
  if (!j.is_object()) fail(ErrorCode::kCorrupt, name, ": expected a JSON object");
  return j;
}

std::string read_file(const std::filesystem::path& p, const char* name) {
  return core::read_file_bounded(p.string(), kTokenizerLimits.max_bytes, name);
}

// "bos_token": "<s>" or {"content": "<s>", ...} (transformers' AddedToken form) or null.
std::string config_token(const Json& cfg, const char* key) {
  const auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  fail(ErrorCode::kCorrupt, "tokenizer_config.json: ", key,
       ": expected a string or {\"content\": ...}");
}

bool is_llama_class(const std::string& c) {
  for (const char* k : {"LlamaTokenizer", "LlamaTokenizerFast", "CodeLlamaTokenizer",
                        "CodeLlamaTokenizerFast", "GemmaTokenizer", "GemmaTokenizerFast"}) {
    if (c == k) return true;
  }
  return false;
}

void load_added_tokens(const Json& list, Tokenizer::Impl& impl) {
  // Runs after the normalizer is parsed: normalized tokens are matched in normalized form.
  if (list.is_null()) return;
  const std::string where = std::string(kJsonName) + ": added_tokens";
  if (!list.is_array()) fail(ErrorCode::kCorrupt, where, ": expected an array");
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    tokenizer::AddedToken t;
    const std::int64_t id = tokenizer::get_int(list[i], "id", at);
    if (id < 0 || id > 0x7ffffffe) fail(ErrorCode::kCorrupt, at, ".id: out of range: ", id);
    t.id = static_cast<std::int32_t>(id);
    t.content = tokenizer::get_string(list[i], "content", at);
    if (t.content.empty()) fail(ErrorCode::kCorrupt, at, ".content: empty");
    t.single_word = tokenizer::get_bool(list[i], "single_word", false, at);
    t.lstrip = tokenizer::get_bool(list[i], "lstrip", false, at);
    t.rstrip = tokenizer::get_bool(list[i], "rstrip", false, at);
    t.special = tokenizer::get_bool(list[i], "special", false, at);
    t.normalized = tokenizer::get_bool(list[i], "normalized", !t.special, at);
    if (impl.added_by_id.count(t.id) != 0) {
      fail(ErrorCode::kCorrupt, at, ": duplicate id ", t.id, " ('",
           impl.added.tokens()[impl.added_by_id[t.id]].content, "' and '", t.content, "')");
    }
    const std::string* in_vocab = impl.model->token(t.id);
    if (in_vocab != nullptr && *in_vocab != t.content) {
      fail(ErrorCode::kCorrupt, at, ": id ", t.id, " is '", t.content,
           "' but the model vocab has '", *in_vocab, "' there");
    }
    impl.added_by_id[t.id] = impl.added.tokens().size();
    impl.added_by_content[t.content] = t.id;
    std::string match = t.content;
    if (t.normalized && impl.normalizer) impl.normalizer->apply(match);
    impl.added.add(std::move(t), match);
  }
}

// Tokenizer::max_text_bytes_per_token: the most bytes of text one token can stand for when
// no stage shrinks or drops text, else 0.
std::size_t text_bytes_per_token(const Tokenizer::Impl& impl) {
  if (impl.normalizer) return 0;  // NFC composes, Replace and Strip may delete: no bound
  const tokenizer::PreTokenizer* pre = impl.pre_tokenizer.get();
  if (pre != nullptr && !pre->keeps_every_byte()) return 0;
  std::size_t most = impl.model->max_word_bytes_per_token(pre != nullptr && pre->byte_level());
  if (most == 0) return 0;
  for (const auto& t : impl.added.tokens()) {
    if (t.lstrip || t.rstrip) return 0;  // takes the whitespace beside it, of any length
    most = std::max({most, t.content.size(), t.match_text.size()});
  }
  return most;
}

void check_id(const Tokenizer::Impl& impl, std::int32_t id) {
  if (id < 0 || id >= impl.vocab_size) {
    fail(ErrorCode::kInvalidArgument, "token id ", id, " is outside [0, ", impl.vocab_size, ")");
  }
}
}  // namespace

const std::string* Tokenizer::Impl::token(std::int32_t id) const {
  const auto it = added_by_id.find(id);
  if (it != added_by_id.end()) return &added.tokens()[it->second].match_text;
  return model->token(id);
}

const std::string* Tokenizer::Impl::content(std::int32_t id) const {
  const auto it = added_by_id.find(id);
  if (it != added_by_id.end()) return &added.tokens()[it->second].content;
  return model->token(id);
}

bool Tokenizer::Impl::special(std::int32_t id) const {
  const auto it = added_by_id.find(id);
  return it != added_by_id.end() && added.tokens()[it->second].special;
}

void Tokenizer::Impl::encode_text(std::string_view text, bool at_start,
                                  std::vector<std::int32_t>& ids) const {
  tokenizer::Pieces p;
  p.buf.assign(text);
  p.spans.push_back({0, static_cast<std::uint32_t>(text.size()), at_start});
  if (pre_tokenizer) pre_tokenizer->apply(p);
  std::vector<std::int32_t> scratch;
  for (const auto& s : p.spans) model->encode_word(p.text(s), p.byte_level_pending, ids, scratch);
}

std::vector<std::int32_t> Tokenizer::Impl::encode(std::string_view text,
                                                  bool add_special_tokens) const {
  const std::size_t bad = tokenizer::find_invalid_utf8(text);
  if (bad != std::string_view::npos) {
    fail(ErrorCode::kInvalidArgument, "encode: text is not valid UTF-8 (byte ", bad, " of ",
         text.size(), ")");
  }
  if (text.size() > 0x7fffffffu) fail(ErrorCode::kInvalidArgument, "encode: text over 2 GiB");
  std::vector<std::int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<tokenizer::Segment> raw, norm;
  added.split(text, false, raw);
  for (const auto& seg : raw) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      continue;
    }
    std::string s(text.substr(seg.begin, seg.end - seg.begin));
    if (normalizer) normalizer->apply(s);
    norm.clear();
    added.split(s, true, norm);
    for (const auto& n : norm) {
      if (n.id >= 0) {
        ids.push_back(n.id);
      } else if (n.end > n.begin) {
        encode_text(std::string_view(s).substr(n.begin, n.end - n.begin),
                    seg.begin == 0 && n.begin == 0, ids);
      }
    }
  }
  if (add_special_tokens) post_processor.apply(ids);
  return ids;
}

std::string Tokenizer::Impl::decode(const std::vector<std::int32_t>& ids,
                                    bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const std::int32_t id : ids) {
    check_id(*this, id);
    const std::string* t = token(id);
    if (t == nullptr || (skip_special_tokens && special(id))) continue;
    tokens.push_back(*t);
  }
  if (decoder) {
    decoder->decode_chain(tokens);
    std::string out;
    for (const auto& t : tokens) out += t;
    return out;
  }
  std::string out;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (i > 0) out.push_back(' ');
    out += tokens[i];
  }
  return out;
}

Tokenizer Tokenizer::from_json(std::string_view tokenizer_json,
                               std::string_view tokenizer_config_json) {
  const Json j = parse_json(tokenizer_json, kJsonName);
  Json cfg = Json::object();
  if (!tokenizer_config_json.empty())
    cfg = parse_json(tokenizer_config_json, "tokenizer_config.json");

  auto impl = std::make_shared<Impl>();
  const std::string root = kJsonName;
  for (const char* k : {"truncation", "padding"}) {
    if (j.contains(k) && !j[k].is_null()) tokenizer::unsupported(root + ": " + k, k);
  }
  impl->model =
      std::make_unique<tokenizer::BpeModel>(tokenizer::require(j, "model", root), root + ": model");
  impl->normalizer =
      tokenizer::make_normalizer(j.value("normalizer", Json()), root + ": normalizer");
  load_added_tokens(j.contains("added_tokens") ? j["added_tokens"] : Json(), *impl);
  impl->pre_tokenizer =
      tokenizer::make_pre_tokenizer(j.value("pre_tokenizer", Json()), root + ": pre_tokenizer");
  impl->post_processor =
      tokenizer::PostProcessor(j.value("post_processor", Json()), root + ": post_processor");
  impl->decoder = tokenizer::make_decoder(j.value("decoder", Json()), root + ": decoder");
  impl->decoder_byte_fallback = tokenizer::has_byte_fallback(j.value("decoder", Json()));
  impl->max_text_bytes_per_token = text_bytes_per_token(*impl);

  impl->vocab_size = impl->model->id_bound();
  for (const auto& t : impl->added.tokens()) {
    impl->vocab_size = std::max<std::int64_t>(impl->vocab_size, std::int64_t{t.id} + 1);
  }
  if (impl->vocab_size == 0) fail(ErrorCode::kCorrupt, root, ": model.vocab is empty");

  // tokenizer_config.json: BOS/EOS, and transformers' Llama-family classes, which rebuild
  // the post-processor from add_bos_token / add_eos_token.
  Tokenizer tok(impl);
  const auto resolve = [&](const char* key) -> std::optional<std::int32_t> {
    const std::string name = config_token(cfg, key);
    if (name.empty()) return std::nullopt;
    const auto id = tok.token_to_id(name);
    if (!id)
      fail(ErrorCode::kCorrupt, "tokenizer_config.json: ", key, " '", name,
           "' is not in the vocabulary");
    return id;
  };
  impl->bos = resolve("bos_token");
  impl->eos = resolve("eos_token");
  const std::string cls = cfg.value("tokenizer_class", "");
  const bool add_bos = tokenizer::get_bool(cfg, "add_bos_token", true, "tokenizer_config.json");
  const bool add_eos = tokenizer::get_bool(cfg, "add_eos_token", false, "tokenizer_config.json");
  if (is_llama_class(cls)) {
    if ((add_bos && !impl->bos) || (add_eos && !impl->eos)) {
      fail(ErrorCode::kCorrupt,
           "tokenizer_config.json: add_bos_token/add_eos_token set without the token");
    }
    std::vector<std::int32_t> prefix, suffix;
    if (add_bos) prefix.push_back(*impl->bos);
    if (add_eos) suffix.push_back(*impl->eos);
    impl->post_processor = tokenizer::PostProcessor::from_ids(prefix, suffix);
  }
  std::vector<std::int32_t> probe;
  impl->post_processor.apply(probe);
  for (const std::int32_t id : probe) {
    if (id < 0 || id >= impl->vocab_size) {
      fail(ErrorCode::kCorrupt, root, ": post_processor adds id ", id, " outside the vocabulary");
    }
  }

  Json relevant = Json::object();
  for (const char* k : {"bos_token", "eos_token", "pad_token", "unk_token", "add_bos_token",
                        "add_eos_token", "tokenizer_class", "chat_template"}) {
    relevant[k] = cfg.value(k, Json());
  }
  Hasher h;
  h.update_field("detinfer.tokenizer.v1");
  h.update_field(j.dump());
  h.update_field(relevant.dump());
  impl->hash = h.digest128();
  return tok;
}

Tokenizer Tokenizer::load(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path json_path(path);
  if (fs::is_directory(json_path, ec)) json_path /= kJsonName;
  if (!fs::exists(json_path, ec))
    fail(ErrorCode::kNotFound, "tokenizer file not found: ", json_path.string());
  const fs::path cfg_path = json_path.parent_path() / "tokenizer_config.json";
  const std::string cfg =
      fs::exists(cfg_path, ec) ? read_file(cfg_path, "tokenizer_config.json") : std::string();
  try {
    return from_json(read_file(json_path, kJsonName), cfg);
  } catch (const Error& e) {
    throw Error(e.code(), json_path.string() + ": " + e.message(), e.field());
  }
}

Tokenizer::Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

std::vector<std::int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  return impl_->encode(text, add_special_tokens);
}

std::string Tokenizer::decode(const std::vector<std::int32_t>& ids,
                              bool skip_special_tokens) const {
  return impl_->decode(ids, skip_special_tokens);
}

std::int64_t Tokenizer::vocab_size() const { return impl_->vocab_size; }

std::size_t Tokenizer::max_text_bytes_per_token() const { return impl_->max_text_bytes_per_token; }

std::optional<std::int32_t> Tokenizer::token_to_id(std::string_view token) const {
  const auto it = impl_->added_by_content.find(std::string(token));
  if (it != impl_->added_by_content.end()) return it->second;
  const std::int32_t id = impl_->model->find(token);
  if (id >= 0) return id;
  return std::nullopt;
}

std::optional<std::string> Tokenizer::id_to_token(std::int32_t id) const {
  const std::string* t = impl_->content(id);
  if (t == nullptr) return std::nullopt;
  return *t;
}

std::optional<std::int32_t> Tokenizer::bos_token_id() const { return impl_->bos; }
std::optional<std::int32_t> Tokenizer::eos_token_id() const { return impl_->eos; }
bool Tokenizer::is_special(std::int32_t id) const { return impl_->special(id); }
const Hash128& Tokenizer::hash() const { return impl_->hash; }

// Streaming: Hugging Face's DecodeStream. The window holds the ids of the last emitted
// chunk (context for decoders that treat the first token specially) plus pending ids;
// text is released when the window's decode grows and does not end in U+FFFD.
struct Tokenizer::StreamDecoder::Impl {
  std::shared_ptr<const Tokenizer::Impl> tok;
  bool skip = false;
  std::vector<std::int32_t> ids;
  std::string prefix;
  std::size_t prefix_index = 0;
};

Tokenizer::StreamDecoder::StreamDecoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::StreamDecoder::~StreamDecoder() = default;
Tokenizer::StreamDecoder::StreamDecoder(StreamDecoder&&) noexcept = default;
Tokenizer::StreamDecoder& Tokenizer::StreamDecoder::operator=(StreamDecoder&&) noexcept = default;

std::string Tokenizer::StreamDecoder::push(std::int32_t id) {
  Impl& s = *impl_;
  check_id(*s.tok, id);
  s.ids.push_back(id);
  if (s.tok->decoder_byte_fallback) {
    // Only a token that reaches the decoder and is not a byte closes a run of bytes;
    // skipped special tokens and holes do not.
    const std::string* t = s.tok->token(id);
    if (t == nullptr || (s.skip && s.tok->special(id)) || tokenizer::is_byte_fallback_token(*t)) {
      return {};
    }
  }
  const std::string text = s.tok->decode(s.ids, s.skip);
  const bool ends_replacement =
      text.size() >= 3 && text.compare(text.size() - 3, 3, "\xEF\xBF\xBD") == 0;
  if (text.size() <= s.prefix.size() || ends_replacement) return {};
  DETINFER_INTERNAL_CHECK(text.compare(0, s.prefix.size(), s.prefix) == 0);
  std::string piece = text.substr(s.prefix.size());
  const std::size_t new_prefix_index = s.ids.size() - s.prefix_index;
  s.ids.erase(s.ids.begin(), s.ids.begin() + static_cast<std::ptrdiff_t>(s.prefix_index));
  s.prefix = s.tok->decode(s.ids, s.skip);
  s.prefix_index = new_prefix_index;
  return piece;
}

std::string Tokenizer::StreamDecoder::flush() {
  Impl& s = *impl_;
  const std::string text = s.tok->decode(s.ids, s.skip);
  std::string piece;
  if (text.size() > s.prefix.size()) {
    DETINFER_INTERNAL_CHECK(text.compare(0, s.prefix.size(), s.prefix) == 0);
    piece = text.substr(s.prefix.size());
  }
  s.ids.clear();
  s.prefix.clear();
  s.prefix_index = 0;
  return piece;
}

Tokenizer::StreamDecoder Tokenizer::stream_decoder(bool skip_special_tokens) const {
  auto impl = std::make_unique<StreamDecoder::Impl>();
  impl->tok = impl_;
  impl->skip = skip_special_tokens;
  return StreamDecoder(std::move(impl));
}

}  // namespace detinfer

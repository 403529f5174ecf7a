// Internals of the GGUF model reader shared by its files (gguf_config.cpp, gguf_families.cpp,
// gguf_moe.cpp, gguf_source.cpp): the metadata reader of one architecture and the
// mappings of the Gemma and mixture-of-experts families (docs/gguf.md, "Models").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "core/check.h"
#include "model/gguf_model.h"
#include "model/tensor_source.h"
#include "model/weight_loader.h"

namespace detinfer::model::gguf_internal {

inline constexpr std::int64_t kMaxDim = std::int64_t{1} << 20;  // as model_config.cpp

[[noreturn]] inline void bad(ErrorCode code, const std::string& where, const std::string& key,
                             const std::string& what) {
  throw Error(code, str_cat(where, ": GGUF metadata '", key, "' ", what), key);
}

// Reads the metadata of one architecture, naming `where` in every error.
class Meta {
 public:
  Meta(const GgufFile& f, std::string where, std::string arch)
      : f_(f), where_(std::move(where)), prefix_(std::move(arch) + ".") {}
  std::string key(const char* k) const { return prefix_ + k; }

  std::int64_t dim(const char* k, std::int64_t lo, std::int64_t hi) const {
    return check_range(k, guarded([&] { return f_.get_uint(key(k)); }), lo, hi);
  }
  std::int64_t dim_or(const char* k, std::int64_t lo, std::int64_t hi, std::int64_t def) const {
    const auto v = guarded([&] { return f_.find_uint(key(k)); });
    return v ? check_range(k, *v, lo, hi) : def;
  }
  double number(const char* k, double lo, double hi) const {
    return check_range(k, guarded([&] { return f_.get_float(key(k)); }), lo, hi);
  }
  std::optional<double> number_opt(const char* k, double lo, double hi) const {
    const auto v = guarded([&] { return f_.find_float(key(k)); });
    if (v) check_range(k, *v, lo, hi);
    return v;
  }
  std::optional<std::string> string_opt(const char* k) const {
    return guarded([&] { return f_.find_string(key(k)); });
  }
  std::optional<bool> bool_opt(const char* k) const {
    return guarded([&] { return f_.find_bool(key(k)); });
  }
  const GgufValue* value(const char* k) const { return f_.find(key(k)); }
  const std::string& where() const { return where_; }

  // Runs a GgufFile getter, prefixing its error with the file (code and field kept).
  template <typename F>
  auto guarded(F&& get) const -> decltype(get()) {
    try {
      return get();
    } catch (const Error& e) {
      throw Error(e.code(), where_ + ": " + e.message(), e.field());
    }
  }

 private:
  template <typename T>
  T check_range(const char* k, T v, T lo, T hi) const {
    if (!(v >= lo && v <= hi)) {
      bad(ErrorCode::kCorrupt, where_, key(k),
          str_cat("= ", v, " is outside [", lo, ", ", hi, "]"));
    }
    return v;
  }
  std::int64_t check_range(const char* k, std::uint64_t v, std::int64_t lo, std::int64_t hi) const {
    if (v > static_cast<std::uint64_t>(hi) || static_cast<std::int64_t>(v) < lo) {
      bad(ErrorCode::kCorrupt, where_, key(k),
          str_cat("= ", v, " is outside [", lo, ", ", hi, "]"));
    }
    return static_cast<std::int64_t>(v);
  }

  const GgufFile& f_;
  std::string where_;
  std::string prefix_;
};

// Gemma 2 / Gemma 3 (general.architecture gemma2 / gemma3): soft-caps, the attention scale,
// the sliding-window layers, the local RoPE base, q/k norms and the (1 + w) norms.
void read_gemma_metadata(const Meta& m, ModelConfig& c);

// Mixture of experts (qwen3moe, qwen2moe, llama with expert_count > 0 = Mixtral): the
// expert counts and widths, the top-k renormalization and, from the tensor directory, which
// layers are sparse (those with blk.N.ffn_gate_inp.weight).
void read_moe_metadata(const Meta& m, const GgufModel& g, ModelConfig& c);

// The GGUF name of a mixture-of-experts tensor (`rest` after "model.layers.N.") of `layer`:
// the router, the stacked experts (blk.N.ffn_{gate,up,down}_exps.weight) and Qwen2-MoE's
// shared expert; "" for another tensor.
std::string moe_tensor_name(const std::string& rest, const std::string& layer);

// `spec`'s tensor when it is an expert (kExpertGate/Up/Down) of a model of `num_experts`: a
// view of expert spec.expert's rows of the stacked 3-D tensor `stacked` (ggml dims [cols,
// rows, experts]; other dims are Error(kCorrupt) naming it), or the per-expert 2-D tensor of
// older Mixtral files (blk.N.ffn_gate.E.weight) when `stacked` is absent. False when `spec`
// is no expert or neither tensor is present.
bool expert_source(const GgufModel& g, const WeightSpec& spec, const std::string& stacked,
                   std::int64_t num_experts, SourceTensor& out);

// The tensor format of ggml type number `type` (float for F32, F16 and BF16).
TensorFormat ggml_format(std::uint32_t type);

// `out` set from the GGUF tensor `name` (its file, offset, bytes, shape in Hugging Face
// order, format); false when the model does not hold it.
bool source_tensor(const GgufModel& g, const std::string& name, SourceTensor& out);

}  // namespace detinfer::model::gguf_internal

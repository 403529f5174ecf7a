#include "session/numerics_identity.h"

#include "cache/result_cache.h"
#include "core/check.h"
#include "core/dtype.h"
#include "detinfer/version.h"
#include "kernels/quant.h"

namespace detinfer::session {

NumericsIdentity build_numerics_identity(const SessionOptions& options, const model::Model& model) {
  const model::DeviceInfo dev = model.device_info();
  NumericsIdentity id;
  id.mode = model.mode();
  id.spec_version = static_cast<std::uint32_t>(kNumericsSpecVersion);
  id.kv_dtype = options.kv_dtype;
  id.stored_weight_dtype = core::to_string(model.config().weight_dtype);
  // Quantized on load, or stored quantized (GGUF): the format(s) and the quantized spec
  // version (docs/numerics.md), so a run on quantized weights is keyed and recorded apart.
  const std::string stored_quant = model.stored_quant_formats();
  if (options.weights != "native") {
    id.weight_format = str_cat(options.weights, "/qspec", kernels::kQuantSpecVersion);
  } else if (!stored_quant.empty()) {
    id.weight_format = str_cat(stored_quant, "/qspec", kernels::kQuantSpecVersion);
  } else {
    id.weight_format = id.stored_weight_dtype;
  }
  id.device_class = dev.device;
  id.gpu_name = dev.name;
  id.gpu_compute_capability = dev.compute_capability;
  return id;
}

bool NumericsIdentity::device_matters() const {
  return device_class != "cpu" && mode != NumericsMode::kCanonical;
}

std::vector<std::pair<std::string, std::string>> NumericsIdentity::keyed_members() const {
  std::vector<std::pair<std::string, std::string>> out;
  // Non-canonical KV on a GPU depends on the GPU model: keyed apart by it.
  if (device_matters()) {
    out.emplace_back(
        "device", std::string(to_string(mode)) + "@" + gpu_name + " sm_" + gpu_compute_capability);
  }
  // Rounded KV is other numbers: never shared with another kv_dtype's.
  if (kv_dtype != KvDType::kF32) out.emplace_back("kv_dtype", to_string(kv_dtype));
  // Weights converted at load compute other numbers than the stored ones.
  if (weight_format != stored_weight_dtype) out.emplace_back("weight_format", weight_format);
  return out;
}

std::string prefix_salt(const NumericsIdentity& id, const std::string& cache_salt) {
  std::string salt = cache_salt;
  for (const auto& [name, value] : id.keyed_members()) {
    // The device piece keeps the form it had before the identity ("<mode>@<gpu> sm_<cc>"),
    // so existing disk and Redis entries keep their keys.
    salt += "\x1f" + (name == "device" ? value : name + "=" + value);
  }
  return salt;
}

Hash128 result_model_key(const NumericsIdentity& id, const Hash128& model_fingerprint) {
  const auto members = id.keyed_members();
  if (members.empty()) return model_fingerprint;  // the key of every baseline session
  Hasher h;
  h.update_hash(model_fingerprint);
  for (const auto& [name, value] : members) h.update_field(name).update_field(value);
  return h.digest128();
}

cache::PrefixNamespace prefix_namespace(const NumericsIdentity& id,
                                        const Hash128& model_fingerprint, std::int64_t block_size,
                                        std::int64_t block_bytes) {
  cache::PrefixNamespace ns;
  ns.model_fingerprint = model_fingerprint;
  ns.mode = id.mode;
  ns.spec_version = id.spec_version;
  ns.block_size = block_size;
  ns.block_bytes = block_bytes;
  return ns;
}

Hash128 identity_result_key(const NumericsIdentity& id, const Hash128& model_fingerprint,
                            const Hash128& tokenizer_hash, const std::vector<std::int32_t>& prompt,
                            std::string_view canonical_config) {
  return cache::result_cache_key(result_model_key(id, model_fingerprint), id.mode, id.spec_version,
                                 tokenizer_hash, prompt, canonical_config);
}

void fill_fingerprint(const NumericsIdentity& id, const std::string& gpu_driver,
                      RunFingerprint& fp) {
  fp.numerics.mode = to_string(id.mode);
  fp.numerics.spec_version = static_cast<int>(id.spec_version);
  fp.numerics.device = id.device_class;
  fp.numerics.kv_dtype = to_string(id.kv_dtype);
  fp.numerics.weight_format =
      id.weight_format == id.stored_weight_dtype ? std::string() : id.weight_format;
  fp.model.weight_dtype = id.stored_weight_dtype;
  if (id.device_class != "cpu") {
    fp.device.gpu = FingerprintGpu{id.gpu_name, id.gpu_compute_capability, gpu_driver};
  } else {
    fp.device.gpu.reset();
  }
}

}  // namespace detinfer::session

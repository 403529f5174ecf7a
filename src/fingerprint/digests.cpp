// Digest definitions of docs/fingerprint.md.
#include <cstring>

#include "core/check.h"
#include "detinfer/fingerprint.h"

namespace detinfer {

static_assert(sizeof(float) == 4, "fp32 logits");

namespace {
bool little_endian() {
  const std::uint32_t one = 1;
  unsigned char b;
  std::memcpy(&b, &one, 1);
  return b == 1;
}

void put_le64(unsigned char* out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<unsigned char>(v >> (8 * i));
}
}  // namespace

std::uint64_t logits_digest(const float* logits, std::size_t vocab_size) {
  // The digest is defined over little-endian bits; on the supported (little-endian)
  // hosts that is the memory as it is, hashed in one pass.
  if (!little_endian()) {
    fail(ErrorCode::kUnsupported, "logits_digest: big-endian hosts are not supported");
  }
  return xxh3_64(logits, vocab_size * sizeof(float));
}

std::uint64_t chain_digest(std::uint64_t prev, std::uint64_t step_digest) {
  unsigned char buf[16];
  put_le64(buf, prev);
  put_le64(buf + 8, step_digest);
  return xxh3_64(buf, sizeof buf);
}

std::uint64_t chain_digest(const std::vector<std::uint64_t>& step_digests) {
  std::uint64_t c = 0;
  for (std::uint64_t d : step_digests) c = chain_digest(c, d);
  return c;
}

std::uint64_t prompt_hash(const std::vector<std::int32_t>& prompt_tokens) {
  Hasher h;
  for (std::int32_t t : prompt_tokens) h.update_u32(static_cast<std::uint32_t>(t));
  return h.digest64();
}

const char* to_string(RecordLevel level) {
  switch (level) {
    case RecordLevel::kOff:
      return "off";
    case RecordLevel::kFinal:
      return "final";
    case RecordLevel::kSteps:
      return "steps";
    case RecordLevel::kLogits:
      return "logits";
  }
  return "unknown";
}

RecordLevel parse_record_level(const std::string& name) {
  for (RecordLevel l :
       {RecordLevel::kOff, RecordLevel::kFinal, RecordLevel::kSteps, RecordLevel::kLogits}) {
    if (name == to_string(l)) return l;
  }
  fail(ErrorCode::kInvalidArgument, "fingerprint record level '", name,
       "' is not one of off, final, steps, logits");
}

std::uint64_t FingerprintEnvironment::hash() const {
  Hasher h;
  h.update_field("detinfer.environment/1");
  h.update_field(os).update_field(glibc_version).update_field(libtorch_version);
  h.update_u64(env_vars.size());
  for (const auto& [name, value] : env_vars) h.update_field(name).update_field(value);
  return h.digest64();
}

void RunFingerprint::set_prompt(const std::vector<std::int32_t>& ids, bool store_tokens) {
  request.prompt_hash = prompt_hash(ids);
  request.prompt_length = static_cast<std::int64_t>(ids.size());
  if (store_tokens) {
    request.prompt_tokens = ids;
  } else {
    request.prompt_tokens.reset();
  }
}

RunFingerprint fingerprint_of(const RunFingerprint& base, const GenerationConfig& config,
                              const GenerationResult& result, bool store_prompt_tokens) {
  RunFingerprint fp = base;
  fp.set_prompt(result.prompt_tokens, store_prompt_tokens);
  fp.request.config = config;
  fp.request.config.seed.reset();
  fp.request.seed = result.seed;
  fp.level = RecordLevel::kSteps;
  fp.sequences.clear();
  for (const Sequence& s : result.sequences) {
    FingerprintSequence fs;
    fs.tokens = s.tokens;
    fs.finish_reason = s.finish_reason;
    fs.step_digests = s.step_digests;
    fs.chain_digest = s.digest;
    fp.sequences.push_back(std::move(fs));
  }
  fp.cache = result.cache;
  return fp;
}

}  // namespace detinfer

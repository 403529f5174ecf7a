// Keys of the KV-prefix cache. A block's key commits to everything that determines its
// bytes: the model, the numerics, the KV layout and every token before and in it.
//   root  = XXH3-128(model fingerprint | numerics mode | spec version | KV dtype |
//                    block size | salt)
//   key_i = XXH3-128(key_{i-1} | token ids of block i as little-endian u32), key_{-1} = root
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "detinfer/hash.h"
#include "detinfer/numerics.h"

namespace detinfer::cache {

// What makes two KV blocks of the same tokens differ.
struct PrefixNamespace {
  Hash128 model_fingerprint;  // Model::fingerprint()
  NumericsMode mode = NumericsMode::kCanonical;
  std::uint32_t spec_version = 1;  // numerics spec version
  std::string kv_dtype = "f32";    // KV cache element type
  std::int64_t block_size = 16;    // tokens per block, >= 1
  std::int64_t block_bytes = 0;    // payload of one block (KvCachePool::block_bytes())
};

// root: the fields above in order (u32 mode, u32 spec version, length-prefixed dtype, u64
// block size, length-prefixed salt; an empty salt is "no salt").
Hash128 prefix_root(const PrefixNamespace& ns, std::string_view salt = {});

// key_i from key_{i-1} and the block_size tokens of block i.
Hash128 prefix_next_key(const Hash128& previous, const std::int32_t* block_tokens,
                        std::int64_t block_size);

// Keys of every full block of tokens[0, count): count / block_size keys.
std::vector<Hash128> prefix_block_keys(const Hash128& root, const std::int32_t* tokens,
                                       std::size_t count, std::int64_t block_size);

}  // namespace detinfer::cache

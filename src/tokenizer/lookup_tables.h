// Open-addressing hash tables for the BPE hot path: token text -> id (looked up by
// string_view, no allocation) and (left id, right id) -> (rank, merged id).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "detinfer/hash.h"

namespace detinfer::tokenizer {

// Maps strings to ids; the strings themselves live in the caller's id -> text array.
class StringIdTable {
 public:
  // `texts[id]` is the text of id (ids with an empty text are not inserted).
  void build(const std::vector<std::string>* texts);
  // Inserts id (its text is (*texts)[id]); returns the id already holding that text, or -1.
  std::int32_t insert(std::int32_t id);
  std::int32_t find(std::string_view s) const;

 private:
  void grow();
  const std::vector<std::string>* texts_ = nullptr;
  std::vector<std::int32_t> slots_;  // -1 = empty
  std::size_t size_ = 0;
  std::size_t mask_ = 0;
};

struct MergeValue {
  std::int32_t rank;
  std::int32_t merged;
};

class PairTable {
 public:
  void reserve(std::size_t n);
  // Overwrites an existing entry, as Hugging Face's HashMap collect does for duplicates.
  void insert(std::int32_t a, std::int32_t b, MergeValue v);
  // nullptr when (a, b) is not a merge.
  const MergeValue* find(std::int32_t a, std::int32_t b) const {
    if (slots_.empty()) return nullptr;
    const std::uint64_t k = key(a, b);
    for (std::size_t i = mix(k) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == k) return &s.value;
      if (s.key == kEmpty) return nullptr;
    }
  }
  std::size_t size() const { return size_; }

 private:
  struct Slot {
    std::uint64_t key;
    MergeValue value;
  };
  static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};
  static std::uint64_t key(std::int32_t a, std::int32_t b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) |
           static_cast<std::uint32_t>(b);
  }
  static std::size_t mix(std::uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return static_cast<std::size_t>(k);
  }
  void rehash(std::size_t capacity);
  std::vector<Slot> slots_;
  std::size_t size_ = 0;
  std::size_t mask_ = 0;
};

}  // namespace detinfer::tokenizer

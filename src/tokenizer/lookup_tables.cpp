#include "tokenizer/lookup_tables.h"

namespace detinfer::tokenizer {

void StringIdTable::build(const std::vector<std::string>* texts) {
  texts_ = texts;
  size_ = 0;
  std::size_t cap = 16;
  while (cap < texts->size() * 2) cap <<= 1;
  slots_.assign(cap, -1);
  mask_ = cap - 1;
}

std::int32_t StringIdTable::insert(std::int32_t id) {
  if ((size_ + 1) * 2 > slots_.size()) grow();
  const std::string& s = (*texts_)[id];
  for (std::size_t i = xxh3_64(s) & mask_;; i = (i + 1) & mask_) {
    if (slots_[i] < 0) {
      slots_[i] = id;
      ++size_;
      return -1;
    }
    if ((*texts_)[slots_[i]] == s) return slots_[i];
  }
}

void StringIdTable::grow() {
  std::vector<std::int32_t> old = std::move(slots_);
  slots_.assign(old.empty() ? 16 : old.size() * 2, -1);
  mask_ = slots_.size() - 1;
  size_ = 0;
  for (const std::int32_t id : old) {
    if (id >= 0) insert(id);
  }
}

std::int32_t StringIdTable::find(std::string_view s) const {
  if (slots_.empty()) return -1;
  for (std::size_t i = xxh3_64(s.data(), s.size()) & mask_;; i = (i + 1) & mask_) {
    const std::int32_t id = slots_[i];
    if (id < 0) return -1;
    if ((*texts_)[id] == s) return id;
  }
}

void PairTable::reserve(std::size_t n) {
  std::size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  if (cap > slots_.size()) rehash(cap);
}

void PairTable::rehash(std::size_t capacity) {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(capacity, Slot{kEmpty, {0, 0}});
  mask_ = capacity - 1;
  size_ = 0;
  for (const Slot& s : old) {
    if (s.key != kEmpty) {
      insert(static_cast<std::int32_t>(s.key >> 32), static_cast<std::int32_t>(s.key & 0xffffffffu),
             s.value);
    }
  }
}

void PairTable::insert(std::int32_t a, std::int32_t b, MergeValue v) {
  if ((size_ + 1) * 2 > slots_.size()) rehash(slots_.empty() ? 16 : slots_.size() * 2);
  const std::uint64_t k = key(a, b);
  for (std::size_t i = mix(k) & mask_;; i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    if (s.key == k) {
      s.value = v;
      return;
    }
    if (s.key == kEmpty) {
      s = Slot{k, v};
      ++size_;
      return;
    }
  }
}

}  // namespace detinfer::tokenizer

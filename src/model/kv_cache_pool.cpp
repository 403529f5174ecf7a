#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "model/model.h"

namespace detinfer::model {

namespace {

// Host memory for pools of models that run on the CPU (shared, stateless).
std::shared_ptr<Backend> host_memory() {
  static const std::shared_ptr<Backend> host = make_cpu_backend(1);
  return host;
}

}  // namespace

KvCachePool::KvCachePool(const ModelConfig& config, std::int64_t block_size,
                         std::int64_t budget_bytes, std::shared_ptr<Backend> backend,
                         core::DType kv_dtype)
    : block_size_(block_size),
      capacity_(0),
      num_layers_(config.num_layers),
      num_kv_heads_(config.num_kv_heads),
      head_dim_(config.head_dim),
      kv_dtype_(kv_dtype) {
  if (kv_dtype != core::DType::kF32 && kv_dtype != core::DType::kBF16 &&
      kv_dtype != core::DType::kF16) {
    throw Error(
        ErrorCode::kInvalidArgument,
        str_cat("KV pool: kv_dtype ", static_cast<int>(kv_dtype), " is not f32, bf16 or f16"),
        "kv_dtype");
  }
  if (block_size < 1 || block_size > 4096) {
    fail(ErrorCode::kInvalidArgument, "KV block size ", block_size, " is outside [1, 4096]");
  }
  if (num_layers_ < 1 || num_kv_heads_ < 1 || head_dim_ < 1) {
    fail(ErrorCode::kInvalidArgument, "KV pool: model config has no layers or heads");
  }
  if (budget_bytes < block_bytes()) {
    fail(ErrorCode::kResourceExhausted, "KV budget of ", budget_bytes,
         " bytes is smaller than one block (", block_bytes(), " bytes)");
  }
  capacity_ = std::min<std::int64_t>(budget_bytes / block_bytes(), 0x7fffffff);
  backend_ = backend != nullptr ? std::move(backend) : host_memory();
  const auto bytes = static_cast<std::size_t>(capacity_ * block_size_ * kv_stride() * elem_bytes());
  for (std::int64_t l = 0; l < num_layers_; ++l) {
    k_.push_back(backend_->alloc(bytes, Backend::Touch::kGrowing));
    v_.push_back(backend_->alloc(bytes, Backend::Touch::kGrowing));
  }
  refcount_.assign(static_cast<std::size_t>(capacity_), 0);
  // Handed out lowest id first (pop from the back), so allocation order is reproducible.
  free_.reserve(static_cast<std::size_t>(capacity_));
  for (std::int64_t b = capacity_ - 1; b >= 0; --b) free_.push_back(static_cast<std::int32_t>(b));
}

std::int64_t KvCachePool::block_bytes() const {
  return num_layers_ * 2 * block_size_ * kv_stride() * elem_bytes();
}

std::int32_t KvCachePool::allocate() {
  if (free_.empty()) {
    fail(ErrorCode::kResourceExhausted, "KV cache pool exhausted (", capacity_, " blocks of ",
         block_size_, " tokens)");
  }
  const std::int32_t b = free_.back();
  free_.pop_back();
  refcount_[static_cast<std::size_t>(b)] = 1;
  return b;
}

void KvCachePool::retain(std::int32_t block) {
  if (refcount(block) <= 0)
    fail(ErrorCode::kInvalidArgument, "KV block ", block, " is not allocated");
  ++refcount_[static_cast<std::size_t>(block)];
}

void KvCachePool::release(std::int32_t block) {
  if (refcount(block) <= 0)
    fail(ErrorCode::kInvalidArgument, "KV block ", block, " is not allocated");
  if (--refcount_[static_cast<std::size_t>(block)] == 0) free_.push_back(block);
}

std::int32_t KvCachePool::refcount(std::int32_t block) const {
  if (block < 0 || block >= capacity_) {
    fail(ErrorCode::kInvalidArgument, "KV block id ", block, " is outside [0, ", capacity_, ")");
  }
  return refcount_[static_cast<std::size_t>(block)];
}

void* KvCachePool::k_pool(std::int64_t layer) {
  return k_.at(static_cast<std::size_t>(layer)).data();
}
void* KvCachePool::v_pool(std::int64_t layer) {
  return v_.at(static_cast<std::size_t>(layer)).data();
}
const void* KvCachePool::k_pool(std::int64_t layer) const {
  return k_.at(static_cast<std::size_t>(layer)).data();
}
const void* KvCachePool::v_pool(std::int64_t layer) const {
  return v_.at(static_cast<std::size_t>(layer)).data();
}

void KvCachePool::export_block(std::int32_t block, void* dst) const {
  refcount(block);  // range check
  const std::size_t n = static_cast<std::size_t>(block_size_ * kv_stride() * elem_bytes());
  const std::size_t off = static_cast<std::size_t>(block) * n;
  auto* out = static_cast<unsigned char*>(dst);
  for (std::size_t l = 0; l < k_.size(); ++l) {
    backend_->download(out, k_[l].as<unsigned char>() + off, n);
    backend_->download(out + n, v_[l].as<unsigned char>() + off, n);
    out += 2 * n;
  }
}

void KvCachePool::import_block(std::int32_t block, const void* src) {
  refcount(block);
  const std::size_t n = static_cast<std::size_t>(block_size_ * kv_stride() * elem_bytes());
  const std::size_t off = static_cast<std::size_t>(block) * n;
  const auto* in = static_cast<const unsigned char*>(src);
  for (std::size_t l = 0; l < k_.size(); ++l) {
    backend_->upload(k_[l].as<unsigned char>() + off, in, n);
    backend_->upload(v_[l].as<unsigned char>() + off, in + n, n);
    in += 2 * n;
  }
}

}  // namespace detinfer::model

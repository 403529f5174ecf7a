#include "devtools/gguf_writer.h"

#include <cstring>
#include <fstream>

#include "core/check.h"

namespace detinfer::devtools {

using model::GgufType;

namespace {

template <typename T>
void put(std::vector<std::uint8_t>& out, T v) {
  std::uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.insert(out.end(), b, b + sizeof(T));
}

}  // namespace

void put_u32(std::vector<std::uint8_t>& out, std::uint32_t v) { put(out, v); }
void put_u64(std::vector<std::uint8_t>& out, std::uint64_t v) { put(out, v); }
void put_gguf_string(std::vector<std::uint8_t>& out, const std::string& s) {
  put_u64(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

GgufWriter::GgufWriter(std::uint32_t version, std::uint32_t alignment)
    : version_(version), alignment_(alignment) {
  if (alignment != 32) add_u32("general.alignment", alignment);
}

void GgufWriter::add_raw(const std::string& key, GgufType type,
                         const std::vector<std::uint8_t>& v) {
  put_gguf_string(kv_, key);
  put_u32(kv_, static_cast<std::uint32_t>(type));
  kv_.insert(kv_.end(), v.begin(), v.end());
  ++kv_count_;
}

void GgufWriter::add_u8(const std::string& key, std::uint8_t v) {
  add_raw(key, GgufType::kU8, {v});
}

void GgufWriter::add_u32(const std::string& key, std::uint32_t v) {
  std::vector<std::uint8_t> b;
  put(b, v);
  add_raw(key, GgufType::kU32, b);
}

void GgufWriter::add_i32(const std::string& key, std::int32_t v) {
  std::vector<std::uint8_t> b;
  put(b, v);
  add_raw(key, GgufType::kI32, b);
}

void GgufWriter::add_u64(const std::string& key, std::uint64_t v) {
  std::vector<std::uint8_t> b;
  put(b, v);
  add_raw(key, GgufType::kU64, b);
}

void GgufWriter::add_f32(const std::string& key, float v) {
  std::vector<std::uint8_t> b;
  put(b, v);
  add_raw(key, GgufType::kF32, b);
}

void GgufWriter::add_f64(const std::string& key, double v) {
  std::vector<std::uint8_t> b;
  put(b, v);
  add_raw(key, GgufType::kF64, b);
}

void GgufWriter::add_bool(const std::string& key, bool v) {
  add_raw(key, GgufType::kBool, {static_cast<std::uint8_t>(v ? 1 : 0)});
}

void GgufWriter::add_string(const std::string& key, const std::string& v) {
  std::vector<std::uint8_t> b;
  put_gguf_string(b, v);
  add_raw(key, GgufType::kString, b);
}

void GgufWriter::add_string_array(const std::string& key, const std::vector<std::string>& v) {
  std::vector<std::uint8_t> b;
  put_u32(b, static_cast<std::uint32_t>(GgufType::kString));
  put_u64(b, v.size());
  for (const std::string& s : v) put_gguf_string(b, s);
  add_raw(key, GgufType::kArray, b);
}

void GgufWriter::add_f32_array(const std::string& key, const std::vector<float>& v) {
  std::vector<std::uint8_t> b;
  put_u32(b, static_cast<std::uint32_t>(GgufType::kF32));
  put_u64(b, v.size());
  for (float x : v) put(b, x);
  add_raw(key, GgufType::kArray, b);
}

void GgufWriter::add_i32_array(const std::string& key, const std::vector<std::int32_t>& v) {
  std::vector<std::uint8_t> b;
  put_u32(b, static_cast<std::uint32_t>(GgufType::kI32));
  put_u64(b, v.size());
  for (std::int32_t x : v) put(b, x);
  add_raw(key, GgufType::kArray, b);
}

void GgufWriter::add_bool_array(const std::string& key, const std::vector<bool>& v) {
  std::vector<std::uint8_t> b;
  put_u32(b, static_cast<std::uint32_t>(GgufType::kBool));
  put_u64(b, v.size());
  for (const bool x : v) b.push_back(x ? 1 : 0);
  add_raw(key, GgufType::kArray, b);
}

void GgufWriter::add_tensor(const std::string& name, const std::vector<std::uint64_t>& dims,
                            std::uint32_t type, std::vector<std::uint8_t> data) {
  tensors_.push_back({name, dims, type, std::move(data)});
}

std::vector<std::uint8_t> GgufWriter::bytes() const {
  std::vector<std::uint8_t> out;
  put_u32(out, 0x46554747u);
  put_u32(out, version_);
  put_u64(out, tensors_.size());
  put_u64(out, kv_count_);
  out.insert(out.end(), kv_.begin(), kv_.end());
  const auto align = [&](std::uint64_t n) {
    return (n + alignment_ - 1) / alignment_ * alignment_;
  };
  std::uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    put_gguf_string(out, t.name);
    put_u32(out, static_cast<std::uint32_t>(t.dims.size()));
    for (std::uint64_t d : t.dims) put_u64(out, d);
    put_u32(out, t.type);
    put_u64(out, offset);
    offset = align(offset + t.data.size());
  }
  out.resize(align(out.size()), 0);
  for (const Tensor& t : tensors_) {
    out.insert(out.end(), t.data.begin(), t.data.end());
    out.resize(align(out.size()), 0);
  }
  return out;
}

void GgufWriter::write(const std::string& path) const {
  const std::vector<std::uint8_t> b = bytes();
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  if (!f) fail(ErrorCode::kInvalidArgument, "cannot write GGUF file ", path);
}

}  // namespace detinfer::devtools

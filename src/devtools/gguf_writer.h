// Writes GGUF files (format version 3 by default; docs/gguf.md): the metadata key/value
// pairs and the tensors, each tensor's data aligned to general.alignment. Used by the tests
// (well-formed files and, byte by byte, hostile ones) and by the tiny-model tools.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/gguf.h"

namespace detinfer::devtools {

class GgufWriter {
 public:
  explicit GgufWriter(std::uint32_t version = 3, std::uint32_t alignment = 32);

  void add_u8(const std::string& key, std::uint8_t v);
  void add_u32(const std::string& key, std::uint32_t v);
  void add_i32(const std::string& key, std::int32_t v);
  void add_u64(const std::string& key, std::uint64_t v);
  void add_f32(const std::string& key, float v);
  void add_f64(const std::string& key, double v);
  void add_bool(const std::string& key, bool v);
  void add_string(const std::string& key, const std::string& v);
  void add_string_array(const std::string& key, const std::vector<std::string>& v);
  void add_f32_array(const std::string& key, const std::vector<float>& v);
  void add_i32_array(const std::string& key, const std::vector<std::int32_t>& v);
  void add_bool_array(const std::string& key, const std::vector<bool>& v);
  // A value given as its type and its encoded bytes (for tests of unusual encodings).
  void add_raw(const std::string& key, model::GgufType type, const std::vector<std::uint8_t>& v);

  // A tensor of ggml type `type` with `dims` in GGUF order (dims[0] = row length) and its
  // encoded bytes (the block layout of the type; the writer does not check them).
  void add_tensor(const std::string& name, const std::vector<std::uint64_t>& dims,
                  std::uint32_t type, std::vector<std::uint8_t> data);

  // The whole file.
  std::vector<std::uint8_t> bytes() const;
  // Writes bytes() to `path` (Error(kInvalidArgument) when it cannot be written).
  void write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<std::uint64_t> dims;
    std::uint32_t type;
    std::vector<std::uint8_t> data;
  };
  std::uint32_t version_;
  std::uint32_t alignment_;
  std::uint64_t kv_count_ = 0;
  std::vector<std::uint8_t> kv_;
  std::vector<Tensor> tensors_;
};

// Little-endian encoding helpers (the writer's and the hostile-file tests').
void put_u32(std::vector<std::uint8_t>& out, std::uint32_t v);
void put_u64(std::vector<std::uint8_t>& out, std::uint64_t v);
void put_gguf_string(std::vector<std::uint8_t>& out, const std::string& s);

}  // namespace detinfer::devtools

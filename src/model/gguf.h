// Parser and validator for GGUF files (format versions 2 and 3; docs/gguf.md): the header,
// the metadata key/value pairs and the tensor directory. A pure function of the bytes (no
// I/O), so it is also the libFuzzer target (tools/fuzz_gguf). Callers pass the whole file,
// usually memory-mapped (model/mapped_file.h); tensor data stays in the mapping.
//
// Every count, length, offset and alignment is checked against the bytes that are really
// there before anything is allocated or read: a hostile file is an Error(kCorrupt) naming
// the file and what is wrong, never a crash or an allocation larger than the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace detinfer::model {

// Metadata value types, with the file's numbering.
enum class GgufType : std::uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

const char* to_string(GgufType t);  // "u32", "string", "array", ...

// ggml tensor element types that GGUF files hold, with the file's numbering. detinfer knows
// the block layout of each listed type; the numbers in between (IQ formats, ternary types,
// integer tensors) are other types that GGUF files may carry.
enum class GgmlType : std::uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kBF16 = 30,
};

// The block layout of a tensor type: `block_elements` values are stored in `block_bytes`
// bytes. `name` is ggml's spelling ("Q4_K", "BF16", ...).
struct GgmlTypeInfo {
  const char* name = "";
  std::uint32_t block_elements = 0;
  std::uint32_t block_bytes = 0;
};

// The layout of type number `type`, for every type a GGUF tensor may have (including the
// ones detinfer does not compute with, so that their sizes can still be checked); nullopt
// for a number that is no ggml type at all.
std::optional<GgmlTypeInfo> ggml_type_info(std::uint32_t type);
// ggml's name of type number `type`, or "type <n>" for an unknown number.
std::string ggml_type_name(std::uint32_t type);

// One metadata value. Scalars: integers in `u` (unsigned types, bool) or `i` (signed
// types), floats in `f` (exact widening of f32). Strings in `s` (valid UTF-8). Arrays:
// `element` is the element type and exactly one of the vectors holds the elements
// (strings; unsigned integers and bools; signed integers; floats; nested arrays).
struct GgufValue {
  GgufType type = GgufType::kU8;
  std::uint64_t u = 0;
  std::int64_t i = 0;
  double f = 0.0;
  std::string s;
  GgufType element = GgufType::kU8;
  std::vector<std::string> strings;
  std::vector<std::uint64_t> uints;
  std::vector<std::int64_t> ints;
  std::vector<double> floats;
  std::vector<GgufValue> arrays;

  bool is_integer() const;
  bool is_float() const { return type == GgufType::kF32 || type == GgufType::kF64; }
  std::size_t array_size() const;
};

// One entry of the tensor directory. `dims` in GGUF (ggml) order: dims[0] varies fastest
// (the row length of a matrix). `offset` is relative to the data section.
struct GgufTensor {
  std::string name;
  std::uint32_t type = 0;  // a GgmlType number
  std::vector<std::uint64_t> dims;
  std::uint64_t elements = 0;
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
};

// Bounds on what a well-formed file may hold; past them a file is kCorrupt. The defaults
// are far above every published model (a 150k-token vocabulary's arrays, ~1000 tensors).
struct GgufLimits {
  std::uint64_t max_metadata = 1u << 16;       // key/value pairs
  std::uint64_t max_tensors = 1u << 20;        // tensor directory entries
  std::uint64_t max_string_bytes = 64u << 20;  // one string (chat templates included)
  std::uint64_t max_key_bytes = 1u << 16;      // one key or tensor name
  std::uint32_t max_array_depth = 4;           // arrays of arrays ...
  std::uint64_t max_alignment = 1u << 20;      // general.alignment
};

struct GgufFile {
  std::uint32_t version = 0;
  std::uint64_t alignment = 32;   // general.alignment, or GGUF's default 32
  std::uint64_t data_offset = 0;  // where the data section starts in the file
  std::uint64_t data_size = 0;    // bytes of the data section (to the end of the file)
  std::map<std::string, GgufValue> metadata;
  std::vector<GgufTensor> tensors;  // in file order

  const GgufValue* find(const std::string& key) const;
  const GgufTensor* find_tensor(const std::string& name) const;

  // Typed getters. A missing key is Error(kNotFound), a value of another type kCorrupt;
  // both name the key. get_uint accepts any integer type with a non-negative value,
  // get_float f32/f64 (and integers, converted exactly when they fit in a double).
  std::uint64_t get_uint(const std::string& key) const;
  std::int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  const std::string& get_string(const std::string& key) const;
  // The nullopt-when-missing forms (a present value of the wrong type is still kCorrupt).
  std::optional<std::uint64_t> find_uint(const std::string& key) const;
  std::optional<double> find_float(const std::string& key) const;
  std::optional<bool> find_bool(const std::string& key) const;
  std::optional<std::string> find_string(const std::string& key) const;
  // An array value whose elements have type `element` (kCorrupt naming the key otherwise).
  const GgufValue& get_array(const std::string& key, GgufType element) const;

 private:
  std::map<std::string, std::size_t> tensor_index_;
  friend GgufFile parse_gguf(const std::uint8_t*, std::size_t, const std::string&,
                             const GgufLimits&);
};

// Parses and validates a whole GGUF file held in memory: magic, version (2 or 3; version 1
// and big-endian files are kUnsupported), every key (valid UTF-8, unique), every value
// (type, string length, array count against the bytes left), general.alignment (a power
// of two), the tensor directory (unique names, 1..4 dims each > 0, no element-count
// overflow, a known type whose block divides the row length, offsets aligned and inside
// the file, no two tensors overlapping). Throws detinfer::Error naming `file`.
GgufFile parse_gguf(const std::uint8_t* data, std::size_t size, const std::string& file,
                    const GgufLimits& limits = {});

}  // namespace detinfer::model

#include "model/gguf.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string_view>

#include "core/check.h"
#include "tokenizer/utf8.h"

namespace detinfer::model {
namespace {

constexpr std::uint32_t kMagic = 0x46554747u;  // "GGUF" read as little-endian u32

struct TypeRow {
  std::uint32_t number;
  GgmlTypeInfo info;
};

// Every ggml type number a GGUF file may carry, with its block layout (ggml's type traits).
// Numbers not listed (4, 5, 31..33, 36..38) were removed from ggml and are invalid.
constexpr TypeRow kTypes[] = {
    {0, {"F32", 1, 4}},         {1, {"F16", 1, 2}},         {2, {"Q4_0", 32, 18}},
    {3, {"Q4_1", 32, 20}},      {6, {"Q5_0", 32, 22}},      {7, {"Q5_1", 32, 24}},
    {8, {"Q8_0", 32, 34}},      {9, {"Q8_1", 32, 36}},      {10, {"Q2_K", 256, 84}},
    {11, {"Q3_K", 256, 110}},   {12, {"Q4_K", 256, 144}},   {13, {"Q5_K", 256, 176}},
    {14, {"Q6_K", 256, 210}},   {15, {"Q8_K", 256, 292}},   {16, {"IQ2_XXS", 256, 66}},
    {17, {"IQ2_XS", 256, 74}},  {18, {"IQ3_XXS", 256, 98}}, {19, {"IQ1_S", 256, 50}},
    {20, {"IQ4_NL", 32, 18}},   {21, {"IQ3_S", 256, 110}},  {22, {"IQ2_S", 256, 82}},
    {23, {"IQ4_XS", 256, 136}}, {24, {"I8", 1, 1}},         {25, {"I16", 1, 2}},
    {26, {"I32", 1, 4}},        {27, {"I64", 1, 8}},        {28, {"F64", 1, 8}},
    {29, {"IQ1_M", 256, 56}},   {30, {"BF16", 1, 2}},       {34, {"TQ1_0", 256, 54}},
    {35, {"TQ2_0", 256, 66}},   {39, {"MXFP4", 32, 17}},
};

// Reads the file front to back; every read checks the bytes left first.
class Cursor {
 public:
  Cursor(const std::uint8_t* data, std::size_t size, const std::string& file)
      : data_(data), size_(size), file_(file) {}

  [[noreturn]] void corrupt(const std::string& what) const {
    fail(ErrorCode::kCorrupt, "GGUF file ", file_, ": ", what, " (at byte ", pos_, ")");
  }
  [[noreturn]] void unsupported(const std::string& what) const {
    fail(ErrorCode::kUnsupported, "GGUF file ", file_, ": ", what);
  }
  std::uint64_t left() const { return size_ - pos_; }
  std::size_t pos() const { return pos_; }

  void need(std::uint64_t n, const char* what) const {
    if (n > left())
      corrupt(str_cat("truncated: ", what, " needs ", n, " bytes, ", left(), " left"));
  }
  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_,
                sizeof(T));  // GGUF is little-endian, like every host we build for
    pos_ += sizeof(T);
    return v;
  }
  // A GGUF string: u64 length, then that many bytes of UTF-8 (no terminator).
  std::string read_string(const char* what, std::uint64_t max_bytes) {
    const auto n = read<std::uint64_t>(what);
    if (n > max_bytes) corrupt(str_cat(what, " is ", n, " bytes long (limit ", max_bytes, ")"));
    need(n, what);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    if (tokenizer::find_invalid_utf8(s) != std::string::npos) {
      corrupt(str_cat(what, " is not valid UTF-8"));
    }
    return s;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
  const std::string& file_;
};

// The smallest encoding of one element of type t (to bound an array count by the bytes left).
std::uint64_t min_element_bytes(GgufType t) {
  switch (t) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kBool:
      return 1;
    case GgufType::kU16:
    case GgufType::kI16:
      return 2;
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kF32:
      return 4;
    case GgufType::kU64:
    case GgufType::kI64:
    case GgufType::kF64:
    case GgufType::kString:
      return 8;
    case GgufType::kArray:
      return 12;  // element type + count
  }
  return 1;
}

bool valid_type(std::uint32_t t) { return t <= static_cast<std::uint32_t>(GgufType::kF64); }

class Parser {
 public:
  Parser(Cursor& c, const GgufLimits& limits) : c_(c), limits_(limits) {}

  GgufValue value(GgufType type, const std::string& key, std::uint32_t depth) {
    GgufValue v;
    v.type = type;
    switch (type) {
      case GgufType::kU8:
        v.u = c_.read<std::uint8_t>(key.c_str());
        break;
      case GgufType::kI8:
        v.i = c_.read<std::int8_t>(key.c_str());
        break;
      case GgufType::kU16:
        v.u = c_.read<std::uint16_t>(key.c_str());
        break;
      case GgufType::kI16:
        v.i = c_.read<std::int16_t>(key.c_str());
        break;
      case GgufType::kU32:
        v.u = c_.read<std::uint32_t>(key.c_str());
        break;
      case GgufType::kI32:
        v.i = c_.read<std::int32_t>(key.c_str());
        break;
      case GgufType::kU64:
        v.u = c_.read<std::uint64_t>(key.c_str());
        break;
      case GgufType::kI64:
        v.i = c_.read<std::int64_t>(key.c_str());
        break;
      case GgufType::kF32:
        v.f = c_.read<float>(key.c_str());
        break;
      case GgufType::kF64:
        v.f = c_.read<double>(key.c_str());
        break;
      case GgufType::kBool: {
        const auto b = c_.read<std::uint8_t>(key.c_str());
        if (b > 1) c_.corrupt(str_cat("metadata '", key, "': bool value ", unsigned(b)));
        v.u = b;
        break;
      }
      case GgufType::kString:
        v.s = c_.read_string(key.c_str(), limits_.max_string_bytes);
        break;
      case GgufType::kArray:
        array(v, key, depth);
        break;
    }
    return v;
  }

 private:
  void array(GgufValue& v, const std::string& key, std::uint32_t depth) {
    if (depth >= limits_.max_array_depth) {
      c_.corrupt(
          str_cat("metadata '", key, "': arrays nested deeper than ", limits_.max_array_depth));
    }
    const auto et = c_.read<std::uint32_t>("array element type");
    if (!valid_type(et)) c_.corrupt(str_cat("metadata '", key, "': array element type ", et));
    v.element = static_cast<GgufType>(et);
    const auto n = c_.read<std::uint64_t>("array length");
    if (n > c_.left() / min_element_bytes(v.element)) {
      c_.corrupt(str_cat("metadata '", key, "': array of ", n, " ", to_string(v.element),
                         " values cannot fit in the ", c_.left(), " bytes left"));
    }
    const auto count = static_cast<std::size_t>(n);
    for (std::size_t k = 0; k < count; ++k) {
      GgufValue e = value(v.element, key, depth + 1);
      switch (v.element) {
        case GgufType::kString:
          v.strings.push_back(std::move(e.s));
          break;
        case GgufType::kArray:
          v.arrays.push_back(std::move(e));
          break;
        case GgufType::kF32:
        case GgufType::kF64:
          v.floats.push_back(e.f);
          break;
        case GgufType::kI8:
        case GgufType::kI16:
        case GgufType::kI32:
        case GgufType::kI64:
          v.ints.push_back(e.i);
          break;
        default:
          v.uints.push_back(e.u);
          break;
      }
    }
  }

  Cursor& c_;
  const GgufLimits& limits_;
};

std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b, Cursor& c, const std::string& what) {
  if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a) c.corrupt(what + " overflows");
  return a * b;
}

GgufTensor read_tensor_info(Cursor& c, const GgufLimits& limits) {
  GgufTensor t;
  t.name = c.read_string("tensor name", limits.max_key_bytes);
  if (t.name.empty()) c.corrupt("a tensor has an empty name");
  const auto n_dims = c.read<std::uint32_t>("tensor dimension count");
  if (n_dims < 1 || n_dims > 4) {
    c.corrupt(str_cat("tensor '", t.name, "' has ", n_dims, " dimensions (1 to 4 allowed)"));
  }
  t.elements = 1;
  for (std::uint32_t d = 0; d < n_dims; ++d) {
    const auto n = c.read<std::uint64_t>("tensor dimension");
    if (n == 0) c.corrupt(str_cat("tensor '", t.name, "' has a dimension of 0"));
    t.elements = checked_mul(t.elements, n, c, "tensor '" + t.name + "' element count");
    t.dims.push_back(n);
  }
  t.type = c.read<std::uint32_t>("tensor type");
  const auto info = ggml_type_info(t.type);
  if (!info) c.corrupt(str_cat("tensor '", t.name, "' has unknown type number ", t.type));
  if (t.dims[0] % info->block_elements != 0) {
    c.corrupt(str_cat("tensor '", t.name, "' of type ", info->name, " has rows of ", t.dims[0],
                      " values, not a multiple of its block of ", info->block_elements));
  }
  t.bytes = checked_mul(t.elements / info->block_elements, info->block_bytes, c,
                        "tensor '" + t.name + "' byte size");
  t.offset = c.read<std::uint64_t>("tensor offset");
  return t;
}

// general.alignment: a u32 power of two (GGUF's default is 32).
std::uint64_t read_alignment(const GgufFile& f, Cursor& c, const GgufLimits& limits) {
  const GgufValue* v = f.find("general.alignment");
  if (v == nullptr) return 32;
  if (v->type != GgufType::kU32) c.corrupt("general.alignment is not a u32");
  if (v->u == 0 || (v->u & (v->u - 1)) != 0 || v->u > limits.max_alignment) {
    c.corrupt(
        str_cat("general.alignment ", v->u, " is not a power of two up to ", limits.max_alignment));
  }
  return v->u;
}

void check_tensor_ranges(GgufFile& f, Cursor& c) {
  std::vector<std::size_t> order(f.tensors.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  for (const GgufTensor& t : f.tensors) {
    if (t.offset % f.alignment != 0) {
      c.corrupt(str_cat("tensor '", t.name, "' starts at data offset ", t.offset,
                        ", not a multiple of the alignment ", f.alignment));
    }
    if (t.offset > f.data_size || t.bytes > f.data_size - t.offset) {
      c.corrupt(str_cat("tensor '", t.name, "' (", t.bytes, " bytes at data offset ", t.offset,
                        ") ends past the end of the file (data section: ", f.data_size, " bytes)"));
    }
  }
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return f.tensors[a].offset < f.tensors[b].offset;
  });
  for (std::size_t k = 1; k < order.size(); ++k) {
    const GgufTensor& prev = f.tensors[order[k - 1]];
    const GgufTensor& cur = f.tensors[order[k]];
    if (cur.offset < prev.offset + prev.bytes) {
      c.corrupt(str_cat("tensors '", prev.name, "' and '", cur.name, "' overlap"));
    }
  }
}

void read_header(Cursor& c, GgufFile& f, std::uint64_t* n_tensors, std::uint64_t* n_kv,
                 const GgufLimits& limits) {
  if (c.read<std::uint32_t>("magic") != kMagic) c.corrupt("not a GGUF file (bad magic)");
  f.version = c.read<std::uint32_t>("version");
  if (f.version == 1) {
    c.unsupported("format version 1 (32-bit counts) is not supported; convert the file again");
  }
  if ((f.version & 0xffffu) == 0 && f.version != 0) {
    c.unsupported(str_cat("the file is big-endian (version field ", f.version,
                          "); only little-endian GGUF files are supported"));
  }
  if (f.version != 2 && f.version != 3) {
    c.unsupported(str_cat("format version ", f.version, " is not supported (2 and 3 are)"));
  }
  *n_tensors = c.read<std::uint64_t>("tensor count");
  *n_kv = c.read<std::uint64_t>("metadata count");
  if (*n_tensors > limits.max_tensors)
    c.corrupt(str_cat(*n_tensors, " tensors (limit ", limits.max_tensors, ")"));
  if (*n_kv > limits.max_metadata)
    c.corrupt(str_cat(*n_kv, " metadata pairs (limit ", limits.max_metadata, ")"));
}

}  // namespace

const char* to_string(GgufType t) {
  static const char* const kNames[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                       "bool", "string", "array", "u64", "i64", "f64"};
  const auto i = static_cast<std::uint32_t>(t);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "unknown";
}

std::optional<GgmlTypeInfo> ggml_type_info(std::uint32_t type) {
  for (const TypeRow& r : kTypes) {
    if (r.number == type) return r.info;
  }
  return std::nullopt;
}

std::string ggml_type_name(std::uint32_t type) {
  const auto info = ggml_type_info(type);
  return info ? std::string(info->name) : str_cat("type ", type);
}

GgufFile parse_gguf(const std::uint8_t* data, std::size_t size, const std::string& file,
                    const GgufLimits& limits) {
  Cursor c(data, size, file);
  GgufFile f;
  std::uint64_t n_tensors = 0, n_kv = 0;
  read_header(c, f, &n_tensors, &n_kv, limits);
  Parser p(c, limits);
  for (std::uint64_t k = 0; k < n_kv; ++k) {
    std::string key = c.read_string("metadata key", limits.max_key_bytes);
    if (key.empty()) c.corrupt("a metadata key is empty");
    const auto type = c.read<std::uint32_t>("metadata value type");
    if (!valid_type(type)) c.corrupt(str_cat("metadata '", key, "' has value type ", type));
    GgufValue v = p.value(static_cast<GgufType>(type), key, 0);
    if (!f.metadata.emplace(key, std::move(v)).second) {
      c.corrupt(str_cat("metadata key '", key, "' appears twice"));
    }
  }
  f.alignment = read_alignment(f, c, limits);
  for (std::uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensor t = read_tensor_info(c, limits);
    if (!f.tensor_index_.emplace(t.name, f.tensors.size()).second) {
      c.corrupt(str_cat("tensor '", t.name, "' appears twice"));
    }
    f.tensors.push_back(std::move(t));
  }
  const std::uint64_t end = c.pos();
  const std::uint64_t pad = (f.alignment - end % f.alignment) % f.alignment;
  if (n_tensors > 0 && pad > c.left())
    c.corrupt("the data section starts past the end of the file");
  f.data_offset = std::min<std::uint64_t>(end + pad, size);
  f.data_size = size - f.data_offset;
  check_tensor_ranges(f, c);
  return f;
}

}  // namespace detinfer::model

#include "model/safetensors_header.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/json_parse.h"

namespace detinfer::model {
namespace {

// The deepest valid header is root -> tensor -> shape (3); anything deeper is hostile.
constexpr int kMaxJsonDepth = 4;

[[noreturn]] void corrupt(const std::string& file, const std::string& what) {
  fail(ErrorCode::kCorrupt, "safetensors file ", file, ": ", what);
}

bool known_unsupported_dtype(const std::string& s) {
  static const char* const kKnown[] = {"F64",     "I64", "I32",     "I16",     "I8",      "U64",
                                       "U32",     "U16", "U8",      "BOOL",    "F8_E4M3", "F8_E5M2",
                                       "F8_E8M0", "F4",  "F6_E2M3", "F6_E3M2", "C64"};
  for (const char* k : kKnown) {
    if (s == k) return true;
  }
  return false;
}

std::uint64_t read_u64_le(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

TensorInfo parse_entry(const std::string& name, const nlohmann::json& e, std::uint64_t data_size,
                       const std::string& file) {
  const std::string where = "tensor '" + name + "'";
  if (!e.is_object()) corrupt(file, where + " is not a JSON object");
  for (auto it = e.begin(); it != e.end(); ++it) {
    if (it.key() != "dtype" && it.key() != "shape" && it.key() != "data_offsets") {
      corrupt(file, where + " has unknown field '" + it.key() + "'");
    }
  }
  TensorInfo t;
  t.name = name;
  const auto dt = e.find("dtype");
  if (dt == e.end() || !dt->is_string()) corrupt(file, where + " has no string 'dtype'");
  const std::string dtype = dt->get<std::string>();
  if (const auto d = core::parse_safetensors_dtype(dtype)) {
    t.dtype = *d;
  } else {
    if (known_unsupported_dtype(dtype)) {
      fail(ErrorCode::kUnsupported, "safetensors file ", file, ": ", where, " has dtype ", dtype,
           " (supported: F32, BF16, F16)");
    }
    corrupt(file, where + " has unknown dtype '" + dtype.substr(0, 32) + "'");
  }
  const auto sh = e.find("shape");
  if (sh == e.end() || !sh->is_array()) corrupt(file, where + " has no array 'shape'");
  if (sh->size() > 8) corrupt(file, where + " has more than 8 dimensions");
  // Overflow-safe element count: every partial product stays below 2^62 bytes.
  constexpr std::uint64_t kMaxBytes = std::uint64_t{1} << 62;
  std::uint64_t bytes = core::dtype_size(t.dtype);
  for (const auto& d : *sh) {
    if (!d.is_number_unsigned()) corrupt(file, where + " has a shape entry that is not a count");
    const std::uint64_t v = d.get<std::uint64_t>();
    if (v != 0 && bytes > kMaxBytes / v) corrupt(file, where + " has an impossibly large shape");
    bytes *= v;
    t.shape.push_back(static_cast<std::int64_t>(v));
  }
  const auto off = e.find("data_offsets");
  if (off == e.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
      !(*off)[1].is_number_unsigned()) {
    corrupt(file, where + " has no 'data_offsets' [begin, end]");
  }
  t.begin = (*off)[0].get<std::uint64_t>();
  t.end = (*off)[1].get<std::uint64_t>();
  if (t.begin > t.end) corrupt(file, where + " has data_offsets with begin > end");
  if (t.end > data_size) {
    corrupt(file, str_cat(where, " has data_offsets [", t.begin, ", ", t.end,
                          "] past the end of the data section (", data_size, " bytes)"));
  }
  if (t.size() != bytes) {
    corrupt(file, str_cat(where, " holds ", t.size(), " bytes but shape x dtype needs ", bytes));
  }
  return t;
}

}  // namespace

std::int64_t TensorInfo::numel() const {
  std::int64_t n = 1;
  for (const std::int64_t d : shape) n *= d;
  return n;
}

SafetensorsHeader parse_safetensors_header(const std::uint8_t* prefix, std::size_t prefix_size,
                                           std::uint64_t file_size, const std::string& file) {
  if (file_size < 8 || prefix_size < 8) {
    corrupt(file, str_cat("file is ", file_size, " bytes, shorter than the 8-byte header length"));
  }
  const std::uint64_t n = read_u64_le(prefix);
  if (n == 0) corrupt(file, "header length is 0");
  if (n > kMaxSafetensorsHeaderBytes) {
    corrupt(file, str_cat("header length ", n, " exceeds the ", kMaxSafetensorsHeaderBytes,
                          "-byte limit"));
  }
  if (n > file_size - 8) {
    corrupt(file,
            str_cat("header length ", n, " runs past the end of the file (", file_size, " bytes)"));
  }
  if (prefix_size < 8 + n) {
    fail(ErrorCode::kInternal, "safetensors file ", file, ": header prefix too short");
  }
  const char* text = reinterpret_cast<const char*>(prefix + 8);
  core::JsonLimits limits;
  limits.max_depth = kMaxJsonDepth;
  limits.max_bytes = kMaxSafetensorsHeaderBytes;
  const nlohmann::json root = core::parse_json(std::string_view(text, n), limits,
                                               ErrorCode::kCorrupt, "safetensors file " + file);
  if (!root.is_object()) corrupt(file, "header is not a JSON object");

  SafetensorsHeader h;
  h.data_offset = 8 + n;
  const std::uint64_t data_size = file_size - h.data_offset;
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) corrupt(file, "'__metadata__' is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string())
          corrupt(file, "'__metadata__' value '" + m.key() + "' is not a string");
        h.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    h.tensors.push_back(parse_entry(it.key(), *it, data_size, file));
  }
  // nlohmann objects iterate in key order, so tensors are already sorted by name.
  std::vector<const TensorInfo*> by_offset;
  by_offset.reserve(h.tensors.size());
  for (const auto& t : h.tensors) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  // Empty tensors occupy no bytes and cannot overlap anything.
  const TensorInfo* last = nullptr;  // the non-empty tensor reaching furthest so far
  for (const TensorInfo* cur : by_offset) {
    if (cur->size() == 0) continue;
    if (last != nullptr && cur->begin < last->end) {
      corrupt(file, "tensors '" + last->name + "' and '" + cur->name + "' overlap");
    }
    if (last == nullptr || cur->end > last->end) last = cur;
  }
  return h;
}

}  // namespace detinfer::model

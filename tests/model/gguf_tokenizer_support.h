// Helpers of the GGUF tokenizer tests: fixtures, and GGUF files written from a
// tokenizer.json by devtools::add_gguf_tokenizer and parsed back.
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "detinfer/tokenizer.h"
#include "devtools/gguf_tokenizer_writer.h"
#include "devtools/gguf_writer.h"
#include "model/gguf.h"
#include "model/gguf_tokenizer.h"

namespace detinfer::model::testing {

inline std::string read_tokenizer_fixture(const std::string& name) {
  std::ifstream in(std::string(DETINFER_SOURCE_DIR) + "/tests/tokenizer/fixtures/" + name,
                   std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline GgufFile parse_bytes(const std::vector<std::uint8_t>& b) {
  return parse_gguf(b.data(), b.size(), "tokenizer.gguf");
}

// The GGUF metadata add_gguf_tokenizer writes for (json, config, pre), parsed back.
inline GgufFile gguf_of(const std::string& json, const std::string& config,
                        const std::string& pre) {
  devtools::GgufWriter w;
  w.add_string("general.architecture", "llama");
  devtools::add_gguf_tokenizer(w, {json, config, pre});
  return parse_bytes(w.bytes());
}

inline GgufValue string_value(const std::string& s) {
  GgufValue v;
  v.type = GgufType::kString;
  v.s = s;
  return v;
}

inline GgufValue uint_value(std::uint64_t u) {
  GgufValue v;
  v.type = GgufType::kU32;
  v.u = u;
  return v;
}

inline GgufValue bool_value(bool b) {
  GgufValue v;
  v.type = GgufType::kBool;
  v.u = b ? 1 : 0;
  return v;
}

}  // namespace detinfer::model::testing

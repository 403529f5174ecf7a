// libFuzzer target: the GGUF reader (model/gguf.h) must accept or reject any bytes with a
// detinfer::Error, never crash, hang or read out of bounds (ASan checks the last part), and
// whatever it accepts must describe tensors inside the file. A file that parses also goes
// through what is read from its tokenizer metadata: the tokenizer.json it stands for
// (gguf_tokenizer_json) and the Tokenizer loaded from it (libdetinfer's
// Tokenizer::from_json), chat templates, sampling defaults and stop ids
// (model/gguf_tokenizer.h): each gives a result or a detinfer::Error. (The model config
// needs a mapped GgufModel; its hostile cases are tests/model/gguf_*hostile_test.cpp.)
#include <cstddef>
#include <cstdint>
#include <vector>

#include "detinfer/error.h"
#include "model/gguf.h"
#include "model/gguf_tokenizer.h"

namespace {
template <typename F>
void guarded(F&& f) {
  try {
    f();
  } catch (const detinfer::Error&) {
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Copy into an exact-size buffer so any read past the end is caught.
  std::vector<std::uint8_t> buf(data, data + size);
  try {
    const detinfer::model::GgufFile f =
        detinfer::model::parse_gguf(buf.data(), buf.size(), "fuzz.gguf");
    for (const auto& t : f.tensors) {
      if (f.data_offset + t.offset + t.bytes > size) __builtin_trap();
      if (t.offset % f.alignment != 0) __builtin_trap();
    }
    using namespace detinfer::model;
    guarded([&] { gguf_tokenizer(f); });  // the JSON, then Tokenizer::from_json
    guarded([&] { gguf_chat_templates(f); });
    guarded([&] { gguf_generation_config_json(f); });
    guarded([&] { gguf_stop_token_ids(f); });
  } catch (const detinfer::Error&) {
  }
  return 0;
}

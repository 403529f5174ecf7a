// libFuzzer target: the GGUF reader (model/gguf.h) must accept or reject any bytes with a
// detinfer::Error, never crash, hang or read out of bounds (ASan checks the last part), and
// whatever it accepts must describe tensors inside the file.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "detinfer/error.h"
#include "model/gguf.h"

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
  } catch (const detinfer::Error&) {
  }
  return 0;
}

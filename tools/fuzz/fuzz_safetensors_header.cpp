// libFuzzer target: the safetensors header parser must accept or reject any bytes with a
// detinfer::Error, never crash, hang or read out of bounds (ASan checks the last part).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "detinfer/error.h"
#include "model/safetensors_header.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Copy into an exact-size buffer so any read past the end is caught.
  std::vector<std::uint8_t> buf(data, data + size);
  try {
    const detinfer::model::SafetensorsHeader h =
        detinfer::model::parse_safetensors_header(buf.data(), buf.size(), buf.size(), "fuzz");
    // Whatever was accepted must describe ranges inside the buffer.
    for (const auto& t : h.tensors) {
      if (h.data_offset + t.end > size) __builtin_trap();
    }
  } catch (const detinfer::Error&) {
  }
  return 0;
}

// Test helper: a copy of a model folder with one bit of one weight byte flipped (a byte
// near the end of the safetensors file, which is tensor data, after the header).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace detinfer::testing {

// Copies `model_dir` to `out_dir` (replacing it) and XORs `mask` into the byte
// `from_end` bytes before the end of each .safetensors file. Returns out_dir.
inline std::string flipped_model_copy(const std::string& model_dir, const std::string& out_dir,
                                      std::int64_t from_end = 1, char mask = 0x01) {
  std::filesystem::remove_all(out_dir);
  std::filesystem::copy(model_dir, out_dir, std::filesystem::copy_options::recursive);
  for (const auto& e : std::filesystem::directory_iterator(out_dir)) {
    if (e.path().extension() != ".safetensors") continue;
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-from_end, std::ios::end);
    char b = 0;
    f.read(&b, 1);
    b = static_cast<char>(b ^ mask);
    f.seekp(-from_end, std::ios::end);
    f.write(&b, 1);
  }
  return out_dir;
}

}  // namespace detinfer::testing

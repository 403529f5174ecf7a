// detinfer_tiny_model <out dir> [seed]: writes the default tiny model (make_tiny_model)
// without the `detinfer` program, so that test fixtures (C API, consumers) work in a
// build without the CLI (DETINFER_BUILD_CLI=OFF). Exit code 0 on success, 1 on an
// Error, 2 on bad usage.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "detinfer/error.h"
#include "devtools/model_tools.h"

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: %s <out dir> [seed]\n", argv[0]);
    return 2;
  }
  detinfer::devtools::TinyModelOptions options;
  options.out_dir = argv[1];
  if (argc == 3) {
    char* end = nullptr;
    options.seed = std::strtoull(argv[2], &end, 10);
    if (end == argv[2] || *end != '\0') {
      std::fprintf(stderr, "seed must be a non-negative integer, got '%s'\n", argv[2]);
      return 2;
    }
  }
  try {
    detinfer::devtools::make_tiny_model(options);
  } catch (const detinfer::Error& e) {
    std::fprintf(stderr, "detinfer_tiny_model: %s\n", e.what());
    return 1;
  }
  return 0;
}

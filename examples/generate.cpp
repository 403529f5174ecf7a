// The smallest program on detinfer's public API (README, "Use it from C++"): opens a model
// folder, generates with a fixed seed and prints the text and the chain digest of the
// logits. Same model, prompt, settings and seed: the same bits, under any load.
//
// Usage: detinfer_example_generate MODEL_DIR [PROMPT]
#include <detinfer/error.h>
#include <detinfer/session.h>

#include <iostream>
#include <string>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: " << argv[0] << " MODEL_DIR [PROMPT]\n";
    return 2;
  }
  try {
    detinfer::SessionOptions options;  // canonical numerics by default
    auto session = detinfer::DeterministicSession::open(argv[1], options);
    detinfer::GenerationConfig config;
    config.max_new_tokens = 32;
    config.temperature = 0.8f;
    config.seed = 42;  // same seed -> same bits, any load
    const std::string prompt = argc > 2 ? argv[2] : "Hello";
    detinfer::GenerationResult r = session.generate(prompt, config);
    std::cout << r.sequences[0].text << "\n"
              << "digest " << r.sequences[0].digest << "\n";  // chain digest of the logits
    return 0;
  } catch (const detinfer::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}

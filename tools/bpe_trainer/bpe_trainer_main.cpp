// detinfer_bpe_trainer: trains a byte-level BPE on text files and writes a Hugging Face
// tokenizer.json (the trainer behind make_tiny_tokenizer_json; docs/tokenizer.md).
#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <sstream>

#include "detinfer/error.h"
#include "devtools/bpe_trainer.h"

int main(int argc, char** argv) {
  CLI::App app{"Train a byte-level BPE and write tokenizer.json"};
  std::vector<std::string> inputs;
  std::vector<std::string> specials = {"<|endoftext|>"};
  std::string output = "tokenizer.json";
  std::int64_t vocab_size = 512;
  std::int64_t min_frequency = 2;
  std::string pattern = detinfer::devtools::kLlama3SplitPattern;
  app.add_option("--input", inputs, "UTF-8 text files to train on")->required();
  app.add_option("--vocab-size", vocab_size, "Total ids, padded with reserved tokens")
      ->check(CLI::Range(std::int64_t{257}, std::int64_t{0x7fffffff}));
  app.add_option("--min-frequency", min_frequency, "Smallest pair count merged")
      ->check(CLI::PositiveNumber);
  app.add_option("--special", specials, "Special tokens, after the merges");
  app.add_option("--pattern", pattern, "Pre-tokenizer split regex (default: Llama-3's)");
  app.add_option("--output", output, "Where to write tokenizer.json");
  CLI11_PARSE(app, argc, argv);
  try {
    std::vector<std::string> texts;
    for (const auto& path : inputs) {
      std::ifstream in(path, std::ios::binary);
      if (!in) throw detinfer::Error(detinfer::ErrorCode::kNotFound, "cannot open " + path);
      std::ostringstream ss;
      ss << in.rdbuf();
      texts.push_back(ss.str());
    }
    detinfer::devtools::BpeTrainerOptions opts;
    opts.num_merges = vocab_size - 256 - static_cast<std::int64_t>(specials.size());
    opts.min_frequency = min_frequency;
    opts.split_pattern = pattern;
    if (opts.num_merges < 0) {
      throw detinfer::Error(detinfer::ErrorCode::kInvalidArgument,
                            "vocab-size too small for 256 bytes and the special tokens");
    }
    const auto bpe = detinfer::devtools::train_byte_level_bpe(
        std::vector<std::string_view>(texts.begin(), texts.end()), opts);
    detinfer::devtools::ByteLevelJsonOptions jopts;
    jopts.special_tokens = specials;
    jopts.vocab_size = vocab_size;
    jopts.split_pattern = pattern;
    std::ofstream out(output, std::ios::binary);
    out << detinfer::devtools::byte_level_tokenizer_json(bpe, jopts) << "\n";
    if (!out) throw detinfer::Error(detinfer::ErrorCode::kNotFound, "cannot write " + output);
    std::cerr << "wrote " << output << ": " << bpe.merges.size() << " merges, " << vocab_size
              << " ids\n";
  } catch (const detinfer::Error& e) {
    std::cerr << "detinfer_bpe_trainer: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

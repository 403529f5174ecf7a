// `detinfer tokenize`: text lines on stdin -> one line of comma-separated ids each (or,
// with --decode, id lines -> text), to compare tokenization with other implementations.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "command_registry.h"
#include "detinfer/error.h"
#include "detinfer/tokenizer.h"

namespace {
struct TokenizeOptions {
  std::string tokenizer;
  bool decode = false;
  bool no_special = false;
};

std::vector<std::int32_t> parse_ids(const std::string& line, std::size_t line_no) {
  std::vector<std::int32_t> ids;
  std::size_t i = 0;
  while (i < line.size()) {
    const std::size_t comma = line.find(',', i);
    const std::string field =
        line.substr(i, comma == std::string::npos ? std::string::npos : comma - i);
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(field, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    while (used < field.size() && (field[used] == ' ' || field[used] == '\r')) ++used;
    if (field.empty() || used != field.size() || v < INT32_MIN || v > INT32_MAX) {
      throw detinfer::Error(
          detinfer::ErrorCode::kInvalidArgument,
          "line " + std::to_string(line_no) + ": '" + field + "' is not a token id");
    }
    ids.push_back(static_cast<std::int32_t>(v));
    if (comma == std::string::npos) break;
    i = comma + 1;
  }
  return ids;
}

int run_tokenize(const TokenizeOptions& opts) {
  const detinfer::Tokenizer tok = detinfer::Tokenizer::load(opts.tokenizer);
  std::string line;
  std::size_t line_no = 0;
  while (std::getline(std::cin, line)) {
    ++line_no;
    if (opts.decode) {
      std::cout << tok.decode(parse_ids(line, line_no), opts.no_special) << "\n";
      continue;
    }
    const std::vector<std::int32_t> ids = tok.encode(line, !opts.no_special);
    for (std::size_t k = 0; k < ids.size(); ++k) std::cout << (k ? "," : "") << ids[k];
    std::cout << "\n";
  }
  return 0;
}

const detinfer_cli::RegisterCommand kRegister(
    "tokenize", "Encode stdin lines to ids (or decode id lines) with a tokenizer.json",
    [](CLI::App& sub, int& exit_code) {
      auto opts = std::make_shared<TokenizeOptions>();
      sub.add_option("--tokenizer", opts->tokenizer,
                     "tokenizer.json, or a folder with tokenizer.json [+ tokenizer_config.json]")
          ->required();
      sub.add_flag("--decode", opts->decode, "Read comma-separated ids per line, print text");
      sub.add_flag("--no-special", opts->no_special,
                   "Encode without BOS/EOS templates; decode skipping special tokens");
      sub.callback([opts, &exit_code] { exit_code = run_tokenize(*opts); });
    });
}  // namespace

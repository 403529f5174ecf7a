// bench_tokenizer: encode throughput, one thread, on >= 1 MB of English prose and of CJK
// text with a ~150k-entry byte-level vocabulary (docs/performance.md, "Tokenizer").
// The text and the vocabulary are made at startup, outside the timed loops:
//  - English: sentences of data/tiny_corpus.txt (ASCII lines) shuffled with Philox into
//    1.2 MB of prose;
//  - CJK: 1 MB of Chinese-like text (3,500 common ideographs drawn with a Zipf-like law,
//    punctuation every 8-24 characters);
//  - vocabulary: the trainer's merges on both texts (min frequency 2), then synthetic
//    merges of existing token pairs up to 150,000 ids, so the lookup tables have the size
//    of Qwen2's or Llama-3's.
// Baselines in the same run: the pre-tokenizer regex alone, and a memcpy of the text.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/json_parse.h"
#include "detinfer/philox.h"
#include "detinfer/tokenizer.h"
#include "devtools/bpe_trainer.h"
#include "devtools/tiny_tokenizer.h"
#include "tokenizer/regex.h"

namespace {

using detinfer::Tokenizer;
namespace tk = detinfer::tokenizer;

constexpr std::int64_t kVocab = 150000;

std::string english_prose(std::size_t bytes) {
  // ASCII lines of the corpus, cut into sentences.
  const std::string_view corpus = detinfer::devtools::tiny_corpus();
  std::vector<std::string> sentences;
  std::string cur;
  bool ascii_line = true;
  std::string line;
  for (std::size_t i = 0; i <= corpus.size(); ++i) {
    const char c = i < corpus.size() ? corpus[i] : '\n';
    if (c != '\n') {
      line.push_back(c);
      ascii_line = ascii_line && static_cast<unsigned char>(c) < 0x80;
      continue;
    }
    if (ascii_line && line.size() > 20) {
      for (const char ch : line + " ") {
        cur.push_back(ch);
        if ((ch == '.' || ch == '?' || ch == '!') && cur.size() > 20) {
          sentences.push_back(cur);
          cur.clear();
        }
      }
    }
    line.clear();
    ascii_line = true;
  }
  std::string out;
  for (std::uint64_t step = 0; out.size() < bytes; ++step) {
    out += sentences[detinfer::philox_bits(1, 0, step, 0) % sentences.size()];
    out += (step % 7 == 6) ? "\n\n" : " ";
  }
  return out;
}

std::string cjk_text(std::size_t bytes) {
  std::string out;
  const char* punct[] = {"，", "。", "、", "！", "？"};
  std::uint64_t step = 0;
  while (out.size() < bytes) {
    const auto run = 8 + detinfer::philox_bits(2, 0, step++, 0) % 17;
    for (std::uint32_t k = 0; k < run; ++k) {
      // Zipf-like: u^3 concentrates draws on the first ideographs.
      const double u = detinfer::philox_uniform(2, 1, step++, 0);
      const auto cp = static_cast<char32_t>(0x4E00 + static_cast<std::uint32_t>(u * u * u * 3500));
      out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
    out += punct[detinfer::philox_bits(2, 2, step++, 0) % 5];
  }
  return out;
}

struct Data {
  std::string english = english_prose(1200 * 1024);
  std::string cjk = cjk_text(1024 * 1024);
  std::unique_ptr<Tokenizer> big;
  std::unique_ptr<Tokenizer> tiny;
  std::size_t trained_merges = 0;

  Data() {
    detinfer::devtools::BpeTrainerOptions opts;
    opts.num_merges = kVocab - 256 - 1;
    opts.min_frequency = 2;
    detinfer::devtools::TrainedBpe bpe =
        detinfer::devtools::train_byte_level_bpe({english, cjk}, opts);
    trained_merges = bpe.merges.size();
    // Synthetic merges (pairs of existing tokens) fill the tables to 150k entries.
    std::vector<std::string> seen(bpe.vocab.begin(), bpe.vocab.end());
    std::sort(seen.begin(), seen.end());
    for (std::uint64_t step = 0; static_cast<std::int64_t>(bpe.vocab.size()) < kVocab - 1; ++step) {
      const auto n = static_cast<std::uint32_t>(bpe.vocab.size());
      const std::string a = bpe.vocab[detinfer::philox_bits(3, 0, step, 0) % n];
      const std::string b = bpe.vocab[detinfer::philox_bits(3, 0, step, 1) % n];
      if (std::binary_search(seen.begin(), seen.end(), a + b)) continue;
      seen.insert(std::upper_bound(seen.begin(), seen.end(), a + b), a + b);
      bpe.merges.emplace_back(a, b);
      bpe.vocab.push_back(a + b);
    }
    detinfer::devtools::ByteLevelJsonOptions jopts;
    jopts.special_tokens = {"<|endoftext|>"};
    jopts.vocab_size = kVocab;
    big = std::make_unique<Tokenizer>(
        Tokenizer::from_json(detinfer::devtools::byte_level_tokenizer_json(bpe, jopts)));
    tiny = std::make_unique<Tokenizer>(
        Tokenizer::from_json(detinfer::devtools::make_tiny_tokenizer_json(512)));
  }
};

const Data& data() {
  static const Data d;
  return d;
}

void encode_bench(benchmark::State& state, const Tokenizer& tok, const std::string& text) {
  std::size_t tokens = 0;
  for (auto _ : state) {
    const auto ids = tok.encode(text, false);
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
  state.counters["bytes_per_token"] =
      static_cast<double>(text.size()) / static_cast<double>(tokens);
}

void BM_EncodeEnglish150k(benchmark::State& state) {
  encode_bench(state, *data().big, data().english);
  state.counters["trained_merges"] = static_cast<double>(data().trained_merges);
}
void BM_EncodeCjk150k(benchmark::State& state) { encode_bench(state, *data().big, data().cjk); }
void BM_EncodeEnglishTiny512(benchmark::State& state) {
  encode_bench(state, *data().tiny, data().english);
}

void BM_DecodeEnglish150k(benchmark::State& state) {
  const auto ids = data().big->encode(data().english, false);
  for (auto _ : state) benchmark::DoNotOptimize(data().big->decode(ids).size());
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * data().english.size()));
}

// The Llama-3 split regex alone (PCRE2 JIT): the floor under encode.
void BM_PreTokenizeEnglish(benchmark::State& state) {
  const tk::Regex re(detinfer::devtools::kLlama3SplitPattern, false, "bench");
  std::vector<std::pair<std::size_t, std::size_t>> spans;
  for (auto _ : state) {
    spans.clear();
    re.find_all(data().english, spans);
    benchmark::DoNotOptimize(spans.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * data().english.size()));
}

void BM_MemcpyEnglish(benchmark::State& state) {
  std::string dst(data().english.size(), '\0');
  for (auto _ : state) {
    std::memcpy(dst.data(), data().english.data(), dst.size());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * data().english.size()));
}

// core::parse_json (the hardened reader every model, tokenizer and HTTP body goes through)
// on an array of state.range(0) small objects, like a tokenizer.json's added_tokens: the
// per-object time must not grow with the count (it was O(n^2) with nlohmann's callback
// parser: 2.5 s for 50,000). Compare the per-object times of the two sizes, same run.
void BM_ParseJsonObjects(benchmark::State& state) {
  const auto n = state.range(0);
  std::string text = "[";
  for (std::int64_t i = 0; i < n; ++i) {
    text += (i ? ",{\"id\":" : "{\"id\":") + std::to_string(i) + ",\"content\":\"<t>\"}";
  }
  text += "]";
  for (auto _ : state) {
    auto j = detinfer::core::parse_json(text, {}, detinfer::ErrorCode::kCorrupt, "bench");
    benchmark::DoNotOptimize(j);
  }
  state.counters["ns_per_object"] =
      benchmark::Counter(static_cast<double>(n) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
}

BENCHMARK(BM_ParseJsonObjects)->Arg(10000)->Arg(160000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeEnglish150k)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_EncodeCjk150k)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_EncodeEnglishTiny512)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_DecodeEnglish150k)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PreTokenizeEnglish)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MemcpyEnglish)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();

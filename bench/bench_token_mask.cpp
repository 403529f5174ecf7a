// bench_token_mask [--reps N]: the per-token cost of constrained decoding's mask
// (docs/performance.md, "Constrained decoding") on a synthetic 151,646-token vocabulary
// shaped like a byte-level BPE one (the size of Qwen2.5's): single bytes, words with and
// without a leading space, capitalized words, digit runs, punctuation runs, whitespace
// runs. Prints, for automaton states from cheapest to the worst case (inside a free
// string that an enum branch shadows, where every token is walked), the median milliseconds per
// mask, the trie nodes walked and the allowed tokens. A plain program, no Google Benchmark.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "decode/json_schema.h"
#include "decode/token_trie.h"
#include "detinfer/philox.h"

namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> synthetic_vocab(std::size_t n) {
  std::vector<std::string> v;
  for (int b = 0; b < 256; ++b) v.emplace_back(1, static_cast<char>(b));
  const std::string punct = "{}[]\":,.;!?()-_'/\\*#@=+<>";
  std::uint64_t i = 0;
  const auto rnd = [&](std::uint32_t m) { return detinfer::philox_bits(11, 3, i++, 0) % m; };
  while (v.size() < n) {
    std::string t;
    const std::uint32_t kind = rnd(10);
    if (kind < 6) {  // words: 2..10 letters, often with a leading space or capital
      if (rnd(3) != 0) t += ' ';
      const std::uint32_t len = 2 + rnd(9);
      for (std::uint32_t k = 0; k < len; ++k) t += static_cast<char>('a' + rnd(26));
      if (rnd(5) == 0) t[t[0] == ' ' ? 1 : 0] = static_cast<char>(t[t[0] == ' ' ? 1 : 0] - 32);
    } else if (kind < 7) {
      const std::uint32_t len = 1 + rnd(3);
      for (std::uint32_t k = 0; k < len; ++k) t += static_cast<char>('0' + rnd(10));
    } else if (kind < 9) {
      const std::uint32_t len = 1 + rnd(4);
      for (std::uint32_t k = 0; k < len; ++k) t += punct[rnd(punct.size())];
    } else {
      t = std::string(1 + rnd(8), rnd(2) == 0 ? ' ' : '\n');
    }
    v.push_back(t);
  }
  return v;
}

struct Case {
  const char* name;
  const char* schema;  // nullptr: json_object
  const char* prefix;  // text already generated
};

}  // namespace

int main(int argc, char** argv) {
  int reps = 20;
  for (int a = 1; a + 1 < argc; ++a) {
    if (std::strcmp(argv[a], "--reps") == 0) reps = std::atoi(argv[a + 1]);
  }
  const std::vector<std::string> vocab = synthetic_vocab(151646);
  const auto t0 = Clock::now();
  const detinfer::decode::TokenTrie trie(vocab);
  const double build_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  std::printf("vocabulary %zu tokens, trie %zu nodes, built in %.1f ms\n", vocab.size(),
              trie.node_count(), build_ms);
  const char* kObj =
      R"({"type":"object","properties":{"age":{"type":"integer"},)"
      R"("name":{"type":"string"},"tags":{"type":"array","items":{"enum":["a","b"]}}},)"
      R"("required":["name","age","tags"],"additionalProperties":false})";
  const char* kAmbiguous = R"({"anyOf":[{"type":"string","maxLength":50},)"
                           R"({"type":"string","minLength":1}]})";
  const char* kShadowed = R"({"anyOf":[{"type":"string"},{"enum":["abc","abd"]}]})";
  // Properties are generated in the schema text's order (age, name, tags).
  const Case cases[] = {
      {"value start (expects {)", kObj, ""},
      {"key start (expects \")", kObj, "{"},
      {"inside a key", kObj, "{\"ag"},
      {"inside an integer", kObj, "{\"age\":1"},
      {"any value (json_object)", nullptr, "{\"k\":"},
      {"inside a free string", kObj, "{\"age\":1,\"name\":\"ab"},
      // Two live string branches: the fast path still applies.
      {"string in 2 anyOf branches", kAmbiguous, "\"ab"},
      // A string beside an enum branch: no fast path, every token is walked (the worst).
      {"string beside an enum (worst)", kShadowed, "\"ab"},
      // Pattern strings have no fast path either: every accepted prefix is walked.
      {"inside ^[a-z ]{1,40}$", R"({"type":"string","pattern":"^[a-z ]{1,40}$"})", "\"ab"},
      {"inside an unanchored pattern", R"({"type":"string","pattern":"x"})", "\"ab"},
  };
  std::printf("%-32s %10s %12s %10s\n", "state", "ms/mask", "allowed", "ns/node");
  for (const Case& c : cases) {
    detinfer::ResponseFormat f;
    f.type = c.schema ? detinfer::ResponseFormatType::kJsonSchema
                      : detinfer::ResponseFormatType::kJsonObject;
    if (c.schema) f.json_schema = c.schema;
    const auto g = detinfer::decode::compile_response_format(f);
    detinfer::decode::JsonState s(g.get());
    if (!s.advance(std::string(c.prefix))) return 1;
    std::vector<std::uint8_t> allowed;
    std::vector<double> ms;
    std::size_t count = 0;
    for (int r = 0; r < reps; ++r) {
      const auto a = Clock::now();
      count = trie.mask(s, allowed);
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - a).count());
    }
    std::sort(ms.begin(), ms.end());
    const double med = ms[ms.size() / 2];
    std::printf("%-32s %10.3f %12zu %10.1f\n", c.name, med, count,
                med * 1e6 / static_cast<double>(trie.node_count()));
  }
  return 0;
}

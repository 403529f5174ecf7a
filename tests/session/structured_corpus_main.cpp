// Writes a corpus of constrained generations for the independent validator
// (structured_outputs_test.py): seeded random schemas (random_schema.h) x seeds on the
// tiny random-weight model, all submitted at once (batched), one JSON line per output:
// {"schema", "seed", "temperature", "text", "finish_reason"}.
// Usage: structured_corpus <work dir> <schemas> <seeds per schema>
#include <iostream>
#include <string>
#include <vector>

#include "devtools/model_tools.h"
#include "session/random_schema.h"

int main(int argc, char** argv) {
  using detinfer::GenerationConfig;
  if (argc != 4) {
    std::cerr << "usage: structured_corpus <work dir> <schemas> <seeds per schema>\n";
    return 2;
  }
  try {
    detinfer::devtools::TinyModelOptions m;
    m.out_dir = std::string(argv[1]) + "/structured-corpus-model";
    m.seed = 6;
    detinfer::devtools::make_tiny_model(m);
    detinfer::SessionOptions o = detinfer::testing::tiny_options(2);
    o.max_batch = 32;
    o.kv_budget_bytes = 64 << 20;
    detinfer::DeterministicSession session = detinfer::DeterministicSession::open(m.out_dir, o);
    const int schemas = std::stoi(argv[2]);
    const int seeds = std::stoi(argv[3]);
    detinfer::testing::RandomSchema gen(2026);
    struct Job {
      nlohmann::json schema;
      GenerationConfig config;
      detinfer::RequestHandle handle;
    };
    std::vector<Job> jobs;
    for (int i = 0; i < schemas; ++i) {
      const nlohmann::json schema = gen.next();
      for (int s = 0; s < seeds; ++s) {
        Job j;
        j.schema = schema;
        j.config.max_new_tokens = 200;
        j.config.temperature = s == 0 ? 0.0f : 1.0f;
        j.config.seed = 1000 + s;
        j.config.response_format.type = detinfer::ResponseFormatType::kJsonSchema;
        j.config.response_format.json_schema = schema.dump();
        jobs.push_back(std::move(j));
      }
    }
    // Submitted in waves below the queue limit; all of a wave run batched together.
    const std::size_t wave = 128;
    for (std::size_t first = 0; first < jobs.size(); first += wave) {
      const std::size_t last = std::min(jobs.size(), first + wave);
      for (std::size_t k = first; k < last; ++k) {
        jobs[k].handle = session.submit(detinfer::Prompt("{\"a\": "), jobs[k].config);
      }
      for (std::size_t k = first; k < last; ++k) {
        const detinfer::GenerationResult r = jobs[k].handle.get();
        const detinfer::Sequence& seq = r.sequences.at(0);
        nlohmann::json line = {{"schema", jobs[k].schema},
                               {"seed", *jobs[k].config.seed},
                               {"temperature", jobs[k].config.temperature},
                               {"text", seq.text},
                               {"finish_reason", detinfer::to_string(seq.finish_reason)}};
        std::cout << line.dump() << "\n";
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "structured_corpus: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

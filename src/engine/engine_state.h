// Internal to the engine module: the state of a request from admission to its result
// (Group), of each of its KV sequences (SeqState), and what a sequence contributed to a
// step's batch (BatchEntry). Shared by the scheduler (engine_impl.h, engine.cpp) and the
// output stage (output_stage.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <vector>

#include "decode/beam_search.h"
#include "decode/json_automaton.h"
#include "decode/stop_matcher.h"
#include "engine/engine.h"

namespace detinfer::engine {
namespace engine_internal {

inline double ms_between(EngineClock::time_point a, EngineClock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// One KV sequence: a sample, a live beam, or the prompt while it is prefilled.
struct SeqState {
  std::int32_t sample_index = 0;
  std::vector<std::int32_t> blocks;
  std::int64_t num_computed = 0;  // tokens whose K/V are in `blocks`
  std::int32_t pending = -1;      // chosen token whose K/V is not computed yet
  // Speculative decoding (output_speculative.cpp): the drafts fed after `pending` this
  // step, and the adaptive draft length: how many tokens to ask for (0: not yet set), the
  // steps left without drafting and the consecutive verify passes that accepted nothing.
  std::vector<std::int32_t> draft;
  std::int32_t draft_len = 0;
  std::int32_t draft_pause = 0;
  std::int32_t draft_misses = 0;
  std::vector<std::int32_t> generated;
  Sequence out;
  std::optional<Tokenizer::StreamDecoder> decoder;
  std::optional<decode::StopMatcher> stops;
  std::optional<decode::JsonState> json;  // constrained decoding: the text's position
  bool finished = false;
  EngineClock::time_point last_token;
};

// One request from admission to its result.
struct Group {
  EngineRequest req;
  std::promise<GenerationResult> promise;
  std::int64_t reserve = 0;  // KV blocks reserved
  std::int32_t width = 1;    // sequences it runs
  bool prefilling = true;
  std::int64_t prefilled = 0;  // prompt tokens with K/V
  std::int64_t cached_tokens = 0;
  std::vector<SeqState> seqs;  // one while prefilling
  std::unique_ptr<decode::BeamSearch> beam;
  std::vector<Sequence> beam_results;
  std::shared_ptr<const decode::JsonGrammar> grammar;  // response_format; null for text
  EngineClock::time_point admitted;
  std::optional<EngineClock::time_point> first_token;
  EngineClock::time_point last_token;  // of sample 0 / of the beam search
  std::vector<double> token_ms;
  bool done = false;

  bool cancelled() const { return req.cancelled->load(std::memory_order_relaxed); }
};

// What one sequence contributed to the batch.
struct BatchEntry {
  Group* group;
  std::size_t seq;      // index in group->seqs
  std::int64_t tokens;  // new tokens fed
  bool prefill;
  std::int64_t rows = 1;  // logits rows it returned (tokens when all_logits)
};

}  // namespace engine_internal

using engine_internal::BatchEntry;
using engine_internal::Group;
using engine_internal::ms_between;
using engine_internal::SeqState;

}  // namespace detinfer::engine

// The prompt-lookup (n-gram) drafter of speculative decoding (docs/speculative.md): a
// guess at the next tokens of a sequence from its own text, no extra model. Drafts are
// only ever proposals: the engine verifies each one against the token the target model
// chooses, so a draft can make decoding faster or slower, never different.
#pragma once

#include <cstdint>
#include <vector>

namespace detinfer::decode {

// Proposes up to `max_tokens` tokens to follow the text `prompt` + `generated`: for n from
// ngram_max down to ngram_min, the text's last n tokens are looked for earlier in the text
// (the latest occurrence wins); the first n that matches proposes the tokens that followed
// that occurrence (max_tokens of them: past the text's end the copy continues from its own
// start, so a repeating pattern repeats on). `out` is cleared first and stays empty when
// nothing matches. A pure
// function of its arguments; O(text length * ngram_max).
void ngram_draft(const std::vector<std::int32_t>& prompt,
                 const std::vector<std::int32_t>& generated, std::int32_t ngram_min,
                 std::int32_t ngram_max, std::int32_t max_tokens, std::vector<std::int32_t>& out);

}  // namespace detinfer::decode

// `detinfer generate`'s sampling flags, one per row of the GenerationConfig field table
// (src/core/generation_fields.h): `--` + the member's name with dashes, plus the short
// names earlier releases had (--beams, --n, --stop). Values are checked by the session,
// which names the field (docs/cli.md, "generate").
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "detinfer/generation.h"

namespace detinfer_cli {

// The flag of a GenerationConfig member: "--top-p" for "top_p" (aliases not included).
std::string generation_flag(const char* member);

// --speculative off|ngram|draft and --draft-tokens N for the commands that build their
// GenerationConfig themselves (chat, bench, consistency; `generate` has both through
// add_generation_flags). apply() sets draft_tokens and draft_with_model; `draft` needs the
// session's --draft-model (docs/speculative.md). Outputs never change, only speed.
struct SpeculativeFlags {
  std::string mode = "off";
  std::int32_t draft_tokens = 0;  // 0: 4 when mode is ngram or draft
  void add(CLI::App& app);
  void apply(detinfer::GenerationConfig& c) const;
};

// Adds one flag per table row to `app`, bound to `config` (which holds the defaults and
// must outlive the parse).
void add_generation_flags(CLI::App& app, detinfer::GenerationConfig& config);

}  // namespace detinfer_cli

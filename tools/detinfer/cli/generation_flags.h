// `detinfer generate`'s sampling flags, one per row of the GenerationConfig field table
// (src/core/generation_fields.h): `--` + the member's name with dashes, plus the short
// names earlier releases had (--beams, --n, --stop). Values are checked by the session,
// which names the field (docs/cli.md, "generate").
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "detinfer/generation.h"

namespace detinfer_cli {

// The flag of a GenerationConfig member: "--top-p" for "top_p" (aliases not included).
std::string generation_flag(const char* member);

// Adds one flag per table row to `app`, bound to `config` (which holds the defaults and
// must outlive the parse).
void add_generation_flags(CLI::App& app, detinfer::GenerationConfig& config);

}  // namespace detinfer_cli

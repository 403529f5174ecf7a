// The messages form of a transcript (docs/fingerprint.md, "Chat transcripts"): what a
// chat transcript's conversation renders to, checked against its prompt ids before the
// teacher-forced pass (DeterministicSession::verify).
#pragma once

#include <optional>
#include <vector>

#include "detinfer/session.h"
#include "detinfer/transcript.h"

namespace detinfer::session {

// The prompt ids of a conversation: the session's chat template renders it, the
// tokenizer encodes it, then the prompt suffix (without special tokens). Errors name the
// transcript field ("chat.messages", "chat.tools", ...).
std::vector<std::int32_t> chat_prompt_ids(const DeterministicSession& session,
                                          const TranscriptChat& chat);

// For each transcript: nothing when it has no conversation or its conversation renders
// to its prompt ids (left-out prompt ids are filled in), else the "prompt" divergence.
std::vector<std::optional<VerifyDivergence>> resolve_chat_prompts(
    const DeterministicSession& session, std::vector<Transcript>& transcripts);

}  // namespace detinfer::session

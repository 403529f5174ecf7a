// The inside of a DeterministicSession: the model, tokenizer and chat templates, and the
// request pipeline built around the engine at open (docs/architecture.md, "A session's
// request pipeline"):
//   RequestPrep -> CacheBridge (result lookup) -> Engine -> CacheBridge (store/audit),
//                                                           Telemetry (metrics, recorder,
//                                                           consistency monitor)
// Replays and the monitor are clients of RequestPrep and the Engine (Replayer). Policy
// travels on each EngineRequest (use_caches, observed); no stage points back here.
#pragma once

#include <memory>
#include <optional>

#include "chat/chat_templates.h"
#include "core/byte_budget.h"
#include "detinfer/consistency_monitor.h"
#include "detinfer/session.h"
#include "engine/engine.h"
#include "model/model.h"
#include "session/cache_bridge.h"
#include "session/draft_model.h"
#include "session/model_metadata.h"
#include "session/numerics_identity.h"
#include "session/replay.h"
#include "session/request_prep.h"
#include "session/telemetry.h"
#include "session/verifier.h"

namespace detinfer {

// encode_chat's memory budget (issue 33): rendering and tokenizing a conversation hold up to
// kChatCostPerByte times its bytes at their peak (measured: ~23 MB for a 1 MB message on
// the tiny model's tokenizer); concurrent calls share kChatBudgetBytes, and a call over
// kChatTrimBytes gives the freed heap back when it ends.
inline constexpr std::int64_t kChatCostPerByte = 24;
inline constexpr std::int64_t kChatBudgetBytes = std::int64_t{256} << 20;
inline constexpr std::int64_t kChatTrimBytes = kChatCostPerByte * (std::int64_t{64} << 10);

struct DeterministicSession::Impl {
  SessionOptions options;              // resolved
  session::NumericsIdentity numerics;  // built at open from the options and the loaded model
  std::unique_ptr<model::Model> model;
  std::optional<Tokenizer> tokenizer;
  // Speculative decoding's draft model (SessionOptions::draft_model_path); null when none.
  std::shared_ptr<session::DraftModel> draft;
  // Sets r.drafter for a request that drafts with the draft model; Error(kInvalidArgument,
  // "draft_with_model") when the session has none.
  void attach_drafter(engine::EngineRequest& r) const;
  // Chat templates and generation defaults of the model (folder or GGUF metadata); the tokenizer
  // hash the fingerprints record (with the chat template when it has its own file).
  // session_chat.cpp.
  chat::ChatTemplates chat_templates;
  GenerationConfig generation_defaults;
  Hash128 tokenizer_hash;
  // What concurrent encode_chat calls may hold at once (session_chat.cpp).
  core::ByteBudget chat_budget{kChatBudgetBytes};
  void load_chat(const std::string& model_dir, const session::ModelMetadata& metadata);

  // The pipeline, in the order a request passes it (all set by build_pipeline()).
  std::unique_ptr<session::RequestPrep> prep;
  std::shared_ptr<session::CacheBridge> caches;
  std::unique_ptr<engine::Engine> engine;
  std::shared_ptr<session::Telemetry> telemetry;
  std::unique_ptr<session::Replayer> replayer;
  std::unique_ptr<session::Verifier> verifier;
  std::unique_ptr<ConsistencyMonitor> monitor;  // null when the monitor is off
  // Builds the stages from `options`, model and tokenizer and wires them to the engine.
  // Throws Error(kInvalidArgument) naming an option, Error(kUnavailable) when a recorder
  // file or cache directory cannot be opened.
  void build_pipeline(const engine::EngineOptions& engine_options, std::uint64_t seed_key);

  // Fails queued and running requests and every later one; joins the monitor. Idempotent.
  void shutdown();
  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() { shutdown(); }
};

}  // namespace detinfer

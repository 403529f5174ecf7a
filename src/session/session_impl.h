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
#include "detinfer/consistency_monitor.h"
#include "detinfer/session.h"
#include "engine/engine.h"
#include "model/model.h"
#include "session/cache_bridge.h"
#include "session/replay.h"
#include "session/request_prep.h"
#include "session/telemetry.h"

namespace detinfer {

struct DeterministicSession::Impl {
  SessionOptions options;  // resolved
  std::unique_ptr<model::Model> model;
  std::optional<Tokenizer> tokenizer;
  // Chat templates and generation defaults of the model folder; the tokenizer hash the
  // fingerprints record (with the chat template when it has its own file). session_chat.cpp.
  chat::ChatTemplates chat_templates;
  GenerationConfig generation_defaults;
  Hash128 tokenizer_hash;
  void load_chat(const std::string& model_dir);

  // The pipeline, in the order a request passes it (all set by build_pipeline()).
  std::unique_ptr<session::RequestPrep> prep;
  std::shared_ptr<session::CacheBridge> caches;
  std::unique_ptr<engine::Engine> engine;
  std::shared_ptr<session::Telemetry> telemetry;
  std::unique_ptr<session::Replayer> replayer;
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

#include "capi/session_observer.h"

#include <exception>
#include <utility>

#include "core/log.h"
#include "engine/engine.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "session/session_impl.h"

namespace detinfer::capi {

SessionObserver::SessionObserver(DeterministicSession& session, RecordLevel level)
    : metrics_(registry_) {
  if (level == RecordLevel::kOff) return;
  RecorderOptions ro;
  ro.level = level;
  recorder_ = std::make_unique<FingerprintRecorder>(std::move(ro));
  set_host_groups(base_);
  const bool fast = session.mode() == NumericsMode::kFast;
  base_.numerics.mode = fast ? "fast" : "canonical";
  base_.numerics.kernel_isa = fast ? "torch" : kernels::to_string(kernels::active_isa());
  base_.numerics.threads = session.threads();
  base_.numerics.device = "cpu";
  const Model& model = *session.impl().model;
  base_.model.fingerprint = model.fingerprint();
  base_.model.architecture = session.architecture();
  base_.model.weight_dtype = kernels::to_string(model.config().weight_dtype);
  if (!session.tokenizer_hash().empty()) {
    base_.tokenizer_hash = Hash128::from_hex(session.tokenizer_hash());
  }
}

void SessionObserver::on_step(const StepStats& stats) {
  const std::int64_t batch = stats.decode_sequences + stats.prefill_sequences;
  if (batch > 0) metrics_.batch_size.observe(static_cast<double>(batch));
  metrics_.queue_depth.set(static_cast<double>(stats.queue_depth));
  metrics_.kv_blocks_in_use.set(static_cast<double>(stats.kv_blocks_in_use));
  metrics_.kv_blocks_capacity.set(static_cast<double>(stats.kv_blocks_capacity));
}

void SessionObserver::on_finished(const EngineRequest& request, GenerationResult& result) {
  metrics_.on_finished(result);
  if (!recorder_) return;
  // Runs on the engine thread: a failure to fingerprint must not fail the request.
  try {
    result.fingerprint_json = recorder_->record(fingerprint_of(base_, request.config, result));
  } catch (const std::exception& e) {
    logger().error("C API: fingerprint of request {} failed: {}", request.id, e.what());
  }
}

void SessionObserver::on_failed(const EngineRequest&, const Error&) {
  metrics_.requests_failed.inc();
}

std::string SessionObserver::metrics_text(const SessionStats& stats) const {
  metrics_.queue_depth.set(static_cast<double>(stats.queued));
  metrics_.kv_blocks_in_use.set(static_cast<double>(stats.kv_blocks_in_use));
  metrics_.kv_blocks_capacity.set(static_cast<double>(stats.kv_blocks_capacity));
  return registry_.render();
}

std::shared_ptr<SessionObserver> attach_observer(DeterministicSession& session, RecordLevel level) {
  auto observer = std::make_shared<SessionObserver>(session, level);
  session.impl().engine->add_observer(observer);
  return observer;
}

}  // namespace detinfer::capi

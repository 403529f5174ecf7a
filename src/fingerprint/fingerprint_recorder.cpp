#include "detinfer/fingerprint_recorder.h"

#include <cstdio>
#include <mutex>

#include "core/check.h"

namespace detinfer {

struct FingerprintRecorder::Impl {
  RecorderOptions options;
  std::mutex mu;
  std::FILE* file = nullptr;
  std::uint64_t records = 0;
};

FingerprintRecorder::FingerprintRecorder(RecorderOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  if (impl_->options.level != RecordLevel::kOff && !impl_->options.path.empty()) {
    impl_->file = std::fopen(impl_->options.path.c_str(), "ab");
    if (impl_->file == nullptr) {
      fail(ErrorCode::kUnavailable, "cannot open fingerprint file '", impl_->options.path,
           "' for appending");
    }
  }
}

FingerprintRecorder::~FingerprintRecorder() {
  if (impl_->file != nullptr) std::fclose(impl_->file);
}

RecordLevel FingerprintRecorder::level() const { return impl_->options.level; }

std::uint64_t FingerprintRecorder::records() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->records;
}

std::string FingerprintRecorder::record(RunFingerprint fp) {
  const RecordLevel level = impl_->options.level;
  if (level == RecordLevel::kOff) return {};
  fp.level = level;
  for (auto& s : fp.sequences) {
    if (!s.step_digests.empty()) s.chain_digest = chain_digest(s.step_digests);
    if (level < RecordLevel::kSteps) s.step_digests.clear();
    if (level < RecordLevel::kLogits) s.logits.clear();
  }
  if (!impl_->options.store_prompt_tokens) fp.request.prompt_tokens.reset();
  std::string line = fp.to_json(-1);
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->file != nullptr) {
      const bool ok = std::fwrite(line.data(), 1, line.size(), impl_->file) == line.size() &&
                      std::fputc('\n', impl_->file) != EOF && std::fflush(impl_->file) == 0;
      if (!ok) {
        fail(ErrorCode::kUnavailable, "writing fingerprint file '", impl_->options.path,
             "' failed");
      }
    }
    ++impl_->records;
  }
  if (impl_->options.callback) impl_->options.callback(fp, line);
  return line;
}

}  // namespace detinfer

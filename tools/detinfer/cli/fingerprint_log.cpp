#include "fingerprint_log.h"

#include <filesystem>
#include <system_error>

#include "detinfer/error.h"

namespace detinfer_cli {

namespace fs = std::filesystem;

RotatingLineFile::RotatingLineFile(const FingerprintLogOptions& options) : o_(options) {
  if (o_.max_bytes < 1) {
    throw detinfer::Error(detinfer::ErrorCode::kInvalidArgument,
                          "fingerprint.log_max_bytes must be >= 1", "fingerprint.log_max_bytes");
  }
  if (o_.keep < 0 || o_.keep > 1000) {
    throw detinfer::Error(detinfer::ErrorCode::kInvalidArgument,
                          "fingerprint.log_keep must be in [0, 1000]", "fingerprint.log_keep");
  }
  std::error_code ec;
  const auto size = fs::file_size(o_.path, ec);
  size_ = ec ? 0 : static_cast<std::int64_t>(size);
  out_.open(o_.path, std::ios::app | std::ios::binary);
  if (!out_) {
    throw detinfer::Error(detinfer::ErrorCode::kUnavailable,
                          "cannot open the fingerprint log " + o_.path, "fingerprint.log");
  }
}

void RotatingLineFile::rotate() {
  out_.close();
  std::error_code ec;
  if (o_.keep == 0) {
    fs::remove(o_.path, ec);
  } else {
    fs::remove(o_.path + "." + std::to_string(o_.keep), ec);
    for (std::int32_t i = o_.keep - 1; i >= 1; --i) {
      const std::string from = o_.path + "." + std::to_string(i);
      if (fs::exists(from, ec)) fs::rename(from, o_.path + "." + std::to_string(i + 1), ec);
    }
    fs::rename(o_.path, o_.path + ".1", ec);
  }
  out_.open(o_.path, std::ios::trunc | std::ios::binary);
  size_ = 0;
  if (!out_) {
    throw detinfer::Error(detinfer::ErrorCode::kUnavailable,
                          "cannot reopen the fingerprint log " + o_.path, "fingerprint.log");
  }
}

void RotatingLineFile::write(const std::string& line) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto n = static_cast<std::int64_t>(line.size()) + 1;
  if (size_ > 0 && size_ + n > o_.max_bytes) rotate();
  out_ << line << '\n';
  out_.flush();
  if (!out_) {
    throw detinfer::Error(detinfer::ErrorCode::kUnavailable,
                          "cannot write the fingerprint log " + o_.path, "fingerprint.log");
  }
  size_ += n;
}

std::shared_ptr<RotatingLineFile> attach_fingerprint_log(ToolConfig& config) {
  if (config.fingerprint_log.path.empty()) return nullptr;
  auto file = std::make_shared<RotatingLineFile>(config.fingerprint_log);
  auto previous = config.session.recorder.callback;
  std::weak_ptr<RotatingLineFile> weak = file;
  config.session.recorder.callback = [weak, previous](const detinfer::RunFingerprint& fp,
                                                      const std::string& line) {
    if (auto f = weak.lock()) f->write(line);
    if (previous) previous(fp, line);
  };
  return file;
}

}  // namespace detinfer_cli

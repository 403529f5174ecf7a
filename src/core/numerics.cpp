#include "detinfer/numerics.h"

#include <cctype>

#include "core/check.h"

namespace detinfer {

const char* to_string(NumericsMode mode) noexcept {
  switch (mode) {
    case NumericsMode::kCanonical:
      return "canonical";
    case NumericsMode::kFast:
      return "fast";
    case NumericsMode::kDeviceInvariant:
      return "device_invariant";
  }
  return "unknown";
}

NumericsMode parse_numerics_mode(const std::string& text) {
  for (const NumericsMode m :
       {NumericsMode::kCanonical, NumericsMode::kFast, NumericsMode::kDeviceInvariant}) {
    if (text == to_string(m)) return m;
  }
  throw Error(ErrorCode::kInvalidArgument,
              str_cat("numerics mode '", text,
                      "' is not one of \"canonical\", \"fast\", \"device_invariant\""),
              "numerics");
}

const char* to_string(KvDType dtype) noexcept {
  switch (dtype) {
    case KvDType::kF32:
      return "f32";
    case KvDType::kBF16:
      return "bf16";
    case KvDType::kF16:
      return "f16";
  }
  return "unknown";
}

KvDType parse_kv_dtype(const std::string& text) {
  for (const KvDType d : {KvDType::kF32, KvDType::kBF16, KvDType::kF16}) {
    if (text == to_string(d)) return d;
  }
  throw Error(ErrorCode::kInvalidArgument,
              str_cat("kv_dtype '", text, "' is not one of \"f32\", \"bf16\", \"f16\""),
              "kv_dtype");
}

DeviceSpec parse_device(const std::string& text) {
  DeviceSpec d;
  if (text == "cpu") return d;
  d.type = Device::kCuda;
  if (text == "cuda") return d;
  const std::string prefix = "cuda:";
  const std::string digits =
      text.size() > prefix.size() && text.compare(0, prefix.size(), prefix) == 0
          ? text.substr(prefix.size())
          : std::string();
  bool ok = !digits.empty() && digits.size() <= 4;
  for (const char c : digits) ok = ok && std::isdigit(static_cast<unsigned char>(c)) != 0;
  if (ok) d.index = std::stoi(digits);
  if (!ok || d.index > 1023) {
    throw Error(
        ErrorCode::kInvalidArgument,
        str_cat("device '", text, "' is not \"cpu\", \"cuda\" or \"cuda:N\" (N in 0..1023)"),
        "device");
  }
  return d;
}

std::string to_string(const DeviceSpec& device) {
  return device.type == Device::kCpu ? "cpu" : "cuda:" + std::to_string(device.index);
}

}  // namespace detinfer

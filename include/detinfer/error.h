// The one exception type of detinfer's C++ API.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "detinfer/export.h"

namespace detinfer {

// What kind of failure an Error reports. Stable: the C API returns these numbers.
enum class ErrorCode : std::int32_t {
  kInvalidArgument = 1,    // a caller-supplied value is out of range or malformed
  kNotFound = 2,           // a file, tensor, token or entry does not exist
  kCorrupt = 3,            // stored data fails validation (bounds, checksum, format)
  kUnsupported = 4,        // a valid but unsupported architecture, dtype or component
  kResourceExhausted = 5,  // a queue, budget or memory limit is full
  kUnavailable = 6,        // a backend or the session is down or closed
  kInternal = 7,           // a broken invariant inside detinfer (a bug)
};

// Stable lowercase name of a code, e.g. "invalid_argument".
DETINFER_API const char* to_string(ErrorCode code) noexcept;

// Every failure of the public C++ API is thrown as a detinfer::Error. The message
// names the file, field or value at fault; what() is "<code>: <message>".
class DETINFER_API Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message);
  // `field` names the offending input (e.g. "temperature", "messages[2].role",
  // "tokenizer.json: model.merges"); empty when no single field is at fault.
  Error(ErrorCode code, const std::string& message, std::string field);

  ErrorCode code() const noexcept { return code_; }
  // The message without the code prefix.
  const std::string& message() const noexcept { return message_; }
  // The offending field, or "" (servers map it to OpenAI's `param`, the C API reports it).
  const std::string& field() const noexcept { return field_; }

 private:
  ErrorCode code_;
  std::string message_;
  std::string field_;
};

}  // namespace detinfer

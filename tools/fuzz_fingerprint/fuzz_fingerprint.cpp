// libFuzzer target: RunFingerprint::from_json on arbitrary bytes must either throw
// detinfer::Error or return a fingerprint that re-serializes to itself and diffs as
// identical with its own round trip. Anything else (a crash, a sanitizer report, another
// exception type) is a bug.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "detinfer/error.h"
#include "detinfer/fingerprint.h"
#include "detinfer/fingerprint_diff.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  detinfer::RunFingerprint fp;
  try {
    fp = detinfer::RunFingerprint::from_json(text);
  } catch (const detinfer::Error&) {
    return 0;
  }
  const std::string once = fp.to_json();
  const detinfer::RunFingerprint back = detinfer::RunFingerprint::from_json(once);
  if (back.to_json() != once || !detinfer::diff(fp, back).identical()) std::abort();
  return 0;
}

#include "session/session_fields.h"

#include <type_traits>

#include "core/check.h"

namespace detinfer::session {

void check_session_ranges(const SessionOptions& options) {
  for_each_session_field(options, [](const SessionFieldSpec& f, const auto& value) {
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      if (!f.ranged()) return;
      const auto v = static_cast<std::int64_t>(value);
      if (v < f.lo || v > f.hi) {
        throw Error(
            ErrorCode::kInvalidArgument,
            str_cat("SessionOptions.", f.member, " must be in [", f.lo, ", ", f.hi, "], got ", v),
            f.member);
      }
    }
  });
}

}  // namespace detinfer::session

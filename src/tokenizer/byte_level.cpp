#include "tokenizer/byte_level.h"

#include "tokenizer/utf8.h"

namespace detinfer::tokenizer {

namespace {
struct Tables {
  std::array<std::uint8_t, 256> order{};
  std::array<char32_t, 256> to_cp{};
  std::array<std::string, 256> to_str;
  std::array<std::int16_t, 324> from_cp{};  // code points < 256 + 68

  Tables() {
    from_cp.fill(-1);
    int n = 0;
    const auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    int k = 0;
    for (int b = 0; b < 256; ++b) {
      if (printable(b)) order[k++] = static_cast<std::uint8_t>(b);
    }
    for (int b = 0; b < 256; ++b) {
      if (!printable(b)) order[k++] = static_cast<std::uint8_t>(b);
    }
    for (int b = 0; b < 256; ++b) {
      to_cp[b] = printable(b) ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
      from_cp[to_cp[b]] = static_cast<std::int16_t>(b);
      append_utf8(to_str[b], to_cp[b]);
    }
  }
};

const Tables& tables() {
  static const Tables t;  // immutable after construction (thread-safe init)
  return t;
}
}  // namespace

const std::array<std::uint8_t, 256>& byte_level_order() { return tables().order; }

char32_t byte_to_code_point(std::uint8_t byte) { return tables().to_cp[byte]; }

int code_point_to_byte(char32_t cp) {
  const auto& t = tables();
  return cp < t.from_cp.size() ? t.from_cp[cp] : -1;
}

const std::string& byte_to_char(std::uint8_t byte) { return tables().to_str[byte]; }

std::string bytes_to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) out += byte_to_char(static_cast<std::uint8_t>(c));
  return out;
}

}  // namespace detinfer::tokenizer

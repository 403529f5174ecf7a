// Hand-made hostile GGUF files (truncations, huge counts, overlapping or misaligned tensors,
// wrong types, bad UTF-8, shape/type mismatches): each is a detinfer::Error with the
// expected code and a message naming what is wrong. The libFuzzer target tools/fuzz_gguf
// covers the same parser with random bytes.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "detinfer/error.h"
#include "devtools/gguf_writer.h"
#include "model/gguf.h"

namespace detinfer::model {
namespace {

using devtools::GgufWriter;
using devtools::put_gguf_string;
using devtools::put_u32;
using devtools::put_u64;
using Bytes = std::vector<std::uint8_t>;

// A file built by hand: header(version, tensors, kvs) then whatever the case appends.
struct Raw {
  Bytes b;
  explicit Raw(std::uint64_t n_tensors = 0, std::uint64_t n_kv = 0, std::uint32_t version = 3) {
    put_u32(b, 0x46554747u);
    put_u32(b, version);
    put_u64(b, n_tensors);
    put_u64(b, n_kv);
  }
  Raw& u32(std::uint32_t v) { return put_u32(b, v), *this; }
  Raw& u64(std::uint64_t v) { return put_u64(b, v), *this; }
  Raw& str(const std::string& s) { return put_gguf_string(b, s), *this; }
  Raw& byte(std::uint8_t v) { return b.push_back(v), *this; }
  Raw& kv_u32(const std::string& k, std::uint32_t v) { return str(k).u32(4).u32(v); }
  // A tensor directory entry.
  Raw& tensor(const std::string& name, std::vector<std::uint64_t> dims, std::uint32_t type,
              std::uint64_t offset) {
    str(name).u32(static_cast<std::uint32_t>(dims.size()));
    for (auto d : dims) u64(d);
    return u32(type).u64(offset);
  }
  // Pads to 32 and appends n data bytes.
  Raw& data(std::size_t n) {
    b.resize((b.size() + 31) / 32 * 32, 0);
    b.resize(b.size() + n, 7);
    return *this;
  }
};

struct Case {
  const char* name;
  std::function<Bytes()> make;
  ErrorCode code;
  const char* message_part;
};

Bytes truncate(Bytes b, std::size_t n) {
  b.resize(n);
  return b;
}

Bytes good_file() {
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_string_array("tokenizer.ggml.tokens", {"a", "b"});
  w.add_tensor("t", {32}, 0, Bytes(128, 1));
  return w.bytes();
}

std::vector<Case> cases() {
  constexpr auto C = ErrorCode::kCorrupt;
  constexpr auto U = ErrorCode::kUnsupported;
  const std::uint64_t huge = 1ull << 62;
  return {
      {"empty", [] { return Bytes{}; }, C, "truncated"},
      {"three bytes",
       [] {
         return Bytes{'G', 'G', 'U'};
       },
       C, "truncated"},
      {"bad magic",
       [] {
         auto b = Raw().b;
         b[0] = 'X';
         return b;
       },
       C, "magic"},
      {"version 1", [] { return Raw(0, 0, 1).b; }, U, "version 1"},
      {"version 4", [] { return Raw(0, 0, 4).b; }, U, "version 4"},
      {"big-endian", [] { return Raw(0, 0, 0x03000000u).b; }, U, "big-endian"},
      {"truncated counts", [] { return truncate(Raw().b, 12); }, C, "tensor count"},
      {"huge tensor count", [] { return Raw(huge, 0).b; }, C, "tensors"},
      {"huge metadata count", [] { return Raw(0, huge).b; }, C, "metadata pairs"},
      {"more pairs than bytes", [] { return Raw(0, 5).kv_u32("a", 1).b; }, C, "truncated"},
      {"huge key length", [] { return Raw(0, 1).u64(huge).b; }, C, "metadata key"},
      {"key past the end", [] { return Raw(0, 1).u64(100).b; }, C, "truncated"},
      {"key invalid UTF-8", [] { return Raw(0, 1).str("a\xff").u32(4).u32(1).b; }, C, "UTF-8"},
      {"key overlong UTF-8", [] { return Raw(0, 1).str("\xc0\xaf").u32(4).u32(1).b; }, C, "UTF-8"},
      {"empty key", [] { return Raw(0, 1).str("").u32(4).u32(1).b; }, C, "empty"},
      {"value type 13", [] { return Raw(0, 1).str("k").u32(13).b; }, C, "value type 13"},
      {"value type max", [] { return Raw(0, 1).str("k").u32(0xffffffffu).b; }, C, "value type"},
      {"bool of 2", [] { return Raw(0, 1).str("k").u32(7).byte(2).b; }, C, "bool"},
      {"u32 truncated", [] { return Raw(0, 1).str("k").u32(4).byte(1).b; }, C, "truncated"},
      {"huge string", [] { return Raw(0, 1).str("k").u32(8).u64(huge).b; }, C, "limit"},
      {"string past the end", [] { return Raw(0, 1).str("k").u32(8).u64(64).b; }, C, "truncated"},
      {"string invalid UTF-8", [] { return Raw(0, 1).str("k").u32(8).str("\xed\xa0\x80").b; }, C,
       "UTF-8"},
      {"array element type", [] { return Raw(0, 1).str("k").u32(9).u32(77).u64(1).b; }, C,
       "element type"},
      {"huge array", [] { return Raw(0, 1).str("k").u32(9).u32(8).u64(huge).b; }, C, "cannot fit"},
      {"array past the end", [] { return Raw(0, 1).str("k").u32(9).u32(4).u64(3).u32(1).b; }, C,
       "cannot fit"},
      {"arrays too deep",
       [] {
         Raw r(0, 1);
         r.str("k").u32(9);
         for (int d = 0; d < 6; ++d) r.u32(9).u64(1);
         return r.u32(4).u64(1).u32(0).b;
       },
       C, "nested"},
      {"duplicate key", [] { return Raw(0, 2).kv_u32("a", 1).kv_u32("a", 2).b; }, C, "twice"},
      {"alignment 0", [] { return Raw(0, 1).kv_u32("general.alignment", 0).b; }, C, "power of two"},
      {"alignment 48", [] { return Raw(0, 1).kv_u32("general.alignment", 48).b; }, C,
       "power of two"},
      {"alignment 2^31", [] { return Raw(0, 1).kv_u32("general.alignment", 1u << 31).b; }, C,
       "power of two"},
      {"alignment string", [] { return Raw(0, 1).str("general.alignment").u32(8).str("32").b; }, C,
       "not a u32"},
      {"empty tensor name", [] { return Raw(1, 0).tensor("", {32}, 0, 0).data(128).b; }, C,
       "empty name"},
      {"tensor name UTF-8", [] { return Raw(1, 0).tensor("w\xfe", {32}, 0, 0).data(128).b; }, C,
       "UTF-8"},
      {"zero dims", [] { return Raw(1, 0).tensor("w", {}, 0, 0).data(128).b; }, C, "0 dimensions"},
      {"five dims",
       [] {
         return Raw(1, 0).tensor("w", {1, 1, 1, 1, 1}, 0, 0).data(4).b;
       },
       C, "5 dimensions"},
      {"dim of 0",
       [] {
         return Raw(1, 0).tensor("w", {32, 0}, 0, 0).data(128).b;
       },
       C, "dimension of 0"},
      {"element overflow",
       [] {
         return Raw(1, 0).tensor("w", {1ull << 32, 1ull << 32, 2}, 0, 0).data(4).b;
       },
       C, "overflows"},
      {"byte size overflow",
       [] {
         return Raw(1, 0).tensor("w", {1ull << 62, 2}, 0, 0).data(4).b;
       },
       C, "overflows"},
      {"removed type 4", [] { return Raw(1, 0).tensor("w", {32}, 4, 0).data(128).b; }, C,
       "unknown type number 4"},
      {"type 1000", [] { return Raw(1, 0).tensor("w", {32}, 1000, 0).data(128).b; }, C,
       "unknown type number 1000"},
      {"Q4_K row of 100",
       [] {
         return Raw(1, 0).tensor("w", {100, 2}, 12, 0).data(4096).b;
       },
       C, "not a multiple"},
      {"Q8_0 row of 33", [] { return Raw(1, 0).tensor("w", {33}, 8, 0).data(64).b; }, C,
       "not a multiple"},
      {"misaligned offset", [] { return Raw(1, 0).tensor("w", {8}, 0, 4).data(128).b; }, C,
       "alignment"},
      {"tensor past the end", [] { return Raw(1, 0).tensor("w", {64}, 0, 0).data(128).b; }, C,
       "past the end"},
      {"huge offset", [] { return Raw(1, 0).tensor("w", {8}, 0, 1ull << 63).data(128).b; }, C,
       "past the end"},
      {"offset + size wraps", [] { return Raw(1, 0).tensor("w", {8}, 0, ~31ull).data(128).b; }, C,
       "past the end"},
      {"overlapping tensors",
       [] { return Raw(2, 0).tensor("a", {16}, 0, 0).tensor("b", {16}, 0, 32).data(128).b; }, C,
       "overlap"},
      {"duplicate tensor",
       [] { return Raw(2, 0).tensor("a", {8}, 0, 0).tensor("a", {8}, 0, 32).data(64).b; }, C,
       "twice"},
      {"truncated directory", [] { return truncate(Raw(1, 0).tensor("w", {8}, 0, 0).b, 40); }, C,
       "truncated"},
      {"no data section", [] { return Raw(1, 0).tensor("w", {8}, 0, 0).b; }, C, "past the end"},
      {"good file cut in the middle",
       [] {
         auto b = good_file();
         return truncate(b, b.size() / 2);
       },
       C, "truncated"},
      {"good file without its last byte",
       [] {
         auto b = good_file();
         return truncate(b, b.size() - 1);
       },
       C, "past the end"},
  };
}

TEST(GgufHostile, EveryHandMadeFileIsAClearError) {
  const std::vector<Case> all = cases();
  EXPECT_GE(all.size(), 40u);
  for (const Case& c : all) {
    const Bytes b = c.make();
    try {
      (void)parse_gguf(b.data(), b.size(), "hostile.gguf");
      ADD_FAILURE() << c.name << ": parsed without an error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), c.code) << c.name << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find(c.message_part), std::string::npos)
          << c.name << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find("hostile.gguf"), std::string::npos) << c.name;
    }
  }
}

// Every prefix of a well-formed file is an error, never a crash or a read past its end
// (the parser gets exactly the prefix's bytes: AddressSanitizer builds catch any overread).
TEST(GgufHostile, EveryPrefixOfAGoodFileIsRejected) {
  const Bytes good = good_file();
  (void)parse_gguf(good.data(), good.size(), "good.gguf");
  for (std::size_t n = 0; n < good.size(); ++n) {
    Bytes prefix(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_THROW((void)parse_gguf(prefix.data(), prefix.size(), "p.gguf"), Error) << n;
  }
}

// A single flipped byte anywhere in a good file parses or is an Error; nothing else.
TEST(GgufHostile, FlippedBytesParseOrFailCleanly) {
  const Bytes good = good_file();
  for (std::size_t i = 0; i < good.size(); ++i) {
    for (std::uint8_t x : {0x01, 0x80, 0xff}) {
      Bytes b = good;
      b[i] ^= x;
      try {
        (void)parse_gguf(b.data(), b.size(), "f.gguf");
      } catch (const Error&) {
      }
    }
  }
}

}  // namespace
}  // namespace detinfer::model

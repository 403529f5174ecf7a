#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/check.h"
#include "tokenizer/unicode_classes.h"

namespace detinfer::tokenizer {

struct Regex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

namespace {
struct MatchData {
  pcre2_match_data* md;
  explicit MatchData(const pcre2_code* code)
      : md(pcre2_match_data_create_from_pattern(code, nullptr)) {
    if (md == nullptr) fail(ErrorCode::kResourceExhausted, "pcre2_match_data_create failed");
  }
  ~MatchData() { pcre2_match_data_free(md); }
  MatchData(const MatchData&) = delete;
  MatchData& operator=(const MatchData&) = delete;
};

struct JitStack {
  pcre2_jit_stack* stack;
  pcre2_match_context* ctx;
  JitStack()
      : stack(pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, nullptr)),
        ctx(pcre2_match_context_create(nullptr)) {
    if (stack == nullptr || ctx == nullptr) fail(ErrorCode::kResourceExhausted, "pcre2 JIT stack");
    pcre2_jit_stack_assign(ctx, nullptr, stack);
  }
  ~JitStack() {
    pcre2_match_context_free(ctx);
    pcre2_jit_stack_free(stack);
  }
  JitStack(const JitStack&) = delete;
  JitStack& operator=(const JitStack&) = delete;
};

// The Unicode version of the PCRE2 library's property tables ("14.0.0" for 10.42).
const std::string& pcre2_unicode_version() {
  static const std::string version = [] {
    PCRE2_UCHAR buf[64] = {};
    return pcre2_config(PCRE2_CONFIG_UNICODE_VERSION, buf) > 0
               ? std::string(reinterpret_cast<const char*>(buf))
               : std::string();
  }();
  return version;
}

std::string pcre2_message(int rc) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(rc, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}
}  // namespace

Regex::Regex(const std::string& pattern, bool literal, std::string_view what) : pattern_(pattern) {
  int err = 0;
  PCRE2_SIZE off = 0;
  const std::uint32_t opts = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  auto compile = [&](const std::string& p) {
    return pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(), opts, &err, &off,
                         nullptr);
  };
  // General categories as Unicode 16.0 defines them (unicode_classes.h), not PCRE2's.
  const std::string pinned =
      literal ? pattern : pin_unicode_categories(pattern, pcre2_unicode_version());
  pcre2_code* code = compile(pinned);
  if (code == nullptr && pinned != pattern) {
    // Report the error at the offset of the pattern as written; a pattern that compiles
    // only unpinned is refused rather than matched with other tables.
    const int pinned_err = err;
    pcre2_code* plain = compile(pattern);
    if (plain != nullptr) {
      pcre2_code_free(plain);
      fail(ErrorCode::kUnsupported, what, ": regex '", pattern,
           "' does not compile with its Unicode categories spelled out: ",
           pcre2_message(pinned_err));
    }
  }
  if (code == nullptr) {
    fail(ErrorCode::kCorrupt, what, ": regex '", pattern, "' does not compile at offset ", off,
         ": ", pcre2_message(err));
  }
  auto c = std::make_shared<Code>();
  c->code = code;
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  code_ = std::move(c);
}

void Regex::find_all(std::string_view text,
                     std::vector<std::pair<std::size_t, std::size_t>>& out) const {
  const pcre2_code* code = code_->code;
  MatchData data(code);
  std::unique_ptr<JitStack> big_stack;  // only when the default JIT stack runs out
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t pos = 0;
  while (pos <= text.size()) {
    int rc;
    if (jit_) {
      rc = pcre2_jit_match(code, subject, text.size(), pos, 0, data.md,
                           big_stack ? big_stack->ctx : nullptr);
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !big_stack) {
        big_stack = std::make_unique<JitStack>();
        continue;
      }
    } else {
      rc = pcre2_match(code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, data.md, nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      fail(ErrorCode::kResourceExhausted, "pre-tokenizer regex '", pattern_,
           "' failed on a text of ", text.size(), " bytes: ", pcre2_message(rc));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data.md);
    const std::size_t start = ov[0], end = ov[1];
    if (end > start) {
      out.emplace_back(start, end);
      pos = end;
    } else {
      // Empty match: step over one whole character.
      if (start >= text.size()) break;
      std::size_t next = start + 1;
      while (next < text.size() && (static_cast<unsigned char>(text[next]) & 0xC0) == 0x80) ++next;
      pos = next;
    }
  }
}

}  // namespace detinfer::tokenizer

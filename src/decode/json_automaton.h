// A character-level pushdown automaton over JSON text for a compiled JsonGrammar: it
// accepts exactly the compact JSON texts (an optional single space after ':' and ',')
// whose value the grammar admits. Iterative: one stack of frames per live anyOf
// branch (at most kMaxStacks), each at most kMaxSchemaDepth * 2 + 2 frames deep, so a
// step costs a bounded amount of work whatever the schema.
#pragma once

#include <cstdint>
#include <vector>

#include "decode/json_numbers.h"
#include "decode/json_schema.h"

namespace detinfer::decode {

namespace json_phase {
// Phases of each frame kind.
enum Phase : std::uint8_t {
  kStart = 0,
  // object
  kOKeyOrEnd,
  kOKeyNext,
  kOKeyNextSp,
  kOKey,
  kOColon,
  kOAfterColon,
  kOValueNext,
  kOAfterValue,
  // array
  kAFirst,
  kAAfterValue,
  kANext,
  kANextSp,
  // string
  kSBody,
  kSEsc,
  kPBody,
  kPEsc,
  kFBody,
  // number
  kNMinus,
  kNZero,
  kNInt,
  kNDot,
  kNFrac,
};

}  // namespace json_phase

struct Frame {
  std::int32_t node = 0;
  std::uint8_t phase = 0;
  std::uint8_t flag = 0;
  std::uint16_t pos = 0;
  std::int32_t a = 0;
  std::int32_t b = 0;
  std::int64_t v = 0;  // a number's integer digits (bounded numbers need the value)
};

class JsonState {
 public:
  // Expects one value of the grammar's root. `g` must outlive the state.
  explicit JsonState(const JsonGrammar* g);

  // Copies the position only (reuses this state's buffers: no allocation once warm).
  void copy_from(const JsonState& o) {
    frames_.assign(o.frames_.begin(), o.frames_.end());
    ends_.assign(o.ends_.begin(), o.ends_.end());
  }

  // Consumes one byte of output text. False when no branch accepts it; the state is
  // then dead (dead() is true) and accepts nothing more.
  bool advance(std::uint8_t byte);
  bool advance(const std::string& bytes) {
    for (const char ch : bytes) {
      if (!advance(static_cast<std::uint8_t>(ch))) return false;
    }
    return true;
  }

  bool dead() const { return ends_.empty(); }
  // The value is complete and nothing may follow it.
  bool done() const;
  // When every live branch is inside a free string (no format), between characters:
  // the most characters one of them may still take (its maxLength less what it holds).
  // A "plain" text (no control character, quote or backslash) of at most that many
  // characters is then accepted (by the branches with room for it); -1 otherwise.
  std::int64_t string_room() const;
  // When the state is one stack whose innermost value is a pattern string between
  // characters (or after a backslash): that string's DFA, with `cursor` set; else nullptr.
  // The token mask then walks the DFA alone until a token closes the string.
  const PatternDfa* pattern_top(PatternCursor& cursor) const;
  // The text so far is a complete value (done(), or a root number or literal that a
  // longer one could still extend): a stop token may end it.
  bool can_end() const;

 private:
  struct Sink;
  void feed(std::vector<Frame>& s, std::uint8_t c, Sink& out) const;
  void enter(std::vector<Frame>& s, std::int32_t node, std::uint8_t c, Sink& out) const;
  // What a frame did with a byte: consumed it (kDone: and the value is complete), is
  // complete without it (hand it to the frame below), opens the child value `push` with
  // it, or rejects it (the stack dies). Handlers live in json_steps.cpp.
  enum class Step : std::uint8_t { kConsumed, kDone, kPopRefeed, kPushRefeed, kReject };
  // `room`: the frames that may still be pushed above `f` (a child opens only if its
  // min_frames fit, so an optional property or item too deep to finish is never begun).
  Step object_step(Frame& f, std::uint8_t c, std::int32_t room, std::int32_t& push) const;
  Step array_step(Frame& f, std::uint8_t c, std::int32_t room, std::int32_t& push) const;
  Step string_step(Frame& f, std::uint8_t c) const;
  Step format_step(Frame& f, std::uint8_t c) const;
  Step pattern_step(Frame& f, std::uint8_t c) const;
  Step number_step(Frame& f, std::uint8_t c) const;
  static Step number_byte(Frame& f, std::uint8_t c, bool integer);
  static NumberPrefix number_prefix(const Frame& f);
  Step literal_step(Frame& f, const std::vector<std::string>& lits, std::uint8_t c) const;
  Step key_step(Frame& f, std::uint8_t c, std::int32_t room) const;
  // Some property in [from, the next required one] has a value that fits in `room`.
  bool key_fits(const Node& n, std::int32_t from, std::int32_t room) const;

  const JsonGrammar* g_;
  std::vector<Frame> frames_;        // the stacks, one after another
  std::vector<std::uint16_t> ends_;  // end of each stack in frames_
  std::vector<Frame> next_frames_, work_;
  std::vector<std::uint16_t> next_ends_;
};

}  // namespace detinfer::decode

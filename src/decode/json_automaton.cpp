#include "decode/json_automaton.h"

#include <algorithm>
#include <utility>

#include "core/check.h"

namespace detinfer::decode {

using namespace json_phase;  // NOLINT(build/namespaces)

struct JsonState::Sink {
  std::vector<Frame>* frames;
  std::vector<std::uint16_t>* ends;
  void push(const std::vector<Frame>& s) {
    DETINFER_INTERNAL_CHECK(ends->size() < static_cast<std::size_t>(kMaxStacks));
    frames->insert(frames->end(), s.begin(), s.end());
    ends->push_back(static_cast<std::uint16_t>(frames->size()));
  }
};

JsonState::JsonState(const JsonGrammar* g) : g_(g) {
  const Node& root = g->nodes[g->root];
  if (root.kind == NodeKind::kUnion) {
    for (const std::int32_t alt : root.alts) {
      if (g->nodes[alt].min_frames > kMaxFrames) continue;  // no value fits
      frames_.push_back(Frame{alt});
      ends_.push_back(static_cast<std::uint16_t>(frames_.size()));
    }
  } else {
    frames_.push_back(Frame{g->root});
    ends_.push_back(1);
  }
}

bool JsonState::advance(std::uint8_t byte) {
  next_frames_.clear();
  next_ends_.clear();
  Sink out{&next_frames_, &next_ends_};
  std::size_t begin = 0;
  for (const std::uint16_t end : ends_) {
    work_.assign(frames_.begin() + static_cast<std::ptrdiff_t>(begin),
                 frames_.begin() + static_cast<std::ptrdiff_t>(end));
    feed(work_, byte, out);
    begin = end;
  }
  std::swap(frames_, next_frames_);
  std::swap(ends_, next_ends_);
  return !ends_.empty();
}

bool JsonState::done() const {
  std::size_t begin = 0;
  for (const std::uint16_t end : ends_) {
    if (end == begin) return true;
    begin = end;
  }
  return false;
}

bool JsonState::can_end() const {
  if (done()) return true;
  std::size_t begin = 0;
  for (const std::uint16_t end : ends_) {
    if (end == begin + 1) {
      const Frame& f = frames_[begin];
      const NodeKind k = g_->nodes[f.node].kind;
      if ((k == NodeKind::kNumber || k == NodeKind::kInteger) &&
          (f.phase == kNZero || f.phase == kNInt || f.phase == kNFrac) &&
          (!g_->nodes[f.node].bounds || inside(number_prefix(f), *g_->nodes[f.node].bounds))) {
        return true;
      }
      if (k == NodeKind::kLiteral && f.flag != 0) return true;
    }
    begin = end;
  }
  return false;
}

std::int64_t JsonState::string_room() const {
  std::int64_t room = -1;
  std::size_t begin = 0;
  for (const std::uint16_t end : ends_) {
    if (end == begin) return -1;  // a complete value accepts nothing
    const Frame& f = frames_[end - 1];
    const Node& n = g_->nodes[f.node];
    if (n.kind != NodeKind::kString || !n.format.empty() || f.phase != kSBody || f.b != 0) {
      return -1;
    }
    room = std::max<std::int64_t>(room, static_cast<std::int64_t>(n.max_length) - f.a);
    begin = end;
  }
  return room;
}

void JsonState::enter(std::vector<Frame>& s, std::int32_t node, std::uint8_t c, Sink& out) const {
  // A value opens only where its smallest completion fits under the frame limit.
  const auto fits = [&](std::int32_t k) {
    return static_cast<std::int64_t>(s.size()) + g_->nodes[k].min_frames <= kMaxFrames;
  };
  const Node& n = g_->nodes[node];
  if (n.kind != NodeKind::kUnion) {
    if (!fits(node)) return;
    s.push_back(Frame{node});
    feed(s, c, out);
    return;
  }
  for (const std::int32_t alt : n.alts) {  // alternatives are never unions themselves
    if (!fits(alt)) continue;
    std::vector<Frame> copy = s;
    copy.push_back(Frame{alt});
    feed(copy, c, out);
  }
}

void JsonState::feed(std::vector<Frame>& s, std::uint8_t c, Sink& out) const {
  // A byte is handed on at most once per frame popped; the stack bounds the loop.
  while (!s.empty()) {
    Frame& f = s.back();
    const Node& n = g_->nodes[f.node];
    std::int32_t push = -1;
    Step st = Step::kReject;
    const std::int32_t room = kMaxFrames - static_cast<std::int32_t>(s.size());
    switch (n.kind) {
      case NodeKind::kObject:
        st = object_step(f, c, room, push);
        break;
      case NodeKind::kArray:
        st = array_step(f, c, room, push);
        break;
      case NodeKind::kString:
        st = n.format.empty() ? string_step(f, c) : format_step(f, c);
        break;
      case NodeKind::kPattern:
        st = pattern_step(f, c);
        break;
      case NodeKind::kNumber:
      case NodeKind::kInteger:
        st = number_step(f, c);
        break;
      case NodeKind::kLiteral:
        st = literal_step(f, n.literals, c);
        break;
      case NodeKind::kUnion:
        return;  // never on a stack
    }
    switch (st) {
      case Step::kConsumed:
        out.push(s);
        return;
      case Step::kDone:
        s.pop_back();
        out.push(s);
        return;
      case Step::kPopRefeed:
        s.pop_back();
        continue;
      case Step::kPushRefeed:
        enter(s, push, c, out);
        return;
      case Step::kReject:
        return;
    }
  }
}

}  // namespace detinfer::decode

// Stop strings matched on decoded text across token boundaries. Text that could still
// turn into a stop string is held back, so streamed pieces never show any part of a
// stop string and their concatenation equals the final (trimmed) text.
#pragma once

#include <string>
#include <vector>

namespace detinfer::decode {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stop_strings);

  struct Result {
    std::string emit;      // text that is now final
    bool stopped = false;  // a stop string matched; `emit` ends right before it
  };
  // Feeds the next decoded piece. After a stop, further pushes emit nothing.
  Result push(const std::string& piece);
  // End of generation: releases held-back text (unless stopped).
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace detinfer::decode

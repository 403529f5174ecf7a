// Paths and contents of tests/tokenizer/fixtures/.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace detinfer::testing {

inline std::string fixture_path(const std::string& name) {
  return std::string(DETINFER_SOURCE_DIR) + "/tests/tokenizer/fixtures/" + name;
}

inline std::string read_fixture(const std::string& name) {
  std::ifstream in(fixture_path(name), std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace detinfer::testing

// A main for the libFuzzer harnesses of tools/fuzz*/ built with the project's compiler (no
// libFuzzer, no sanitizers): runs LLVMFuzzerTestOneInput once on every file named on the
// command line, directories expanded in name order. CTest runs each harness over its seed
// corpus (tools/CMakeLists.txt, detinfer_fuzz_replay), so a harness whose source list no
// longer links, or that crashes or throws on a seed, fails the ordinary test run; the
// sanitized, mutating runs stay the clang targets' (docs/building.md, "Fuzzing").
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

std::vector<std::filesystem::path> inputs(int argc, char** argv) {
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg(argv[i]);
    if (!std::filesystem::is_directory(arg)) {
      files.push_back(arg);
      continue;
    }
    std::vector<std::filesystem::path> dir;
    for (const auto& entry : std::filesystem::directory_iterator(arg))
      if (entry.is_regular_file()) dir.push_back(entry.path());
    std::sort(dir.begin(), dir.end());
    files.insert(files.end(), dir.begin(), dir.end());
  }
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::filesystem::path> files = inputs(argc, argv);
  if (files.empty()) {
    std::fprintf(stderr, "usage: %s FILE_OR_DIR...: no input files\n", argv[0]);
    return 2;
  }
  for (const auto& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "cannot read %s\n", file.string().c_str());
      return 2;
    }
    const std::vector<char> bytes{std::istreambuf_iterator<char>(in),
                                  std::istreambuf_iterator<char>()};
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  }
  std::fprintf(stderr, "ran %zu inputs\n", files.size());
  return 0;
}

// A program outside the detinfer tree that uses only the public headers. Built four times
// by run_consumers.sh (find_package(detinfer) shared and static, pkg-config shared and
// static) and once by the add_subdirectory consumer (tests/consumer/subdir_project).
// Usage: consumer <tiny model dir> (written by detinfer_tiny_model). It runs a greedy and
// a seeded sampled generation and prints one "result:" line that must be identical for
// every build.
// Exits 0 only when every check passes.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "detinfer/environment.h"
#include "detinfer/error.h"
#include "detinfer/hash.h"
#include "detinfer/session.h"
#include "detinfer/version.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <tiny model dir>\n", argv[0]);
    return 2;
  }
  try {
    const detinfer::EnvironmentInfo env = detinfer::collect_environment();
    if (env.library_version != DETINFER_VERSION_STRING) {
      std::fprintf(stderr, "library %s != header %s\n", env.library_version.c_str(),
                   DETINFER_VERSION_STRING);
      return 1;
    }
    // XXH3-128 of "abc" (xxhsum -H2): the digest is part of the stable API.
    const std::string digest = detinfer::xxh3_128("abc").hex();
    if (digest != "06b05ab6733a618578af5f94892f3950") {
      std::fprintf(stderr, "xxh3_128(abc) = %s\n", digest.c_str());
      return 1;
    }
    // Errors cross the library boundary as detinfer::Error (typeinfo is exported).
    try {
      detinfer::Hash128::from_hex("not-hex");
      std::fprintf(stderr, "from_hex accepted garbage\n");
      return 1;
    } catch (const detinfer::Error& e) {
      if (e.code() != detinfer::ErrorCode::kInvalidArgument) return 1;
    }
    // The tiny model (deterministic random weights): a greedy and a seeded sampled
    // generation through a DeterministicSession.
    const std::string model_dir = argv[1];
    detinfer::SessionOptions options;
    options.threads = 2;
    auto session = detinfer::DeterministicSession::open(model_dir, options);
    detinfer::GenerationConfig greedy;
    greedy.max_new_tokens = 8;
    greedy.ignore_eos = true;
    const detinfer::GenerationResult greedy_result = session.generate("The quick", greedy);
    detinfer::GenerationConfig config;
    config.max_new_tokens = 12;
    config.temperature = 0.8f;
    config.seed = 1234;
    config.ignore_eos = true;
    const detinfer::GenerationResult result = session.generate("Hello, world", config);
    const detinfer::Sequence& seq = result.sequences.at(0);
    if (seq.tokens.size() != 12) {
      std::fprintf(stderr, "generated %zu tokens, expected 12\n", seq.tokens.size());
      return 1;
    }
    std::string tokens;
    for (std::int32_t t : seq.tokens) tokens += std::to_string(t) + " ";
    std::printf("consumer ok: detinfer %s, numerics spec v%d\n", env.library_version.c_str(),
                env.numerics_spec_version);
    std::printf("result: model %s greedy %s tokens %sdigest %s\n",
                session.model_fingerprint().c_str(),
                detinfer::hex64(greedy_result.sequences.at(0).digest).c_str(), tokens.c_str(),
                detinfer::hex64(seq.digest).c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer failed: %s\n", e.what());
    return 1;
  }
}

// A program outside the detinfer tree that uses only the installed public headers. Built
// twice by run_consumers.sh: with find_package(detinfer) (shared and static) and with
// pkg-config. Exits 0 only when every check passes.
#include <cstdio>
#include <cstring>
#include <string>

#include "detinfer/environment.h"
#include "detinfer/error.h"
#include "detinfer/hash.h"
#include "detinfer/version.h"

int main() {
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
    std::printf("consumer ok: detinfer %s, numerics spec v%d, %s\n", env.library_version.c_str(),
                env.numerics_spec_version, digest.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer failed: %s\n", e.what());
    return 1;
  }
}

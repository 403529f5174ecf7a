// Facts fixed at configure time (generated build_info.cpp).
#pragma once

namespace detinfer::build_info {
extern const char* const kVersion;
extern const char* const kGitRevision;
extern const char* const kCompiler;
extern const char* const kBuildType;
extern const char* const kBuildFlags;
extern const char* const kTorchVersion;
extern const bool kCudaCompiled;
}  // namespace detinfer::build_info

// Symbol visibility for detinfer's public API. The library is built with hidden
// visibility; only declarations marked DETINFER_API are exported from libdetinfer.so.
#pragma once

#if defined(DETINFER_STATIC_DEFINE)
#define DETINFER_API
#elif defined(DETINFER_BUILDING_LIBRARY)
#define DETINFER_API __attribute__((visibility("default")))
#else
#define DETINFER_API __attribute__((visibility("default")))
#endif

// DETINFER_LOCAL: never exported, also where the enclosing class is (a nested Impl of a
// DETINFER_API class would otherwise inherit its visibility).
#if defined(DETINFER_STATIC_DEFINE)
#define DETINFER_LOCAL
#else
#define DETINFER_LOCAL __attribute__((visibility("hidden")))
#endif

// DETINFER_DEPRECATED(msg): public API kept for one more release, then removed; using it
// warns (-Wdeprecated-declarations) with `msg`. This repository's own code is built with
// DETINFER_IN_TREE_BUILD (target detinfer_flags), which keeps the old users quiet while
// they move off it.
#if defined(DETINFER_IN_TREE_BUILD)
#define DETINFER_DEPRECATED(msg)
#else
#define DETINFER_DEPRECATED(msg) __attribute__((deprecated(msg)))
#endif
// The classes that DeterministicSession runs for its users (consistency monitor,
// fingerprint recorder, session and cache metrics): public until the next release.
#define DETINFER_DEPRECATED_MACHINERY                                                     \
  DETINFER_DEPRECATED(                                                                    \
      "machinery of DeterministicSession, configured through SessionOptions; leaves the " \
      "public API after this release")

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

// The operational metrics `detinfer serve` adds to the session's (docs/metrics.md,
// "Server families"): build information, cache counters and hit ratios per tier, and the
// standard process_* families read from /proc.
#pragma once

#include <mutex>
#include <string>

#include "detinfer/cache_options.h"
#include "detinfer/metrics.h"
#include "detinfer/session.h"

namespace detinfer_cli {

class ServeMetrics {
 public:
  // Registers detinfer_build_info{version,spec,git,compiler,mode} 1 and the per-tier
  // cache families in the session's registry.
  explicit ServeMetrics(detinfer::DeterministicSession& session);
  // Brings the per-tier cache counters and ratios up to date (before each scrape).
  void update();

 private:
  struct Tier {
    detinfer::Counter hits, misses, hit_tokens;
    detinfer::Gauge ratio;
  };
  Tier tier(const char* cache, const char* name);
  void advance(Tier& t, const detinfer::CacheTierStats& now, const detinfer::CacheTierStats& was);

  detinfer::DeterministicSession& session_;
  std::mutex mu_;
  detinfer::CacheStats last_;
  Tier prefix_memory_, prefix_disk_, prefix_redis_, result_memory_, result_redis_;
  detinfer::Counter lookup_tokens_;
};

// process_resident_memory_bytes, process_virtual_memory_bytes, process_cpu_seconds_total,
// process_open_fds, process_max_fds and process_start_time_seconds of this process, in
// the text exposition format (families the registry's integer counters cannot hold).
std::string process_metrics_text();

}  // namespace detinfer_cli

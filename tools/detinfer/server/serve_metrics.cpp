#include "serve_metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

#include "detinfer/environment.h"
#include "detinfer/version.h"

namespace detinfer_cli {

ServeMetrics::ServeMetrics(detinfer::DeterministicSession& session)
    : session_(session),
      prefix_memory_(tier("prefix", "memory")),
      prefix_disk_(tier("prefix", "disk")),
      prefix_redis_(tier("prefix", "redis")),
      result_memory_(tier("result", "memory")),
      result_redis_(tier("result", "redis")) {
  const detinfer::EnvironmentInfo e = detinfer::collect_environment();
  session.metrics()
      .gauge("detinfer_build_info", "Build of the running detinfer (always 1)",
             {{"version", e.library_version},
              {"spec", std::to_string(e.numerics_spec_version)},
              {"git", e.git_revision},
              {"compiler", e.compiler},
              {"mode", detinfer::to_string(session.mode())}})
      .set(1);
  session.metrics()
      .gauge("detinfer_max_queue", "Waiting requests the server accepts before 429 (max_queue)")
      .set(session.options().max_queue);
  lookup_tokens_ = session.metrics().counter("detinfer_prefix_lookup_tokens_total",
                                             "Prompt tokens looked up in the KV-prefix cache");
  last_ = detinfer::CacheStats{};
}

ServeMetrics::Tier ServeMetrics::tier(const char* cache, const char* name) {
  detinfer::MetricsRegistry& r = session_.metrics();
  const detinfer::MetricLabels l = {{"cache", cache}, {"tier", name}};
  Tier t;
  t.hits = r.counter("detinfer_cache_tier_hits_total", "Cache lookups served by a tier", l);
  t.misses = r.counter("detinfer_cache_tier_misses_total", "Cache lookups a tier missed", l);
  t.hit_tokens = r.counter("detinfer_cache_tier_hit_tokens_total",
                           "Prompt tokens served by a tier (prefix cache)", l);
  t.ratio = r.gauge("detinfer_cache_hit_ratio",
                    "hits / (hits + misses) of a tier since start (NaN before any lookup)", l);
  t.ratio.set(std::numeric_limits<double>::quiet_NaN());
  return t;
}

void ServeMetrics::advance(Tier& t, const detinfer::CacheTierStats& now,
                           const detinfer::CacheTierStats& was) {
  if (now.hits > was.hits) t.hits.inc(static_cast<std::uint64_t>(now.hits - was.hits));
  if (now.misses > was.misses) t.misses.inc(static_cast<std::uint64_t>(now.misses - was.misses));
  if (now.hit_tokens > was.hit_tokens) {
    t.hit_tokens.inc(static_cast<std::uint64_t>(now.hit_tokens - was.hit_tokens));
  }
  const std::int64_t total = now.hits + now.misses;
  t.ratio.set(total > 0 ? static_cast<double>(now.hits) / static_cast<double>(total)
                        : std::numeric_limits<double>::quiet_NaN());
}

void ServeMetrics::update() {
  std::lock_guard<std::mutex> lock(mu_);
  const detinfer::CacheStats now = session_.cache_stats();
  advance(prefix_memory_, now.prefix.memory, last_.prefix.memory);
  advance(prefix_disk_, now.prefix.disk, last_.prefix.disk);
  advance(prefix_redis_, now.prefix.redis, last_.prefix.redis);
  advance(result_memory_, now.result.memory, last_.result.memory);
  advance(result_redis_, now.result.redis, last_.result.redis);
  if (now.prefix.lookup_tokens > last_.prefix.lookup_tokens) {
    lookup_tokens_.inc(
        static_cast<std::uint64_t>(now.prefix.lookup_tokens - last_.prefix.lookup_tokens));
  }
  last_ = now;
}

namespace {

void family(std::ostringstream& out, const char* name, const char* type, const char* help,
            double value) {
  out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n"
      << name << " ";
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    out << static_cast<long long>(value);
  } else {
    out.precision(17);
    out << value;
  }
  out << "\n";
}

std::int64_t open_fds() {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return 0;
  std::int64_t n = 0;
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n - 1;  // the descriptor of the directory being read
}

}  // namespace

std::string process_metrics_text() {
  // /proc/self/stat: fields after the command name (which may hold spaces) in ')'.
  std::ifstream stat_file("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  std::vector<std::string> f;
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));
  for (std::string x; rest >> x;) f.push_back(x);
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  // f[0] is field 3 (state): utime 14, stime 15, starttime 22, vsize 23, rss 24.
  auto field = [&](std::size_t n) { return f.size() > n - 3 ? std::stod(f[n - 3]) : 0.0; };
  double boot = 0;
  std::ifstream proc_stat("/proc/stat");
  for (std::string key; proc_stat >> key;) {
    if (key == "btime") {
      proc_stat >> boot;
      break;
    }
  }
  struct rlimit lim {};
  getrlimit(RLIMIT_NOFILE, &lim);
  std::ostringstream out;
  family(out, "process_cpu_seconds_total", "counter", "User and system CPU time in seconds.",
         (field(14) + field(15)) / ticks);
  family(out, "process_max_fds", "gauge", "Maximum number of open file descriptors.",
         static_cast<double>(lim.rlim_cur));
  family(out, "process_open_fds", "gauge", "Number of open file descriptors.",
         static_cast<double>(open_fds()));
  family(out, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
         field(24) * page);
  family(out, "process_start_time_seconds", "gauge",
         "Start time of the process since unix epoch in seconds.", boot + field(22) / ticks);
  family(out, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", field(23));
  return out.str();
}

}  // namespace detinfer_cli

// The rendered text, parsed by an independent parser (prometheus_parser.h).
#include <gtest/gtest.h>

#include "detinfer/metrics.h"
#include "metrics/prometheus_parser.h"

namespace detinfer {
namespace {

using testing::parse_prometheus;

const testing::Sample* find_sample(const testing::ParsedFamily& f, const std::string& name,
                                   const std::string& label = {}, const std::string& value = {}) {
  for (const auto& s : f.samples) {
    if (s.name == name && (label.empty() || s.label(label) == value)) return &s;
  }
  return nullptr;
}

TEST(PrometheusText, EscapesHelpAndLabelValues) {
  MetricsRegistry r;
  r.counter("esc_total", "line one\nback\\slash", {{"path", "a\"b\\c\nd"}}).inc(7);
  const std::string text = r.render();
  EXPECT_NE(text.find("# HELP esc_total line one\\nback\\\\slash\n"), std::string::npos) << text;
  EXPECT_NE(text.find("esc_total{path=\"a\\\"b\\\\c\\nd\"} 7\n"), std::string::npos) << text;
  const auto families = parse_prometheus(text);
  const auto& f = families.at("esc_total");
  EXPECT_EQ(f.help, "line one\nback\\slash");
  EXPECT_EQ(f.type, "counter");
  ASSERT_EQ(f.samples.size(), 1u);
  EXPECT_EQ(f.samples[0].label("path"), "a\"b\\c\nd");
  EXPECT_EQ(f.samples[0].value, 7);
}

TEST(PrometheusText, HistogramBucketsAreCumulativeAndEndInInf) {
  MetricsRegistry r;
  const Histogram h = r.histogram("lat_seconds", "h", {0.005, 0.25, 1}, {{"op", "x"}});
  for (double v : {0.001, 0.2, 0.3, 0.9, 4.0, 0.25}) h.observe(v);
  const std::string text = r.render();
  const auto families = parse_prometheus(text);
  testing::expect_valid_histograms(families);
  const auto& f = families.at("lat_seconds");
  EXPECT_EQ(f.type, "histogram");
  EXPECT_EQ(find_sample(f, "lat_seconds_bucket", "le", "0.005")->value, 1);
  EXPECT_EQ(find_sample(f, "lat_seconds_bucket", "le", "0.25")->value, 3);
  EXPECT_EQ(find_sample(f, "lat_seconds_bucket", "le", "1")->value, 5);
  EXPECT_EQ(find_sample(f, "lat_seconds_bucket", "le", "+Inf")->value, 6);
  EXPECT_EQ(find_sample(f, "lat_seconds_count")->value, 6);
  EXPECT_DOUBLE_EQ(find_sample(f, "lat_seconds_sum")->value, 5.651);
  EXPECT_EQ(find_sample(f, "lat_seconds_count")->label("op"), "x");
}

TEST(PrometheusText, GaugeSpecialValues) {
  MetricsRegistry r;
  r.gauge("g_inf", "h").set(INFINITY);
  r.gauge("g_nan", "h").set(NAN);
  r.gauge("g_frac", "h").set(0.1);
  r.gauge("g_neg", "h").set(-2);
  const auto families = parse_prometheus(r.render());
  EXPECT_TRUE(std::isinf(families.at("g_inf").samples[0].value));
  EXPECT_TRUE(std::isnan(families.at("g_nan").samples[0].value));
  EXPECT_EQ(families.at("g_frac").samples[0].value, 0.1);  // round-trips exactly
  EXPECT_EQ(families.at("g_neg").samples[0].value, -2);
}

TEST(SessionMetricsText, EveryFamilyIsValidAndValuesMove) {
  MetricsRegistry r;
  SessionMetrics m(r);
  const auto before = parse_prometheus(r.render());
  for (const char* name :
       {"detinfer_requests_total", "detinfer_requests_failed_total", "detinfer_prompt_tokens_total",
        "detinfer_generated_tokens_total", "detinfer_time_to_first_token_seconds",
        "detinfer_inter_token_latency_seconds", "detinfer_batch_size", "detinfer_queue_depth",
        "detinfer_kv_blocks_in_use", "detinfer_cache_hits_total", "detinfer_cache_misses_total",
        "detinfer_cache_bytes", "detinfer_cache_evictions_total", "detinfer_cache_corrupt_total",
        "detinfer_cache_backend_errors_total", "detinfer_replay_checks_total",
        "detinfer_consistency_ratio"}) {
    ASSERT_EQ(before.count(name), 1u) << name;
    EXPECT_FALSE(before.at(name).help.empty()) << name;
    EXPECT_FALSE(before.at(name).type.empty()) << name;
  }
  testing::expect_valid_histograms(before);
  EXPECT_EQ(find_sample(before.at("detinfer_requests_total"), "detinfer_requests_total",
                        "finish_reason", "stop")
                ->value,
            0);

  // Simulate two requests the way the engine reports them.
  m.requests(FinishReason::kStop).inc();
  m.requests(FinishReason::kLength).inc();
  m.prompt_tokens.inc(12);
  m.generated_tokens.inc(30);
  m.time_to_first_token.observe(0.042);
  for (int i = 0; i < 29; ++i) m.inter_token_latency.observe(0.003 + i * 1e-4);
  m.batch_size.observe(2);
  m.queue_depth.set(3);
  m.kv_blocks_in_use.set(17);
  m.prefix_cache.hits.inc();
  m.result_cache.misses.inc(2);
  m.prefix_cache.bytes.set(4096);
  m.replay_match.inc(999);
  m.replay_mismatch.inc();
  m.consistency_ratio.set(0.999);

  const auto after = parse_prometheus(r.render());
  testing::expect_valid_histograms(after);
  auto value = [&](const std::string& family, const std::string& sample,
                   const std::string& label = {}, const std::string& v = {}) {
    const testing::Sample* s = find_sample(after.at(family), sample, label, v);
    EXPECT_NE(s, nullptr) << sample;
    return s ? s->value : -1;
  };
  EXPECT_EQ(value("detinfer_requests_total", "detinfer_requests_total", "finish_reason", "stop"),
            1);
  EXPECT_EQ(value("detinfer_requests_total", "detinfer_requests_total", "finish_reason", "length"),
            1);
  EXPECT_EQ(value("detinfer_prompt_tokens_total", "detinfer_prompt_tokens_total"), 12);
  EXPECT_EQ(value("detinfer_generated_tokens_total", "detinfer_generated_tokens_total"), 30);
  EXPECT_EQ(
      value("detinfer_time_to_first_token_seconds", "detinfer_time_to_first_token_seconds_count"),
      1);
  EXPECT_EQ(value("detinfer_time_to_first_token_seconds",
                  "detinfer_time_to_first_token_seconds_bucket", "le", "0.05"),
            1);
  EXPECT_EQ(value("detinfer_time_to_first_token_seconds",
                  "detinfer_time_to_first_token_seconds_bucket", "le", "0.025"),
            0);
  EXPECT_EQ(
      value("detinfer_inter_token_latency_seconds", "detinfer_inter_token_latency_seconds_count"),
      29);
  EXPECT_EQ(value("detinfer_queue_depth", "detinfer_queue_depth"), 3);
  EXPECT_EQ(value("detinfer_kv_blocks_in_use", "detinfer_kv_blocks_in_use"), 17);
  EXPECT_EQ(value("detinfer_cache_hits_total", "detinfer_cache_hits_total", "cache", "prefix"), 1);
  EXPECT_EQ(value("detinfer_cache_misses_total", "detinfer_cache_misses_total", "cache", "result"),
            2);
  EXPECT_EQ(value("detinfer_cache_bytes", "detinfer_cache_bytes", "cache", "prefix"), 4096);
  EXPECT_EQ(
      value("detinfer_replay_checks_total", "detinfer_replay_checks_total", "result", "match"),
      999);
  EXPECT_EQ(value("detinfer_consistency_ratio", "detinfer_consistency_ratio"), 0.999);
}

}  // namespace
}  // namespace detinfer

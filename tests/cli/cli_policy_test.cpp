// The `detinfer` tools' option table (session_flags), fingerprint log rotation and the
// server's policies (serve_policy), tested through their C++ interfaces: every flag and
// config key round-trips into the configuration and the session; the consistency policy
// alerts at the first level and fails (sticky) at the second on injected mismatches.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "detinfer/consistency_monitor.h"
#include "detinfer/error.h"
#include "fingerprint/fingerprint_test_util.h"
#include "fingerprint_log.h"
#include "model/model_test_util.h"
#include "serve_policy.h"
#include "session/tiny_session.h"
#include "session_flags.h"

namespace detinfer_cli {
namespace {

using nlohmann::json;

// A value of the row's type that differs from `dflt`.
json other_value(const ConfigField& f, const json& dflt) {
  static const std::map<std::string, std::string> kEnums = {{"mode", "fast"},
                                                            {"kv_dtype", "bf16"},
                                                            {"log_level", "debug"},
                                                            {"fingerprint.level", "final"}};
  switch (f.type) {
    case FieldType::kBool:
      return !dflt.get<bool>();
    case FieldType::kInt:
      return dflt.get<std::int64_t>() + 3;
    case FieldType::kDouble:
      return dflt.get<double>() + 0.25;
    case FieldType::kString:
      return "value-of-" + f.key;
    default:
      return kEnums.at(f.key);
  }
}

// Parses `args` with the serve table; returns the resolved configuration.
ToolConfig parse(std::vector<std::string> args, bool serve = true) {
  CLI::App app;
  SessionFlags flags(app, serve);
  std::reverse(args.begin(), args.end());  // CLI11 takes a vector in reverse order
  app.parse(args);
  return flags.resolve();
}

std::vector<std::string> flag_args(const ConfigField& f, const json& v) {
  if (f.type == FieldType::kBool) {
    return {v.get<bool>() ? f.flag : "--no-" + f.flag.substr(2)};
  }
  return {f.flag, v.is_string() ? v.get<std::string>() : v.dump()};
}

std::string write_config(const std::string& name, const json& j) {
  static const std::string dir = detinfer::testing::scratch_dir("cli-policy");
  const std::string path = dir + "/" + name;
  std::ofstream(path) << j.dump();
  return path;
}

// The requests `detinfer serve` runs on its quick workers (ServerOptions::is_quick; the
// mechanism: HttpServer.QuickRequestsAreAnsweredWhileEveryWorkerIsBusy).
TEST(ServePolicy, ProbesAndScrapesAreTheQuickRequests) {
  auto req = [](std::string method, std::string path) {
    detinfer_http::Request r;
    r.method = std::move(method);
    r.path = std::move(path);
    return r;
  };
  EXPECT_TRUE(detinfer_cli::is_probe_request(req("GET", "/health")));
  EXPECT_TRUE(detinfer_cli::is_probe_request(req("HEAD", "/health")));
  EXPECT_TRUE(detinfer_cli::is_probe_request(req("GET", "/metrics")));
  EXPECT_FALSE(detinfer_cli::is_probe_request(req("POST", "/metrics")));
  EXPECT_FALSE(detinfer_cli::is_probe_request(req("POST", "/v1/completions")));
  EXPECT_FALSE(detinfer_cli::is_probe_request(req("POST", "/v1/chat/completions")));
  EXPECT_FALSE(detinfer_cli::is_probe_request(req("POST", "/v1/verify")));
  EXPECT_FALSE(detinfer_cli::is_probe_request(req("GET", "/v1/models")));
}

TEST(SessionFlags, EveryFlagAndConfigKeyRoundTrips) {
  const ToolConfig defaults;
  ASSERT_GE(config_fields().size(), 40u);
  for (const ConfigField& f : config_fields()) {
    SCOPED_TRACE(f.key);
    const json v = other_value(f, f.get(defaults));
    ASSERT_NE(v, f.get(defaults));
    EXPECT_EQ(f.get(parse(flag_args(f, v))), v);
    // The same value through a config file, as a nested object.
    json nested;
    nested[json::json_pointer("/" + [&] {
      std::string p = f.key;
      std::replace(p.begin(), p.end(), '.', '/');
      return p;
    }())] = v;
    const ToolConfig from_file = parse({"--config", write_config("c.json", nested)});
    EXPECT_EQ(f.get(from_file), v);
    // A flag overrides the file: the default given as a flag wins over the file's value.
    if (f.type != FieldType::kEnum || f.key != "log_level") {
      const json d = f.get(defaults);
      std::vector<std::string> args = flag_args(f, d);
      args.insert(args.begin(), {"--config", write_config("c.json", nested)});
      EXPECT_EQ(f.get(parse(args)), d);
    }
  }
}

TEST(SessionFlags, PrintConfigShowsEveryKeyOnce) {
  const json j = config_json(ToolConfig{}, true);
  const json flat = j.flatten();
  EXPECT_EQ(flat.size(), config_fields().size());
  EXPECT_EQ(j["cache"]["prefix"]["memory"]["ttl_seconds"], 3600.0);
  EXPECT_EQ(j["consistency"]["alert_below"], 0.999);
  EXPECT_EQ(j["consistency"]["fail_below"], 0.99);
  // Serve-only rows are not offered to the other tools.
  EXPECT_FALSE(config_json(ToolConfig{}, false).contains("seed"));
}

TEST(SessionFlags, BadValuesAndKeysNameTheKey) {
  auto field_of = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const detinfer::Error& e) {
      return e.field();
    }
    return std::string("<no error>");
  };
  EXPECT_EQ(field_of([] {
              parse({"--config", write_config("a.json", {{"kv_block_size", "x"}})});
            }),
            "kv_block_size");
  EXPECT_EQ(field_of([] {
              parse({"--config", write_config("b.json", {{"cache", {{"prefix", {{"nope", 1}}}}}})});
            }),
            "cache.prefix.nope");
  EXPECT_EQ(field_of([] { parse({"--threads", "abc"}); }), "--threads");
  EXPECT_EQ(field_of([] { parse({"--mode", "quick"}); }), "mode");
  EXPECT_EQ(field_of([] { parse({"--max-batch", "99999999999"}); }), "max_batch");
  EXPECT_EQ(field_of([] {
              parse({"--config", write_config("d.json", {{"seed", {{"require", true}}}})}, false);
            }),
            "seed.require");
  const std::string not_json = write_config("e.json", json());
  std::ofstream(not_json) << "{\"threads\": ";
  EXPECT_EQ(field_of([&] { parse({"--config", not_json}); }), "config");
}

TEST(SessionFlags, ResolvedOptionsReachTheSession) {
  const ToolConfig c = parse({"--threads",
                              "1",
                              "--kv-budget-bytes",
                              "8388608",
                              "--kv-block-size",
                              "8",
                              "--max-batch",
                              "4",
                              "--prefill-chunk-tokens",
                              "16",
                              "--max-queue",
                              "9",
                              "--cache-salt",
                              "salt",
                              "--prefix-cache-memory-bytes",
                              "1048576",
                              "--prefix-cache-ttl",
                              "60",
                              "--result-cache",
                              "--result-cache-audit",
                              "0.5",
                              "--consistency-monitor",
                              "--consistency-sample-rate",
                              "0.25",
                              "--consistency-alert-below",
                              "0.9",
                              "--fingerprint-level",
                              "final"});
  detinfer::DeterministicSession s =
      detinfer::DeterministicSession::open(detinfer::testing::tiny_model_dir(), c.session);
  const detinfer::SessionOptions& o = s.options();
  EXPECT_EQ(o.threads, 1);
  EXPECT_EQ(o.kv_budget_bytes, 8388608);
  EXPECT_EQ(o.kv_block_size, 8);
  EXPECT_EQ(o.max_batch, 4);
  EXPECT_EQ(o.prefill_chunk_tokens, 16);
  EXPECT_EQ(o.max_queue, 9);
  EXPECT_EQ(o.cache_salt, "salt");
  EXPECT_EQ(o.cache.prefix.memory.budget_bytes, 1048576);
  EXPECT_EQ(o.cache.prefix.memory.ttl_seconds, 60);
  EXPECT_TRUE(o.cache.result.enabled);
  EXPECT_EQ(o.cache.result.audit_fraction, 0.5);
  EXPECT_TRUE(o.consistency.enabled);
  EXPECT_EQ(o.consistency.monitor.sample_rate, 0.25);
  EXPECT_EQ(o.consistency.monitor.threshold, 0.9);
  EXPECT_EQ(o.recorder.level, detinfer::RecordLevel::kFinal);
  EXPECT_EQ(s.stats().kv_blocks_capacity, 8388608 / (8 * s.footprint().kv_bytes_per_token));
  // The cache options took effect: the memory tier's budget is the one given.
  s.generate(std::vector<std::int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17},
             {});
  EXPECT_EQ(s.cache_stats().prefix.memory.budget_bytes, 1048576);
}

TEST(FingerprintLog, RotatesBySizeAndKeepsTheNewestFiles) {
  const std::string dir = detinfer::testing::scratch_dir("cli-fplog");
  FingerprintLogOptions o{dir + "/fp.jsonl", 100, 2};
  RotatingLineFile f(o);
  const std::string line(39, 'a');  // 40 bytes with the newline: two lines per file
  for (int i = 0; i < 7; ++i) f.write(line + std::to_string(i).substr(0, 0));
  auto lines = [](const std::string& p) {
    std::ifstream in(p);
    int n = 0;
    for (std::string l; std::getline(in, l);) ++n;
    return n;
  };
  EXPECT_EQ(lines(o.path), 1);                        // line 7
  EXPECT_EQ(lines(o.path + ".1"), 2);                 // lines 5, 6
  EXPECT_EQ(lines(o.path + ".2"), 2);                 // lines 3, 4
  EXPECT_FALSE(std::ifstream(o.path + ".3").good());  // lines 1, 2 rotated away
  EXPECT_THROW(RotatingLineFile(FingerprintLogOptions{dir + "/x", 0, 1}), detinfer::Error);
  EXPECT_THROW(RotatingLineFile(FingerprintLogOptions{dir + "/no/such/dir/x", 10, 1}),
               detinfer::Error);
}

TEST(FingerprintLog, TheSessionWritesOneLinePerRequest) {
  const std::string dir = detinfer::testing::scratch_dir("cli-fplog-session");
  ToolConfig c;
  c.session = detinfer::testing::tiny_options();
  c.fingerprint_log.path = dir + "/fp.jsonl";
  const auto log = attach_fingerprint_log(c);
  ASSERT_NE(log, nullptr);
  {
    detinfer::DeterministicSession s =
        detinfer::DeterministicSession::open(detinfer::testing::tiny_model_dir(), c.session);
    detinfer::GenerationConfig g;
    g.max_new_tokens = 4;
    s.generate(std::vector<std::int32_t>{1, 2, 3}, g);
    s.generate(std::vector<std::int32_t>{4, 5, 6}, g);
  }
  std::ifstream in(c.fingerprint_log.path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(detinfer::RunFingerprint::from_json(lines[1]).request.prompt_tokens,
            (std::vector<std::int32_t>{4, 5, 6}));
}

TEST(SeedPolicy, RequireSeedAndDefaultTemperature) {
  ServePolicyOptions p;
  p.require_seed = true;
  p.default_temperature = 0.7;
  SeedSource src{};
  detinfer::GenerationConfig c;
  c.temperature = 1.0f;  // what the parser chose for a body without "temperature"
  auto e = apply_seed_policy(p, /*temperature_defaulted=*/true, c, &src);
  ASSERT_TRUE(e.has_value());  // sampled at the default temperature, no seed
  EXPECT_EQ(e->status, 400);
  EXPECT_EQ(e->param, "seed");
  EXPECT_EQ(c.temperature, 0.7f);
  c.seed = 5;
  EXPECT_FALSE(apply_seed_policy(p, /*temperature_defaulted=*/true, c, &src).has_value());
  EXPECT_EQ(src, SeedSource::kGiven);
  detinfer::GenerationConfig greedy;
  greedy.temperature = 0.0f;
  EXPECT_FALSE(apply_seed_policy(p, /*temperature_defaulted=*/false, greedy, &src).has_value());
  EXPECT_EQ(src, SeedSource::kDefault);
  p.require_seed = false;
  detinfer::GenerationConfig sampled;
  sampled.temperature = 0.5f;
  EXPECT_FALSE(apply_seed_policy(p, /*temperature_defaulted=*/false, sampled, &src).has_value());
  EXPECT_EQ(sampled.temperature, 0.5f);  // given: the default does not apply
  EXPECT_EQ(src, SeedSource::kDrawn);
}

TEST(ExpectFingerprint, MismatchIs421AndMatchOrAbsentPasses) {
  EXPECT_FALSE(check_expected_fingerprint("", "fp_1").has_value());
  EXPECT_FALSE(check_expected_fingerprint("fp_1", "fp_1").has_value());
  const auto e = check_expected_fingerprint("fp_2", "fp_1");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->status, 421);
  EXPECT_NE(e->message.find("fp_1"), std::string::npos);
}

// Replays that reproduce, except for the requests in `bad` (an injected mismatch).
detinfer::ReplayFunction replay_except(const std::set<std::uint64_t>* bad) {
  return [bad](const detinfer::RunFingerprint& fp) {
    detinfer::RunFingerprint r = fp;
    if (bad->count(fp.request_key()) != 0) {
      r.sequences[0].step_digests[3] ^= 0x10;
      r.sequences[0].chain_digest = detinfer::chain_digest(r.sequences[0].step_digests);
    }
    return r;
  };
}

TEST(ConsistencyPolicy, InjectedMismatchesAlertThenFailForGood) {
  detinfer::MetricsRegistry registry;
  std::atomic<int> fails{0};
  std::string fail_reason;
  ConsistencyPolicy policy(0.95, 0.8, 1, registry, [&](const std::string& r) {
    ++fails;
    fail_reason = r;
  });
  std::set<std::uint64_t> bad;
  detinfer::ConsistencyMonitorOptions mo;
  mo.sample_rate = 1.0;
  mo.threshold = 0.95;  // alert_below
  mo.queue_capacity = 1000;
  std::unique_ptr<detinfer::ConsistencyMonitor> monitor;
  monitor = std::make_unique<detinfer::ConsistencyMonitor>(
      mo, replay_except(&bad), policy.alarm([&] { return monitor->stats(); }));
  int next = 0;
  auto run = [&](int n, bool mismatch) {
    for (int i = 0; i < n; ++i) {
      const detinfer::RunFingerprint fp = detinfer::testing::make_fingerprint(next++);
      if (mismatch) bad.insert(fp.request_key());
      monitor->submit(fp);
      monitor->drain();
    }
  };
  auto gauge = [&](const std::string& name) {
    const std::string text = registry.render();
    const auto at = text.find("\n" + name + " ");
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + name.size() + 2));
  };
  run(9, false);
  policy.evaluate(monitor->stats());
  EXPECT_FALSE(policy.alerting());
  run(1, true);  // 9/10 = 0.9: below alert_below, above fail_below
  EXPECT_TRUE(policy.alerting());
  EXPECT_FALSE(policy.failed());
  EXPECT_EQ(gauge("detinfer_consistency_alert"), 1.0);
  EXPECT_EQ(gauge("detinfer_consistency_failed"), 0.0);
  EXPECT_EQ(gauge("detinfer_consistency_alarms_total"), 1.0);
  EXPECT_EQ(fails.load(), 0);
  run(2, true);  // 9/12 = 0.75: below fail_below
  EXPECT_TRUE(policy.failed());
  EXPECT_EQ(fails.load(), 1);
  EXPECT_NE(fail_reason.find("0.75"), std::string::npos);
  EXPECT_EQ(policy.reason(), fail_reason);
  EXPECT_EQ(gauge("detinfer_consistency_failed"), 1.0);
  run(60, false);  // the ratio recovers: the alert clears, the failure stays
  policy.evaluate(monitor->stats());
  EXPECT_FALSE(policy.alerting());
  EXPECT_TRUE(policy.failed());
  EXPECT_EQ(fails.load(), 1);
  monitor.reset();
  EXPECT_THROW(ConsistencyPolicy(0.9, 0.95, 1, registry), detinfer::Error);
}

}  // namespace
}  // namespace detinfer_cli

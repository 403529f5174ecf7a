// `detinfer bench`: prefill and decode tokens/s for several batch sizes, canonical vs
// fast, next to the memory-bandwidth bound for decode (the bytes a decode step reads,
// weights plus the KV of its context, over a read bandwidth measured in the same run).
// Decode is measured after a --context-token prompt (default 8).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <future>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "cli_random.h"
#include "command_registry.h"
#include "detinfer/error.h"
#include "detinfer/session.h"
#include "fingerprint_log.h"
#include "generation_flags.h"
#include "session_flags.h"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kDecodePrompt = 8;  // the default --context

struct BenchOptions {
  std::string model;
  detinfer::SessionOptions session;  // from the session flags (session_flags.h)
  std::string modes = "canonical,fast";
  std::string batches = "1,4,16";
  std::int32_t prompt_tokens = 128;
  std::int32_t decode_tokens = 32;
  std::int32_t context = kDecodePrompt;  // prompt tokens before the measured decode steps
  std::int32_t repeats = 3;
  bool json = false;
  detinfer_cli::SpeculativeFlags speculative;  // applied to every measured request
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Sequential read bandwidth (bytes/s) with `threads` threads, each summing its own
// slice of a buffer much larger than the caches; best of 5 passes.
double read_bandwidth(int threads) {
  const std::size_t bytes = std::size_t{512} << 20;
  std::vector<std::uint64_t> buf(bytes / 8);
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = i * 0x9E3779B97F4A7C15ull;
  double best = 0;
  for (int pass = 0; pass < 5; ++pass) {
    std::vector<std::uint64_t> sums(static_cast<std::size_t>(threads));
    const auto t0 = Clock::now();
    std::vector<std::thread> ts;
    const std::size_t per = buf.size() / static_cast<std::size_t>(threads);
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([&, t] {
        const std::uint64_t* p = buf.data() + per * static_cast<std::size_t>(t);
        std::uint64_t a = 0, b = 0, c = 0, d = 0;
        for (std::size_t i = 0; i + 4 <= per; i += 4) {
          a += p[i];
          b ^= p[i + 1];
          c += p[i + 2];
          d ^= p[i + 3];
        }
        sums[static_cast<std::size_t>(t)] = a + b + c + d;
      });
    }
    for (auto& th : ts) th.join();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    volatile std::uint64_t sink = 0;
    for (auto v : sums) sink = sink + v;
    best = std::max(best, static_cast<double>(per * static_cast<std::size_t>(threads) * 8) / s);
  }
  return best;
}

// Peak resident set of this process (bytes) since the last reset_peak_rss(): Linux's
// VmHWM, or ru_maxrss (peak of the whole process) where /proc is unavailable.
std::int64_t peak_rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // kB
  }
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<std::int64_t>(ru.ru_maxrss) * 1024;
}

// Resets VmHWM to the current RSS (Linux >= 4.0); harmless where unsupported.
void reset_peak_rss() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
}

// Prompt length of the decode measurement (see run_bench).
// Wall seconds for `batch` concurrent requests of random prompts.
double timed_batch(detinfer::DeterministicSession& session, int batch, int prompt_tokens,
                   int new_tokens, detinfer_cli::CliRandom& rng,
                   const detinfer_cli::SpeculativeFlags& speculative) {
  detinfer::GenerationConfig c;
  speculative.apply(c);
  c.max_new_tokens = new_tokens;
  c.ignore_eos = true;
  std::vector<std::vector<std::int32_t>> prompts;
  for (int b = 0; b < batch; ++b)
    prompts.push_back(rng.tokens(prompt_tokens, session.vocab_size()));
  const auto t0 = Clock::now();
  std::vector<detinfer::RequestHandle> handles;
  for (int b = 0; b < batch; ++b) handles.push_back(session.submit(prompts[b], c));
  for (auto& h : handles) h.get();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Decode tokens/s of `batch` concurrent requests after --context prompts, counted from
// the moment the last request got its first token (every sequence decoding from then on)
// to the last token: the prompts' prefill is left out by timestamps, not by subtracting a
// second run (at long contexts two prefills differ by more than the decode steps take).
double timed_decode(detinfer::DeterministicSession& session, int batch, int context,
                    int decode_tokens, detinfer_cli::CliRandom& rng,
                    const detinfer_cli::SpeculativeFlags& speculative) {
  detinfer::GenerationConfig c;
  speculative.apply(c);
  c.max_new_tokens = 1 + decode_tokens;
  c.ignore_eos = true;
  std::vector<std::vector<std::int32_t>> prompts;
  for (int b = 0; b < batch; ++b) prompts.push_back(rng.tokens(context, session.vocab_size()));
  std::mutex mu;  // events arrive on the engine thread; the lock only orders the reads
  std::vector<Clock::time_point> token_times;
  Clock::time_point all_decoding{};
  int started = 0;
  std::vector<detinfer::RequestHandle> handles;
  for (int b = 0; b < batch; ++b) {
    handles.push_back(session.submit(prompts[b], c, [&](const detinfer::TokenEvent& e) {
      const Clock::time_point now = Clock::now();
      std::lock_guard<std::mutex> lk(mu);
      token_times.push_back(now);
      if (e.step == 0 && ++started == batch) all_decoding = now;
      return true;
    }));
  }
  for (auto& h : handles) h.get();
  std::lock_guard<std::mutex> lk(mu);
  std::int64_t after = 0;
  Clock::time_point last = all_decoding;
  for (const Clock::time_point t : token_times) {
    if (t <= all_decoding) continue;
    ++after;
    last = std::max(last, t);
  }
  const double secs = std::chrono::duration<double>(last - all_decoding).count();
  return after > 0 && secs > 0 ? static_cast<double>(after) / secs : 0.0;
}

struct Row {
  std::string mode;
  int batch = 0;
  double prefill_tps = 0;
  double decode_tps = 0;
  double step_bytes = 0;      // bytes one decode step reads per sequence in this mode
  std::int64_t peak_rss = 0;  // peak RSS while this mode's session was open
  // --speculative: tokens drafted and accepted during this row's measurements.
  std::int64_t drafted = 0;
  std::int64_t accepted = 0;
};

// What one decode step reads per sequence: the weights it touches (one embedding row,
// not the table) plus the KV of its context, whose mean over the measured steps is the
// --context prompt plus half the decoded tokens.
double decode_step_bytes(const detinfer::ModelFootprint& f, const BenchOptions& o) {
  const double mean_context = o.context + 1 + 0.5 * o.decode_tokens;
  return static_cast<double>(f.decode_read_bytes) +
         mean_context * static_cast<double>(f.kv_bytes_per_token);
}

struct BenchResult {
  std::vector<Row> rows;
  std::int32_t threads = 0;
  detinfer::ModelFootprint footprint;  // of the first mode measured
};

void measure_mode(const BenchOptions& o, const std::string& m, const std::vector<int>& batches,
                  BenchResult& out) {
  reset_peak_rss();
  detinfer::SessionOptions so = o.session;
  so.mode = detinfer::parse_numerics_mode(m);
  so.max_batch = *std::max_element(batches.begin(), batches.end());
  so.prefill_chunk_tokens = std::max(256, o.prompt_tokens * so.max_batch);
  detinfer::DeterministicSession session = detinfer::DeterministicSession::open(o.model, so);
  out.threads = session.threads();
  const detinfer::ModelFootprint footprint = session.footprint();
  if (out.rows.empty()) out.footprint = footprint;
  detinfer_cli::CliRandom rng(12345, so.mode == detinfer::NumericsMode::kFast ? 2 : 1);
  timed_batch(session, 1, 8, 2, rng, o.speculative);  // warm-up
  for (int b : batches) {
    const detinfer::SessionStats before = session.stats();
    std::vector<double> prefill, decode;
    for (int r = 0; r < o.repeats; ++r) {
      // Prefill: one new token each, so the time is the prompts' prefill (+1 step).
      const double tp = timed_batch(session, b, o.prompt_tokens, 1, rng, o.speculative);
      prefill.push_back(static_cast<double>(b) * o.prompt_tokens / tp);
      decode.push_back(timed_decode(session, b, o.context, o.decode_tokens, rng, o.speculative));
    }
    const detinfer::SessionStats after = session.stats();
    out.rows.push_back({m, b, median(prefill), median(decode), decode_step_bytes(footprint, o), 0,
                        after.draft_tokens - before.draft_tokens,
                        after.accepted_draft_tokens - before.accepted_draft_tokens});
  }
  const std::int64_t peak = peak_rss_bytes();
  for (Row& row : out.rows)
    if (row.mode == m) row.peak_rss = peak;
}

// Fraction of the batch-1 bound (bandwidth / bytes per step) that a row's per-sequence
// decode rate reaches.
double vs_bound(const Row& row, double bandwidth) {
  return row.step_bytes > 0 ? row.decode_tps / row.batch / (bandwidth / row.step_bytes) : 0;
}

void print_json(const BenchOptions& o, const BenchResult& res, double bandwidth,
                std::int64_t peak_rss) {
  json r = json::array();
  for (const auto& row : res.rows) {
    r.push_back({{"mode", row.mode},
                 {"batch", row.batch},
                 {"prefill_tokens_per_s", row.prefill_tps},
                 {"decode_tokens_per_s", row.decode_tps},
                 {"decode_step_bytes", row.step_bytes},
                 {"peak_rss_bytes", row.peak_rss},
                 {"decode_vs_bandwidth_bound", vs_bound(row, bandwidth)},
                 {"draft_tokens", row.drafted},
                 {"accepted_draft_tokens", row.accepted}});
  }
  const detinfer::ModelFootprint& f = res.footprint;
  const double step = decode_step_bytes(f, o);
  std::cout << json{{"model", o.model},
                    {"threads", res.threads},
                    {"prompt_tokens", o.prompt_tokens},
                    {"decode_tokens", o.decode_tokens},
                    {"context_tokens", o.context},
                    {"repeats", o.repeats},
                    {"speculative", o.speculative.mode},
                    {"read_bandwidth_bytes_per_s", bandwidth},
                    {"weight_bytes", f.weight_bytes},
                    {"resident_bytes", f.resident_bytes},
                    {"weight_bytes_per_token", f.decode_read_bytes},
                    {"kv_dtype", detinfer::to_string(o.session.kv_dtype)},
                    {"kv_bytes_per_token", f.kv_bytes_per_token},  // as stored (bf16/f16: half)
                    {"kv_reserved_bytes", f.kv_reserved_bytes},
                    {"decode_step_bytes", step},
                    {"decode_bound_tokens_per_s", step > 0 ? bandwidth / step : 0},
                    {"peak_rss_bytes", peak_rss},
                    {"results", r}}
                   .dump(2)
            << "\n";
}

void print_text(const BenchOptions& o, const BenchResult& res, double bandwidth,
                std::int64_t peak_rss) {
  const detinfer::ModelFootprint& f = res.footprint;
  const double step = decode_step_bytes(f, o);
  std::cout << "threads " << res.threads << ", prompt " << o.prompt_tokens << " tokens, decode "
            << o.decode_tokens << " tokens after a " << o.context << "-token context, median of "
            << o.repeats << "\n"
            << "read bandwidth " << std::fixed << std::setprecision(2) << bandwidth / 1e9
            << " GB/s; a decode step reads " << static_cast<double>(f.decode_read_bytes) / 1e6
            << " MB of weights + " << (step - static_cast<double>(f.decode_read_bytes)) / 1e6
            << " MB of KV per sequence -> batch-1 decode bound " << std::setprecision(1)
            << bandwidth / step << " tok/s; peak RSS " << static_cast<double>(peak_rss) / 1e6
            << " MB\n";
  std::cout << std::left << std::setw(11) << "mode" << std::right << std::setw(6) << "batch"
            << std::setw(16) << "prefill tok/s" << std::setw(15) << "decode tok/s" << std::setw(18)
            << "per-seq/bound"
            << "\n";
  for (const auto& row : res.rows) {
    std::cout << std::left << std::setw(11) << row.mode << std::right << std::setw(6) << row.batch
              << std::setw(16) << std::setprecision(1) << row.prefill_tps << std::setw(15)
              << row.decode_tps << std::setw(17) << std::setprecision(3) << vs_bound(row, bandwidth)
              << "\n";
  }
}

int run_bench(const BenchOptions& o) {
  const std::vector<std::string> modes = split(o.modes);
  std::vector<int> batches;
  for (const auto& b : split(o.batches)) {
    const int v = std::stoi(b);
    if (v < 1 || v > 4096) {
      throw detinfer::Error(detinfer::ErrorCode::kInvalidArgument,
                            "--batch sizes must be in [1, 4096], got " + b);
    }
    batches.push_back(v);
  }
  for (const auto& m : modes) {
    try {
      detinfer::parse_numerics_mode(m);  // the one list of mode names
    } catch (const detinfer::Error&) {
      throw detinfer::Error(
          detinfer::ErrorCode::kInvalidArgument,
          "--modes takes canonical, fast and/or device_invariant, got '" + m + "'");
    }
  }
  BenchResult res;
  for (const auto& m : modes) measure_mode(o, m, batches, res);
  std::int64_t peak_rss = 0;  // of the sessions, before the bandwidth probe's buffer
  for (const Row& row : res.rows) peak_rss = std::max(peak_rss, row.peak_rss);
  const double bandwidth = read_bandwidth(std::max(1, res.threads));
  if (o.json) {
    print_json(o, res, bandwidth, peak_rss);
  } else {
    print_text(o, res, bandwidth, peak_rss);
  }
  return 0;
}

const detinfer_cli::RegisterCommand kRegister(
    "bench", "Prefill and decode tokens/s (canonical vs fast) vs the bandwidth bound",
    [](CLI::App& sub, int& exit_code) {
      auto o = std::make_shared<BenchOptions>();
      sub.add_option("--model", o->model, "Model folder or GGUF file")->required();
      sub.add_option("--modes", o->modes, "Comma-separated: canonical,fast,device_invariant")
          ->capture_default_str();
      sub.add_option("--batch", o->batches, "Comma-separated batch sizes")->capture_default_str();
      sub.add_option("--prompt-tokens", o->prompt_tokens, "Prompt length for prefill")
          ->capture_default_str()
          ->check(CLI::Range(1, 1 << 20));
      sub.add_option("--decode-tokens", o->decode_tokens, "Decode steps measured")
          ->capture_default_str()
          ->check(CLI::Range(1, 1 << 20));
      sub.add_option("--context", o->context,
                     "Prompt tokens before the measured decode steps (decode at this context)")
          ->capture_default_str()
          ->check(CLI::Range(1, 1 << 20));
      sub.add_option("--repeats", o->repeats, "Measurements per cell (median)")
          ->capture_default_str()
          ->check(CLI::Range(1, 1000));
      sub.add_flag("--json", o->json, "Machine-readable output");
      o->speculative.add(sub);
      // The bench sizes the batch and the prefill chunk from --batch and --prompt-tokens.
      auto flags = std::make_shared<detinfer_cli::SessionFlags>(
          sub, false, std::set<std::string>{"mode", "max_batch", "prefill_chunk_tokens"});
      sub.callback([o, flags, &exit_code] {
        detinfer_cli::ToolConfig tc = flags->resolve();
        const auto log = detinfer_cli::attach_fingerprint_log(tc);
        o->session = tc.session;
        if (flags->print_config()) {
          flags->print(tc, detinfer::DeterministicSession::open(o->model, tc.session));
          return;
        }
        exit_code = run_bench(*o);
      });
    });

}  // namespace

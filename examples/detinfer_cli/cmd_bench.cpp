// `detinfer bench`: prefill and decode tokens/s for several batch sizes, canonical vs
// fast, next to the memory-bandwidth bound for decode (weight bytes per token over a
// read bandwidth measured in the same run).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <future>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "cli_random.h"
#include "command_registry.h"
#include "detinfer/error.h"
#include "detinfer/session.h"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct BenchOptions {
  std::string model;
  std::int32_t threads = 0;
  std::string modes = "canonical,fast";
  std::string device = "cpu";
  std::string batches = "1,4,16";
  std::int32_t prompt_tokens = 128;
  std::int32_t decode_tokens = 32;
  std::int32_t repeats = 3;
  bool json = false;
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

std::int64_t weight_bytes(const std::string& dir) {
  std::int64_t total = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".safetensors") {
      total += static_cast<std::int64_t>(e.file_size());
    }
  }
  return total;
}

// Wall seconds for `batch` concurrent requests of random prompts.
double timed_batch(detinfer::DeterministicSession& session, int batch, int prompt_tokens,
                   int new_tokens, detinfer_cli::CliRandom& rng) {
  detinfer::GenerationConfig c;
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

struct Row {
  std::string mode;
  int batch = 0;
  double prefill_tps = 0;
  double decode_tps = 0;
};

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
    if (m != "canonical" && m != "fast" && m != "device_invariant") {
      throw detinfer::Error(
          detinfer::ErrorCode::kInvalidArgument,
          "--modes takes canonical, fast and/or device_invariant, got '" + m + "'");
    }
  }
  std::vector<Row> rows;
  std::int32_t threads_used = 0;
  for (const auto& m : modes) {
    detinfer::SessionOptions so;
    so.mode = detinfer::parse_numerics_mode(m);
    so.device = o.device;
    so.threads = o.threads;
    so.max_batch = *std::max_element(batches.begin(), batches.end());
    so.prefill_chunk_tokens = std::max(256, o.prompt_tokens * so.max_batch);
    detinfer::DeterministicSession session = detinfer::DeterministicSession::open(o.model, so);
    threads_used = session.threads();
    detinfer_cli::CliRandom rng(12345, m == "fast" ? 2 : 1);
    timed_batch(session, 1, 8, 2, rng);  // warm-up
    for (int b : batches) {
      std::vector<double> prefill, decode;
      for (int r = 0; r < o.repeats; ++r) {
        // Prefill: one new token each, so the time is the prompts' prefill (+1 step).
        const double tp = timed_batch(session, b, o.prompt_tokens, 1, rng);
        prefill.push_back(static_cast<double>(b) * o.prompt_tokens / tp);
        // Decode: the difference between 1 and 1+D new tokens on short prompts.
        const double t1 = timed_batch(session, b, 8, 1, rng);
        const double t2 = timed_batch(session, b, 8, 1 + o.decode_tokens, rng);
        decode.push_back(static_cast<double>(b) * o.decode_tokens / std::max(1e-9, t2 - t1));
      }
      rows.push_back({m, b, median(prefill), median(decode)});
    }
  }
  const double bandwidth = read_bandwidth(std::max(1, threads_used));
  const std::int64_t wbytes = weight_bytes(o.model);
  const double bound = wbytes > 0 ? bandwidth / static_cast<double>(wbytes) : 0;

  if (o.json) {
    json r = json::array();
    for (const auto& row : rows) {
      r.push_back(
          {{"mode", row.mode},
           {"batch", row.batch},
           {"prefill_tokens_per_s", row.prefill_tps},
           {"decode_tokens_per_s", row.decode_tps},
           {"decode_vs_bandwidth_bound", bound > 0 ? row.decode_tps / row.batch / bound : 0}});
    }
    std::cout << json{{"model", o.model},
                      {"threads", threads_used},
                      {"prompt_tokens", o.prompt_tokens},
                      {"decode_tokens", o.decode_tokens},
                      {"repeats", o.repeats},
                      {"read_bandwidth_bytes_per_s", bandwidth},
                      {"weight_bytes_per_token", wbytes},
                      {"decode_bound_tokens_per_s", bound},
                      {"results", r}}
                     .dump(2)
              << "\n";
    return 0;
  }
  std::cout << "threads " << threads_used << ", prompt " << o.prompt_tokens << " tokens, decode "
            << o.decode_tokens << " tokens, median of " << o.repeats << "\n"
            << "read bandwidth " << std::fixed << std::setprecision(2) << bandwidth / 1e9
            << " GB/s, weights " << static_cast<double>(wbytes) / 1e6
            << " MB per token -> batch-1 decode bound " << std::setprecision(1) << bound
            << " tok/s\n";
  std::cout << std::left << std::setw(11) << "mode" << std::right << std::setw(6) << "batch"
            << std::setw(16) << "prefill tok/s" << std::setw(15) << "decode tok/s" << std::setw(18)
            << "per-seq/bound"
            << "\n";
  for (const auto& row : rows) {
    std::cout << std::left << std::setw(11) << row.mode << std::right << std::setw(6) << row.batch
              << std::setw(16) << std::setprecision(1) << row.prefill_tps << std::setw(15)
              << row.decode_tps << std::setw(17) << std::setprecision(3)
              << (bound > 0 ? row.decode_tps / row.batch / bound : 0) << "\n";
  }
  return 0;
}

const detinfer_cli::RegisterCommand kRegister(
    "bench", "Prefill and decode tokens/s (canonical vs fast) vs the bandwidth bound",
    [](CLI::App& sub, int& exit_code) {
      auto o = std::make_shared<BenchOptions>();
      sub.add_option("--model", o->model, "Model folder")->required();
      sub.add_option("--threads", o->threads, "Kernel threads (0 = all cores)")
          ->check(CLI::Range(0, 1024));
      sub.add_option("--modes", o->modes, "Comma-separated: canonical,fast,device_invariant")
          ->capture_default_str();
      sub.add_option("--device", o->device, "cpu | cuda | cuda:N")->capture_default_str();
      sub.add_option("--batch", o->batches, "Comma-separated batch sizes")->capture_default_str();
      sub.add_option("--prompt-tokens", o->prompt_tokens, "Prompt length for prefill")
          ->capture_default_str()
          ->check(CLI::Range(1, 1 << 20));
      sub.add_option("--decode-tokens", o->decode_tokens, "Decode steps measured")
          ->capture_default_str()
          ->check(CLI::Range(1, 1 << 20));
      sub.add_option("--repeats", o->repeats, "Measurements per cell (median)")
          ->capture_default_str()
          ->check(CLI::Range(1, 1000));
      sub.add_flag("--json", o->json, "Machine-readable output");
      sub.callback([o, &exit_code] { exit_code = run_bench(*o); });
    });

}  // namespace

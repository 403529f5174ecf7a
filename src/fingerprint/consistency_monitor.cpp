#include "detinfer/consistency_monitor.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "core/check.h"
#include "core/log.h"

namespace detinfer {

namespace {
// Lowers the calling thread's priority so shadow replays only use idle CPU.
void lower_thread_priority() {
#ifdef SCHED_IDLE
  sched_param param{};
  param.sched_priority = 0;
  if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &param) == 0) return;
#endif
  // On Linux, nice applies per thread when given the thread id.
  if (setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19) != 0) {
    logger().debug("consistency monitor: could not lower the worker's priority");
  }
}
}  // namespace

struct ConsistencyMonitor::Impl {
  ConsistencyMonitorOptions options;
  ReplayFunction replay;
  ConsistencyAlarm alarm;
  const SessionMetrics* metrics = nullptr;

  mutable std::mutex mu;
  std::condition_variable work_cv;
  std::condition_variable idle_cv;
  std::deque<RunFingerprint> queue;
  bool busy = false;
  bool stop = false;
  ConsistencyStats stats;
  std::thread worker;

  void run() {
    if (options.low_priority) lower_thread_priority();
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      work_cv.wait(lock, [&] { return stop || !queue.empty(); });
      if (stop) return;
      RunFingerprint original = std::move(queue.front());
      queue.pop_front();
      busy = true;
      lock.unlock();
      check(original);
      lock.lock();
      busy = false;
      if (queue.empty()) idle_cv.notify_all();
    }
  }

  void check(const RunFingerprint& original) {
    RunFingerprint replayed;
    try {
      replayed = replay(original);
    } catch (const std::exception& e) {
      logger().warn("consistency monitor: replay of request {:016x} failed: {}",
                    original.request_key(), e.what());
      std::lock_guard<std::mutex> lock(mu);
      ++stats.errors;
      return;
    }
    const bool match = same_output(original, replayed);
    double ratio;
    bool fire;
    {
      std::lock_guard<std::mutex> lock(mu);
      ++stats.checks;
      ++(match ? stats.matches : stats.mismatches);
      stats.ratio = static_cast<double>(stats.matches) / static_cast<double>(stats.checks);
      ratio = stats.ratio;
      fire = !match && stats.checks >= options.min_checks && ratio < options.threshold;
      if (fire) ++stats.alarms;
    }
    if (metrics != nullptr) {
      (match ? metrics->replay_match : metrics->replay_mismatch).inc();
      metrics->consistency_ratio.set(ratio);
    }
    if (!match) {
      logger().warn("consistency monitor: request {:016x} did not reproduce (ratio {:.6f})",
                    original.request_key(), ratio);
    }
    if (fire && alarm) {
      try {
        alarm(original, replayed, ratio);
      } catch (const std::exception& e) {
        logger().error("consistency monitor: alarm callback threw: {}", e.what());
      }
    }
  }
};

ConsistencyMonitor::ConsistencyMonitor(ConsistencyMonitorOptions options, ReplayFunction replay,
                                       ConsistencyAlarm alarm, const SessionMetrics* metrics)
    : impl_(std::make_unique<Impl>()) {
  if (!(options.sample_rate >= 0.0 && options.sample_rate <= 1.0)) {
    fail(ErrorCode::kInvalidArgument, "ConsistencyMonitorOptions.sample_rate ", options.sample_rate,
         " is outside [0, 1]");
  }
  if (!(options.threshold >= 0.0 && options.threshold <= 1.0)) {
    fail(ErrorCode::kInvalidArgument, "ConsistencyMonitorOptions.threshold ", options.threshold,
         " is outside [0, 1]");
  }
  if (options.queue_capacity == 0) {
    fail(ErrorCode::kInvalidArgument, "ConsistencyMonitorOptions.queue_capacity must be > 0");
  }
  if (!replay) fail(ErrorCode::kInvalidArgument, "ConsistencyMonitor needs a replay function");
  impl_->options = options;
  impl_->replay = std::move(replay);
  impl_->alarm = std::move(alarm);
  impl_->metrics = metrics;
  impl_->worker = std::thread([impl = impl_.get()] { impl->run(); });
}

ConsistencyMonitor::~ConsistencyMonitor() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->work_cv.notify_all();
  impl_->worker.join();
}

bool ConsistencyMonitor::sampled(const RunFingerprint& fp) const {
  const double rate = impl_->options.sample_rate;
  if (rate <= 0.0) return false;
  if (rate >= 1.0) return true;
  // A uniform in [0, 1) from the top 53 bits of a salted hash of the request key.
  const std::uint64_t key = fp.request_key();
  const std::uint64_t h = xxh3_64(&key, sizeof key, impl_->options.sampling_salt);
  return static_cast<double>(h >> 11) * 0x1.0p-53 < rate;
}

bool ConsistencyMonitor::submit(const RunFingerprint& fp) {
  const bool in_sample = sampled(fp);
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!in_sample) {
    ++impl_->stats.skipped;
    return false;
  }
  if (impl_->queue.size() >= impl_->options.queue_capacity) {
    ++impl_->stats.dropped;
    return false;
  }
  impl_->queue.push_back(fp);
  ++impl_->stats.submitted;
  impl_->work_cv.notify_one();
  return true;
}

void ConsistencyMonitor::drain() {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->idle_cv.wait(lock, [&] { return impl_->queue.empty() && !impl_->busy; });
}

ConsistencyStats ConsistencyMonitor::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

}  // namespace detinfer

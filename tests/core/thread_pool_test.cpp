#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "detinfer/error.h"

namespace detinfer {
namespace {

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (std::int64_t n : {1, 2, 7, 64, 1001}) {
      std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
      pool.parallel_for(n, 1, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) hits[static_cast<std::size_t>(i)]++;
      });
      for (auto& h : hits) ASSERT_EQ(h.load(), 1) << threads << " threads, n=" << n;
    }
  }
}

TEST(ThreadPool, PropagatesExceptions) {
  ThreadPool pool(4);
  EXPECT_THROW(pool.parallel_for(100, 1,
                                 [](std::int64_t b, std::int64_t) {
                                   if (b > 0) throw std::runtime_error("boom");
                                 }),
               std::runtime_error);
  // The pool still works afterwards.
  std::atomic<int> count{0};
  pool.parallel_for(10, 1, [&](std::int64_t b, std::int64_t e) { count += int(e - b); });
  EXPECT_EQ(count.load(), 10);
}

TEST(ThreadPool, NestedCallsRunSerially) {
  ThreadPool pool(3);
  std::atomic<int> count{0};
  pool.parallel_for(6, 1, [&](std::int64_t b, std::int64_t e) {
    pool.parallel_for(e - b, 1, [&](std::int64_t ib, std::int64_t ie) { count += int(ie - ib); });
  });
  EXPECT_EQ(count.load(), 6);
}

// Back-to-back short jobs, as a forward step issues them: workers catch each job while
// still spinning from the previous one, and every job sees every index exactly once.
TEST(ThreadPool, ManyShortJobsBackToBack) {
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    std::vector<std::int64_t> sums(2000, 0);
    for (std::size_t job = 0; job < sums.size(); ++job) {
      const std::int64_t n = 1 + static_cast<std::int64_t>(job % 17);
      std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
      pool.parallel_for(n, 1, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) hits[static_cast<std::size_t>(i)]++;
      });
      for (auto& h : hits) sums[job] += h.load();
      ASSERT_EQ(sums[job], n) << threads << " threads, job " << job;
    }
  }
}

// Pools created and destroyed right after a job (workers may still be spinning).
TEST(ThreadPool, DestroyRightAfterAJob) {
  for (int round = 0; round < 50; ++round) {
    ThreadPool pool(2 + round % 3);
    std::atomic<int> count{0};
    pool.parallel_for(8, 1, [&](std::int64_t b, std::int64_t e) { count += int(e - b); });
    ASSERT_EQ(count.load(), 8);
  }
}

TEST(ThreadPool, RejectsInvalidThreadCounts) {
  EXPECT_THROW(ThreadPool(0), Error);
  EXPECT_THROW(ThreadPool(-3), Error);
}

}  // namespace
}  // namespace detinfer

#include "cache/disk_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "cache_test_util.h"
#include "detinfer/error.h"

namespace detinfer {
namespace {

using testing::make_payload;
using testing::TempDir;
using testing::test_key;

constexpr std::size_t kHeader = cache::kEntryHeaderBytes;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void write_all(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}
bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

TEST(DiskStore, RoundTripAndRestart) {
  TempDir dir;
  {
    cache::DiskStore d(dir.path(), 1 << 20, cache::kKvBlockMagic);
    for (std::uint64_t i = 0; i < 5; ++i) d.put(test_key(i), make_payload(i, 3000));
    EXPECT_EQ(d.stats().entries, 5);
    EXPECT_EQ(d.stats().bytes, 5 * static_cast<std::int64_t>(3000 + kHeader));
    EXPECT_EQ(read_all(d.path_of(test_key(0))).size(), 3000 + kHeader);
  }
  // Leftover temp file of an interrupted write: removed at start.
  write_all(dir.path() + "/.junk.1.0.tmp", "partial");
  cache::DiskStore d(dir.path(), 1 << 20, cache::kKvBlockMagic);
  EXPECT_EQ(d.stats().entries, 5);
  EXPECT_FALSE(exists(dir.path() + "/.junk.1.0.tmp"));
  for (std::uint64_t i = 0; i < 5; ++i) {
    const cache::BytesPtr got = d.get(test_key(i), 3000);
    ASSERT_TRUE(got) << i;
    EXPECT_EQ(*got, *make_payload(i, 3000));
  }
  EXPECT_FALSE(d.get(test_key(7), 3000));
  EXPECT_EQ(d.stats().hits, 5);
  EXPECT_EQ(d.stats().misses, 1);
}

TEST(DiskStore, BudgetAndLruByAccessTimeSurviveRestart) {
  TempDir dir;
  const std::int64_t entry = 1000 + kHeader;
  {
    cache::DiskStore d(dir.path(), 3 * entry, cache::kKvBlockMagic);
    for (std::uint64_t i = 1; i <= 3; ++i) d.put(test_key(i), make_payload(i, 1000));
    ASSERT_TRUE(d.get(test_key(1), 1000));  // 2 becomes the least recently used
    d.put(test_key(4), make_payload(4, 1000));
    EXPECT_LE(d.stats().bytes, 3 * entry);
    EXPECT_FALSE(exists(d.path_of(test_key(2))));
    EXPECT_EQ(d.stats().evictions, 1);
    ASSERT_TRUE(d.get(test_key(3), 1000));  // order now (old -> new): 1, 4, 3
  }
  // A restart with a smaller budget evicts by the recorded access times.
  cache::DiskStore d(dir.path(), 2 * entry, cache::kKvBlockMagic);
  EXPECT_EQ(d.stats().entries, 2);
  EXPECT_FALSE(d.get(test_key(1), 1000));
  EXPECT_TRUE(d.get(test_key(4), 1000));
  EXPECT_TRUE(d.get(test_key(3), 1000));
}

TEST(DiskStore, BudgetNeverExceeded) {
  TempDir dir;
  const std::int64_t budget = 50000;
  cache::DiskStore d(dir.path(), budget, cache::kKvBlockMagic);
  std::uint64_t x = 5;
  for (std::uint64_t i = 0; i < 300; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    d.put(test_key(i), make_payload(i, 1 + (x >> 33) % 12000));
    ASSERT_LE(d.stats().bytes, budget) << "after insertion " << i;
  }
  EXPECT_GT(d.stats().evictions, 200);
  d.put(test_key(999), make_payload(1, budget));  // with its header, over the budget
  EXPECT_EQ(d.stats().rejected, 1);
}

class DiskCorruption : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::make_unique<cache::DiskStore>(dir_.path(), 1 << 20, cache::kKvBlockMagic);
    store_->put(test_key(1), make_payload(1, 2000));
    store_->put(test_key(2), make_payload(2, 2000));
    path_ = store_->path_of(test_key(1));
  }
  // The damaged entry is a miss, is deleted, and is counted as corrupt.
  void expect_bypassed() {
    EXPECT_FALSE(store_->get(test_key(1), 2000));
    EXPECT_FALSE(exists(path_));
    EXPECT_EQ(store_->stats().corrupt, 1);
    EXPECT_EQ(store_->stats().entries, 1);
    // The healthy neighbour is untouched.
    const cache::BytesPtr other = store_->get(test_key(2), 2000);
    ASSERT_TRUE(other);
    EXPECT_EQ(*other, *make_payload(2, 2000));
  }

  TempDir dir_;
  std::unique_ptr<cache::DiskStore> store_;
  std::string path_;
};

TEST_F(DiskCorruption, FlippedPayloadByte) {
  std::string data = read_all(path_);
  data[kHeader + 1234] ^= 0x10;
  write_all(path_, data);
  expect_bypassed();
}

TEST_F(DiskCorruption, FlippedHeaderByte) {
  std::string data = read_all(path_);
  data[33] ^= 0x01;  // payload length
  write_all(path_, data);
  expect_bypassed();
}

TEST_F(DiskCorruption, Truncated) {
  const std::string data = read_all(path_);
  write_all(path_, data.substr(0, data.size() - 1));
  expect_bypassed();
}

TEST_F(DiskCorruption, TruncatedInsideHeader) {
  write_all(path_, read_all(path_).substr(0, 20));
  expect_bypassed();
}

TEST_F(DiskCorruption, EmptyFile) {
  write_all(path_, "");
  expect_bypassed();
}

TEST_F(DiskCorruption, TrailingBytes) {
  write_all(path_, read_all(path_) + "x");
  expect_bypassed();
}

TEST_F(DiskCorruption, WrongKey) {
  // A valid entry of key 2 copied to key 1's name.
  write_all(path_, read_all(store_->path_of(test_key(2))));
  expect_bypassed();
}

TEST_F(DiskCorruption, WrongMagicAndUnexpectedLength) {
  std::string data = read_all(path_);
  data[0] = 'X';
  write_all(path_, data);
  expect_bypassed();
  // A valid entry whose payload has another size than asked is never served.
  EXPECT_FALSE(store_->get(test_key(2), 1999));
  EXPECT_EQ(store_->stats().corrupt, 2);
}

TEST(DiskStore, IoFailureIsCountedNotThrown) {
  TempDir dir;
  const std::string sub = dir.path() + "/cache";
  cache::DiskStore d(sub, 1 << 20, cache::kKvBlockMagic);
  d.put(test_key(1), make_payload(1, 100));
  // The directory disappears under the store (unmounted disk, removed by an operator).
  std::system(("rm -rf '" + sub + "'").c_str());
  d.put(test_key(2), make_payload(2, 100));
  EXPECT_EQ(d.stats().backend_errors, 1);
  EXPECT_FALSE(d.get(test_key(1), 100));
  EXPECT_FALSE(d.get(test_key(2), 100));
  EXPECT_EQ(d.stats().entries, 0);
}

TEST(DiskStore, InvalidateAllAndInvalidDirectory) {
  TempDir dir;
  cache::DiskStore d(dir.path(), 1 << 20, cache::kKvBlockMagic);
  d.put(test_key(1), make_payload(1, 100));
  // Written by "another process" sharing the directory.
  {
    cache::DiskStore other(dir.path(), 1 << 20, cache::kKvBlockMagic);
    other.put(test_key(2), make_payload(2, 100));
  }
  EXPECT_TRUE(d.get(test_key(2), 100));
  d.invalidate_all();
  EXPECT_FALSE(d.get(test_key(1), 100));
  EXPECT_FALSE(d.get(test_key(2), 100));
  EXPECT_THROW(cache::DiskStore(dir.path() + "/a/b/c", 1, cache::kKvBlockMagic), Error);
  EXPECT_THROW(cache::DiskStore("", 1, cache::kKvBlockMagic), Error);
}

}  // namespace
}  // namespace detinfer

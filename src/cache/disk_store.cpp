#include "cache/disk_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/log.h"

namespace detinfer::cache {

namespace {
constexpr const char* kSuffix = ".kv";
constexpr const char* kTempSuffix = ".tmp";

bool ends_with(const std::string& s, const char* suffix) {
  const std::size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// Reads exactly n bytes unless the file ends; returns the bytes read or -1 on error.
ssize_t read_full(int fd, void* dst, std::size_t n) {
  std::size_t done = 0;
  while (done < n) {
    const ssize_t r = ::read(fd, static_cast<char*>(dst) + done, n - done);
    if (r < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (r == 0) break;
    done += static_cast<std::size_t>(r);
  }
  return static_cast<ssize_t>(done);
}

bool write_full(int fd, const void* src, std::size_t n) {
  std::size_t done = 0;
  while (done < n) {
    const ssize_t w = ::write(fd, static_cast<const char*>(src) + done, n - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<std::size_t>(w);
  }
  return true;
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // Closes now and reports whether close succeeded (write errors can surface here).
  bool close() {
    const int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0;
  }

 private:
  int fd_;
};
}  // namespace

DiskStore::DiskStore(std::string directory, std::int64_t budget_bytes, const EntryMagic& magic,
                     double error_log_interval_seconds, std::shared_ptr<CacheClock> clock)
    : dir_(std::move(directory)),
      budget_(budget_bytes),
      magic_(magic),
      log_(std::move(clock), error_log_interval_seconds) {
  if (dir_.empty()) fail(ErrorCode::kInvalidArgument, "cache disk tier: empty directory");
  if (budget_bytes < 0) {
    fail(ErrorCode::kInvalidArgument, "cache disk tier: budget_bytes must be >= 0, got ",
         budget_bytes);
  }
  if (::mkdir(dir_.c_str(), 0755) != 0 && errno != EEXIST) {
    fail(ErrorCode::kUnavailable, "cache disk tier: cannot create directory '", dir_,
         "': ", std::strerror(errno));
  }
  struct stat st {};
  if (::stat(dir_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    fail(ErrorCode::kUnavailable, "cache disk tier: '", dir_, "' is not a directory");
  }
  std::lock_guard<std::mutex> g(mu_);
  scan();
  evict_locked(0);
}

std::string DiskStore::path_of(const Hash128& key) const {
  return dir_ + "/" + key.hex() + kSuffix;
}

void DiskStore::scan() {
  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr) {
    fail(ErrorCode::kUnavailable, "cache disk tier: cannot list '", dir_,
         "': ", std::strerror(errno));
  }
  struct Found {
    Hash128 key;
    std::int64_t size;
    struct timespec mtime;
  };
  std::vector<Found> found;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    const std::string path = dir_ + "/" + name;
    if (ends_with(name, kTempSuffix)) {
      ::unlink(path.c_str());  // an interrupted write of an earlier run
      continue;
    }
    if (!ends_with(name, kSuffix) || name.size() != 32 + std::strlen(kSuffix)) continue;
    Hash128 key;
    try {
      key = Hash128::from_hex(name.substr(0, 32));
    } catch (const Error&) {
      continue;
    }
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    found.push_back({key, static_cast<std::int64_t>(st.st_size), st.st_mtim});
  }
  ::closedir(d);
  // Oldest first, so that pushing to the front leaves the newest at the front.
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
    if (a.mtime.tv_sec != b.mtime.tv_sec) return a.mtime.tv_sec < b.mtime.tv_sec;
    if (a.mtime.tv_nsec != b.mtime.tv_nsec) return a.mtime.tv_nsec < b.mtime.tv_nsec;
    return a.key < b.key;
  });
  for (const Found& f : found) touch_locked(f.key, f.size);
}

void DiskStore::touch_locked(const Hash128& key, std::int64_t size) {
  auto it = map_.find(key);
  if (it != map_.end()) {
    bytes_ += size - it->second.size;
    it->second.size = size;
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return;
  }
  lru_.push_front(key);
  map_.emplace(key, Entry{size, lru_.begin()});
  bytes_ += size;
}

void DiskStore::forget_locked(const Hash128& key) {
  auto it = map_.find(key);
  if (it == map_.end()) return;
  bytes_ -= it->second.size;
  lru_.erase(it->second.lru);
  map_.erase(it);
}

void DiskStore::evict_locked(std::int64_t need) {
  while (!lru_.empty() && bytes_ + need > budget_) {
    const Hash128 victim = lru_.back();
    ::unlink(path_of(victim).c_str());
    forget_locked(victim);
    ++stats_.evictions;
  }
}

void DiskStore::stamp_locked(int fd) {
  // Explicit nanosecond times, strictly increasing within this process: the kernel's own
  // file timestamps are coarse (a few ms), which would tie entries touched close together.
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  std::int64_t ns = static_cast<std::int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
  if (ns <= last_stamp_ns_) ns = last_stamp_ns_ + 1;
  last_stamp_ns_ = ns;
  timespec times[2];
  times[0].tv_sec = static_cast<time_t>(ns / 1000000000);
  times[0].tv_nsec = static_cast<long>(ns % 1000000000);
  times[1] = times[0];
  ::futimens(fd, times);
}

void DiskStore::drop_corrupt_locked(const Hash128& key, const std::string& why) {
  const std::string path = path_of(key);
  ::unlink(path.c_str());
  forget_locked(key);
  ++stats_.corrupt;
  log_.warn(str_cat("cache disk tier: deleted corrupt entry '", path, "': ", why));
}

void DiskStore::backend_error_locked(const std::string& what) {
  ++stats_.backend_errors;
  log_.warn(str_cat("cache disk tier: ", what, " (entry skipped)"));
}

BytesPtr DiskStore::get(const Hash128& key, std::size_t expected_size) {
  std::lock_guard<std::mutex> g(mu_);
  const std::string path = path_of(key);
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno != ENOENT) backend_error_locked(str_cat("open '", path, "': ", std::strerror(errno)));
    forget_locked(key);
    ++stats_.misses;
    return nullptr;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    backend_error_locked(str_cat("stat '", path, "': ", std::strerror(errno)));
    ++stats_.misses;
    return nullptr;
  }
  EntryHeader header{};
  const ssize_t got = read_full(fd.get(), header.data(), header.size());
  if (got < 0) {
    backend_error_locked(str_cat("read '", path, "': ", std::strerror(errno)));
    ++stats_.misses;
    return nullptr;
  }
  std::uint64_t len = 0;
  EntryStatus status = static_cast<std::size_t>(got) < header.size()
                           ? EntryStatus::kTruncated
                           : parse_entry_header(header.data(), magic_, key, expected_size, &len);
  const auto file_size = static_cast<std::uint64_t>(st.st_size);
  if (status == EntryStatus::kOk && file_size != kEntryHeaderBytes + len) {
    status = file_size < kEntryHeaderBytes + len ? EntryStatus::kTruncated : EntryStatus::kTooLong;
  }
  auto payload = std::make_shared<Bytes>();
  if (status == EntryStatus::kOk) {
    payload->resize(len);
    const ssize_t r = read_full(fd.get(), payload->data(), len);
    if (r < 0) {
      backend_error_locked(str_cat("read '", path, "': ", std::strerror(errno)));
      ++stats_.misses;
      return nullptr;
    }
    status = static_cast<std::uint64_t>(r) != len
                 ? EntryStatus::kTruncated
                 : verify_entry_payload(header.data(), payload->data(), len);
  }
  if (status != EntryStatus::kOk) {
    drop_corrupt_locked(key, to_string(status));
    ++stats_.misses;
    return nullptr;
  }
  // The mtime is the access time of the LRU order (atime is unreliable: noatime mounts).
  stamp_locked(fd.get());
  touch_locked(key, static_cast<std::int64_t>(file_size));
  ++stats_.hits;
  return payload;
}

void DiskStore::put(const Hash128& key, const BytesPtr& payload) {
  if (!payload) return;
  const EntryHeader header = encode_entry_header(magic_, key, payload->data(), payload->size());
  const auto size = static_cast<std::int64_t>(header.size() + payload->size());
  std::lock_guard<std::mutex> g(mu_);
  if (size > budget_) {
    ++stats_.rejected;
    return;
  }
  forget_locked(key);  // rewritten below; not counted against the budget twice
  evict_locked(size);
  const std::string path = path_of(key);
  const std::string temp =
      str_cat(dir_, "/.", key.hex(), ".", ::getpid(), ".", temp_counter_++, kTempSuffix);
  Fd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) {
    backend_error_locked(str_cat("create '", temp, "': ", std::strerror(errno)));
    return;
  }
  const bool ok = write_full(fd.get(), header.data(), header.size()) &&
                  write_full(fd.get(), payload->data(), payload->size());
  stamp_locked(fd.get());
  const int write_errno = errno;
  if (!fd.close() || !ok) {
    ::unlink(temp.c_str());
    backend_error_locked(str_cat("write '", temp, "': ", std::strerror(ok ? errno : write_errno)));
    return;
  }
  // rename() is atomic: readers see the old file, no file or the whole new one.
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(temp.c_str());
    backend_error_locked(str_cat("rename to '", path, "': ", std::strerror(e)));
    return;
  }
  touch_locked(key, size);
  ++stats_.insertions;
}

bool DiskStore::contains(const Hash128& key) {
  // Existence only: the content is validated when it is read.
  return ::access(path_of(key).c_str(), F_OK) == 0;
}

void DiskStore::erase(const Hash128& key) {
  std::lock_guard<std::mutex> g(mu_);
  ::unlink(path_of(key).c_str());
  forget_locked(key);
}

void DiskStore::invalidate_all() {
  std::lock_guard<std::mutex> g(mu_);
  scan();  // also entries written by other processes sharing the directory
  for (const Hash128& key : lru_) ::unlink(path_of(key).c_str());
  map_.clear();
  lru_.clear();
  bytes_ = 0;
}

CacheTierStats DiskStore::stats() const {
  std::lock_guard<std::mutex> g(mu_);
  return with_occupancy(stats_, budget_, bytes_, map_.size());
}

}  // namespace detinfer::cache

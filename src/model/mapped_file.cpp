#include "model/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/check.h"

namespace detinfer::model {
namespace {

// [offset, offset+size) widened to whole pages inside the mapping.
bool page_range(std::uint64_t offset, std::uint64_t size, std::uint64_t file_size,
                std::uint64_t* begin, std::uint64_t* len) {
  const std::uint64_t page = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  if (offset >= file_size || size == 0) return false;
  const std::uint64_t end = std::min(file_size, offset + size);
  *begin = offset / page * page;
  *len = end - *begin;
  return true;
}

}  // namespace

MappedFile::MappedFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(ErrorCode::kNotFound, "cannot open ", path, ": ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(ErrorCode::kNotFound, path, " is not a regular file");
  }
  size_ = static_cast<std::uint64_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      fail(ErrorCode::kResourceExhausted, "cannot map ", path, ": ", std::strerror(err));
    }
    data_ = static_cast<const std::uint8_t*>(p);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::uint8_t*>(data_), size_);
}

void MappedFile::advise_sequential(std::uint64_t offset, std::uint64_t size) const {
  std::uint64_t b = 0, n = 0;
  if (data_ != nullptr && page_range(offset, size, size_, &b, &n)) {
    ::madvise(const_cast<std::uint8_t*>(data_) + b, n, MADV_SEQUENTIAL);
  }
}

void MappedFile::release(std::uint64_t offset, std::uint64_t size) const {
  std::uint64_t b = 0, n = 0;
  if (data_ != nullptr && page_range(offset, size, size_, &b, &n)) {
    ::madvise(const_cast<std::uint8_t*>(data_) + b, n, MADV_DONTNEED);
  }
}

}  // namespace detinfer::model

// A read-only memory mapping of a whole file (RAII).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace detinfer::model {

class MappedFile {
 public:
  // Maps `path` read-only; throws Error(kNotFound) when it cannot be opened.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::uint8_t* data() const { return data_; }
  std::uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Tells the kernel the bytes [offset, offset+size) will be read once, in order.
  void advise_sequential(std::uint64_t offset, std::uint64_t size) const;
  // Drops the resident pages of [offset, offset+size) (they are re-read from the file if
  // touched again), so that a loader which copies tensors out keeps peak RSS low.
  void release(std::uint64_t offset, std::uint64_t size) const;

 private:
  std::string path_;
  const std::uint8_t* data_ = nullptr;
  std::uint64_t size_ = 0;
};

}  // namespace detinfer::model

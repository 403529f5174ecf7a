// Device discovery, memory, timing and error mapping for the CUDA kernels (host only).
#include <cuda_runtime.h>

#include <utility>

#include "core/check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"

namespace detinfer::kernels::cuda {

namespace {

ErrorCode code_for(cudaError_t err) {
  switch (err) {
    case cudaErrorMemoryAllocation:
      return ErrorCode::kResourceExhausted;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInitializationError:
    case cudaErrorDevicesUnavailable:
    case cudaErrorStubLibrary:
    case cudaErrorSystemDriverMismatch:
      return ErrorCode::kUnavailable;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevice:
      return ErrorCode::kInvalidArgument;
    default:
      return ErrorCode::kInternal;
  }
}

// Driver/runtime versions as "13.0".
std::string version_text(int v) { return str_cat(v / 1000, ".", (v % 1000) / 10); }

}  // namespace

void check_cuda(cudaError_t err, const char* what, const char* file, int line) {
  if (err == cudaSuccess) return;
  // A failed call also sets the runtime's last error; clear it so the next launch check
  // does not report this failure again (sticky errors stay regardless).
  (void)cudaGetLastError();
  fail(code_for(err), "CUDA error in ", what, " (", file, ":", line, "): ", cudaGetErrorName(err),
       ": ", cudaGetErrorString(err));
}

void require(bool ok, const char* op, const char* what) {
  if (!ok) fail(ErrorCode::kInvalidArgument, "cuda::", op, ": ", what);
}

void require_positive(std::int64_t v, const char* op, const char* field) {
  if (v <= 0) fail(ErrorCode::kInvalidArgument, "cuda::", op, ": ", field, " must be > 0, got ", v);
}

void require_ptr(const void* p, const char* op, const char* field) {
  if (p == nullptr) fail(ErrorCode::kInvalidArgument, "cuda::", op, ": ", field, " is null");
}

void require_ptrs(const char* op, std::initializer_list<NamedPtr> ptrs) {
  for (const NamedPtr& n : ptrs) require_ptr(n.p, op, n.field);
}

void check_linear_args(const char* op, const void* x, std::int64_t ldx, std::int64_t m,
                       const void* w, std::int64_t n, std::int64_t k, const void* y,
                       std::int64_t ldy) {
  require_ptrs(op, {{"x", x}, {"w", w}, {"y", y}});
  require_positive(m, op, "m");
  require_positive(n, op, "n");
  require_positive(k, op, "k");
  require(ldx >= k, op, "ldx must be >= k");
  require(ldy >= n, op, "ldy must be >= n");
}

void check_row_args(const char* op, const void* x, std::int64_t ldx, const void* y,
                    std::int64_t ldy, std::int64_t rows, std::int64_t n) {
  require_ptrs(op, {{"x", x}, {"y", y}});
  require_positive(rows, op, "rows");
  require_positive(n, op, "n");
  require(ldx >= n && ldy >= n, op, "row strides must be >= n");
}

unsigned grid_x(std::int64_t v, const char* op) {
  if (v <= 0 || v > 0x7fffffff)
    fail(ErrorCode::kUnsupported, "cuda::", op, ": grid x dimension ", v, " out of range");
  return static_cast<unsigned>(v);
}

unsigned grid_yz(std::int64_t v, const char* op) {
  if (v <= 0 || v > 65535)
    fail(ErrorCode::kUnsupported, "cuda::", op, ": grid y/z dimension ", v,
         " out of range (1..65535)");
  return static_cast<unsigned>(v);
}

int device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the error so later calls are not poisoned
    return 0;
  }
  return n;
}

std::string no_device_reason() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return str_cat(cudaGetErrorName(err), ": ", cudaGetErrorString(err));
  }
  return n == 0 ? "no CUDA device" : "";
}

DeviceProperties device_properties(int device) {
  cudaDeviceProp p{};
  DETINFER_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  int driver = 0;
  int runtime = 0;
  DETINFER_CUDA_CHECK(cudaDriverGetVersion(&driver));
  DETINFER_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  return {p.name, p.major, p.minor, version_text(driver), version_text(runtime)};
}

std::string device_description(int device) {
  const DeviceProperties d = device_properties(device);
  cudaDeviceProp p{};
  DETINFER_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  return str_cat(d.name, " (sm_", d.major, d.minor, ", ", p.multiProcessorCount, " SMs, ",
                 p.totalGlobalMem >> 30, " GiB), driver ", d.driver, ", runtime ", d.runtime);
}

void set_device(int device) { DETINFER_CUDA_CHECK(cudaSetDevice(device)); }

void synchronize(Stream stream) { DETINFER_CUDA_CHECK(cudaStreamSynchronize(stream)); }

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes > 0) DETINFER_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ != nullptr) (void)cudaFree(ptr_);  // a destructor cannot throw
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (ptr_ != nullptr) (void)cudaFree(ptr_);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::upload(const void* host, std::size_t bytes) {
  require(bytes <= bytes_, "DeviceBuffer::upload", "more bytes than the buffer holds");
  if (bytes > 0) DETINFER_CUDA_CHECK(cudaMemcpy(ptr_, host, bytes, cudaMemcpyHostToDevice));
}

void DeviceBuffer::download(void* host, std::size_t bytes) const {
  require(bytes <= bytes_, "DeviceBuffer::download", "more bytes than the buffer holds");
  if (bytes > 0) DETINFER_CUDA_CHECK(cudaMemcpy(host, ptr_, bytes, cudaMemcpyDeviceToHost));
}

void DeviceBuffer::fill_zero() {
  if (bytes_ > 0) DETINFER_CUDA_CHECK(cudaMemset(ptr_, 0, bytes_));
}

void copy_from_host(void* dst, const void* src, std::size_t bytes) {
  if (bytes > 0) DETINFER_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}

void copy_to_host(void* dst, const void* src, std::size_t bytes) {
  if (bytes > 0) DETINFER_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

void* malloc_device_zeroed(std::size_t bytes) {
  void* p = nullptr;
  DETINFER_CUDA_CHECK(cudaMalloc(&p, bytes == 0 ? 1 : bytes));
  const cudaError_t err = cudaMemset(p, 0, bytes == 0 ? 1 : bytes);
  if (err != cudaSuccess) (void)cudaFree(p);
  DETINFER_CUDA_CHECK(err);
  return p;
}

void free_device(void* p) noexcept {
  if (p != nullptr) (void)cudaFree(p);
}

void copy_device(void* dst, const void* src, std::size_t bytes, Stream stream) {
  DETINFER_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
}

EventTimer::EventTimer() {
  cudaEvent_t a = nullptr;
  cudaEvent_t b = nullptr;
  DETINFER_CUDA_CHECK(cudaEventCreate(&a));
  const cudaError_t err = cudaEventCreate(&b);
  if (err != cudaSuccess) (void)cudaEventDestroy(a);
  DETINFER_CUDA_CHECK(err);
  start_ = a;
  stop_ = b;
}

EventTimer::~EventTimer() {
  (void)cudaEventDestroy(static_cast<cudaEvent_t>(start_));
  (void)cudaEventDestroy(static_cast<cudaEvent_t>(stop_));
}

void EventTimer::start(Stream stream) {
  DETINFER_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(start_), stream));
}

void EventTimer::stop(Stream stream) {
  DETINFER_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(stop_), stream));
}

float EventTimer::elapsed_ms() {
  DETINFER_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(stop_)));
  float ms = 0;
  DETINFER_CUDA_CHECK(
      cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start_), static_cast<cudaEvent_t>(stop_)));
  return ms;
}

}  // namespace detinfer::kernels::cuda

// DeviceBuffer: bytes of device memory owned RAII-style (cuMemAlloc / cuMemFree), move-only.
// A zero-size buffer never calls the driver and holds the null device pointer. Byte copies
// between host and device take an optional stream: without one they are synchronous
// (complete when the call returns); with one they are enqueued on it and the host memory
// must stay alive and unchanged until the stream is synchronised.
#pragma once

#include <cstddef>
#include <utility>

#include "spindle/runtime/cuda/device.hpp"
#include "spindle/runtime/cuda/stream.hpp"

namespace spindle::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;  // empty: size 0, no context
  // RuntimeError (naming the size and the free memory) when the allocation fails.
  DeviceBuffer(CudaContext& context, std::size_t bytes) : context_(&context), bytes_(bytes) {
    if (bytes == 0) return;
    context.make_current();
    CUresult r = context.api().cuMemAlloc_v2(&ptr_, bytes);
    if (r != CUDA_SUCCESS) {
      std::size_t free = 0, total = 0;
      context.api().cuMemGetInfo_v2(&free, &total);
      throw RuntimeError(message("CUDA driver: cuMemAlloc of ", bytes, " bytes on ", context.device().description(),
                                 " failed: ", context.api().error_text(r), " (", free, " of ", total,
                                 " bytes free)"));
    }
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : context_(o.context_), ptr_(std::exchange(o.ptr_, 0)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      context_ = o.context_;
      ptr_ = std::exchange(o.ptr_, 0);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { reset(); }

  // Frees the memory now (errors are ignored: nothing can be done about them here).
  void reset() noexcept {
    if (ptr_ != 0) {
      context_->api().cuCtxSetCurrent(context_->handle());
      context_->api().cuMemFree_v2(ptr_);
    }
    ptr_ = 0;
    bytes_ = 0;
  }

  CUdeviceptr get() const { return ptr_; }
  std::size_t size() const { return bytes_; }
  bool empty() const { return bytes_ == 0; }
  CudaContext* context() const { return context_; }

  // host -> device, `bytes` from the start of the buffer.
  void upload(const void* host, std::size_t bytes, CudaStream* stream = nullptr) {
    check_range(bytes, "upload");
    if (bytes == 0) return;
    context_->make_current();
    if (stream)
      context_->check(context_->api().cuMemcpyHtoDAsync_v2(ptr_, host, bytes, stream->handle()), "cuMemcpyHtoDAsync");
    else
      context_->check(context_->api().cuMemcpyHtoD_v2(ptr_, host, bytes), "cuMemcpyHtoD");
  }
  // device -> host.
  void download(void* host, std::size_t bytes, CudaStream* stream = nullptr) const {
    check_range(bytes, "download");
    if (bytes == 0) return;
    context_->make_current();
    if (stream)
      context_->check(context_->api().cuMemcpyDtoHAsync_v2(host, ptr_, bytes, stream->handle()), "cuMemcpyDtoHAsync");
    else
      context_->check(context_->api().cuMemcpyDtoH_v2(host, ptr_, bytes), "cuMemcpyDtoH");
  }
  // device -> device, from the start of `src`.
  void copy_from(const DeviceBuffer& src, std::size_t bytes, CudaStream* stream = nullptr) {
    check_range(bytes, "device copy");
    src.check_range(bytes, "device copy");
    if (bytes == 0) return;
    context_->make_current();
    if (stream)
      context_->check(context_->api().cuMemcpyDtoDAsync_v2(ptr_, src.ptr_, bytes, stream->handle()), "cuMemcpyDtoDAsync");
    else
      context_->check(context_->api().cuMemcpyDtoD_v2(ptr_, src.ptr_, bytes), "cuMemcpyDtoD");
  }
  // Every byte zero.
  void fill_zero(CudaStream* stream = nullptr) {
    if (bytes_ == 0) return;
    context_->make_current();
    if (stream)
      context_->check(context_->api().cuMemsetD8Async(ptr_, 0, bytes_, stream->handle()), "cuMemsetD8Async");
    else
      context_->check(context_->api().cuMemsetD8_v2(ptr_, 0, bytes_), "cuMemsetD8");
  }

 private:
  void check_range(std::size_t bytes, const char* what) const {
    SPINDLE_CHECK(bytes <= bytes_, InternalError, "DeviceBuffer ", what, " of ", bytes,
                  " bytes exceeds the buffer's ", bytes_, " bytes");
  }

  CudaContext* context_ = nullptr;
  CUdeviceptr ptr_ = 0;
  std::size_t bytes_ = 0;
};

}  // namespace spindle::cuda

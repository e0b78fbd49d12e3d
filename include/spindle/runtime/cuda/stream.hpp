// RAII wrappers of a CUDA stream and a CUDA event.
//
//   CudaStream s(ctx);            // cuStreamCreate(CU_STREAM_DEFAULT): ordered with the
//                                 // legacy default stream, so synchronous copies issued
//                                 // after a launch on s see its results
//   CudaEvent a(ctx), b(ctx);     // timing events
//   a.record(s); ...; b.record(s); float ms = CudaEvent::elapsed_ms(a, b);
//
// Destruction never throws; a failing destroy call is ignored (the context is gone or
// faulted, and nothing else can be done).
#pragma once

#include <utility>

#include "spindle/runtime/cuda/device.hpp"

namespace spindle::cuda {

class CudaStream {
 public:
  explicit CudaStream(CudaContext& context) : context_(&context) {
    context.make_current();
    context.check(context.api().cuStreamCreate(&stream_, CU_STREAM_DEFAULT), "cuStreamCreate");
  }
  CudaStream(CudaStream&& o) noexcept : context_(o.context_), stream_(std::exchange(o.stream_, nullptr)) {}
  CudaStream& operator=(CudaStream&& o) noexcept {
    if (this != &o) {
      destroy();
      context_ = o.context_;
      stream_ = std::exchange(o.stream_, nullptr);
    }
    return *this;
  }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  ~CudaStream() { destroy(); }

  CUstream handle() const { return stream_; }
  CudaContext& context() const { return *context_; }

  // Waits for everything enqueued; RuntimeError for a fault in that work.
  void synchronize() const {
    context_->make_current();
    context_->check(context_->api().cuStreamSynchronize(stream_), "cuStreamSynchronize");
  }

 private:
  void destroy() noexcept {
    if (!stream_) return;
    context_->api().cuCtxSetCurrent(context_->handle());
    context_->api().cuStreamDestroy_v2(stream_);
    stream_ = nullptr;
  }

  CudaContext* context_;
  CUstream stream_ = nullptr;
};

class CudaEvent {
 public:
  explicit CudaEvent(CudaContext& context, bool timing = true) : context_(&context) {
    context.make_current();
    context.check(context.api().cuEventCreate(&event_, timing ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING),
                  "cuEventCreate");
  }
  CudaEvent(CudaEvent&& o) noexcept : context_(o.context_), event_(std::exchange(o.event_, nullptr)) {}
  CudaEvent& operator=(CudaEvent&& o) noexcept {
    if (this != &o) {
      destroy();
      context_ = o.context_;
      event_ = std::exchange(o.event_, nullptr);
    }
    return *this;
  }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  ~CudaEvent() { destroy(); }

  CUevent handle() const { return event_; }

  // Records on `stream` (null: the legacy default stream).
  void record(CUstream stream = nullptr) {
    context_->make_current();
    context_->check(context_->api().cuEventRecord(event_, stream), "cuEventRecord");
  }
  void record(const CudaStream& stream) { record(stream.handle()); }
  void synchronize() const {
    context_->make_current();
    context_->check(context_->api().cuEventSynchronize(event_), "cuEventSynchronize");
  }
  // Milliseconds between two recorded timing events; waits for `end`.
  static float elapsed_ms(const CudaEvent& start, const CudaEvent& end) {
    end.synchronize();
    float ms = 0;
    end.context_->check(end.context_->api().cuEventElapsedTime(&ms, start.event_, end.event_), "cuEventElapsedTime");
    return ms;
  }

 private:
  void destroy() noexcept {
    if (!event_) return;
    context_->api().cuCtxSetCurrent(context_->handle());
    context_->api().cuEventDestroy_v2(event_);
    event_ = nullptr;
  }

  CudaContext* context_;
  CUevent event_ = nullptr;
};

}  // namespace spindle::cuda

// DeviceTensor<T>: a dense row-major tensor (rank 0..8) in device memory, the GPU
// counterpart of Tensor<T>. It is a kernel argument: storage() describes it like a host
// Tensor (one dense_fixed level per axis) with on_device = true and the device address in
// `data`; the argument binder checks shapes and dtypes but never reads device memory. A
// const DeviceTensor gives a read-only view (writable = false).
//
//   auto d = DeviceTensor<float>::from_host(host);   // synchronous copy
//   d.copy_from_host(host, &stream);                  // enqueued on a stream
//   Tensor<float> back = d.to_host();
//
// Copies check the element type (DTypeError) and the shape (ShapeError), naming both sides.
// Without a stream a copy is complete when it returns; with one, host memory must stay
// alive and unchanged until the stream is synchronised (to_host() always synchronises).
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "spindle/format/storage.hpp"
#include "spindle/format/tensor.hpp"
#include "spindle/runtime/cuda/device_buffer.hpp"

namespace spindle::cuda {

namespace detail {

inline std::string level_shape(const StorageView& s) {
  std::vector<std::int64_t> shape;
  for (const LevelView& l : s.levels) shape.push_back(l.length);
  return spindle::detail::shape_string(shape);
}

// Checks that `host` is a dense host container of dtype `dtype` and shape `shape`.
inline void check_dense_host(const StorageView& host, DType dtype, const std::vector<std::int64_t>& shape,
                             const std::string& device_desc, const char* what, bool need_writable) {
  SPINDLE_CHECK(!host.on_device, UserError, what, ": ", host.description(),
                " is a device container, expected host memory", "\n  hint: use DeviceTensor::copy_from");
  SPINDLE_CHECK(host.dtype == dtype, DTypeError, what, ": the host ", host.description(), " has element type ",
                dtype_name(host.dtype), " but the device tensor ", device_desc, " has ", dtype_name(dtype));
  bool dense = true;
  for (const LevelView& l : host.levels) dense = dense && l.kind == LevelKind::dense_fixed;
  SPINDLE_CHECK(dense, ShapeError, what, ": the host ", host.description(),
                " is not dense (it has a sparse or ragged level); the device tensor is ", device_desc);
  bool same = host.levels.size() == shape.size();
  for (std::size_t a = 0; same && a < shape.size(); ++a) same = host.levels[a].length == shape[a];
  SPINDLE_CHECK(same, ShapeError, what, ": the host ", host.description(), " has shape ", level_shape(host),
                " but the device tensor ", device_desc, " has shape ", spindle::detail::shape_string(shape));
  SPINDLE_CHECK(!need_writable || host.writable, UserError, what, ": the host ", host.description(),
                " is read-only");
}

}  // namespace detail

template <class T>
class DeviceTensor {
  static_assert(!std::is_const_v<T>, "spindle: DeviceTensor<const T> is not allowed; use a const DeviceTensor<T>");

 public:
  using value_type = T;

  DeviceTensor() = default;  // shape [0], no device memory

  // Uninitialised device memory of `shape` (ShapeError for a negative extent, overflow or
  // a rank above 8).
  explicit DeviceTensor(std::vector<std::int64_t> shape, CudaContext& context = CudaContext::process())
      : shape_(std::move(shape)) {
    spindle::detail::static_check_value<T>();
    SPINDLE_CHECK(shape_.size() <= kMaxLevels, ShapeError, "DeviceTensor ", spindle::detail::shape_string(shape_),
                  ": rank ", shape_.size(), " exceeds the maximum of ", kMaxLevels);
    size_ = spindle::detail::checked_volume(shape_, "DeviceTensor");
    buffer_ = DeviceBuffer(context, static_cast<std::size_t>(size_) * sizeof(T));
  }

  static DeviceTensor zeros(std::vector<std::int64_t> shape, CudaContext& context = CudaContext::process(),
                            CudaStream* stream = nullptr) {
    DeviceTensor t(std::move(shape), context);
    t.fill_zero(stream);
    return t;
  }
  // A device copy of `host` (in the stream's context, or the process context).
  static DeviceTensor from_host(const Tensor<T>& host, CudaStream* stream = nullptr) {
    return from_host(host.view(), stream);
  }
  static DeviceTensor from_host(TensorView<const T> host, CudaStream* stream = nullptr) {
    DeviceTensor t(host.shape(), stream ? stream->context() : CudaContext::process());
    t.copy_from_host(host, stream);
    return t;
  }

  int rank() const { return static_cast<int>(shape_.size()); }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  std::int64_t dim(int axis) const { return shape_.at(static_cast<std::size_t>(axis)); }
  std::int64_t size() const { return size_; }
  std::size_t bytes() const { return static_cast<std::size_t>(size_) * sizeof(T); }
  CUdeviceptr device_ptr() const { return buffer_.get(); }
  const DeviceBuffer& buffer() const { return buffer_; }
  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }
  // "DeviceTensor<f32> [3, 4] 'B'".
  std::string description() const { return storage().description(); }

  // host -> device; DTypeError / ShapeError when `host` is not a dense T tensor of shape().
  void copy_from_host(const StorageView& host, CudaStream* stream = nullptr) {
    detail::check_dense_host(host, dtype_v<T>, shape_, description(), "DeviceTensor::copy_from_host", false);
    if (size_ > 0) buffer_.upload(host.data, bytes(), stream);
  }
  void copy_from_host(const Tensor<T>& host, CudaStream* stream = nullptr) { copy_from_host(host.storage(), stream); }
  void copy_from_host(TensorView<const T> host, CudaStream* stream = nullptr) {
    copy_from_host(host.storage(), stream);
  }

  // device -> host into an existing container of the same dtype and shape.
  void copy_to_host(const StorageView& host, CudaStream* stream = nullptr) const {
    detail::check_dense_host(host, dtype_v<T>, shape_, description(), "DeviceTensor::copy_to_host", true);
    if (size_ > 0) buffer_.download(host.data, bytes(), stream);
  }
  void copy_to_host(Tensor<T>& host, CudaStream* stream = nullptr) const { copy_to_host(host.storage(), stream); }

  // A host copy; complete on return (the stream, if given, is synchronised).
  Tensor<T> to_host(CudaStream* stream = nullptr) const {
    Tensor<T> host = Tensor<T>::zeros(shape_);
    copy_to_host(host, stream);
    if (stream) stream->synchronize();
    return host;
  }

  // device -> device; ShapeError when the shapes differ.
  void copy_from(const DeviceTensor& src, CudaStream* stream = nullptr) {
    SPINDLE_CHECK(src.shape_ == shape_, ShapeError, "DeviceTensor::copy_from: the source ", src.description(),
                  " does not match the destination ", description());
    if (size_ > 0) buffer_.copy_from(src.buffer_, bytes(), stream);
  }

  void fill_zero(CudaStream* stream = nullptr) { buffer_.fill_zero(stream); }

  StorageView storage() { return view(true); }
  StorageView storage() const { return view(false); }

 private:
  StorageView view(bool writable) const {
    StorageView s;
    s.dtype = dtype_v<T>;
    s.data = reinterpret_cast<void*>(static_cast<std::uintptr_t>(buffer_.get()));
    s.value_count = size_;
    s.writable = writable;
    s.on_device = true;
    s.levels = spindle::detail::dense_levels(shape_);
    s.kind = "DeviceTensor";
    s.name = name_;
    return s;
  }

  std::vector<std::int64_t> shape_{0};
  std::int64_t size_ = 0;
  DeviceBuffer buffer_;
  std::string name_;
};

}  // namespace spindle::cuda

namespace spindle {
using cuda::DeviceTensor;
}  // namespace spindle

// DeviceCsr<T, Index>: a CSR matrix whose indptr, indices and values live in device
// memory, made from a host Csr (whose structure the Csr constructor has validated, so it
// is not checked again). It is a kernel argument: storage() describes it exactly like the
// host Csr (levels [dense_fixed(rows), sparse_variable(cols)], sortedness, index dtype)
// with on_device = true and device addresses; a const DeviceCsr is read-only.
//
//   auto a = DeviceCsr<float>::from_host(csr);
//   Csr<float> back = a.to_host();          // structure + values
//   a.copy_values_from_host(new_values);    // same pattern, new values (SDDMM inputs)
//   std::vector<float> v = a.values_to_host();
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "spindle/format/csr.hpp"
#include "spindle/format/csr_view.hpp"
#include "spindle/runtime/assembled_kernel.hpp"
#include "spindle/runtime/cuda/device_buffer.hpp"
#include "spindle/support/hash.hpp"

namespace spindle::cuda {

template <class T, class Index = std::int32_t>
class DeviceCsr {
  static_assert(!std::is_const_v<T>, "spindle: DeviceCsr<const T> is not allowed; use a const DeviceCsr<T>");

 public:
  using value_type = T;
  using index_type = Index;

  DeviceCsr() = default;  // 0x0, no device memory

  // rows x cols with no entries (an output a kernel assembles: spindle::kernel replaces its
  // pattern); the row offsets are zeros in device memory (of the stream's context).
  DeviceCsr(std::int64_t rows, std::int64_t cols, std::string name = {}, CudaStream* stream = nullptr)
      : rows_(rows), cols_(cols), name_(std::move(name)) {
    SPINDLE_CHECK(rows >= 0 && cols >= 0, ShapeError, "DeviceCsr: a ", rows, " x ", cols, " matrix has a negative extent");
    CudaContext& context = stream ? stream->context() : CudaContext::process();
    const std::vector<Index> zeros(static_cast<std::size_t>(rows) + 1, Index(0));
    fingerprint_ = Hasher().add(std::string_view(reinterpret_cast<const char*>(zeros.data()),
                                                 zeros.size() * sizeof(Index)))
                       .add(std::string_view())
                       .digest()
                       .a |
                   1;  // as from_host of an empty Csr
    indptr_ = DeviceBuffer(context, zeros.size() * sizeof(Index));
    indptr_.upload(zeros.data(), zeros.size() * sizeof(Index), stream);
    if (stream) stream->synchronize();
  }

  // Copies the three arrays of `host` (in the stream's context, or the process context).
  static DeviceCsr from_host(const Csr<T, Index>& host, CudaStream* stream = nullptr) {
    CudaContext& context = stream ? stream->context() : CudaContext::process();
    DeviceCsr d;
    d.rows_ = host.rows();
    d.cols_ = host.cols();
    d.nnz_ = host.nnz();
    d.sorted_ = host.sorted();
    d.name_ = host.name();
    // The structure's fingerprint lets the call binder check that two device arguments
    // share a sparsity structure (SDDMM's input and output) without reading device memory.
    auto bytes = [](auto span) {
      return std::string_view(reinterpret_cast<const char*>(span.data()), span.size_bytes());
    };
    d.fingerprint_ = Hasher().add(bytes(host.indptr())).add(bytes(host.indices())).digest().a | 1;
    d.indptr_ = DeviceBuffer(context, host.indptr().size_bytes());
    d.indices_ = DeviceBuffer(context, host.indices().size_bytes());
    d.values_ = DeviceBuffer(context, host.values().size_bytes());
    d.indptr_.upload(host.indptr().data(), host.indptr().size_bytes(), stream);
    d.indices_.upload(host.indices().data(), host.indices().size_bytes(), stream);
    d.values_.upload(host.values().data(), host.values().size_bytes(), stream);
    return d;
  }

  // The arrays of an assembled output (cuda::DeviceCsrAssembly): row offsets from prefix sums,
  // columns in range and sorted per row by construction, so they are not validated again.
  // The structure's fingerprint is hashed from a host copy of the indices. The token is only
  // made by spindle::Kernel.
  static DeviceCsr from_assembly(spindle::detail::AssemblyToken, std::int64_t rows, std::int64_t cols,
                                 const std::vector<Index>& host_indptr, DeviceBuffer indptr, DeviceBuffer indices,
                                 DeviceBuffer values, std::string name) {
    DeviceCsr d;
    d.rows_ = rows;
    d.cols_ = cols;
    d.nnz_ = static_cast<std::int64_t>(indices.size() / sizeof(Index));
    d.sorted_ = true;
    d.name_ = std::move(name);
    std::vector<Index> host_indices(static_cast<std::size_t>(d.nnz_));
    indices.download(host_indices.data(), host_indices.size() * sizeof(Index));
    auto bytes = [](const auto& v) {
      return std::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(Index));
    };
    d.fingerprint_ = Hasher().add(bytes(host_indptr)).add(bytes(host_indices)).digest().a | 1;
    d.indptr_ = std::move(indptr);
    d.indices_ = std::move(indices);
    d.values_ = std::move(values);
    return d;
  }

  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  std::int64_t nnz() const { return nnz_; }
  bool sorted() const { return sorted_; }
  const std::string& name() const { return name_; }
  CUdeviceptr indptr_ptr() const { return indptr_.get(); }
  CUdeviceptr indices_ptr() const { return indices_.get(); }
  CUdeviceptr values_ptr() const { return values_.get(); }
  // "DeviceCsr<f32> [rows, cols] 'A'" with nnz.
  std::string description() const {
    return message("DeviceCsr<", dtype_name(dtype_v<T>), ",", dtype_name(dtype_v<Index>), "> ", rows_, "x", cols_,
                   " nnz=", nnz_, name_.empty() ? "" : " '" + name_ + "'");
  }

  // A host copy of structure and values; complete on return.
  Csr<T, Index> to_host(CudaStream* stream = nullptr) const {
    std::vector<Index> indptr(static_cast<std::size_t>(rows_) + 1);
    std::vector<Index> indices(static_cast<std::size_t>(nnz_));
    std::vector<T> values(static_cast<std::size_t>(nnz_));
    if (indptr_.empty()) {
      indptr.assign(indptr.size(), Index(0));  // default-constructed 0x0 matrix
    } else {
      indptr_.download(indptr.data(), indptr.size() * sizeof(Index), stream);
    }
    indices_.download(indices.data(), indices.size() * sizeof(Index), stream);
    values_.download(values.data(), values.size() * sizeof(T), stream);
    if (stream) stream->synchronize();
    return Csr<T, Index>(rows_, cols_, std::move(indptr), std::move(indices), std::move(values), name_);
  }

  // The values only, in position order; complete on return.
  std::vector<T> values_to_host(CudaStream* stream = nullptr) const {
    std::vector<T> values(static_cast<std::size_t>(nnz_));
    values_.download(values.data(), values.size() * sizeof(T), stream);
    if (stream) stream->synchronize();
    return values;
  }

  // Replaces the values (same pattern); ShapeError when the count is not nnz().
  void copy_values_from_host(std::span<const T> values, CudaStream* stream = nullptr) {
    SPINDLE_CHECK(static_cast<std::int64_t>(values.size()) == nnz_, ShapeError,
                  "DeviceCsr::copy_values_from_host: ", values.size(), " values given for ", description(),
                  " (nnz=", nnz_, ")");
    values_.upload(values.data(), values.size_bytes(), stream);
  }
  void fill_values_zero(CudaStream* stream = nullptr) { values_.fill_zero(stream); }

  StorageView storage() { return view<T>(); }
  StorageView storage() const { return view<const T>(); }

 private:
  template <class V>
  StorageView view() const {
    auto ptr = [](CUdeviceptr p) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(p)); };
    StorageView s = spindle::detail::csr_storage<V, Index>(static_cast<V*>(ptr(values_.get())), rows_, cols_, nnz_,
                                                           static_cast<const Index*>(ptr(indptr_.get())),
                                                           static_cast<const Index*>(ptr(indices_.get())), sorted_,
                                                           "DeviceCsr", name_);
    s.on_device = true;
    s.levels[1].fingerprint = fingerprint_;
    return s;
  }

  std::int64_t rows_ = 0, cols_ = 0, nnz_ = 0;
  bool sorted_ = true;
  std::uint64_t fingerprint_ = 0;
  std::string name_;
  DeviceBuffer indptr_, indices_, values_;
};

// Receives an assembled output's device arrays and hands them to the caller's DeviceCsr when
// the call succeeded (the DeviceCsr is untouched before).
template <class T, class Index>
class DeviceCsrAssembly final : public runtime::AssemblyTarget {
 public:
  DeviceCsrAssembly(DeviceCsr<T, Index>& out, CudaContext& context) : out_(out), context_(context) {}
  void allocate(std::int64_t nnz, const std::vector<std::int64_t>& row_ptr, void*& indices, void*& values) override {
    indptr_host_.resize(row_ptr.size());
    for (std::size_t r = 0; r < row_ptr.size(); ++r) indptr_host_[r] = static_cast<Index>(row_ptr[r]);
    indptr_ = DeviceBuffer(context_, indptr_host_.size() * sizeof(Index));
    indptr_.upload(indptr_host_.data(), indptr_host_.size() * sizeof(Index));
    indices_ = DeviceBuffer(context_, static_cast<std::size_t>(nnz) * sizeof(Index));
    values_ = DeviceBuffer(context_, static_cast<std::size_t>(nnz) * sizeof(T));
    indices = reinterpret_cast<void*>(static_cast<std::uintptr_t>(indices_.get()));
    values = reinterpret_cast<void*>(static_cast<std::uintptr_t>(values_.get()));
  }
  void commit() override {
    out_ = DeviceCsr<T, Index>::from_assembly(spindle::detail::AssemblyToken{}, out_.rows(), out_.cols(), indptr_host_,
                                              std::move(indptr_), std::move(indices_), std::move(values_), out_.name());
  }

 private:
  DeviceCsr<T, Index>& out_;
  CudaContext& context_;
  std::vector<Index> indptr_host_;
  DeviceBuffer indptr_, indices_, values_;
};

}  // namespace spindle::cuda

namespace spindle {
using cuda::DeviceCsr;
}  // namespace spindle

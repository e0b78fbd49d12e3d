// Runs a kernel's CUDA build on the GPU with host arguments: every non-scalar argument is
// mirrored into device memory (values and every level's indptr/indices, with the level
// fingerprints recomputed from the host bytes), the kernel is called through the public
// CompiledCudaKernel path, and writable arguments are copied back to the host.
//
//   std::vector<spindle::test::DeviceMirror> mirrors;
//   auto dcall = spindle::test::mirror_call(stage1, call, mirrors);  // device copies
//   compiled.call(dcall);
//   for (auto& m : mirrors) m.copy_back();
//
// Shared by the CUDA correctness tests and the random-kernel fuzzers (tests/support).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "spindle/runtime/bind_args.hpp"
#include "spindle/runtime/cuda/cuda.hpp"
#include "spindle/support/hash.hpp"

namespace spindle::test {

// A device copy of a host argument's storage. `roots[s]` says level s starts a new chain of
// axes (a root axis of the kernel's buffer: its parent count restarts at 1); the array
// sizes follow the binder's rules (runtime/bind_args.hpp): a variable level has parents + 1
// indptr entries, a sparse level one index per position.
struct DeviceMirror {
  StorageView host, device;
  std::vector<cuda::DeviceBuffer> buffers;
  bool has_values = false;  // buffers.front() holds the values

  DeviceMirror(const StorageView& h, const std::vector<bool>& roots) : host(h), device(h) {
    auto& ctx = cuda::default_cuda_runtime().context();
    auto copy = [&](const void* p, std::size_t bytes) -> void* {
      if (!p) return nullptr;
      buffers.emplace_back(ctx, bytes);
      if (bytes) buffers.back().upload(p, bytes);
      return reinterpret_cast<void*>(static_cast<std::uintptr_t>(buffers.back().get()));
    };
    device.on_device = true;
    has_values = h.data != nullptr;
    device.data = copy(h.data, static_cast<std::size_t>(h.value_count) * dtype_bytes(h.dtype));
    std::int64_t parents = 1;
    for (std::size_t k = 0; k < h.levels.size(); ++k) {
      if (k < roots.size() && roots[k]) parents = 1;
      const LevelView& l = h.levels[k];
      LevelView& d = device.levels[k];
      const std::size_t ib = static_cast<std::size_t>(dtype_bytes(l.index_dtype));
      const std::int64_t positions = l.kind == LevelKind::dense_fixed    ? parents * l.length
                                     : l.kind == LevelKind::sparse_fixed ? parents * l.nnz_per_row
                                                                         : l.nnz;
      if (l.indptr) d.indptr = copy(l.indptr, static_cast<std::size_t>(parents + 1) * ib);
      if (l.indices) d.indices = copy(l.indices, static_cast<std::size_t>(positions) * ib);
      d.fingerprint = Hasher()
                          .add(std::string_view(static_cast<const char*>(l.indptr ? l.indptr : ""),
                                                l.indptr ? static_cast<std::size_t>(parents + 1) * ib : 0))
                          .add(std::string_view(static_cast<const char*>(l.indices ? l.indices : ""),
                                                l.indices ? static_cast<std::size_t>(positions) * ib : 0))
                          .digest()
                          .a |
                      1;
      parents = positions;
    }
  }
  void copy_back() {
    if (host.writable && has_values && host.value_count)
      buffers.front().download(host.data, static_cast<std::size_t>(host.value_count) * dtype_bytes(host.dtype));
  }
};

// The call of `stage1` with every buffer argument replaced by a device mirror (kept in
// `mirrors`). An argument no buffer of the kernel binds stays on the host (the binder
// reports it).
inline std::vector<runtime::CallArg> mirror_call(const ir::Function& stage1, const std::vector<runtime::CallArg>& call,
                                                 std::vector<DeviceMirror>& mirrors) {
  std::vector<std::vector<bool>> roots(call.size());
  std::vector<bool> bound(call.size(), false);
  for (const ir::FuncBuffer& fb : stage1.buffers) {
    const std::size_t arg = static_cast<std::size_t>(fb.origin.arg);
    if (arg >= call.size() || call[arg].is_scalar || bound[arg]) continue;
    bound[arg] = true;
    for (const ir::Axis& a : fb.buffer->axes) roots[arg].push_back(!a->parent);
  }
  mirrors.clear();
  mirrors.reserve(call.size());
  std::vector<runtime::CallArg> dcall = call;
  for (std::size_t k = 0; k < call.size(); ++k)
    if (bound[k] && call[k].view.levels.size() == roots[k].size()) {
      mirrors.emplace_back(call[k].view, roots[k]);
      dcall[k].view = mirrors.back().device;
    }
  return dcall;
}

// Calls `kernel` (compiled from `stage1`) on the GPU with host arguments; writable arguments
// get the results.
inline void call_on_gpu(const ir::Function& stage1, const cuda::CompiledCudaKernel& kernel,
                        const std::vector<runtime::CallArg>& call) {
  std::vector<DeviceMirror> mirrors;
  kernel.call(mirror_call(stage1, call, mirrors));
  for (auto& m : mirrors) m.copy_back();
}

}  // namespace spindle::test

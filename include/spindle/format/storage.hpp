// The type-erased description of one buffer argument that the call binder checks against a
// kernel's sparse buffer: an element pointer plus one LevelView per axis of the buffer.
// Every host container (Csr, Tensor, Ragged, Csf, Bsr, Ell, the Eigen views) can describe itself as
// a StorageView; the binder never looks at container types.
//
// Level semantics follow the SparseTIR axis kinds (seed 002 §3.1):
//   dense_fixed     positions 0..length-1 under every parent position
//   dense_variable  ragged: fiber p spans positions indptr[p]..indptr[p+1]-1, coordinate ==
//                   position within the fiber
//   sparse_fixed    nnz_per_row positions per parent position; coordinates in indices
//   sparse_variable compressed: indptr + indices (CSR's column level)
// Values are stored in position order; trailing dense_fixed levels are row-major.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "spindle/ir/dtype.hpp"
#include "spindle/support/inline_vector.hpp"

namespace spindle {

enum class LevelKind : std::uint8_t { dense_fixed, dense_variable, sparse_fixed, sparse_variable };

inline const char* level_kind_name(LevelKind k) {
  switch (k) {
    case LevelKind::dense_fixed: return "dense_fixed";
    case LevelKind::dense_variable: return "dense_variable";
    case LevelKind::sparse_fixed: return "sparse_fixed";
    case LevelKind::sparse_variable: return "sparse_variable";
  }
  return "?";
}

struct LevelView {
  LevelKind kind = LevelKind::dense_fixed;
  std::int64_t length = 0;       // extent of the coordinate space of this level
  std::int64_t nnz = 0;          // variable levels: number of positions in the level
  std::int64_t nnz_per_row = 0;  // sparse_fixed: positions per parent position
  const void* indptr = nullptr;  // variable levels: parent_positions + 1 entries
  const void* indices = nullptr; // sparse levels: one coordinate per position
  DType index_dtype = DType::i32;
  bool sorted = true;            // sparse levels: coordinates strictly ascending per fiber
  // Device levels (StorageView::on_device): a hash of this level's indptr and indices
  // contents, computed on the host when they were uploaded, so that two arguments sharing
  // a sparse axis can be checked without reading device memory. 0 = unknown.
  std::uint64_t fingerprint = 0;
};

inline constexpr std::size_t kMaxLevels = 8;

struct StorageView {
  // User-provided (the members keep their initialisers below): value-initialising a
  // StorageView (`StorageView{}`, a vector of CallArgs) would otherwise first zero all of its
  // ~600 bytes, levels not in use included, on every kernel call.
  StorageView() {}
  DType dtype = DType::f32;
  void* data = nullptr;            // values in position order
  std::int64_t value_count = 0;    // number of elements behind data
  bool writable = false;           // false for views of const data
  bool on_device = false;          // data, indptr and indices are CUDA device pointers
  InlineVector<LevelView, kMaxLevels> levels;  // one per buffer axis, outermost first
  const char* kind = "Tensor";     // container kind: Csr, CsrView, Tensor, TensorView, Ragged, Csf, Bsr, Ell
  std::string name;                // the container's name (may be empty; short names stay inline)

  // For messages, built only when needed: e.g. "Csr<f32,i32> 2708x2708 nnz=10556 'cora'".
  std::string description() const {
    std::string k = kind, s = k + "<" + dtype_name(dtype);
    auto shape = [&](std::size_t from) {
      std::string t = "[";
      for (std::size_t i = from; i < levels.size(); ++i) t += (i > from ? ", " : "") + std::to_string(levels[i].length);
      return t + "]";
    };
    if ((k.rfind("Csr", 0) == 0 || k == "DeviceCsr") && levels.size() == 2) {
      s += std::string(",") + dtype_name(levels[1].index_dtype) + "> " + std::to_string(levels[0].length) + "x" +
           std::to_string(levels[1].length) + " nnz=" + std::to_string(levels[1].nnz);
    } else if (k == "Csf" && levels.size() >= 2) {
      s += std::string(",") + dtype_name(levels[1].index_dtype) + "> " + shape(0) + " nnz=" +
           std::to_string(levels.back().nnz);
    } else if (k == "Bsr" && levels.size() == 4) {  // the padded shape: what a kernel sees
      s += std::string(",") + dtype_name(levels[1].index_dtype) + "> " +
           std::to_string(levels[0].length * levels[2].length) + "x" +
           std::to_string(levels[1].length * levels[3].length) + " blocks " +
           std::to_string(levels[2].length) + "x" + std::to_string(levels[3].length) + " (" +
           std::to_string(levels[0].length) + "x" + std::to_string(levels[1].length) +
           " grid) nnzb=" + std::to_string(levels[1].nnz);
    } else if (k == "Ell" && levels.size() == 2) {
      s += std::string(",") + dtype_name(levels[1].index_dtype) + "> " +
           std::to_string(levels[0].length) + "x" + std::to_string(levels[1].length) +
           " k=" + std::to_string(levels[1].nnz_per_row);
    } else if (k == "Ragged" && levels.size() >= 2) {
      s += "> batch=" + std::to_string(levels[0].length) + " rows=" + std::to_string(levels[1].nnz) +
           " max_rows=" + std::to_string(levels[1].length) + " trailing=" + shape(2);
    } else {
      s += "> " + shape(0);
    }
    if (!name.empty()) s += " '" + name + "'";
    return s;
  }
};

namespace detail {

// The values entry of a container's StorageView: `count` elements at `data` (T may be const;
// a view of const data is read-only), the container kind and name. The caller adds the levels.
template <class T>
StorageView values_storage(T* data, std::size_t count, const char* kind, const std::string& name,
                           bool writable = !std::is_const_v<T>) {
  StorageView s;
  s.dtype = dtype_v<T>;
  s.data = const_cast<std::remove_const_t<T>*>(data);
  s.value_count = static_cast<std::int64_t>(count);
  s.writable = writable;
  s.kind = kind;
  s.name = name;
  return s;
}

}  // namespace detail

}  // namespace spindle

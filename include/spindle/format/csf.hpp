// Csf<T, Index>: an owning compressed sparse fiber tensor of order N >= 2. Level 0 is
// dense_fixed over shape[0]; every level k >= 1 is sparse_variable: the fiber under parent
// position p of level k-1 spans positions indptr(k)[p] .. indptr(k)[p+1]-1 with coordinates
// indices(k)[q]. Values belong to the positions of the last level. For N = 3 this is the
// usual (I dense, J compressed under I, K compressed under J) CSF; N = 2 is a CSR.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "spindle/format/coo.hpp"
#include "spindle/format/csr_view.hpp"
#include "spindle/format/random.hpp"
#include "spindle/format/tensor.hpp"
#include "spindle/format/validate.hpp"

namespace spindle {

// The arrays of one compressed level k >= 1.
template <class Index>
struct CsfLevel {
  std::vector<Index> indptr;   // positions(k-1) + 1 entries
  std::vector<Index> indices;  // positions(k) entries
};

// One entry (i, j, k, value) of a 3-d sparse tensor, 0-based.
template <class T>
struct Quadruple {
  std::int64_t i = 0, j = 0, k = 0;
  T value{};
};

template <class T, class Index = std::int32_t>
class Csf {
 public:
  using value_type = T;
  using index_type = Index;

  // Validates every level (FormatError) against `shape`; levels[k-1] describes level k.
  Csf(std::vector<std::int64_t> shape, std::vector<CsfLevel<Index>> levels, std::vector<T> values,
      std::string name = {})
      : shape_(std::move(shape)),
        levels_(std::move(levels)),
        values_(std::move(values)),
        name_(std::move(name)) {
    detail::static_check_value<T>();
    const std::string what = detail::structure_name("Csf", name_);
    SPINDLE_CHECK(shape_.size() >= 2, ShapeError, what, ": order must be at least 2, got shape ",
                  detail::shape_string(shape_));
    SPINDLE_CHECK(levels_.size() + 1 == shape_.size(), FormatError, what, ": shape ",
                  detail::shape_string(shape_), " needs ", shape_.size() - 1,
                  " compressed levels, got ", levels_.size());
    detail::check_extent<Index>(what, "extent of axis 0", shape_[0]);
    std::int64_t parents = shape_[0];
    for (std::size_t k = 1; k < shape_.size(); ++k) {
      const CsfLevel<Index>& l = levels_[k - 1];
      const std::string lw = message(what, " level ", k);
      sorted_.push_back(validate_compressed<Index>(lw, parents, shape_[k],
                                                   static_cast<std::int64_t>(l.indices.size()),
                                                   l.indptr, l.indices, "fiber")
                            .sorted);
      parents = static_cast<std::int64_t>(l.indices.size());
    }
    SPINDLE_CHECK(static_cast<std::int64_t>(values_.size()) == parents, FormatError, what,
                  ": values has ", values_.size(), " entries but the last level has ", parents,
                  " positions");
  }

  // From entries given as `order` coordinates each (coords[e * order + a]) and one value
  // each, in any order; duplicates merged by `policy`. The result is sorted.
  static Csf from_coords(std::vector<std::int64_t> shape, std::span<const std::int64_t> coords,
                         std::span<const T> values, Duplicates policy = Duplicates::sum,
                         std::string name = {});
  static Csf from_quadruples(std::int64_t dim_i, std::int64_t dim_j, std::int64_t dim_k,
                             std::span<const Quadruple<T>> entries,
                             Duplicates policy = Duplicates::sum, std::string name = {}) {
    std::vector<std::int64_t> coords;
    std::vector<T> values;
    coords.reserve(entries.size() * 3);
    values.reserve(entries.size());
    for (const auto& e : entries) {
      coords.insert(coords.end(), {e.i, e.j, e.k});
      values.push_back(e.value);
    }
    return from_coords({dim_i, dim_j, dim_k}, coords, values, policy, std::move(name));
  }
  static Csf from_quadruples(std::int64_t dim_i, std::int64_t dim_j, std::int64_t dim_k,
                             const std::vector<Quadruple<T>>& entries,
                             Duplicates policy = Duplicates::sum, std::string name = {}) {
    return from_quadruples(dim_i, dim_j, dim_k, std::span<const Quadruple<T>>(entries), policy,
                           std::move(name));
  }
  // round(density * volume) distinct random coordinates with values as in Tensor::random.
  static Csf random(std::vector<std::int64_t> shape, double density, std::uint64_t seed,
                    double lo = 0.0, double hi = 1.0);

  int order() const { return static_cast<int>(shape_.size()); }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  std::int64_t dim(int axis) const { return shape_.at(static_cast<std::size_t>(axis)); }
  std::int64_t nnz() const { return static_cast<std::int64_t>(values_.size()); }
  const std::string& name() const { return name_; }
  // Number of positions of a level; level 0 has shape[0].
  std::int64_t positions(int level) const {
    return level == 0 ? shape_[0] : static_cast<std::int64_t>(sparse(level).indices.size());
  }
  std::span<const Index> indptr(int level) const { return sparse(level).indptr; }
  std::span<const Index> indices(int level) const { return sparse(level).indices; }
  bool sorted() const {
    return std::all_of(sorted_.begin(), sorted_.end(), [](bool b) { return b; });
  }
  bool sorted(int level) const { return sorted_.at(static_cast<std::size_t>(level - 1)); }
  std::span<T> values() { return values_; }
  std::span<const T> values() const { return values_; }

  StorageView storage() { return make_storage<T>(values_.data()); }
  StorageView storage() const { return make_storage<const T>(values_.data()); }

  // Dense row-major copy; for tests and small tensors.
  Tensor<T> to_dense() const {
    auto dense = Tensor<T>::zeros(shape_);
    for (std::int64_t i = 0; i < shape_[0]; ++i) add_dense(dense.data(), 1, i, i);
    return dense;
  }

 private:
  // Adds the subtree under position `pos` of level k-1 (row-major offset `off` so far).
  void add_dense(T* d, int k, std::int64_t pos, std::int64_t off) const {
    const CsfLevel<Index>& l = levels_[static_cast<std::size_t>(k - 1)];
    for (Index q = l.indptr[pos]; q < l.indptr[pos + 1]; ++q) {
      const std::int64_t o = off * shape_[k] + l.indices[q];
      if (k == order() - 1)
        d[o] += values_[q];
      else
        add_dense(d, k + 1, q, o);
    }
  }

  const CsfLevel<Index>& sparse(int level) const {
    SPINDLE_CHECK(level >= 1 && level < order(), ShapeError, detail::structure_name("Csf", name_),
                  ": level ", level, " has no indptr/indices (compressed levels are 1..",
                  order() - 1, ")");
    return levels_[static_cast<std::size_t>(level - 1)];
  }

  template <class U>
  StorageView make_storage(U* data) const {
    StorageView s;
    s.dtype = dtype_v<T>;
    s.data = const_cast<T*>(data);
    s.value_count = nnz();
    s.writable = !std::is_const_v<U>;
    LevelView top;
    top.kind = LevelKind::dense_fixed;
    top.length = shape_[0];
    s.levels.push_back(top);
    for (int k = 1; k < order(); ++k) {
      LevelView l;
      l.kind = LevelKind::sparse_variable;
      l.length = shape_[k];
      l.nnz = positions(k);
      l.indptr = levels_[k - 1].indptr.data();
      l.indices = levels_[k - 1].indices.data();
      l.index_dtype = dtype_v<Index>;
      l.sorted = sorted_[k - 1];
      s.levels.push_back(l);
    }
    s.kind = "Csf";
    s.name = name_;
    return s;
  }

  std::vector<std::int64_t> shape_;
  std::vector<CsfLevel<Index>> levels_;
  std::vector<T> values_;
  std::vector<bool> sorted_;
  std::string name_;
};

template <class T, class Index>
Csf<T, Index> Csf<T, Index>::from_coords(std::vector<std::int64_t> shape,
                                         std::span<const std::int64_t> coords,
                                         std::span<const T> values, Duplicates policy,
                                         std::string name) {
  const std::string what = detail::structure_name("Csf", name);
  const std::size_t n = shape.size();
  SPINDLE_CHECK(n >= 2, ShapeError, what, ": order must be at least 2, got shape ",
                detail::shape_string(shape));
  for (std::size_t a = 0; a < n; ++a)
    detail::check_extent<Index>(what, message("extent of axis ", a), shape[a]);
  SPINDLE_CHECK(coords.size() == values.size() * n, FormatError, what, ": ", coords.size(),
                " coordinates for ", values.size(), " values of an order-", n, " tensor");
  const auto m = static_cast<std::int64_t>(values.size());
  detail::check_extent<Index>(what, "number of entries", m);
  auto at = [&](std::int64_t e) { return coords.data() + e * static_cast<std::int64_t>(n); };
  for (std::int64_t e = 0; e < m; ++e)
    for (std::size_t a = 0; a < n; ++a)
      if (at(e)[a] < 0 || at(e)[a] >= shape[a]) [[unlikely]]
        throw FormatError(message(what, ": entry ", e, " has coordinate ", at(e)[a], " on axis ", a,
                                  ", out of range [0, ", shape[a], ")"));
  std::vector<std::int64_t> perm(static_cast<std::size_t>(m));
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(), [&](std::int64_t x, std::int64_t y) {
    return std::lexicographical_compare(at(x), at(x) + n, at(y), at(y) + n);
  });
  std::vector<CsfLevel<Index>> levels(n - 1);
  std::vector<std::vector<Index>> parent(n);  // parent position of each new position
  std::vector<T> out;
  std::int64_t prev = -1;
  for (std::int64_t e : perm) {
    std::size_t d = 0;
    if (prev >= 0) {
      while (d < n && at(prev)[d] == at(e)[d]) ++d;
      if (d == n) {  // duplicate coordinate
        if (policy == Duplicates::error)
          throw FormatError(message(what, ": duplicate entry at ", detail::shape_string({at(e), n}),
                                    "; hint: use Duplicates::sum or Duplicates::keep_last"));
        out.back() = policy == Duplicates::sum ? out.back() + values[e] : values[e];
        continue;
      }
    }
    for (std::size_t k = std::max<std::size_t>(d, 1); k < n; ++k) {
      const std::int64_t p =
          k == 1 ? at(e)[0] : static_cast<std::int64_t>(levels[k - 2].indices.size()) - 1;
      parent[k].push_back(static_cast<Index>(p));
      levels[k - 1].indices.push_back(static_cast<Index>(at(e)[k]));
    }
    out.push_back(values[e]);
    prev = e;
  }
  std::int64_t parents = shape[0];
  for (std::size_t k = 1; k < n; ++k) {
    auto& ptr = levels[k - 1].indptr;
    ptr.assign(static_cast<std::size_t>(parents) + 1, 0);
    for (Index p : parent[k]) ++ptr[static_cast<std::size_t>(p) + 1];
    for (std::int64_t p = 0; p < parents; ++p) ptr[p + 1] += ptr[p];
    parents = static_cast<std::int64_t>(levels[k - 1].indices.size());
  }
  return Csf(std::move(shape), std::move(levels), std::move(out), std::move(name));
}

template <class T, class Index>
Csf<T, Index> Csf<T, Index>::random(std::vector<std::int64_t> shape, double density,
                                    std::uint64_t seed, double lo, double hi) {
  const std::int64_t volume = detail::checked_volume(shape, "Csf::random");
  SPINDLE_CHECK(density >= 0 && density <= 1, UserError,
                "Csf::random: density must be in [0, 1], got ", density);
  const auto count =
      std::min<std::int64_t>(volume, std::llround(density * static_cast<double>(volume)));
  Rng rng(seed);
  std::vector<std::int64_t> offsets;
  if (count * 2 >= volume) {  // selection sampling over all offsets
    std::int64_t need = count;
    for (std::int64_t o = 0; o < volume && need > 0; ++o)
      if (rng.below(volume - o) < need) offsets.push_back(o), --need;
  } else {
    while (static_cast<std::int64_t>(offsets.size()) < count) {
      for (auto k = static_cast<std::int64_t>(offsets.size()); k < count; ++k)
        offsets.push_back(rng.below(volume));
      std::sort(offsets.begin(), offsets.end());
      offsets.erase(std::unique(offsets.begin(), offsets.end()), offsets.end());
    }
  }
  const std::size_t n = shape.size();
  std::vector<std::int64_t> coords(offsets.size() * n);
  std::vector<T> values(offsets.size());
  for (std::size_t e = 0; e < offsets.size(); ++e) {
    std::int64_t o = offsets[e];
    for (std::size_t a = n; a-- > 0;) {
      coords[e * n + a] = o % shape[a];
      o /= shape[a];
    }
    values[e] = rng.value<T>(lo, hi);
  }
  return from_coords(std::move(shape), coords, values);
}

}  // namespace spindle

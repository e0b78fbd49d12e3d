// Ell3d<T, Index>: ELL3D, the three-level format of SparseTIR's RGCN kernels (seed 002 §4.4):
// relations x rows x a fixed number of slots. For each relation r (edge type) of a
// heterogeneous graph, the rows that hold at least one edge of that relation are stored
// (strictly ascending row ids, rel_ptr[r] .. rel_ptr[r+1]-1), and each stored row holds
// exactly k = width() slots: its columns (the in-neighbours by that relation, strictly
// ascending) padded with explicit zeros at the smallest columns the row does not hold, as
// in an Ell. Slot s of stored row q is position q * k + s: column indices[q * k + s], value
// values[q * k + s]. A relation's rows with no edge cost nothing; every stored row costs k
// slots, so the padding is the spread of the row lengths (SparseTIR buckets rows by length,
// one Ell3d per bucket). The structure is validated at construction and immutable
// (FormatError / ShapeError naming the first bad place); the values stay mutable.
// Storage levels:
//   [dense_fixed(relations), sparse_variable(rows, nnz = stored rows, indptr = rel_ptr,
//    indices = row_ids, sorted), sparse_fixed(cols, nnz_per_row = k, indices, sorted)]
// the argument of a buffer over [R, I, J] with
//   struct R : spindle::dense_fixed {};            // relations
//   struct I : spindle::sparse_variable<R> {};     // the rows of relation r that have edges
//   struct J : spindle::sparse_fixed<I> {};        // their k slots (width bound at call time)
// (ops::rgcn_ell3d_spmm).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "spindle/format/csr.hpp"
#include "spindle/format/pad_columns.hpp"
#include "spindle/format/storage.hpp"
#include "spindle/format/tensor.hpp"
#include "spindle/format/validate.hpp"

namespace spindle {

namespace detail {
template <class T, class Index>
struct RelationRows;
}
template <class T, class Index = std::int32_t>
class Ell3dBuckets;

template <class T, class Index = std::int32_t>
class Ell3d {
 public:
  using value_type = T;
  using index_type = Index;

  Ell3d() = default;  // no relations, 0x0, width 0

  // From the arrays described above: rel_ptr has relations + 1 entries, row_ids the stored
  // rows (strictly ascending in [0, rows) per relation), indices and values stored rows * k
  // entries (strictly ascending columns in [0, cols) per stored row). ShapeError for a bad
  // extent, FormatError for malformed arrays. stored_nonzeros() counts the nonzero values.
  Ell3d(std::int64_t relations, std::int64_t rows, std::int64_t cols, std::int64_t k, std::vector<Index> rel_ptr,
        std::vector<Index> row_ids, std::vector<Index> indices, std::vector<T> values, std::string name = {})
      : relations_(relations),
        rows_(rows),
        cols_(cols),
        k_(k),
        rel_ptr_(std::move(rel_ptr)),
        row_ids_(std::move(row_ids)),
        indices_(std::move(indices)),
        values_(std::move(values)),
        name_(std::move(name)) {
    detail::static_check_value<T>();
    const std::string what = detail::structure_name("Ell3d", name_);
    check_extents(what, relations_, rows_, cols_, k_);
    const auto stored = static_cast<std::int64_t>(row_ids_.size());
    const FiberOrder order = validate_compressed<Index>(what, relations_, rows_, stored, rel_ptr_, row_ids_, "relation");
    SPINDLE_CHECK(order.sorted, FormatError, what, ": the rows of relation ", order.fiber,
                  " are not strictly ascending at stored row ", order.position, " (row_ids[", order.position - 1,
                  "]=", order.previous, " >= row_ids[", order.position, "]=", order.current,
                  "); a relation stores each row once, in ascending order");
    SPINDLE_CHECK(k_ == 0 || stored <= std::numeric_limits<std::int64_t>::max() / k_, ShapeError, what, ": ", stored,
                  " rows of width ", k_, " are too many slots");
    const std::int64_t slots = stored * k_;
    SPINDLE_CHECK(static_cast<std::int64_t>(indices_.size()) == slots, FormatError, what, ": indices has ",
                  indices_.size(), " entries, expected stored rows * k = ", stored, " * ", k_, " = ", slots);
    SPINDLE_CHECK(static_cast<std::int64_t>(values_.size()) == slots, FormatError, what, ": values has ",
                  values_.size(), " entries, expected stored rows * k = ", stored, " * ", k_, " = ", slots);
    for (std::int64_t p = 0; p < slots; ++p) {
      const std::int64_t c = indices_[p];
      SPINDLE_CHECK(c >= 0 && c < cols_, FormatError, what, ": column ", c, " out of range [0, ", cols_,
                    ") at slot ", p, " (stored row ", p / k_, ", slot ", p % k_, ")");
      SPINDLE_CHECK(p % k_ == 0 || indices_[p - 1] < c, FormatError, what, ": the columns of stored row ", p / k_,
                    " are not strictly ascending at slot ", p, " (indices[", p - 1, "]=", indices_[p - 1],
                    " >= indices[", p, "]=", c, "); a row stores each column once, in ascending order");
    }
    stored_nonzeros_ = static_cast<std::int64_t>(
        std::count_if(values_.begin(), values_.end(), [](const T& v) { return v != T{}; }));
  }

  // One Csr per relation (all rows x cols; sorted or not, duplicates added): the rows of
  // each with at least one entry, packed into width k (k = -1: the longest row of any
  // relation). ShapeError for relations of different shapes, or k below the longest row or
  // above the column count.
  static Ell3d from_relations(const std::vector<Csr<T, Index>>& relations, std::int64_t k = -1);

  std::int64_t relations() const { return relations_; }
  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  std::int64_t width() const { return k_; }
  std::int64_t stored_rows() const { return static_cast<std::int64_t>(row_ids_.size()); }
  const std::string& name() const { return name_; }
  std::span<const Index> rel_ptr() const { return rel_ptr_; }
  std::span<const Index> row_ids() const { return row_ids_; }
  std::span<const Index> indices() const { return indices_; }
  std::span<T> values() { return values_; }
  std::span<const T> values() const { return values_; }

  // Entries of the sources: the nnz of the Csrs it was built from (after adding duplicates),
  // or the number of nonzero values for the array constructor.
  std::int64_t stored_nonzeros() const { return stored_nonzeros_; }
  // Slots per stored entry (1 = no padding at all).
  double padding_ratio() const {
    return static_cast<double>(values_.size()) / static_cast<double>(std::max<std::int64_t>(1, stored_nonzeros_));
  }
  // Bytes of rel_ptr, row_ids, indices and values.
  std::int64_t bytes() const {
    return static_cast<std::int64_t>((rel_ptr_.size() + row_ids_.size() + indices_.size()) * sizeof(Index) +
                                     values_.size() * sizeof(T));
  }

  // Relation r as a sorted rows x cols Csr; with drop_zeros every zero value is left out
  // (the padding, but also zeros stored on purpose). ShapeError for r out of range.
  Csr<T, Index> relation(std::int64_t r, bool drop_zeros = true) const {
    SPINDLE_CHECK(r >= 0 && r < relations_, ShapeError, detail::structure_name("Ell3d", name_), ": relation ", r,
                  " out of range [0, ", relations_, ")");
    std::vector<Index> ptr(static_cast<std::size_t>(rows_) + 1, 0);
    std::vector<Index> idx;
    std::vector<T> val;
    for (Index q = rel_ptr_[r]; q < rel_ptr_[r + 1]; ++q) {
      for (std::int64_t p = q * k_; p < (q + 1) * k_; ++p) {
        if (drop_zeros && values_[p] == T{}) continue;
        idx.push_back(indices_[p]);
        val.push_back(values_[p]);
      }
      ptr[row_ids_[q] + 1] = static_cast<Index>(idx.size());
    }
    for (std::int64_t i = 0; i < rows_; ++i) ptr[i + 1] = std::max(ptr[i + 1], ptr[i]);
    return Csr<T, Index>(rows_, cols_, std::move(ptr), std::move(idx), std::move(val), name_);
  }

  StorageView storage() { return make_storage<T>(values_.data()); }
  StorageView storage() const { return make_storage<const T>(values_.data()); }

 private:
  friend class Ell3dBuckets<T, Index>;
  static Ell3d pack(const detail::RelationRows<T, Index>& all, const std::vector<std::size_t>& pick, std::int64_t k);

  static void check_extents(const std::string& what, std::int64_t relations, std::int64_t rows, std::int64_t cols,
                            std::int64_t k) {
    detail::static_check_index<Index>();
    SPINDLE_CHECK(relations >= 0 && rows >= 0 && cols >= 0 && k >= 0, ShapeError, what,
                  ": relations, rows, columns and width must not be negative (got ", relations, ", ", rows, ", ",
                  cols, ", ", k, ")");
    constexpr auto imax = static_cast<std::int64_t>(std::numeric_limits<Index>::max());
    SPINDLE_CHECK(relations <= imax && rows <= imax && cols <= imax, ShapeError, what, ": ", relations,
                  " relations of ", rows, "x", cols, " do not fit the index type ", dtype_name(dtype_v<Index>),
                  "; hint: use Index = std::int64_t");
    SPINDLE_CHECK(k <= cols || rows == 0, ShapeError, what, ": width k=", k, " exceeds the ", cols,
                  " columns (the slots of a row hold distinct columns)");
  }

  template <class U>
  StorageView make_storage(U* data) const {
    StorageView s = detail::values_storage(data, values_.size(), "Ell3d", name_);
    LevelView rel;
    rel.kind = LevelKind::dense_fixed;
    rel.length = relations_;
    LevelView rows;
    rows.kind = LevelKind::sparse_variable;
    rows.length = rows_;
    rows.nnz = stored_rows();
    rows.indptr = rel_ptr_.data();
    rows.indices = row_ids_.data();
    rows.index_dtype = dtype_v<Index>;
    rows.sorted = true;
    LevelView slots;
    slots.kind = LevelKind::sparse_fixed;
    slots.length = cols_;
    slots.nnz_per_row = k_;
    slots.indices = indices_.data();
    slots.index_dtype = dtype_v<Index>;
    slots.sorted = true;
    s.levels = {rel, rows, slots};
    return s;
  }

  std::int64_t relations_ = 0, rows_ = 0, cols_ = 0, k_ = 0;
  std::vector<Index> rel_ptr_{0};
  std::vector<Index> row_ids_;
  std::vector<Index> indices_;
  std::vector<T> values_;
  std::int64_t stored_nonzeros_ = 0;
  std::string name_;
};

namespace detail {

// The rows of a set of relations as Ell3d::from_relations and Ell3dBuckets::from_relations
// read them: per relation, each row with at least one entry, columns ascending, duplicates
// added.
template <class T, class Index>
struct RelationRows {
  std::string name, what;
  std::int64_t rows = 0, cols = 0, relations = 0;
  std::vector<std::vector<std::pair<Index, T>>> entries;  // per stored row
  std::vector<std::int64_t> row_of;                        // per stored row: its row id
  std::vector<std::int64_t> relation_of;                   // per stored row: its relation

  explicit RelationRows(const std::vector<Csr<T, Index>>& rels)
      : name(rels.empty() ? std::string() : rels[0].name()),
        what(structure_name("Ell3d", name)),
        rows(rels.empty() ? 0 : rels[0].rows()),
        cols(rels.empty() ? 0 : rels[0].cols()),
        relations(static_cast<std::int64_t>(rels.size())) {
    for (std::size_t r = 0; r < rels.size(); ++r)
      SPINDLE_CHECK(rels[r].rows() == rows && rels[r].cols() == cols, ShapeError, what, ": relation ", r, " is ",
                    rels[r].rows(), "x", rels[r].cols(), " but relation 0 is ", rows, "x", cols,
                    "; every relation is a matrix over the same nodes");
    for (std::size_t r = 0; r < rels.size(); ++r) {
      const auto& a = rels[r];
      for (std::int64_t i = 0; i < rows; ++i) {
        const auto ri = a.row_indices(i);
        if (ri.empty()) continue;
        const auto rv = a.row_values(i);
        std::vector<std::pair<Index, T>> row;
        row.reserve(ri.size());
        for (std::size_t j = 0; j < ri.size(); ++j) row.emplace_back(ri[j], rv[j]);
        detail::sort_and_add_duplicates(row);
        entries.push_back(std::move(row));
        row_of.push_back(i);
        relation_of.push_back(static_cast<std::int64_t>(r));
      }
    }
  }
  std::int64_t length(std::size_t q) const { return static_cast<std::int64_t>(entries[q].size()); }
};

}  // namespace detail

template <class T, class Index>
Ell3d<T, Index> Ell3d<T, Index>::from_relations(const std::vector<Csr<T, Index>>& relations, std::int64_t k) {
  const detail::RelationRows<T, Index> all(relations);
  std::vector<std::size_t> every(all.entries.size());
  for (std::size_t q = 0; q < every.size(); ++q) every[q] = q;
  return pack(all, every, k);
}

// The stored rows `pick` of `all` (ascending: by relation, then by row) as one Ell3d of
// width k (-1: the longest of them).
template <class T, class Index>
Ell3d<T, Index> Ell3d<T, Index>::pack(const detail::RelationRows<T, Index>& all, const std::vector<std::size_t>& pick,
                                      std::int64_t k) {
  const std::string& what = all.what;
  std::int64_t longest = 0, longest_rel = -1, longest_row = -1, nnz = 0;
  for (const std::size_t q : pick) {
    if (all.length(q) > longest) longest = all.length(q), longest_rel = all.relation_of[q], longest_row = all.row_of[q];
    nnz += all.length(q);
  }
  SPINDLE_CHECK(k >= -1, ShapeError, what, ": width k must be >= 0, or -1 for the longest row; got ", k);
  if (k == -1) k = longest;
  SPINDLE_CHECK(k >= longest, ShapeError, what, ": width k=", k, " is smaller than the longest row: row ", longest_row,
                " of relation ", longest_rel, " has ", longest, " entries; hint: pass k = -1 to use the longest row");
  check_extents(what, all.relations, all.rows, all.cols, k);
  const auto stored = static_cast<std::int64_t>(pick.size());
  constexpr auto imax = static_cast<std::int64_t>(std::numeric_limits<Index>::max());
  SPINDLE_CHECK(k == 0 || stored <= imax / k, ShapeError, what, ": ", stored, " rows of width ", k,
                " do not fit the index type ", dtype_name(dtype_v<Index>), "; hint: use Index = std::int64_t");
  std::vector<Index> rel_ptr(static_cast<std::size_t>(all.relations) + 1, 0);
  std::vector<Index> row_ids(static_cast<std::size_t>(stored));
  std::vector<Index> indices(static_cast<std::size_t>(stored * k));
  std::vector<T> values(static_cast<std::size_t>(stored * k), T{});
  for (std::int64_t s = 0; s < stored; ++s) {
    const std::size_t q = pick[static_cast<std::size_t>(s)];
    ++rel_ptr[static_cast<std::size_t>(all.relation_of[q]) + 1];
    row_ids[s] = static_cast<Index>(all.row_of[q]);
    // The row's columns merged with the smallest columns it does not hold, k slots in all.
    const auto& row = all.entries[q];
    Index* out_i = indices.data() + s * k;
    T* out_v = values.data() + s * k;
    detail::pad_columns(
        static_cast<std::int64_t>(row.size()), k, [&](std::int64_t j) { return row[j].first; },
        [&](std::int64_t c, std::int64_t j) {
          *out_i++ = static_cast<Index>(c);
          *out_v++ = j < 0 ? T{} : row[j].second;
        });
  }
  for (std::size_t r = 0; r + 1 < rel_ptr.size(); ++r) rel_ptr[r + 1] += rel_ptr[r];
  Ell3d e(all.relations, all.rows, all.cols, k, std::move(rel_ptr), std::move(row_ids), std::move(indices),
          std::move(values), all.name);
  e.stored_nonzeros_ = nnz;
  return e;
}

// Ell3dBuckets<T, Index>: the relations of a heterogeneous graph as Ell3d parts, one per
// bucket of row lengths (w/2, w], w = 1, 2, 4, ... (SparseTIR's RGCN kernels, seed 002 §4.4):
// a part pads each of its rows to the longest row of the part, so to less than twice its
// length, where one Ell3d pads every row to the longest row of the whole graph (MUTAG: a hub
// of 6781 edges pads all 76204 stored rows, 4.1 GB, against about 2 MB here). A stored row
// is in exactly one part; buckets without rows have no part. ops::RgcnBucketsSpmm runs the
// RGCN aggregation over the parts.
template <class T, class Index>
class Ell3dBuckets {
 public:
  using value_type = T;
  using index_type = Index;

  Ell3dBuckets() = default;  // no relations, 0x0, no parts

  // One Csr per relation (all rows x cols, sorted or not, duplicates added). ShapeError for
  // relations of different shapes.
  static Ell3dBuckets from_relations(const std::vector<Csr<T, Index>>& relations) {
    const detail::RelationRows<T, Index> all(relations);
    Ell3dBuckets b;
    b.relations_ = all.relations;
    b.rows_ = all.rows;
    b.cols_ = all.cols;
    b.name_ = all.name;
    std::vector<std::vector<std::size_t>> picks;  // per bucket: its stored rows, in order
    for (std::size_t q = 0; q < all.entries.size(); ++q) {
      std::size_t bucket = 0;
      while ((std::int64_t{1} << bucket) < all.length(q)) ++bucket;
      if (picks.size() <= bucket) picks.resize(bucket + 1);
      picks[bucket].push_back(q);
    }
    for (const auto& pick : picks)
      if (!pick.empty()) b.parts_.push_back(Ell3d<T, Index>::pack(all, pick, -1));
    return b;
  }

  std::int64_t relations() const { return relations_; }
  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  const std::string& name() const { return name_; }
  // The parts, widths ascending (each the longest row of its bucket).
  const std::vector<Ell3d<T, Index>>& parts() const { return parts_; }
  std::vector<Ell3d<T, Index>>& parts() { return parts_; }

  std::int64_t stored_rows() const { return sum([](const auto& p) { return p.stored_rows(); }); }
  std::int64_t stored_nonzeros() const { return sum([](const auto& p) { return p.stored_nonzeros(); }); }
  std::int64_t slots() const {
    return sum([](const auto& p) { return p.stored_rows() * p.width(); });
  }
  // Slots per stored entry, over all parts (1 = no padding).
  double padding_ratio() const {
    return static_cast<double>(slots()) / static_cast<double>(std::max<std::int64_t>(1, stored_nonzeros()));
  }
  std::int64_t bytes() const { return sum([](const auto& p) { return p.bytes(); }); }
  // "Ell3dBuckets 'name' (R relations of NxM, P parts of widths w0..wn, S slots)".
  std::string description() const {
    std::string d = detail::structure_name("Ell3dBuckets", name_) + " (" + std::to_string(relations_) +
                    " relations of " + std::to_string(rows_) + "x" + std::to_string(cols_) + ", " +
                    std::to_string(parts_.size()) + " parts";
    if (!parts_.empty())
      d += " of widths " + std::to_string(parts_.front().width()) + ".." + std::to_string(parts_.back().width());
    return d + ", " + std::to_string(slots()) + " slots)";
  }

  // Relation r as a sorted rows x cols Csr (its rows gathered from every part); with
  // drop_zeros every zero value is left out. ShapeError for r out of range.
  Csr<T, Index> relation(std::int64_t r, bool drop_zeros = true) const {
    SPINDLE_CHECK(r >= 0 && r < relations_, ShapeError, detail::structure_name("Ell3dBuckets", name_), ": relation ",
                  r, " out of range [0, ", relations_, ")");
    std::vector<Triplet<T>> t;
    for (const auto& p : parts_) {
      const auto a = p.relation(r, drop_zeros);
      for (std::int64_t i = 0; i < a.rows(); ++i)
        for (auto q = a.indptr()[i]; q < a.indptr()[i + 1]; ++q) t.push_back({i, a.indices()[q], a.values()[q]});
    }
    return Csr<T, Index>::from_triplets(rows_, cols_, t, Duplicates::sum, name_);
  }

 private:
  template <class F>
  std::int64_t sum(F&& f) const {
    std::int64_t s = 0;
    for (const auto& p : parts_) s += f(p);
    return s;
  }

  std::int64_t relations_ = 0, rows_ = 0, cols_ = 0;
  std::string name_;
  std::vector<Ell3d<T, Index>> parts_;
};

}  // namespace spindle

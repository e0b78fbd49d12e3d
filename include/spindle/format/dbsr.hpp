// Dbsr<T, Index>: doubly compressed block sparse rows (SparseTIR's DBSR). A Bsr whose empty
// block rows are not stored: the block-row numbers that hold blocks (strictly ascending), an
// indptr over them, and the block columns and br x bc values of their blocks, as in Bsr. For
// block-sparse matrices with many empty block rows (block-sparse attention masks, the
// partitions of a decomposed matrix) it is O(stored blocks) where BSR is O(block rows +
// stored blocks), and a kernel visits only the stored block rows. Storage levels:
//   [sparse_fixed root (mb, the stored block rows: row_ids), sparse_variable(nb, indptr,
//    indices, sorted), dense_fixed(br), dense_fixed(bc)]
// the argument of a buffer over [R, J, Bi, Bj] with
//   struct R : spindle::sparse_root<> {};          // the stored block rows
//   struct J : spindle::sparse_variable<R> {};     // their block columns
//   struct Bi : spindle::dense_fixed_n<BR> {};     // rows inside a block
//   struct Bj : spindle::dense_fixed_n<BC> {};     // columns inside a block
// (ops::dbsr_spmm). The structure is validated at construction and immutable (FormatError /
// ShapeError naming the first bad place); the values stay mutable.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "spindle/format/bsr.hpp"
#include "spindle/format/sparse_vector.hpp"

namespace spindle {

template <class T, class Index = std::int32_t>
class Dbsr {
 public:
  using value_type = T;
  using index_type = Index;

  Dbsr() = default;  // 0x0 with 1x1 blocks

  // row_ids: the stored block rows, strictly ascending in [0, mb); indptr: row_ids.size() + 1
  // entries; indices: the block columns of the stored blocks (strictly ascending per block
  // row); values: br * bc per stored block, row-major. mb = ceil(rows / br), nb = ceil(cols / bc).
  Dbsr(std::int64_t rows, std::int64_t cols, std::int64_t block_rows, std::int64_t block_cols,
       std::vector<Index> row_ids, std::vector<Index> indptr, std::vector<Index> indices, std::vector<T> values,
       std::string name = {})
      : rows_(rows),
        cols_(cols),
        br_(block_rows),
        bc_(block_cols),
        row_ids_(std::move(row_ids)),
        indptr_(std::move(indptr)),
        indices_(std::move(indices)),
        values_(std::move(values)),
        name_(std::move(name)) {
    detail::static_check_value<T>();
    const std::string what = detail::structure_name("Dbsr", name_);
    const detail::BlockGrid g = detail::block_grid<Index>(what, rows_, cols_, br_, bc_);
    mb_ = g.mb;
    nb_ = g.nb;
    detail::check_sparse_coordinates<Index>(what, mb_, row_ids_,
                                            {.coordinate = "block row id",
                                             .coordinates = "block row ids",
                                             .array = "row_ids",
                                             .position = "stored block row"});
    detail::check_blocks<Index>(what, "stored block row", static_cast<std::int64_t>(row_ids_.size()), nb_, br_, bc_,
                                indptr_, indices_, values_.size());
    stored_nonzeros_ =
        static_cast<std::int64_t>(std::count_if(values_.begin(), values_.end(), [](const T& v) { return v != T{}; }));
  }

  // The non-empty block rows of `b`, blocks in b's order.
  static Dbsr from_bsr(const Bsr<T, Index>& b) {
    std::vector<Index> ids, ptr{0};
    const auto bp = b.indptr();
    for (std::int64_t r = 0; r < b.block_row_count(); ++r) {
      if (bp[r] == bp[r + 1]) continue;
      ids.push_back(static_cast<Index>(r));
      ptr.push_back(bp[r + 1]);
    }
    Dbsr d(Trusted{}, b, std::move(ids), std::move(ptr));
    return d;
  }
  // Groups the entries of `a` (sorted or not; duplicates are added) into br x bc blocks and
  // keeps the block rows that hold any (Bsr::from_csr, then from_bsr).
  static Dbsr from_csr(const Csr<T, Index>& a, std::int64_t block_rows, std::int64_t block_cols) {
    return from_bsr(Bsr<T, Index>::from_csr(a, block_rows, block_cols));
  }

  // The same matrix as a Bsr (the empty block rows back).
  Bsr<T, Index> to_bsr() const {
    std::vector<Index> ptr(static_cast<std::size_t>(mb_) + 1, 0);
    for (std::size_t q = 0; q < row_ids_.size(); ++q)
      ptr[static_cast<std::size_t>(row_ids_[q]) + 1] = indptr_[q + 1] - indptr_[q];
    for (std::int64_t r = 0; r < mb_; ++r) ptr[static_cast<std::size_t>(r) + 1] += ptr[static_cast<std::size_t>(r)];
    return Bsr<T, Index>(rows_, cols_, br_, bc_, std::move(ptr), indices_, values_, name_);
  }
  // The entries inside the logical matrix as a sorted Csr (zeros dropped: Bsr::to_csr).
  Csr<T, Index> to_csr(bool drop_zeros = true) const { return to_bsr().to_csr(drop_zeros); }
  // Dense rows x cols row-major copy; for tests and small matrices.
  Tensor<T> to_dense() const { return to_bsr().to_dense(); }

  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  std::int64_t block_rows() const { return br_; }
  std::int64_t block_cols() const { return bc_; }
  std::int64_t block_row_count() const { return mb_; }
  std::int64_t block_col_count() const { return nb_; }
  std::int64_t padded_rows() const { return mb_ * br_; }
  std::int64_t padded_cols() const { return nb_ * bc_; }
  std::int64_t stored_block_rows() const { return static_cast<std::int64_t>(row_ids_.size()); }
  std::int64_t nnz_blocks() const { return static_cast<std::int64_t>(indices_.size()); }
  const std::string& name() const { return name_; }
  std::span<const Index> row_ids() const { return row_ids_; }
  std::span<const Index> indptr() const { return indptr_; }
  std::span<const Index> indices() const { return indices_; }
  std::span<T> values() { return values_; }
  std::span<const T> values() const { return values_; }

  // Entries of the source: the nnz of the Csr it was built from, or the nonzero values.
  std::int64_t stored_nonzeros() const { return stored_nonzeros_; }
  // Stored values per stored entry (1 = no padding at all).
  double padding_ratio() const {
    return static_cast<double>(values_.size()) / static_cast<double>(std::max<std::int64_t>(1, stored_nonzeros_));
  }
  // Bytes of row_ids, indptr, indices and values (a Bsr needs mb + 1 indptr entries instead
  // of the stored block rows' ids and indptr).
  std::int64_t bytes() const {
    return static_cast<std::int64_t>((row_ids_.size() + indptr_.size() + indices_.size()) * sizeof(Index) +
                                     values_.size() * sizeof(T));
  }

  StorageView storage() { return make_storage<T>(values_.data()); }
  StorageView storage() const { return make_storage<const T>(values_.data()); }

 private:
  struct Trusted {};
  // From a validated Bsr: its blocks, with the stored block rows `ids` and their indptr.
  Dbsr(Trusted, const Bsr<T, Index>& b, std::vector<Index> ids, std::vector<Index> ptr)
      : rows_(b.rows()),
        cols_(b.cols()),
        br_(b.block_rows()),
        bc_(b.block_cols()),
        mb_(b.block_row_count()),
        nb_(b.block_col_count()),
        row_ids_(std::move(ids)),
        indptr_(std::move(ptr)),
        indices_(b.indices().begin(), b.indices().end()),
        values_(b.values().begin(), b.values().end()),
        stored_nonzeros_(b.stored_nonzeros()),
        name_(b.name()) {}

  template <class U>
  StorageView make_storage(U* data) const {
    StorageView s = detail::values_storage(data, values_.size(), "Dbsr", name_);
    s.levels = {detail::sparse_root_level<Index>(mb_, row_ids_)};
    detail::append_block_levels<Index>(s, nb_, indptr_, indices_, br_, bc_);
    return s;
  }

  std::int64_t rows_ = 0, cols_ = 0;
  std::int64_t br_ = 1, bc_ = 1;
  std::int64_t mb_ = 0, nb_ = 0;
  std::vector<Index> row_ids_;
  std::vector<Index> indptr_{0};
  std::vector<Index> indices_;
  std::vector<T> values_;
  std::int64_t stored_nonzeros_ = 0;
  std::string name_;
};

}  // namespace spindle

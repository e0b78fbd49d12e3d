// Bsr<T, Index>: an owning block compressed sparse row matrix with blocks of br x bc (both
// runtime values >= 1). The rows x cols matrix is cut into a grid of mb = ceil(rows / br) block
// rows and nb = ceil(cols / bc) block columns; only blocks that hold at least one entry are
// stored. Block row I owns stored blocks indptr[I] .. indptr[I+1]-1, whose block columns
// indices[q] are strictly ascending; stored block q occupies values[q*br*bc .. (q+1)*br*bc),
// row-major. Edge blocks extend past the logical matrix to padded_rows() x padded_cols() and
// hold zeros there. The structure is validated at construction and immutable; the values
// stay mutable. Storage levels:
//   [dense_fixed(mb), sparse_variable(nb, nnz = nnz_blocks, indptr, indices, sorted),
//    dense_fixed(br), dense_fixed(bc)]
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "spindle/format/csr.hpp"
#include "spindle/format/storage.hpp"
#include "spindle/format/tensor.hpp"
#include "spindle/format/validate.hpp"

namespace spindle {

namespace detail {

// The block grid of a BSR matrix: mb x nb blocks of br x bc. ShapeError for a block extent
// below 1, a negative matrix extent, or a padded extent (mb * br, nb * bc) that does not fit
// the index type.
struct BlockGrid {
  std::int64_t mb = 0, nb = 0;
};

template <class Index>
BlockGrid block_grid(const std::string& what, std::int64_t rows, std::int64_t cols, std::int64_t br,
                     std::int64_t bc) {
  static_check_index<Index>();
  SPINDLE_CHECK(br >= 1 && bc >= 1, ShapeError, what, ": block shape must be at least 1x1, got ",
                br, "x", bc);
  SPINDLE_CHECK(rows >= 0, ShapeError, what, ": row count is negative (", rows, ")");
  SPINDLE_CHECK(cols >= 0, ShapeError, what, ": column count is negative (", cols, ")");
  constexpr auto imax = static_cast<std::int64_t>(std::numeric_limits<Index>::max());
  auto padded = [&](std::int64_t n, std::int64_t b, const char* noun) {
    const std::int64_t blocks = n / b + (n % b != 0);
    SPINDLE_CHECK(b <= imax && blocks <= imax / b, ShapeError, what, ": ", noun, " count ", n,
                  " padded to blocks of ", b, " does not fit the index type ",
                  dtype_name(dtype_v<Index>), "; hint: use Index = std::int64_t");
    return blocks;
  };
  return {padded(rows, br, "row"), padded(cols, bc, "column")};
}

// The block columns and values of a blocked format (Bsr, Dbsr), checked after its block-row
// structure: `nnzb` blocks over `block_rows` stored block rows (CSR-like indptr / indices over
// nb block columns). FormatError for a block row whose columns are not strictly ascending or a
// values array of the wrong size, ShapeError when nnzb * br * bc overflows.
template <class Index>
void check_blocks(const std::string& what, const char* block_row, std::int64_t block_rows, std::int64_t nb,
                  std::int64_t br, std::int64_t bc, const std::vector<Index>& indptr, const std::vector<Index>& indices,
                  std::size_t value_count) {
  const auto nnzb = static_cast<std::int64_t>(indices.size());
  const FiberOrder order = validate_compressed<Index>(what, block_rows, nb, nnzb, indptr, indices, block_row);
  SPINDLE_CHECK(order.sorted, FormatError, what, ": block columns of ", block_row, " ", order.fiber,
                " are not strictly ascending at position ", order.position, " (indices[", order.position - 1,
                "]=", order.previous, " >= indices[", order.position, "]=", order.current,
                "); each block row must list distinct block columns in ascending order");
  constexpr auto imax = std::numeric_limits<std::int64_t>::max();
  SPINDLE_CHECK(bc <= imax / br, ShapeError, what, ": block shape ", br, "x", bc, " has too many elements");
  SPINDLE_CHECK(nnzb <= imax / (br * bc), ShapeError, what, ": ", nnzb, " blocks of ", br, "x", bc,
                " have too many values");
  SPINDLE_CHECK(static_cast<std::int64_t>(value_count) == nnzb * br * bc, FormatError, what, ": values has ",
                value_count, " entries, expected nnz_blocks * ", br, " * ", bc, " = ", nnzb * br * bc);
}

// The levels under a blocked format's block rows: the block columns (compressed, sorted,
// `indptr` over the stored block rows), then the rows and columns inside a block.
template <class Index>
void append_block_levels(StorageView& s, std::int64_t nb, const std::vector<Index>& indptr,
                         const std::vector<Index>& indices, std::int64_t br, std::int64_t bc) {
  LevelView blocks;
  blocks.kind = LevelKind::sparse_variable;
  blocks.length = nb;
  blocks.nnz = static_cast<std::int64_t>(indices.size());
  blocks.indptr = indptr.data();
  blocks.indices = indices.data();
  blocks.index_dtype = dtype_v<Index>;
  blocks.sorted = true;
  LevelView inner_rows;
  inner_rows.kind = LevelKind::dense_fixed;
  inner_rows.length = br;
  LevelView inner_cols;
  inner_cols.kind = LevelKind::dense_fixed;
  inner_cols.length = bc;
  s.levels.push_back(blocks);
  s.levels.push_back(inner_rows);
  s.levels.push_back(inner_cols);
}

}  // namespace detail

template <class T, class Index = std::int32_t>
class Bsr {
 public:
  using value_type = T;
  using index_type = Index;

  Bsr() = default;  // 0x0 with 1x1 blocks

  // From the arrays described above: indptr has mb + 1 entries, indices nnz_blocks entries,
  // values nnz_blocks * br * bc. ShapeError for a bad block shape or extent, FormatError for
  // malformed arrays (including unsorted or duplicate block columns). stored_nonzeros()
  // counts the nonzero values.
  Bsr(std::int64_t rows, std::int64_t cols, std::int64_t block_rows, std::int64_t block_cols,
      std::vector<Index> indptr, std::vector<Index> indices, std::vector<T> values,
      std::string name = {})
      : rows_(rows),
        cols_(cols),
        br_(block_rows),
        bc_(block_cols),
        indptr_(std::move(indptr)),
        indices_(std::move(indices)),
        values_(std::move(values)),
        name_(std::move(name)) {
    detail::static_check_value<T>();
    const std::string what = detail::structure_name("Bsr", name_);
    const detail::BlockGrid g = detail::block_grid<Index>(what, rows_, cols_, br_, bc_);
    mb_ = g.mb;
    nb_ = g.nb;
    detail::check_blocks<Index>(what, "block row", mb_, nb_, br_, bc_, indptr_, indices_, values_.size());
    stored_nonzeros_ = static_cast<std::int64_t>(
        std::count_if(values_.begin(), values_.end(), [](const T& v) { return v != T{}; }));
  }

  // Groups the entries of `a` (sorted or not; duplicates are added) into br x bc blocks.
  // Time O(nnz log nnz + mb + nb), extra memory O(nb) besides the result.
  static Bsr from_csr(const Csr<T, Index>& a, std::int64_t block_rows, std::int64_t block_cols);

  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  std::int64_t block_rows() const { return br_; }
  std::int64_t block_cols() const { return bc_; }
  std::int64_t block_row_count() const { return mb_; }
  std::int64_t block_col_count() const { return nb_; }
  std::int64_t padded_rows() const { return mb_ * br_; }
  std::int64_t padded_cols() const { return nb_ * bc_; }
  std::int64_t nnz_blocks() const { return static_cast<std::int64_t>(indices_.size()); }
  const std::string& name() const { return name_; }
  std::span<const Index> indptr() const { return indptr_; }
  std::span<const Index> indices() const { return indices_; }
  std::span<T> values() { return values_; }
  std::span<const T> values() const { return values_; }

  // The br * bc values (row-major) of stored block q; ShapeError when q is out of range.
  std::span<T> block(std::int64_t q) {
    SPINDLE_CHECK(q >= 0 && q < nnz_blocks(), ShapeError, detail::structure_name("Bsr", name_),
                  ": block ", q, " out of range [0, ", nnz_blocks(), ")");
    return std::span<T>(values_).subspan(static_cast<std::size_t>(q * br_ * bc_),
                                         static_cast<std::size_t>(br_ * bc_));
  }
  std::span<const T> block(std::int64_t q) const { return const_cast<Bsr&>(*this).block(q); }

  // Entries of the source: the nnz of the Csr it was built from, or the number of nonzero
  // values for the array constructor.
  std::int64_t stored_nonzeros() const { return stored_nonzeros_; }
  // Stored values per stored entry (1 = no padding at all).
  double padding_ratio() const {
    return static_cast<double>(values_.size()) /
           static_cast<double>(std::max<std::int64_t>(1, stored_nonzeros_));
  }
  // Bytes of indptr, indices and values.
  std::int64_t bytes() const {
    return static_cast<std::int64_t>(indptr_.size() * sizeof(Index) +
                                     indices_.size() * sizeof(Index) + values_.size() * sizeof(T));
  }

  // The entries inside the logical matrix as a sorted Csr. With drop_zeros every zero value
  // is left out: the padding of the blocks, but also zeros the source stored explicitly
  // (the two cannot be told apart).
  Csr<T, Index> to_csr(bool drop_zeros = true) const {
    std::vector<Index> ptr(static_cast<std::size_t>(rows_) + 1, 0);
    std::vector<Index> idx;
    std::vector<T> val;
    for (std::int64_t bi = 0; bi < mb_; ++bi) {
      for (std::int64_t i = 0; i < br_ && bi * br_ + i < rows_; ++i) {
        const std::int64_t r = bi * br_ + i;
        for (Index q = indptr_[bi]; q < indptr_[bi + 1]; ++q) {
          const T* blk = values_.data() + static_cast<std::int64_t>(q) * br_ * bc_ + i * bc_;
          const std::int64_t c0 = static_cast<std::int64_t>(indices_[q]) * bc_;
          for (std::int64_t j = 0; j < bc_ && c0 + j < cols_; ++j) {
            if (drop_zeros && blk[j] == T{}) continue;
            idx.push_back(static_cast<Index>(c0 + j));
            val.push_back(blk[j]);
          }
        }
        ptr[r + 1] = static_cast<Index>(idx.size());
      }
    }
    return Csr<T, Index>(rows_, cols_, std::move(ptr), std::move(idx), std::move(val), name_);
  }

  // Dense rows x cols row-major copy; for tests and small matrices.
  Tensor<T> to_dense() const {
    auto dense = Tensor<T>::zeros({rows_, cols_});
    T* d = dense.data();
    for (std::int64_t bi = 0; bi < mb_; ++bi)
      for (Index q = indptr_[bi]; q < indptr_[bi + 1]; ++q) {
        const T* blk = values_.data() + static_cast<std::int64_t>(q) * br_ * bc_;
        const std::int64_t c0 = static_cast<std::int64_t>(indices_[q]) * bc_;
        for (std::int64_t i = 0; i < br_ && bi * br_ + i < rows_; ++i)
          for (std::int64_t j = 0; j < bc_ && c0 + j < cols_; ++j)
            d[(bi * br_ + i) * cols_ + c0 + j] = blk[i * bc_ + j];
      }
    return dense;
  }

  StorageView storage() { return make_storage<T>(values_.data()); }
  StorageView storage() const { return make_storage<const T>(values_.data()); }

 private:
  struct Trusted {};
  // Arrays built by from_csr: in range, sorted, sized.
  Bsr(Trusted, std::int64_t rows, std::int64_t cols, std::int64_t br, std::int64_t bc,
      detail::BlockGrid g, std::vector<Index> indptr, std::vector<Index> indices,
      std::vector<T> values, std::int64_t stored_nonzeros, std::string name)
      : rows_(rows),
        cols_(cols),
        br_(br),
        bc_(bc),
        mb_(g.mb),
        nb_(g.nb),
        indptr_(std::move(indptr)),
        indices_(std::move(indices)),
        values_(std::move(values)),
        stored_nonzeros_(stored_nonzeros),
        name_(std::move(name)) {}

  template <class U>
  StorageView make_storage(U* data) const {
    StorageView s = detail::values_storage(data, values_.size(), "Bsr", name_);
    LevelView outer;
    outer.kind = LevelKind::dense_fixed;
    outer.length = mb_;
    s.levels = {outer};
    detail::append_block_levels<Index>(s, nb_, indptr_, indices_, br_, bc_);
    return s;
  }

  std::int64_t rows_ = 0, cols_ = 0;
  std::int64_t br_ = 1, bc_ = 1;
  std::int64_t mb_ = 0, nb_ = 0;
  std::vector<Index> indptr_{0};
  std::vector<Index> indices_;
  std::vector<T> values_;
  std::int64_t stored_nonzeros_ = 0;
  std::string name_;
};

template <class T, class Index>
Bsr<T, Index> Bsr<T, Index>::from_csr(const Csr<T, Index>& a, std::int64_t block_rows,
                                      std::int64_t block_cols) {
  const std::string what = detail::structure_name("Bsr", a.name());
  const detail::BlockGrid g =
      detail::block_grid<Index>(what, a.rows(), a.cols(), block_rows, block_cols);
  SPINDLE_CHECK(block_cols <= std::numeric_limits<std::int64_t>::max() / block_rows, ShapeError,
                what, ": block shape ", block_rows, "x", block_cols, " has too many elements");
  const std::int64_t per_block = block_rows * block_cols;
  const auto a_ptr = a.indptr();
  const auto a_idx = a.indices();
  const auto a_val = a.values();
  auto row_begin = [&](std::int64_t bi) { return std::min(a.rows(), bi * block_rows); };

  // Pass 1: the distinct block columns of each block row, sorted. mark[J] is the last block
  // row that used block column J (positions in `slot` are set in pass 2).
  std::vector<Index> indptr(static_cast<std::size_t>(g.mb) + 1, 0);
  std::vector<Index> indices;
  std::vector<std::int64_t> mark(static_cast<std::size_t>(g.nb), -1);
  for (std::int64_t bi = 0; bi < g.mb; ++bi) {
    const std::size_t first = indices.size();
    for (Index q = a_ptr[row_begin(bi)]; q < a_ptr[row_begin(bi + 1)]; ++q) {
      const auto bj = static_cast<std::int64_t>(a_idx[q]) / block_cols;
      if (mark[bj] != bi) {
        mark[bj] = bi;
        indices.push_back(static_cast<Index>(bj));
      }
    }
    std::sort(indices.begin() + static_cast<std::ptrdiff_t>(first), indices.end());
    indptr[bi + 1] = static_cast<Index>(indices.size());
  }
  const auto nnzb = static_cast<std::int64_t>(indices.size());
  SPINDLE_CHECK(nnzb <= std::numeric_limits<std::int64_t>::max() / per_block, ShapeError, what,
                ": ", nnzb, " blocks of ", block_rows, "x", block_cols, " have too many values");

  // Pass 2: scatter the values. slot[J] = position of block column J in the current block
  // row; every J read below was written for this block row first.
  std::vector<T> values(static_cast<std::size_t>(nnzb * per_block), T{});
  std::vector<std::int64_t>& slot = mark;
  for (std::int64_t bi = 0; bi < g.mb; ++bi) {
    for (Index q = indptr[bi]; q < indptr[bi + 1]; ++q) slot[indices[q]] = q;
    for (std::int64_t r = row_begin(bi); r < row_begin(bi + 1); ++r)
      for (Index q = a_ptr[r]; q < a_ptr[r + 1]; ++q) {
        const auto c = static_cast<std::int64_t>(a_idx[q]);
        const std::int64_t pos = slot[c / block_cols];
        values[pos * per_block + (r - bi * block_rows) * block_cols + c % block_cols] += a_val[q];
      }
  }
  return Bsr(Trusted{}, a.rows(), a.cols(), block_rows, block_cols, g, std::move(indptr),
             std::move(indices), std::move(values), a.nnz(), a.name());
}

}  // namespace spindle

// Hyb<T, Index>: SparseTIR's hyb(c, k) composed format (seed 002 §4.1, seed 003): one CSR
// matrix split into ELL parts, each run by its own sub-kernel.
//
// The columns are split into c equal ranges (column partitions: partition p holds columns
// [p * cols / c, (p + 1) * cols / c)). Within a partition, the entries of each row go to the
// bucket of the smallest width 2^b >= their count, b = 0 .. log2(k); a row with more than k
// entries in a partition is cut into pieces of k entries (in the bucket of width k) and a
// last piece (in the bucket of its own length). Each non-empty bucket is one part: an
// Ell<T, Index> over all cols() columns whose rows are those pieces, and a row map
// (`rows[r]` = the row of the matrix that ELL row r is a piece of, ascending). Padding
// slots hold explicit zeros at columns the piece does not hold (Ell::from_csr), so the matrix is
// the sum of its parts: A(i, j) = sum over parts P, rows r with P.rows[r] = i of P.ell(r, j).
//
// Why: a bucket's width is a compile-time constant of its sub-kernel (unrolled slot loops,
// `ops::HybSpmm`), rows of similar length run together (load balance on GPUs), and a column
// partition touches only its share of the dense operand's rows (locality when that operand
// does not fit in cache). Empty buckets and partitions have no part (no sub-kernel runs).
//
// Built from a Csr by one call (from_csr), so it is valid by construction (each part's Ell
// validates its own structure); immutable structure, mutable values.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "spindle/format/csr.hpp"
#include "spindle/format/ell.hpp"
#include "spindle/format/tensor.hpp"
#include "spindle/support/error.hpp"

namespace spindle {

template <class T, class Index = std::int32_t>
class Hyb {
 public:
  using value_type = T;
  using index_type = Index;

  struct Part {
    std::int64_t partition = 0;                   // 0 .. partitions() - 1
    std::int64_t column_begin = 0, column_end = 0;  // the columns of its partition
    std::int64_t bucket_width = 0;                // 2^b: its pieces hold at most this many entries
    Ell<T, Index> ell;                            // width min(bucket_width, cols())
    std::vector<Index> rows;                      // row of the matrix per ELL row, ascending
  };

  Hyb() = default;  // 0x0, no parts

  // Splits `a` (sorted or not; a column stored twice in an unsorted row is one entry
  // holding the sum) into hyb(partitions, max_width). ShapeError for partitions < 1 or
  // above max(1, cols), or max_width not a power of two in [1, 2^20].
  static Hyb from_csr(const Csr<T, Index>& a, std::int64_t partitions = 1, std::int64_t max_width = 32);

  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  std::int64_t partitions() const { return partitions_; }
  std::int64_t max_width() const { return max_width_; }
  const std::string& name() const { return name_; }
  const std::vector<Part>& parts() const { return parts_; }
  std::vector<Part>& parts() { return parts_; }  // values are mutable; keep the structure

  // Entries of the source Csr (after summing duplicates).
  std::int64_t stored_nonzeros() const { return stored_nonzeros_; }
  // Slots of all parts per stored entry (1 = no padding).
  double padding_ratio() const {
    std::int64_t slots = 0;
    for (const Part& p : parts_) slots += p.ell.rows() * p.ell.width();
    return static_cast<double>(slots) / static_cast<double>(std::max<std::int64_t>(1, stored_nonzeros_));
  }
  // Bytes of all parts' indices, values and row maps.
  std::int64_t bytes() const {
    std::int64_t b = 0;
    for (const Part& p : parts_) b += p.ell.bytes() + static_cast<std::int64_t>(p.rows.size() * sizeof(Index));
    return b;
  }
  // "hyb(2, 32): 9 parts, padding 1.21, 3.4 MB"
  std::string description() const {
    return message("hyb(", partitions_, ", ", max_width_, ") ", rows_, "x", cols_, ": ", parts_.size(),
                   " parts, padding ", padding_ratio(), ", ", static_cast<double>(bytes()) / 1e6, " MB");
  }

  // Dense row-major copy: the sum of the parts (for tests and small matrices).
  Tensor<T> to_dense() const {
    auto dense = Tensor<T>::zeros({rows_, cols_});
    T* d = dense.data();
    for (const Part& p : parts_) {
      const std::int64_t w = p.ell.width();
      const auto idx = p.ell.indices();
      const auto val = p.ell.values();
      for (std::int64_t r = 0; r < p.ell.rows(); ++r)
        for (std::int64_t s = 0; s < w; ++s)
          d[static_cast<std::int64_t>(p.rows[static_cast<std::size_t>(r)]) * cols_ + idx[r * w + s]] += val[r * w + s];
    }
    return dense;
  }

  // Output row boundaries 0 = b[0] <= b[1] <= ... <= b[n] = rows() cutting the matrix into
  // n = min(shares, rows()) ranges of about equal slots (every part's pieces counted, padding
  // included): all pieces of one row, in every part, fall in one range. In a part, the pieces
  // of range [b[i], b[i+1]) are those from piece_of(part, b[i]) to piece_of(part, b[i+1]).
  // O(shares * parts * log^2 rows).
  std::vector<std::int64_t> row_shares(std::int64_t shares) const {
    shares = std::max<std::int64_t>(1, std::min(shares, rows_));
    auto slots_before = [&](std::int64_t row) {
      std::int64_t n = 0;
      for (const Part& p : parts_) n += piece_of(p, row) * p.ell.width();
      return n;
    };
    const std::int64_t total = slots_before(rows_);
    std::vector<std::int64_t> b{0};
    for (std::int64_t i = 1; i < shares; ++i) {
      const std::int64_t target = total / shares * i + total % shares * i / shares;
      std::int64_t lo = b.back(), hi = rows_;  // the first row whose earlier slots reach target
      while (lo < hi) {
        const std::int64_t mid = lo + (hi - lo) / 2;
        if (slots_before(mid) >= target) hi = mid;
        else lo = mid + 1;
      }
      b.push_back(lo);
    }
    b.push_back(rows_);
    return b;
  }
  // The first piece of `part` whose row is >= row (the part's pieces are in row order).
  static std::int64_t piece_of(const Part& part, std::int64_t row) {
    return std::lower_bound(part.rows.begin(), part.rows.end(), row,
                            [](Index r, std::int64_t v) { return static_cast<std::int64_t>(r) < v; }) -
           part.rows.begin();
  }

 private:
  std::int64_t rows_ = 0, cols_ = 0, partitions_ = 1, max_width_ = 1, stored_nonzeros_ = 0;
  std::vector<Part> parts_;
  std::string name_;
};

template <class T, class Index>
Hyb<T, Index> Hyb<T, Index>::from_csr(const Csr<T, Index>& source, std::int64_t partitions, std::int64_t max_width) {
  const std::string what = detail::structure_name("Hyb", source.name());
  SPINDLE_CHECK(max_width >= 1 && max_width <= (std::int64_t{1} << 20) && std::has_single_bit(static_cast<std::uint64_t>(max_width)),
                ShapeError, what, ": the largest bucket width k must be a power of two in [1, 2^20], got ", max_width);
  SPINDLE_CHECK(partitions >= 1 && partitions <= std::max<std::int64_t>(1, source.cols()), ShapeError, what,
                ": the column partition count c must lie in [1, max(1, cols) = ", std::max<std::int64_t>(1, source.cols()),
                "], got ", partitions);
  const Csr<T, Index> a = source.sorted() ? Csr<T, Index>() : source.canonical();
  const Csr<T, Index>& m = source.sorted() ? source : a;
  Hyb h;
  h.rows_ = m.rows();
  h.cols_ = m.cols();
  h.partitions_ = partitions;
  h.max_width_ = max_width;
  h.stored_nonzeros_ = m.nnz();
  h.name_ = m.name();
  const int buckets = std::countr_zero(static_cast<std::uint64_t>(max_width)) + 1;  // widths 1, 2, ..., k
  const auto ptr = m.indptr();
  const auto idx = m.indices();
  const auto val = m.values();
  // Per bucket: the pieces as a small Csr (rows = pieces) and their source rows.
  struct Bucket {
    std::vector<Index> ptr{0}, idx, rows;
    std::vector<T> val;
  };
  for (std::int64_t p = 0; p < partitions; ++p) {
    const std::int64_t cb = p * m.cols() / partitions, ce = (p + 1) * m.cols() / partitions;
    std::vector<Bucket> bs(static_cast<std::size_t>(buckets));
    for (std::int64_t r = 0; r < m.rows(); ++r) {
      const Index* lo = std::lower_bound(idx.data() + ptr[r], idx.data() + ptr[r + 1], static_cast<Index>(cb));
      const Index* hi = ce >= m.cols() ? idx.data() + ptr[r + 1]
                                       : std::lower_bound(lo, idx.data() + ptr[r + 1], static_cast<Index>(ce));
      for (std::int64_t q = lo - idx.data(), end = hi - idx.data(); q < end;) {
        const std::int64_t len = std::min(end - q, max_width);
        Bucket& b = bs[static_cast<std::size_t>(std::bit_width(static_cast<std::uint64_t>(len - 1)))];
        b.idx.insert(b.idx.end(), idx.begin() + q, idx.begin() + q + len);
        b.val.insert(b.val.end(), val.begin() + q, val.begin() + q + len);
        b.ptr.push_back(static_cast<Index>(b.idx.size()));
        b.rows.push_back(static_cast<Index>(r));
        q += len;
      }
    }
    for (int b = 0; b < buckets; ++b) {
      Bucket& bk = bs[static_cast<std::size_t>(b)];
      if (bk.rows.empty()) continue;
      const auto pieces = static_cast<std::int64_t>(bk.rows.size());
      const std::int64_t width = std::int64_t{1} << b;
      Csr<T, Index> piece_csr(pieces, m.cols(), std::move(bk.ptr), std::move(bk.idx), std::move(bk.val), m.name());
      Part part;
      part.partition = p;
      part.column_begin = cb;
      part.column_end = ce;
      part.bucket_width = width;
      part.ell = Ell<T, Index>::from_csr(piece_csr, std::min(width, m.cols()));
      part.rows = std::move(bk.rows);
      h.parts_.push_back(std::move(part));
    }
  }
  return h;
}

}  // namespace spindle

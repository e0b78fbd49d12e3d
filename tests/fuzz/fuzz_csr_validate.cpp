// libFuzzer target: bytes -> CSR arrays -> the validators and the Csr constructors.
//
// Input layout (little endian; missing bytes read as zero):
//   byte 0        mode: bit 0 = 64-bit indices, bits 1-2 = entry point
//                 (0 validate_compressed, 1 Csr(rows, cols, indptr, indices, values),
//                  2 the type-erased CompressedLevelRef, 3 Csr::from_triplets),
//                 bits 3-4 = duplicate policy for from_triplets
//   rows, cols    one index each (4 or 8 bytes, signed: negative and huge values included)
//   byte          number of indptr entries n (0..255)
//   n indices     indptr
//   the rest      indices (for from_triplets: (row, col, value) triples)
// Only spindle::Error may escape. When validation passes the structure is walked as a
// kernel would walk it (every row's range, every index), so that an accepted malformed
// structure shows up as an ASan report or a failed invariant.
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "fuzz_support.hpp"
#include "spindle/format/csr.hpp"
#include "spindle/format/validate.hpp"

namespace {

namespace sp = spindle;
using spindle_fuzz::expect_only_spindle_errors;

class Reader {
 public:
  Reader(const std::uint8_t* d, std::size_t n) : d_(d), n_(n) {}
  template <class V>
  V take() {
    V v{};
    unsigned char b[sizeof(V)] = {};
    for (std::size_t k = 0; k < sizeof(V) && pos_ < n_; ++k) b[k] = d_[pos_++];
    std::memcpy(&v, b, sizeof(V));
    return v;
  }
  std::size_t left() const { return n_ - pos_; }

 private:
  const std::uint8_t* d_;
  std::size_t n_;
  std::size_t pos_ = 0;
};

// Walks a structure that a validator accepted: no read may leave the arrays.
template <class Index>
void walk(std::int64_t rows, std::int64_t cols, std::span<const Index> indptr,
          std::span<const Index> indices) {
  SPINDLE_FUZZ_ASSERT(rows >= 0 && cols >= 0);
  SPINDLE_FUZZ_ASSERT(static_cast<std::int64_t>(indptr.size()) == rows + 1);
  SPINDLE_FUZZ_ASSERT(indptr[0] == 0);
  SPINDLE_FUZZ_ASSERT(static_cast<std::size_t>(indptr[rows]) == indices.size());
  std::uint64_t sum = 0;  // touches every index (wrapping, no UB)
  for (std::int64_t r = 0; r < rows; ++r) {
    SPINDLE_FUZZ_ASSERT(indptr[r] <= indptr[r + 1]);
    for (Index q = indptr[r]; q < indptr[r + 1]; ++q) {
      const Index c = indices[static_cast<std::size_t>(q)];
      SPINDLE_FUZZ_ASSERT(c >= 0 && c < cols);
      sum += static_cast<std::uint64_t>(c);
    }
  }
  [[maybe_unused]] static volatile std::uint64_t sink;
  sink = sum;
}

template <class Index>
void run(std::uint8_t mode, Reader& in) {
  const auto rows = static_cast<std::int64_t>(in.take<Index>());
  const auto cols = static_cast<std::int64_t>(in.take<Index>());
  const std::size_t n_indptr = in.take<std::uint8_t>();
  std::vector<Index> indptr(n_indptr);
  for (auto& v : indptr) v = in.take<Index>();
  const unsigned entry = (mode >> 1) & 3;
  if (entry == 3) {  // from_triplets with integer values: duplicate sums may overflow
    std::vector<sp::Triplet<Index>> t;
    while (in.left() > 0) {
      const auto r = static_cast<std::int64_t>(in.take<std::int8_t>());
      const auto c = static_cast<std::int64_t>(in.take<std::int8_t>());
      t.push_back({r, c, in.take<Index>()});
    }
    const auto policy = static_cast<sp::Duplicates>(((mode >> 3) & 3) % 3);
    // from_triplets allocates rows + 1 row pointers by contract; keep that below the
    // fuzzer's malloc limit (the validators' huge sizes are covered by the other modes).
    if (rows > (std::int64_t{1} << 14)) return;
    expect_only_spindle_errors("Csr::from_triplets", [&] {
      const auto a = sp::Csr<Index, Index>::from_triplets(rows, cols, t, policy, "F");
      SPINDLE_FUZZ_ASSERT(a.sorted());
      walk<Index>(a.rows(), a.cols(), a.indptr(), a.indices());
      for (std::int64_t r = 0; r < a.rows(); ++r) {
        const auto idx = a.row_indices(r);
        for (std::size_t k = 1; k < idx.size(); ++k) SPINDLE_FUZZ_ASSERT(idx[k - 1] < idx[k]);
      }
    });
    return;
  }
  std::vector<Index> indices;
  while (in.left() > 0) indices.push_back(in.take<Index>());
  const auto nnz = static_cast<std::int64_t>(indices.size());
  if (entry == 0) {
    expect_only_spindle_errors("validate_compressed", [&] {
      const auto order = sp::validate_compressed<Index>("Csr 'F'", rows, cols, nnz, indptr, indices);
      walk<Index>(rows, cols, indptr, indices);
      if (!order.sorted) {
        SPINDLE_FUZZ_ASSERT(order.position > 0 && order.position < nnz);
        SPINDLE_FUZZ_ASSERT(indices[order.position - 1] >= indices[order.position]);
      }
    });
    expect_only_spindle_errors("validate_indptr", [&] {
      sp::validate_indptr<Index>("Ragged 'F'", rows, nnz, indptr);
      SPINDLE_FUZZ_ASSERT(static_cast<std::int64_t>(indptr.size()) == rows + 1);
    });
  } else if (entry == 1) {
    expect_only_spindle_errors("Csr constructor", [&] {
      std::vector<float> values(indices.size(), 1.0f);
      const sp::Csr<float, Index> a(rows, cols, indptr, indices, values, "F");
      walk<Index>(a.rows(), a.cols(), a.indptr(), a.indices());
      const auto c = a.canonical();
      walk<Index>(c.rows(), c.cols(), c.indptr(), c.indices());
      SPINDLE_FUZZ_ASSERT(c.sorted());
      std::int64_t cells = 0;
      if (!__builtin_mul_overflow(a.rows(), a.cols(), &cells) && cells <= 4096) (void)a.to_dense();
    });
  } else {
    // The caller of the raw-pointer form promises parents + 1 indptr entries.
    if (indptr.empty()) return;
    sp::CompressedLevelRef ref;
    ref.name = "Csr 'F'";
    ref.parents = static_cast<std::int64_t>(indptr.size()) - 1;
    ref.length = cols;
    ref.nnz = nnz;
    ref.indptr = indptr.data();
    ref.indices = indices.data();
    ref.index_dtype = sizeof(Index) == 8 ? sp::DType::i64 : sp::DType::i32;
    expect_only_spindle_errors("validate_compressed(ref)", [&] {
      sp::validate_compressed(ref);
      walk<Index>(ref.parents, cols, indptr, indices);
    });
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Reader in(data, size);
  const auto mode = in.take<std::uint8_t>();
  if (mode & 1)
    run<std::int64_t>(mode, in);
  else
    run<std::int32_t>(mode, in);
  return 0;
}

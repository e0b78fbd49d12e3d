// libFuzzer target: bytes -> the Matrix Market reader.
//
// Every input goes through the in-memory entry points (parse_matrix_market, which gunzips
// input that starts with the gzip magic bytes, and parse_matrix_market_triplets) with several
// value and index types and duplicate policies, and every fourth input also through the
// path-based reader (read_file_bytes, gzip included) via a scratch file. Only spindle::Error
// may escape. A matrix that reads successfully is walked (indptr monotone and in range,
// indices in range and sorted), and for small ones written back and read again: the round
// trip must give the same structure and values.
//
// Limits are lowered from the defaults so that input of -max_len bytes cannot ask for more
// than a few MiB: that is the contract under test (allocation bounded by the input).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"
#include "spindle/format/matrix_market.hpp"

namespace {

namespace sp = spindle;
using spindle_fuzz::expect_only_spindle_errors;

sp::MatrixMarketLimits fuzz_limits() {
  sp::MatrixMarketLimits l;
  l.max_decompressed_bytes = std::uint64_t{1} << 20;
  l.max_line_bytes = 1024;
  l.max_unbacked_bytes = std::uint64_t{1} << 20;
  return l;
}

template <class T>
bool same_value(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
    return std::memcmp(&a, &b, sizeof a) == 0;  // -0 stays -0
  } else {
    return a == b;
  }
}

template <class T, class Index>
void walk(const sp::Csr<T, Index>& a) {
  const auto indptr = a.indptr();
  const auto indices = a.indices();
  SPINDLE_FUZZ_ASSERT(a.rows() >= 0 && a.cols() >= 0);
  SPINDLE_FUZZ_ASSERT(static_cast<std::int64_t>(indptr.size()) == a.rows() + 1);
  SPINDLE_FUZZ_ASSERT(indptr[0] == 0);
  SPINDLE_FUZZ_ASSERT(static_cast<std::int64_t>(indptr[a.rows()]) == a.nnz());
  SPINDLE_FUZZ_ASSERT(a.values().size() == indices.size());
  SPINDLE_FUZZ_ASSERT(a.sorted());
  for (std::int64_t r = 0; r < a.rows(); ++r) {
    SPINDLE_FUZZ_ASSERT(indptr[r] <= indptr[r + 1]);
    const auto row = a.row_indices(r);
    for (std::size_t k = 0; k < row.size(); ++k) {
      SPINDLE_FUZZ_ASSERT(row[k] >= 0 && row[k] < a.cols());
      if (k > 0) SPINDLE_FUZZ_ASSERT(row[k - 1] < row[k]);
    }
  }
}

template <class T, class Index>
void round_trip(const sp::Csr<T, Index>& a) {
  if (a.nnz() > 256 || a.rows() > 4096) return;
  const std::string& path = spindle_fuzz::scratch_path();
  sp::write_matrix_market(path, a);
  const auto b = sp::read_matrix_market<T, Index>(path, sp::Duplicates::error, fuzz_limits());
  SPINDLE_FUZZ_ASSERT(b.rows() == a.rows() && b.cols() == a.cols() && b.nnz() == a.nnz());
  for (std::int64_t q = 0; q < a.nnz(); ++q) {
    SPINDLE_FUZZ_ASSERT(a.indices()[q] == b.indices()[q]);
    SPINDLE_FUZZ_ASSERT(same_value(a.values()[q], b.values()[q]));
  }
  for (std::int64_t r = 0; r <= a.rows(); ++r) SPINDLE_FUZZ_ASSERT(a.indptr()[r] == b.indptr()[r]);
}

template <class T, class Index>
void read_as(std::string_view bytes, sp::Duplicates policy, bool check_round_trip) {
  expect_only_spindle_errors("parse_matrix_market", [&] {
    const auto a = sp::parse_matrix_market<T, Index>(bytes, "fuzz.mtx", policy, fuzz_limits());
    walk(a);
    if (check_round_trip) round_trip(a);
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  read_as<float, std::int32_t>(bytes, sp::Duplicates::sum, true);
  read_as<double, std::int64_t>(bytes, sp::Duplicates::keep_last, false);
  read_as<std::int32_t, std::int32_t>(bytes, sp::Duplicates::sum, true);
  read_as<std::int64_t, std::int64_t>(bytes, sp::Duplicates::error, false);
  if (!sp::is_gzip(bytes)) {
    expect_only_spindle_errors("parse_matrix_market_triplets", [&] {
      const auto t = sp::parse_matrix_market_triplets<std::int64_t>(
          bytes, "fuzz.mtx", std::numeric_limits<std::int32_t>::max(), fuzz_limits());
      for (const auto& e : t.entries)
        SPINDLE_FUZZ_ASSERT(e.row >= 0 && e.row < t.header.rows && e.col >= 0 &&
                            e.col < t.header.cols);
    });
  }
  if (size % 4 == 0) {  // the path-based reader, plain and gzip (read_file_bytes)
    const std::string& path = spindle_fuzz::scratch_path();
    spindle_fuzz::write_scratch(path, bytes);
    expect_only_spindle_errors("read_matrix_market", [&] {
      walk(sp::read_matrix_market<float>(path, sp::Duplicates::sum, fuzz_limits()));
    });
  }
  return 0;
}

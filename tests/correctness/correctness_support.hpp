// Shared pieces of the correctness tests: the test shapes, random inputs, the real graphs,
// plain-loop reference implementations (double accumulation, written independently of the
// library) and the tolerance model.
//
// Tolerances (stated per dtype, relative, scaled by the work per output). For an output that
// is a sum of n rounded products, the classical bound is |computed - exact| <= gamma_n *
// sum |terms| with gamma_n ~ n * eps. We check
//   |got - ref| <= 4 * (n + ops + 1) * eps<T> * sum|terms| + tiny<T>
// where n is the number of terms of that output (the row's nnz, the feature size of a dot
// product), ops the rounded operations per term (1 for a * b, 2 for a * x * y),
// eps<float> = 2^-23 ~ 1.2e-7, eps<double> = 2^-52 ~ 2.2e-16, the factor 4 is headroom for
// the re-association of vectorised and blocked sums, tiny<float> = 1e-30 and
// tiny<double> = 1e-300 (for results that underflow). Element-wise results use the same
// model with sum|terms| = |ref| and n = a bound on the element's relative error in ulps:
// 3 for scale (three products), nnz + 4 + |a - max| for a softmax value (the row's sum of
// exponentials, exp of a rounded argument, one division), n / 2 + 2 for a row norm.
// The references accumulate in double from the same (rounded) inputs.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "spindle/spindle.hpp"

namespace spindle_test {

// NaN of T: outputs are filled with it so that a kernel that skips an element is caught.
template <class T>
constexpr T nan_v = std::numeric_limits<T>::quiet_NaN();


// --- shapes --------------------------------------------------------------------------

struct Shape {
  const char* name;
  std::int64_t rows, cols;
  double avg_nnz_per_row;
  double empty_row_fraction = 0.0;
};

inline std::ostream& operator<<(std::ostream& os, const Shape& s) {
  return os << s.name << " " << s.rows << "x" << s.cols << " (avg " << s.avg_nnz_per_row
            << "/row, empty " << s.empty_row_fraction << ")";
}

// The matrix shapes every operator runs on: empty in each way, a single element, many
// empty rows, rectangular both ways, and sizes that are not multiples of a vector width.
inline std::vector<Shape> matrix_shapes() {
  return {
      {"0x0", 0, 0, 0},
      {"0xN", 0, 13, 0},
      {"Nx0", 9, 0, 0},
      {"1x1", 1, 1, 1},
      {"many-empty-rows", 130, 130, 6, 0.7},
      {"tall", 130, 7, 3},
      {"wide", 7, 130, 40},
      {"33x33-dense-ish", 33, 33, 20},
      {"irregular", 257, 190, 9, 0.2},
  };
}

// Odd sizes (every tile cascade's remainder) and sizes equal to a register-tile width (the
// versions register_tile makes for K == w: 4 ... 128 across dtypes and vector widths).
inline const std::vector<std::int64_t>& feature_sizes() {
  static const std::vector<std::int64_t> f{1, 4, 7, 16, 32, 33, 64, 128, 130};
  return f;
}

template <class T>
std::string dtype_label() {
  return spindle::dtype_name(spindle::dtype_v<T>);
}

// --- random inputs -------------------------------------------------------------------

template <class T, class Index = std::int32_t>
spindle::Csr<T, Index> random_csr(const Shape& s, std::uint64_t seed, double lo = -1.0,
                                  double hi = 1.0) {
  spindle::RandomCsrOptions o;
  o.empty_row_fraction = s.empty_row_fraction;
  o.lo = lo;
  o.hi = hi;
  return spindle::Csr<T, Index>::random(s.rows, s.cols, s.avg_nnz_per_row, seed, o);
}

// The nonzero entries of a CSR (rows sorted, duplicates summed, stored zeros left out): two
// matrices hold the same entries exactly when these are equal, compared without the
// rows x cols dense copies that real graphs cannot afford (mutag as 27163 x 27163 floats is
// 2.9 GB per relation).
template <class T, class Index>
std::vector<spindle::Triplet<T>> nonzero_entries(const spindle::Csr<T, Index>& a) {
  const auto c = a.canonical();
  std::vector<spindle::Triplet<T>> out;
  out.reserve(static_cast<std::size_t>(c.nnz()));
  for (std::int64_t r = 0; r < c.rows(); ++r)
    for (auto q = c.indptr()[r]; q < c.indptr()[r + 1]; ++q)
      if (c.values()[q] != T(0)) out.push_back({r, static_cast<std::int64_t>(c.indices()[q]), c.values()[q]});
  return out;
}

// The same structure and values with another index type.
template <class Index, class T, class I0>
spindle::Csr<T, Index> with_index(const spindle::Csr<T, I0>& a) {
  std::vector<Index> ptr(a.indptr().begin(), a.indptr().end());
  std::vector<Index> idx(a.indices().begin(), a.indices().end());
  std::vector<T> val(a.values().begin(), a.values().end());
  return spindle::Csr<T, Index>(a.rows(), a.cols(), std::move(ptr), std::move(idx), std::move(val));
}

// A copy of a's structure with fresh values (e.g. random values on a pattern graph).
template <class T, class Index>
spindle::Csr<T, Index> with_random_values(const spindle::Csr<T, Index>& a, std::uint64_t seed,
                                          double lo = -1.0, double hi = 1.0) {
  spindle::Rng rng(seed);
  std::vector<T> val(static_cast<std::size_t>(a.nnz()));
  for (T& v : val) v = rng.value<T>(lo, hi);
  return spindle::Csr<T, Index>(a.rows(), a.cols(),
                                std::vector<Index>(a.indptr().begin(), a.indptr().end()),
                                std::vector<Index>(a.indices().begin(), a.indices().end()),
                                std::move(val));
}

// A Csr with the same structure whose values are all `fill` (an output buffer).
template <class T, class Index>
spindle::Csr<T, Index> same_structure(const spindle::Csr<T, Index>& a, T fill) {
  return spindle::Csr<T, Index>(a.rows(), a.cols(),
                                std::vector<Index>(a.indptr().begin(), a.indptr().end()),
                                std::vector<Index>(a.indices().begin(), a.indices().end()),
                                std::vector<T>(static_cast<std::size_t>(a.nnz()), fill));
}

// --- the real graphs -----------------------------------------------------------------

// True in the sanitizer builds (ASan+UBSan, TSan), where a test may check the smaller of its
// real inputs only: the plain build runs them all, and memory errors show on small inputs
// as well (CI time: a reference loop at -O0 under ASan runs ~50x slower).
#ifdef SPINDLE_TEST_SANITIZED
inline constexpr bool sanitized_build = true;
#else
inline constexpr bool sanitized_build = false;
#endif

// The data folder: the environment variable SPINDLE_TEST_DATA_DIR when set (to point a
// built test binary elsewhere), else the folder configured at build time.
inline std::string data_dir() {
  if (const char* env = std::getenv("SPINDLE_TEST_DATA_DIR"); env && *env) return env;
#ifdef SPINDLE_TEST_DATA_DIR
  return SPINDLE_TEST_DATA_DIR;
#else
  return "../shared/data";
#endif
}

// The path of a shared data file, or nullopt when the data folder is missing. With the
// environment variable CI set, a missing folder or file fails the test; otherwise it warns
// and the caller skips.
inline std::optional<std::string> data_file(const std::string& relative) {
  namespace fs = std::filesystem;
  const fs::path path = fs::path(data_dir()) / relative;
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return path.string();
  const bool ci = std::getenv("CI") != nullptr;
  const std::string why = "shared test data not found: " + path.string() +
                          " (configure with -DSPINDLE_DATA_DIR=... or set SPINDLE_TEST_DATA_DIR)";
  if (ci) FAIL(why + "; CI is set, so missing data is an error");
  WARN(why + "; skipping (CI is not set)");
  return std::nullopt;
}

// The graph at `relative` (pattern file) with deterministic random values in [-1, 1).
template <class T, class Index = std::int32_t>
std::optional<spindle::Csr<T, Index>> load_graph(const std::string& relative, std::uint64_t seed = 7) {
  auto path = data_file(relative);
  if (!path) return std::nullopt;
  auto pattern = spindle::read_matrix_market<T, Index>(*path);
  return with_random_values(pattern, seed);
}

inline const std::vector<std::string>& graph_files() {
  static const std::vector<std::string> g{
      "gnn/cora.mtx.gz",          "gnn/citeseer.mtx.gz",         "gnn/pubmed.mtx.gz",
      "gnn/ppi-graphsaint.mtx.gz", "matrices/wiki-Vote.mtx.gz", "matrices/luxembourg_osm.mtx.gz",
  };
  return g;
}

// --- tolerance -----------------------------------------------------------------------

template <class T>
constexpr double eps() {
  return std::numeric_limits<T>::epsilon();
}
template <class T>
constexpr double tiny() {
  return std::is_same_v<T, float> ? 1e-30 : 1e-300;
}
// A reference value: the exact-ish result (double accumulation), the sum of |terms| and the
// number of rounded operations per term chain, for the tolerance above.
struct Ref {
  double value = 0, abs_sum = 0;
  std::int64_t terms = 0;
};

template <class T>
double allowed_error(const Ref& r, int ops_per_term = 1) {
  return 4.0 * static_cast<double>(r.terms + ops_per_term + 1) * eps<T>() * r.abs_sum + tiny<T>();
}

// Compares `got` with refs; reports the first few mismatches with their position.
template <class T>
void check_close(const std::vector<Ref>& ref, std::span<const T> got, const std::string& what,
                 int ops_per_term = 1) {
  REQUIRE(got.size() == ref.size());
  std::int64_t bad = 0;
  std::ostringstream first;
  for (std::size_t k = 0; k < ref.size(); ++k) {
    const double g = static_cast<double>(got[k]);
    const double err = std::abs(g - ref[k].value);
    const double tol = allowed_error<T>(ref[k], ops_per_term);
    if (!(err <= tol)) {  // also catches NaN
      if (bad < 5)
        first << "  [" << k << "] got " << g << " expected " << ref[k].value << " (err " << err
              << " > tol " << tol << ")\n";
      ++bad;
    }
  }
  INFO(what << ": " << bad << " of " << ref.size() << " values outside tolerance\n" << first.str());
  CHECK(bad == 0);
}

// Element-wise results: value[k] with a bound of ops[k] ulps on its relative error.
struct Elementwise {
  std::vector<double> value, ops;
};

inline Elementwise uniform_ops(std::vector<double> value, double ops) {
  std::vector<double> o(value.size(), ops);
  return {std::move(value), std::move(o)};
}

template <class T>
void check_elementwise(const Elementwise& ref, std::span<const T> got, const std::string& what) {
  std::vector<Ref> refs(ref.value.size());
  for (std::size_t k = 0; k < refs.size(); ++k)
    refs[k] = {ref.value[k], std::abs(ref.value[k]), static_cast<std::int64_t>(std::ceil(ref.ops[k]))};
  check_close<T>(refs, got, what, 0);
}

// --- plain-loop references -------------------------------------------------------------
// Every reference reads the CSR arrays directly and accumulates in double.

template <class A>
std::vector<Ref> ref_spmv(const A& a, std::span<const typename A::value_type> x) {
  std::vector<Ref> y(static_cast<std::size_t>(a.rows()));
  auto ptr = a.indptr();
  auto idx = a.indices();
  auto val = a.values();
  for (std::int64_t r = 0; r < a.rows(); ++r) {
    Ref& o = y[static_cast<std::size_t>(r)];
    for (auto q = ptr[r]; q < ptr[r + 1]; ++q) {
      const double t = static_cast<double>(val[q]) * static_cast<double>(x[idx[q]]);
      o.value += t;
      o.abs_sum += std::abs(t);
      ++o.terms;
    }
  }
  return y;
}

// C = A B with B row-major [cols, k].
template <class A>
std::vector<Ref> ref_spmm(const A& a, std::span<const typename A::value_type> b, std::int64_t k) {
  std::vector<Ref> c(static_cast<std::size_t>(a.rows() * k));
  auto ptr = a.indptr();
  auto idx = a.indices();
  auto val = a.values();
  for (std::int64_t r = 0; r < a.rows(); ++r)
    for (auto q = ptr[r]; q < ptr[r + 1]; ++q)
      for (std::int64_t f = 0; f < k; ++f) {
        const double t = static_cast<double>(val[q]) * static_cast<double>(b[idx[q] * k + f]);
        Ref& o = c[static_cast<std::size_t>(r * k + f)];
        o.value += t;
        o.abs_sum += std::abs(t);
        ++o.terms;
      }
  return c;
}

template <class A>
std::vector<Ref> ref_row_sum(const A& a) {
  std::vector<Ref> y(static_cast<std::size_t>(a.rows()));
  auto ptr = a.indptr();
  auto val = a.values();
  for (std::int64_t r = 0; r < a.rows(); ++r)
    for (auto q = ptr[r]; q < ptr[r + 1]; ++q) {
      Ref& o = y[static_cast<std::size_t>(r)];
      o.value += val[q];
      o.abs_sum += std::abs(static_cast<double>(val[q]));
      ++o.terms;
    }
  return y;
}

// c(i, j) = a(i, j) * sum_f x(i, f) y(j, f) on the nonzeros of a (position order).
template <class A>
std::vector<Ref> ref_sddmm(const A& a, std::span<const typename A::value_type> x,
                           std::span<const typename A::value_type> y, std::int64_t k) {
  std::vector<Ref> c(static_cast<std::size_t>(a.nnz()));
  auto ptr = a.indptr();
  auto idx = a.indices();
  auto val = a.values();
  for (std::int64_t r = 0; r < a.rows(); ++r)
    for (auto q = ptr[r]; q < ptr[r + 1]; ++q) {
      Ref& o = c[static_cast<std::size_t>(q)];
      for (std::int64_t f = 0; f < k; ++f) {
        const double t = static_cast<double>(val[q]) * x[r * k + f] * y[idx[q] * k + f];
        o.value += t;
        o.abs_sum += std::abs(t);
        ++o.terms;
      }
    }
  return c;
}

// Row-wise softmax of the stored values (position order), with the error budget above.
template <class A>
Elementwise ref_softmax(const A& a) {
  Elementwise out{std::vector<double>(static_cast<std::size_t>(a.nnz())),
                  std::vector<double>(static_cast<std::size_t>(a.nnz()))};
  auto ptr = a.indptr();
  auto val = a.values();
  for (std::int64_t r = 0; r < a.rows(); ++r) {
    if (ptr[r] == ptr[r + 1]) continue;
    double m = -std::numeric_limits<double>::infinity(), s = 0;
    for (auto q = ptr[r]; q < ptr[r + 1]; ++q) m = std::max(m, static_cast<double>(val[q]));
    for (auto q = ptr[r]; q < ptr[r + 1]; ++q) s += std::exp(val[q] - m);
    const double n = static_cast<double>(ptr[r + 1] - ptr[r]);
    for (auto q = ptr[r]; q < ptr[r + 1]; ++q) {
      out.value[static_cast<std::size_t>(q)] = std::exp(val[q] - m) / s;
      out.ops[static_cast<std::size_t>(q)] = n + 4 + std::abs(val[q] - m);
    }
  }
  return out;
}

template <class T>
std::vector<T> to_vector(std::span<const T> s) {
  return std::vector<T>(s.begin(), s.end());
}

}  // namespace spindle_test

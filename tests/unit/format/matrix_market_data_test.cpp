// Reading the real graphs of the shared data folder (SPINDLE_TEST_DATA_DIR); counts from
// its README. A missing folder is reported with a warning, not a failure.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <string>

#include "format_test_util.hpp"
#include "spindle/format/matrix_market.hpp"

using namespace spindle;

namespace {

struct Expected {
  const char* file;
  std::int64_t rows;
  std::int64_t nnz;
  std::int64_t empty_rows;  // -1: not checked
  std::int64_t max_row;     // -1: not checked
};

std::int64_t count_empty(const Csr<float>& a) {
  std::int64_t n = 0;
  for (std::int64_t r = 0; r < a.rows(); ++r) n += a.indptr()[r] == a.indptr()[r + 1];
  return n;
}

std::int64_t max_row(const Csr<float>& a) {
  std::int64_t m = 0;
  for (std::int64_t r = 0; r < a.rows(); ++r)
    m = std::max<std::int64_t>(m, a.indptr()[r + 1] - a.indptr()[r]);
  return m;
}

}  // namespace

TEST_CASE("real graphs read with the published sizes", "[format][data]") {
  const Expected e = GENERATE(Expected{"gnn/cora.mtx.gz", 2708, 10556, -1, -1},
                              Expected{"gnn/citeseer.mtx.gz", 3327, 9228, -1, -1},
                              Expected{"gnn/pubmed.mtx.gz", 19717, 88651, -1, -1},
                              Expected{"gnn/ogbn-arxiv.mtx.gz", 169343, 1166243, 17440, -1},
                              Expected{"matrices/wiki-Vote.mtx.gz", 8297, 103689, 2187, 893});
  const std::string path = spindle_format_test::data_file(e.file);
  if (path.empty()) {
    WARN("data file " << e.file << " not found under " << SPINDLE_TEST_DATA_DIR << "; skipped");
    return;
  }
  const Csr<float> a = read_matrix_market<float>(path);
  INFO(e.file);
  CHECK(a.rows() == e.rows);
  CHECK(a.cols() == e.rows);
  CHECK(a.nnz() == e.nnz);  // the files have no duplicate entries
  CHECK(a.sorted());
  CHECK(std::all_of(a.values().begin(), a.values().end(), [](float v) { return v == 1.0f; }));
  if (e.empty_rows >= 0) CHECK(count_empty(a) == e.empty_rows);
  if (e.max_row >= 0) CHECK(max_row(a) == e.max_row);
  CHECK(a.name() == std::string(e.file).substr(std::string(e.file).find('/') + 1));
}

TEST_CASE("cora is stored in both directions", "[format][data]") {
  const std::string path = spindle_format_test::data_file("gnn/cora.mtx.gz");
  if (path.empty()) {
    WARN("cora not found under " << SPINDLE_TEST_DATA_DIR << "; skipped");
    return;
  }
  auto t = read_matrix_market_triplets<float>(path);
  CHECK(t.header.field == MmField::pattern);
  CHECK(t.header.symmetry == MmSymmetry::general);
  const auto a = Csr<float>::from_triplets(t.header.rows, t.header.cols, t.entries);
  for (auto& x : t.entries) std::swap(x.row, x.col);
  const auto at = Csr<float>::from_triplets(t.header.rows, t.header.cols, t.entries);
  CHECK(std::equal(a.indptr().begin(), a.indptr().end(), at.indptr().begin(), at.indptr().end()));
  CHECK(
      std::equal(a.indices().begin(), a.indices().end(), at.indices().begin(), at.indices().end()));
}

TEST_CASE("RGCN typed edge lists read as triplets", "[format][data]") {
  const std::string path = spindle_format_test::data_file("rgcn/aifb.mtx.gz");
  if (path.empty()) {
    WARN("aifb not found under " << SPINDLE_TEST_DATA_DIR << "; skipped");
    return;
  }
  const auto t = read_matrix_market_triplets<std::int32_t>(path);
  CHECK(t.header.rows == 7262);
  CHECK(t.header.field == MmField::integer);
  CHECK(t.entries.size() == 48810);
  const auto [lo, hi] = std::minmax_element(t.entries.begin(), t.entries.end(),
                                            [](auto& x, auto& y) { return x.value < y.value; });
  CHECK(lo->value == 1);
  CHECK(hi->value == 78);  // R = 39 forward relations plus their reverses
}

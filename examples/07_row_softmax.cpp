// 07_row_softmax: softmax over the nonzeros of every row (edge attention), written with
// nested iterations and locals: the kernel iterates rows; inside a row, three for_each
// loops over J compute the row max, the sum of exponentials and the normalised values.
#include <spindle/spindle.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace sp = spindle;

struct I : sp::dense_fixed {};
struct J : sp::sparse_variable<I> {};

int main(int argc, char** argv) {
  const auto pattern = sp::read_matrix_market<float>(argc > 1 ? argv[1] : SPINDLE_EXAMPLE_DATA);
  auto A = pattern;  // random scores on the graph's edges
  sp::Rng rng(7);
  for (float& v : A.values()) v = rng.value<float>(-4, 4);
  auto B = A;

  auto softmax = sp::kernel("row_softmax", [](sp::in<float, I, J> a, sp::out<float, I, J> b, sp::iter<I> i) {
    sp::local<float> m(-sp::infinity<float>(), "row_max");  // private to each row
    sp::for_each<J>([&](sp::iter<J> j) { m.max_with(a(i, j)); });
    sp::local<float> s(0.0f, "row_sum");
    sp::for_each<J>([&](sp::iter<J> j) { s += sp::exp(a(i, j) - m); });
    sp::for_each<J>([&](sp::iter<J> j) { b(i, j) = sp::exp(a(i, j) - m) / s; });
  });
  softmax(A, B);

  double max_err = 0, worst_row_sum = 0;
  for (std::int64_t r = 0; r < A.rows(); ++r) {
    const auto row = A.row_values(r);
    if (row.empty()) continue;
    const double m = *std::max_element(row.begin(), row.end());
    double s = 0, sum_b = 0;
    for (float v : row) s += std::exp(v - m);
    for (std::size_t q = 0; q < row.size(); ++q) {
      max_err = std::max(max_err, std::abs(std::exp(row[q] - m) / s - B.row_values(r)[q]));
      sum_b += B.row_values(r)[q];
    }
    worst_row_sum = std::max(worst_row_sum, std::abs(sum_b - 1.0));
  }
  std::printf("row 0 scores:");
  for (float v : A.row_values(0)) std::printf(" %.3f", v);
  std::printf("\nrow 0 softmax:");
  for (float v : B.row_values(0)) std::printf(" %.3f", v);
  std::printf("\nmax err %.3g, max |row sum - 1| %.3g -> %s\n", max_err, worst_row_sum, max_err < 1e-5 ? "OK" : "MISMATCH");
  return max_err < 1e-5 ? 0 : 1;
}

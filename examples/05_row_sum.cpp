// 05_row_sum: the degree of every node, y(i) = sum_j A(i, j), on a pattern graph (all
// stored values are 1). Reductions into an `out` buffer start from 0 automatically.
#include <spindle/spindle.hpp>

#include <cstdio>
#include <string>

namespace sp = spindle;

struct I : sp::dense_fixed {};
struct J : sp::sparse_variable<I> {};

int main(int argc, char** argv) {
  const auto A = sp::read_matrix_market<float>(argc > 1 ? argv[1] : SPINDLE_EXAMPLE_DATA);
  auto degree = sp::Tensor<float>::full({A.rows()}, -1.0f);  // overwritten, not accumulated into

  auto row_sum = sp::kernel("row_sum", [](sp::in<float, I, J> a, sp::out<float, I> y, sp::iter<I> i,
                                          sp::iter<J> j) { y(i) += a(i, j); });
  row_sum(A, degree);

  std::int64_t mismatches = 0, max_node = 0, isolated = 0;
  for (std::int64_t r = 0; r < A.rows(); ++r) {
    const auto expected = A.indptr()[r + 1] - A.indptr()[r];  // pattern: degree = row length
    if (degree(r) != static_cast<float>(expected)) ++mismatches;
    if (degree(r) > degree(max_node)) max_node = r;
    if (expected == 0) ++isolated;
  }
  std::printf("degree[0..4] = %.0f %.0f %.0f %.0f %.0f\n", degree(0), degree(1), degree(2), degree(3), degree(4));
  std::printf("max degree %.0f at node %lld; %lld isolated nodes\n", degree(max_node), (long long)max_node,
              (long long)isolated);
  std::printf("%lld mismatches vs indptr -> %s\n", (long long)mismatches, mismatches == 0 ? "OK" : "MISMATCH");
  return mismatches == 0 ? 0 : 1;
}

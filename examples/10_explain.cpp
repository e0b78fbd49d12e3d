// 10_explain: what the compiler made of a kernel. explain() lowers and compiles it and
// returns the IR of each stage (I: coordinate space, II: position space with loops,
// III: flat loops after scheduling), the passes with their times and the generated C.
#include <spindle/spindle.hpp>

#include <cstdio>
#include <string>

namespace sp = spindle;

struct I : sp::dense_fixed {};
struct J : sp::sparse_variable<I> {};
struct K : sp::dense_fixed {};

int main() {
  auto spmm = sp::kernel("spmm", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>, K> b,
                                    sp::out<float, I, K> c, sp::iter<I> i, sp::iter<J> j,
                                    sp::iter<K> k) { c(i, k) += a(i, j) * b(j, k); });
  const std::string text = spmm.explain();
  std::printf("%s\n", text.c_str());

  // The explained kernel is the one that runs: a tiny 2x3 check.
  const sp::Csr<float> A(2, 3, {0, 2, 3}, {0, 2, 1}, {1, 2, 3});
  const auto B = sp::Tensor<float>::from({1, 10, 2, 20, 3, 30}, {3, 2});
  auto C = sp::Tensor<float>::zeros({2, 2});
  spmm(A, B, C);  // row 0 = 1*B[0] + 2*B[2] = (7, 70); row 1 = 3*B[1] = (6, 60)
  std::printf("C = [[%g, %g], [%g, %g]]\n", C(0, 0), C(0, 1), C(1, 0), C(1, 1));
  const bool ok = C(0, 0) == 7 && C(0, 1) == 70 && C(1, 0) == 6 && C(1, 1) == 60 &&
                  text.find("stage I") != std::string::npos && text.find("generated source") != std::string::npos;
  std::printf("%s\n", ok ? "OK" : "MISMATCH");
  return ok ? 0 : 1;
}

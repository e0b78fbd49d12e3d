// expect: spindle: a kernel argument's element type differs from the buffer's declared type
// A Csr<double> passed to a float kernel.
#include <spindle/spindle.hpp>

int main() {
  auto a = spindle::Csr<double>::random(4, 4, 2, 1);
  auto x = spindle::Tensor<float>::zeros({4});
  auto y = spindle::Tensor<float>::zeros({4});
  spindle::ops::spmv<float>()(a, x, y);
}

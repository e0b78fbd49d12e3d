// expect: spindle: wrong number of kernel arguments
// spmv takes (a, x, y); the call passes two arguments.
#include <spindle/spindle.hpp>

int main() {
  auto a = spindle::Csr<float>::random(4, 4, 2, 1);
  auto x = spindle::Tensor<float>::zeros({4});
  spindle::ops::spmv<float>()(a, x);
}

// expect: (or a scalar parameter got a non-arithmetic argument)
// scale's alpha is a param<float>; a tensor is passed in its place.
#include <spindle/spindle.hpp>

int main() {
  auto a = spindle::Csr<float>::random(4, 4, 2, 1);
  auto r = spindle::Tensor<float>::zeros({4});
  auto b = a;
  spindle::ops::scale<float>()(a, r, r, r, b);
}

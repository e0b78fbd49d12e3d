// expect: spindle: a kernel lambda's parameters must be spindle::in/out/inout buffers
// A plain float parameter instead of spindle::param<float>.
#include <spindle/spindle.hpp>

struct I : spindle::dense_fixed {};

int main() {
  auto k = spindle::kernel("plain_float", [](spindle::in<float, I> x, float alpha, spindle::out<float, I> y,
                                             spindle::iter<I> i) { y(i) = x(i); });
  (void)k;
}

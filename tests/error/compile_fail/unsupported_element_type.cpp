// expect: spindle: unsupported element type
// A buffer of short: only float, double, int32 and int64 are supported.
#include <spindle/spindle.hpp>

struct I : spindle::dense_fixed {};

int main() {
  auto k = spindle::kernel("shorts", [](spindle::in<short, I> x, spindle::out<float, I> y, spindle::iter<I> i) {
    y(i) = 0.0f;
  });
  (void)k;
}

// expect: spindle::view: cannot view a temporary Eigen
// A view of a temporary matrix would dangle.
#include <spindle/eigen.hpp>

int main() {
  using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  auto v = spindle::view(RowMat::Zero(3, 3).eval());
  (void)v;
}

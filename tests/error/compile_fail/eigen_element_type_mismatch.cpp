// expect: spindle: a kernel argument's element type differs from the buffer's declared type
// An Eigen double matrix passed as the dense operand of a float SpMM.
#include <spindle/eigen.hpp>
#include <spindle/spindle.hpp>

int main() {
  using RowMat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  auto a = spindle::Csr<float>::random(4, 4, 2, 1);
  RowMat b = RowMat::Zero(4, 3);
  auto c = spindle::Tensor<float>::zeros({4, 3});
  spindle::ops::spmm<float>()(a, b, c);
}

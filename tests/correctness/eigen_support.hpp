#pragma once
// Eigen types shared by the correctness tests that compare against Eigen.
#include <Eigen/Sparse>

namespace spindle_test {

template <class T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using Vec = Eigen::Matrix<T, Eigen::Dynamic, 1>;
template <class T>
using EigenCsr = Eigen::SparseMatrix<T, Eigen::RowMajor, int>;

}  // namespace spindle_test

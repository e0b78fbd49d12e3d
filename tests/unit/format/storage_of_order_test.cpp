// storage_of() does not depend on include order: a generic caller defined before
// spindle/eigen.hpp is included still accepts Eigen arguments (arg_traits is a class
// template, so its specialisations are found at instantiation).
#include <catch2/catch.hpp>

#include "spindle/format/storage_of.hpp"

namespace {

// Stands in for the kernel-call binder, which knows nothing about Eigen.
template <class Arg>
spindle::StorageView bind_argument(Arg&& arg) {
  return spindle::storage_of(std::forward<Arg>(arg));
}

}  // namespace

#include "spindle/eigen.hpp"
#include "spindle/format/csr.hpp"

TEST_CASE("storage_of finds Eigen support included after the caller", "[format][eigen]") {
  Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> d(2, 3);
  CHECK(bind_argument(d).data == d.data());
  auto csr = spindle::Csr<double>::random(5, 5, 2.0, 1);
  Eigen::SparseMatrix<double, Eigen::RowMajor> e = spindle::to_eigen(csr);
  const spindle::StorageView s = bind_argument(e);
  CHECK(s.data == e.valuePtr());
  CHECK(s.levels.size() == 2);
  CHECK(bind_argument(csr).data == csr.values().data());
}

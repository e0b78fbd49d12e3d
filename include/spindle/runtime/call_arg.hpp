// One argument of a kernel call as the binder sees it: a buffer (StorageView) or a scalar.
#pragma once

#include <cstdint>

#include "spindle/format/storage.hpp"

namespace spindle::runtime {

struct CallArg {
  CallArg() {}  // user-provided: value-initialisation does not zero the view's unused levels
  bool is_scalar = false;
  StorageView view;
  DType scalar_dtype = DType::f64;
  double scalar = 0;
  std::int64_t scalar_int = 0;
};

}  // namespace spindle::runtime

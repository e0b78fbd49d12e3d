// One argument of a kernel call as the binder sees it: a buffer (StorageView) or a scalar.
#pragma once

#include <cstdint>
#include <vector>

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

// The index-value checks (bind_args.hpp: every stored value of an indirect write's index
// buffer against the extent it indexes) that passed during one host call of several kernels
// over the same inputs: an assembled output's symbolic and numeric phases. A later kernel of
// that call skips a check of the same array (address, dtype, count) against the same extent;
// the inputs do not change between the phases (no kernel writes an array it reads from the
// caller, bind_args checks that), so it could only pass again. Lives for one call.
struct CheckedIndexValues {
  struct Entry {
    const void* data;
    DType dtype;
    std::int64_t count, extent;
  };
  std::vector<Entry> passed;
  bool contains(const void* data, DType dtype, std::int64_t count, std::int64_t extent) const {
    for (const Entry& e : passed)
      if (e.data == data && e.dtype == dtype && e.count == count && e.extent == extent) return true;
    return false;
  }
};

}  // namespace spindle::runtime

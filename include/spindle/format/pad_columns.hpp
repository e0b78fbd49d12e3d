// pad_columns: the slots of a padded fiber (ELL rows, SR-BCRS panels, ELL3D rows). A fiber
// holding n strictly ascending columns column(0) < ... < column(n-1) gets `slots` >= n
// slots: its columns merged with the smallest columns it does not hold, in ascending order,
// so the slots stay strictly ascending (a read by coordinate stays well defined and searches
// work) and the padding reads the same few rows of a dense operand for every fiber.
// emit(c, j) is called once per slot in order: j is the held column's number, or -1 for a
// padding column c. The caller ensures slots <= the column count.
#pragma once

#include <cstdint>

namespace spindle::detail {

template <class Column, class Emit>
void pad_columns(std::int64_t n, std::int64_t slots, Column&& column, Emit&& emit) {
  std::int64_t pad = slots - n, next = 0, j = 0;
  for (std::int64_t w = 0; w < slots; ++w) {
    if (j < n && (pad == 0 || static_cast<std::int64_t>(column(j)) <= next)) {
      const auto c = static_cast<std::int64_t>(column(j));
      if (c == next) ++next;
      emit(c, j++);
    } else {  // next is a column the fiber does not hold (its held columns below next are emitted)
      emit(next++, std::int64_t{-1});
      --pad;
    }
  }
}

}  // namespace spindle::detail

// pad_columns: the slots of a padded fiber (ELL rows, SR-BCRS panels, ELL3D rows). A fiber
// holding n strictly ascending columns column(0) < ... < column(n-1) gets `slots` >= n
// slots: its columns merged with the smallest columns it does not hold, in ascending order,
// so the slots stay strictly ascending (a read by coordinate stays well defined and searches
// work) and the padding reads the same few rows of a dense operand for every fiber.
// emit(c, j) is called once per slot in order: j is the held column's number, or -1 for a
// padding column c. The caller ensures slots <= the column count.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

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


// One row's (column, value) pairs ordered by column, a column stored twice made one pair
// holding the sum (how Ell and Ell3d read an unsorted Csr row).
template <class Index, class T>
void sort_and_add_duplicates(std::vector<std::pair<Index, T>>& row) {
  std::stable_sort(row.begin(), row.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::size_t w = 0;
  for (std::size_t q = 0; q < row.size(); ++q) {
    if (w > 0 && row[w - 1].first == row[q].first) row[w - 1].second += row[q].second;
    else row[w++] = row[q];
  }
  row.resize(w);
}

}  // namespace spindle::detail

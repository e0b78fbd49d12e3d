// Implementation of AssembledKernel (see assembled_kernel.hpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "spindle/runtime/assembled_kernel.hpp"
#include "spindle/runtime/assembly_steps.hpp"
#include "spindle/runtime/runtime.hpp"

namespace spindle::runtime {

namespace assembly_detail {

// Sorts each row's (column, value) pairs by column; rows already in order are only checked.
// Two ascending runs (a sum of two rows) are merged; else by row length n and column span
// s (max - min + 1): n <= 32 an insertion sort in place; a
// row that fills its span densely enough (s / 64 words < n log2 n / 4) a bucket pass: a bit
// per column and the value at its column in per-thread scratch, read back in column order;
// otherwise a sort of 64-bit keys (column << 32 | position) and a gather of the values.
template <class I, class V>
void sort_rows(ThreadPool& pool, std::int64_t rows, std::int64_t cols, const std::int64_t* row_ptr, I* idx, V* val) {
  const bool keys_fit = cols <= (std::int64_t{1} << 31);
  const std::int64_t grain = std::max<std::int64_t>(64, rows / (4 * std::max(1, pool.num_threads())));
  pool.parallel_for(rows, grain, [&](std::int64_t b, std::int64_t e) {
    std::vector<std::uint64_t> keys, bits;
    std::vector<V> vals, dense;
    for (std::int64_t r = b; r < e; ++r) {
      I* x = idx + row_ptr[r];
      V* v = val + row_ptr[r];
      const std::int64_t n = row_ptr[r + 1] - row_ptr[r];
      if (n < 2) continue;
      I lo = x[0], hi = x[0];
      std::int64_t descents = 0, cut = 0;
      for (std::int64_t q = 1; q < n; ++q) {
        if (x[q - 1] > x[q]) ++descents, cut = q;
        lo = std::min(lo, x[q]);
        hi = std::max(hi, x[q]);
      }
      if (descents == 0) continue;
      if (descents == 1) {  // two ascending runs (a sum of two rows): merge them
        keys.resize(static_cast<std::size_t>(n));
        vals.resize(static_cast<std::size_t>(n));
        std::int64_t p = 0, o = cut, out = 0;
        while (p < cut && o < n) {
          const std::int64_t take = x[o] < x[p] ? o++ : p++;
          keys[static_cast<std::size_t>(out)] = static_cast<std::uint64_t>(x[take]);
          vals[static_cast<std::size_t>(out++)] = v[take];
        }
        for (; p < cut; ++p, ++out) keys[static_cast<std::size_t>(out)] = static_cast<std::uint64_t>(x[p]), vals[static_cast<std::size_t>(out)] = v[p];
        for (; o < n; ++o, ++out) keys[static_cast<std::size_t>(out)] = static_cast<std::uint64_t>(x[o]), vals[static_cast<std::size_t>(out)] = v[o];
        for (std::int64_t q = 0; q < n; ++q) x[q] = static_cast<I>(keys[static_cast<std::size_t>(q)]), v[q] = vals[static_cast<std::size_t>(q)];
        continue;
      }
      if (n <= 32) {
        for (std::int64_t q = 1; q < n; ++q) {
          const I key = x[q];
          const V kv = v[q];
          std::int64_t p = q - 1;
          for (; p >= 0 && x[p] > key; --p) x[p + 1] = x[p], v[p + 1] = v[p];
          x[p + 1] = key, v[p + 1] = kv;
        }
        continue;
      }
      const std::int64_t span = static_cast<std::int64_t>(hi) - static_cast<std::int64_t>(lo) + 1;
      const double log_n = std::log2(static_cast<double>(n));
      if (static_cast<double>(span) / 64.0 < static_cast<double>(n) * log_n / 4.0) {
        if (dense.size() < static_cast<std::size_t>(cols)) {
          dense.resize(static_cast<std::size_t>(cols));
          bits.assign(static_cast<std::size_t>(cols + 63) / 64, 0);
        }
        for (std::int64_t q = 0; q < n; ++q) {
          const auto c = static_cast<std::uint64_t>(x[q]);
          bits[c >> 6] |= std::uint64_t{1} << (c & 63);
          dense[c] = v[q];
        }
        std::int64_t out = 0;
        for (std::uint64_t w = static_cast<std::uint64_t>(lo) >> 6; w <= static_cast<std::uint64_t>(hi) >> 6; ++w) {
          for (std::uint64_t word = bits[w]; word; word &= word - 1) {
            const std::uint64_t c = (w << 6) + static_cast<std::uint64_t>(__builtin_ctzll(word));
            x[out] = static_cast<I>(c), v[out] = dense[c], ++out;
          }
          bits[w] = 0;
        }
        continue;
      }
      if (keys_fit) {
        keys.resize(static_cast<std::size_t>(n));
        vals.assign(v, v + n);
        for (std::int64_t q = 0; q < n; ++q)
          keys[static_cast<std::size_t>(q)] = (static_cast<std::uint64_t>(x[q]) << 32) | static_cast<std::uint64_t>(q);
        std::sort(keys.begin(), keys.end());
        for (std::int64_t q = 0; q < n; ++q) {
          const std::uint64_t k = keys[static_cast<std::size_t>(q)];
          x[q] = static_cast<I>(k >> 32), v[q] = vals[k & 0xffffffffu];
        }
        continue;
      }
      std::vector<std::pair<I, V>> tmp;
      for (std::int64_t q = 0; q < n; ++q) tmp.emplace_back(x[q], v[q]);
      std::sort(tmp.begin(), tmp.end(), [](const auto& p, const auto& o) { return p.first < o.first; });
      for (std::int64_t q = 0; q < n; ++q) x[q] = tmp[static_cast<std::size_t>(q)].first, v[q] = tmp[static_cast<std::size_t>(q)].second;
    }
  });
}

template <class I>
void sort_rows_by_value_type(ThreadPool& pool, DType vt, std::int64_t rows, std::int64_t cols,
                             const std::int64_t* row_ptr, I* idx, void* val) {
  switch (vt) {
    case DType::f32: return sort_rows(pool, rows, cols, row_ptr, idx, static_cast<float*>(val));
    case DType::f64: return sort_rows(pool, rows, cols, row_ptr, idx, static_cast<double*>(val));
    case DType::i32: return sort_rows(pool, rows, cols, row_ptr, idx, static_cast<std::int32_t*>(val));
    case DType::i64: return sort_rows(pool, rows, cols, row_ptr, idx, static_cast<std::int64_t*>(val));
    default: throw InternalError("AssembledKernel: unsupported value type");
  }
}

}  // namespace assembly_detail

struct AssembledKernel::Impl {
  Impl(const ir::Function& f, Runtime& r)
      : rt(&r), plan(f), sym(plan.symbolic.function, r, plan.symbolic.context),
        num(plan.numeric.function, r, plan.numeric.context) {}

  Runtime* rt;
  AssemblyPlan plan;
  CompiledKernel sym, num;
};

SPINDLE_DECL AssembledKernel::AssembledKernel(const ir::Function& stage1, Runtime& rt)
    : impl_(std::make_unique<Impl>(stage1, rt)) {}

SPINDLE_DECL AssembledKernel::~AssembledKernel() = default;

SPINDLE_DECL int AssembledKernel::output_arg() const { return impl_->plan.output_arg(); }
SPINDLE_DECL const CompiledKernel& AssembledKernel::symbolic() const { return impl_->sym; }
SPINDLE_DECL const CompiledKernel& AssembledKernel::numeric() const { return impl_->num; }

SPINDLE_DECL std::string AssembledKernel::explain() const {
  const AssemblyPlan& p = impl_->plan;
  std::string s = message("# assembled output '", p.output, "' [", p.rows_axis, ", columns of ", p.cols_axis,
                          "]: symbolic phase (distinct columns per row), row offsets by prefix sums, numeric phase "
                          "(a dense workspace per block of rows), rows sorted by column\n");
  return s + impl_->sym.explain() + impl_->num.explain();
}

SPINDLE_DECL void AssembledKernel::call(const std::vector<CallArg>& args, AssemblyTarget& target) const {
  const AssemblyPlan& p = impl_->plan;
  const auto [rows, cols] = p.output_extent(args, /*device=*/false);
  std::vector<CallArg> base = p.inputs(args);

  ThreadPool& pool = impl_->rt->pool();
  const std::int64_t blocks = std::max<std::int64_t>(1, std::min<std::int64_t>(pool.num_threads(), rows));
  std::vector<std::int64_t> bounds = even_blocks(rows, blocks);
  const std::size_t scratch = static_cast<std::size_t>(blocks) * static_cast<std::size_t>(cols);
  std::vector<std::int64_t> mark(scratch, -1), counts(static_cast<std::size_t>(rows), 0);

  std::vector<CallArg> a = base;
  a.push_back(phase_arg(bounds.data(), DType::i64, {blocks + 1}, false));
  a.push_back(phase_arg(mark.data(), DType::i64, {blocks, cols}, true));
  a.push_back(phase_arg(counts.data(), DType::i64, {rows}, true));
  try {
    impl_->sym.call(a);
  } catch (const ShapeError& e) {
    throw p.with_shape_hint(e, rows, cols);
  }

  std::vector<std::int64_t> row_ptr = p.row_offsets(counts);
  const std::int64_t nnz = row_ptr.back();
  void* out_indices = nullptr;
  void* out_values = nullptr;
  target.allocate(nnz, row_ptr, out_indices, out_values);

  rebalance(bounds, row_ptr);
  std::fill(mark.begin(), mark.end(), -1);
  std::vector<std::int64_t> counts2(static_cast<std::size_t>(rows), 0), list(scratch);
  std::unique_ptr<std::int64_t[]> workspace(new std::int64_t[std::max<std::size_t>(scratch, 1)]);  // 8-byte slots
  a = std::move(base);
  a.push_back(phase_arg(bounds.data(), DType::i64, {blocks + 1}, false));
  a.push_back(phase_arg(mark.data(), DType::i64, {blocks, cols}, true));
  a.push_back(phase_arg(counts2.data(), DType::i64, {rows}, true));
  a.push_back(phase_arg(workspace.get(), p.value_dtype, {blocks, cols}, true));
  a.push_back(phase_arg(list.data(), DType::i64, {blocks, cols}, true));
  a.push_back(phase_arg(row_ptr.data(), DType::i64, {rows + 1}, false));
  a.push_back(phase_arg(out_indices, p.index_dtype, {nnz}, true));
  a.push_back(phase_arg(out_values, p.value_dtype, {nnz}, true));
  impl_->num.call(a);
  p.check_same_pattern(counts, counts2);

  if (p.index_dtype == DType::i32)
    assembly_detail::sort_rows_by_value_type(pool, p.value_dtype, rows, cols, row_ptr.data(),
                                             static_cast<std::int32_t*>(out_indices), out_values);
  else
    assembly_detail::sort_rows_by_value_type(pool, p.value_dtype, rows, cols, row_ptr.data(),
                                             static_cast<std::int64_t*>(out_indices), out_values);
  target.commit();
}

}  // namespace spindle::runtime

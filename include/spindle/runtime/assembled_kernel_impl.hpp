// Implementation of AssembledKernel (see assembled_kernel.hpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "spindle/lower/split_assembly.hpp"
#include "spindle/runtime/assembled_kernel.hpp"
#include "spindle/runtime/runtime.hpp"

namespace spindle::runtime {

namespace assembly_detail {

// A dense host array as a call argument (the scratch arrays of the two phases).
inline CallArg dense_arg(const void* data, DType t, std::initializer_list<std::int64_t> shape, bool writable) {
  CallArg a;
  a.view.dtype = t;
  a.view.data = const_cast<void*>(data);
  a.view.writable = writable;
  a.view.value_count = 1;
  for (std::int64_t n : shape) {
    LevelView l;
    l.kind = LevelKind::dense_fixed;
    l.length = n;
    a.view.levels.push_back(l);
    a.view.value_count *= n;
  }
  return a;
}

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
      : rt(&r),
        sym_phase(lower::split_assembly(f, lower::AssemblyContext::symbolic)),
        num_phase(lower::split_assembly(f, lower::AssemblyContext::numeric)),
        sym(sym_phase.function, r, sym_phase.context),
        num(num_phase.function, r, num_phase.context) {
    const ir::FuncBuffer* out = lower::assembled_output(f);
    kernel = f.name;
    output = out->buffer->name;
    value_dtype = out->buffer->dtype;
    index_dtype = out->buffer->axes[1]->index_dtype;
    rows_axis = out->buffer->axes[0]->name;
    cols_axis = ir::coordinate_space(out->buffer->axes[1])->name;
  }

  Runtime* rt;
  lower::AssemblyPhase sym_phase, num_phase;
  CompiledKernel sym, num;
  std::string kernel, output, rows_axis, cols_axis;
  DType value_dtype = DType::f32, index_dtype = DType::i32;
};

SPINDLE_DECL AssembledKernel::AssembledKernel(const ir::Function& stage1, Runtime& rt)
    : impl_(std::make_unique<Impl>(stage1, rt)) {}

SPINDLE_DECL AssembledKernel::~AssembledKernel() = default;

SPINDLE_DECL int AssembledKernel::output_arg() const { return impl_->sym_phase.output_arg; }
SPINDLE_DECL const CompiledKernel& AssembledKernel::symbolic() const { return impl_->sym; }
SPINDLE_DECL const CompiledKernel& AssembledKernel::numeric() const { return impl_->num; }

SPINDLE_DECL std::string AssembledKernel::explain() const {
  const Impl& m = *impl_;
  std::string s = message("# assembled output '", m.output, "' [", m.rows_axis, ", columns of ", m.cols_axis,
                          "]: symbolic phase (distinct columns per row), row offsets by prefix sums, numeric phase "
                          "(a dense workspace per block of rows), rows sorted by column\n");
  return s + m.sym.explain() + m.num.explain();
}

SPINDLE_DECL void AssembledKernel::call(const std::vector<CallArg>& args, AssemblyTarget& target) const {
  using assembly_detail::dense_arg;
  const Impl& m = *impl_;
  const int out_arg = m.sym_phase.output_arg;
  SPINDLE_CHECK(out_arg >= 0 && static_cast<std::size_t>(out_arg) < args.size(), UserError, "kernel '", m.kernel,
                "' takes ", m.sym_phase.user_args + 1, " arguments, got ", args.size());
  const CallArg& o = args[static_cast<std::size_t>(out_arg)];
  const StorageView& ov = o.view;
  SPINDLE_CHECK(!o.is_scalar && ov.levels.size() == 2 && ov.levels[0].kind == LevelKind::dense_fixed &&
                    ov.levels[1].kind == LevelKind::sparse_variable,
                UserError, "kernel '", m.kernel, "': argument ", out_arg, " ('", m.output,
                "') is the assembled output and must be a Csr (rows x columns), got ",
                o.is_scalar ? std::string("a scalar") : ov.description());
  SPINDLE_CHECK(!ov.on_device, UserError, "kernel '", m.kernel, "': the assembled output '", m.output,
                "' is built on the CPU; hint: pass host containers (to_host())");
  SPINDLE_CHECK(ov.dtype == m.value_dtype, DTypeError, "kernel '", m.kernel, "': argument ", out_arg, " ('", m.output,
                "') holds ", dtype_name(ov.dtype), " values but the buffer is declared ", dtype_name(m.value_dtype));
  SPINDLE_CHECK(ov.levels[1].index_dtype == m.index_dtype, DTypeError, "kernel '", m.kernel, "': argument ", out_arg,
                " ('", m.output, "') stores ", dtype_name(ov.levels[1].index_dtype), " column indices but axis ",
                m.cols_axis, "'s assembled columns are declared ", dtype_name(m.index_dtype));
  const std::int64_t rows = ov.levels[0].length, cols = ov.levels[1].length;

  std::vector<CallArg> base;
  base.reserve(args.size() + 8);
  for (std::size_t k = 0; k < args.size(); ++k)
    if (static_cast<int>(k) != out_arg) base.push_back(args[k]);

  ThreadPool& pool = m.rt->pool();
  const std::int64_t blocks = std::max<std::int64_t>(1, std::min<std::int64_t>(pool.num_threads(), rows));
  std::vector<std::int64_t> bounds(static_cast<std::size_t>(blocks) + 1);
  for (std::int64_t t = 0; t <= blocks; ++t) bounds[static_cast<std::size_t>(t)] = rows * t / blocks;
  const std::size_t scratch = static_cast<std::size_t>(blocks) * static_cast<std::size_t>(cols);
  std::vector<std::int64_t> mark(scratch, -1), counts(static_cast<std::size_t>(rows), 0);

  std::vector<CallArg> a = base;
  a.push_back(dense_arg(bounds.data(), DType::i64, {blocks + 1}, false));
  a.push_back(dense_arg(mark.data(), DType::i64, {blocks, cols}, true));
  a.push_back(dense_arg(counts.data(), DType::i64, {rows}, true));
  try {
    m.sym.call(a);
  } catch (const ShapeError& e) {
    throw ShapeError(message(e.what(), " (the assembled output '", m.output, "' was passed as ", rows, " x ", cols,
                             ": its rows must be the extent of ", m.rows_axis, " and its columns that of ",
                             m.cols_axis, ")"));
  }

  std::vector<std::int64_t> row_ptr(static_cast<std::size_t>(rows) + 1, 0);
  for (std::int64_t r = 0; r < rows; ++r)
    row_ptr[static_cast<std::size_t>(r) + 1] = row_ptr[static_cast<std::size_t>(r)] + counts[static_cast<std::size_t>(r)];
  const std::int64_t nnz = row_ptr.back();
  const std::int64_t index_max =
      m.index_dtype == DType::i32 ? std::numeric_limits<std::int32_t>::max() : std::numeric_limits<std::int64_t>::max();
  SPINDLE_CHECK(nnz <= index_max, ShapeError, "kernel '", m.kernel, "': the assembled output '", m.output, "' has ",
                nnz, " entries, more than its ", dtype_name(m.index_dtype), " indices can address; hint: declare the "
                "axis assembled<P, X, std::int64_t> and pass a Csr<T, std::int64_t>");
  void* out_indices = nullptr;
  void* out_values = nullptr;
  target.allocate(nnz, row_ptr, out_indices, out_values);

  // Re-balance: block t gets the rows whose (entries + rows) prefix is about t/T of the total.
  const std::int64_t total = nnz + rows;
  for (std::int64_t t = 1, r = 0; t < blocks; ++t) {
    const std::int64_t goal = total * t / blocks;
    while (r < rows && row_ptr[static_cast<std::size_t>(r)] + r < goal) ++r;
    bounds[static_cast<std::size_t>(t)] = r;
  }
  std::fill(mark.begin(), mark.end(), -1);
  std::vector<std::int64_t> counts2(static_cast<std::size_t>(rows), 0), list(scratch);
  std::unique_ptr<std::int64_t[]> workspace(new std::int64_t[std::max<std::size_t>(scratch, 1)]);  // 8-byte slots
  a = std::move(base);
  a.push_back(dense_arg(bounds.data(), DType::i64, {blocks + 1}, false));
  a.push_back(dense_arg(mark.data(), DType::i64, {blocks, cols}, true));
  a.push_back(dense_arg(counts2.data(), DType::i64, {rows}, true));
  a.push_back(dense_arg(workspace.get(), m.value_dtype, {blocks, cols}, true));
  a.push_back(dense_arg(list.data(), DType::i64, {blocks, cols}, true));
  a.push_back(dense_arg(row_ptr.data(), DType::i64, {rows + 1}, false));
  a.push_back(dense_arg(out_indices, m.index_dtype, {nnz}, true));
  a.push_back(dense_arg(out_values, m.value_dtype, {nnz}, true));
  m.num.call(a);
  SPINDLE_CHECK(counts2 == counts, InternalError, "kernel '", m.kernel, "': the numeric phase of assembled output '",
                m.output, "' wrote another pattern than its symbolic phase counted");

  if (m.index_dtype == DType::i32)
    assembly_detail::sort_rows_by_value_type(pool, m.value_dtype, rows, cols, row_ptr.data(),
                                             static_cast<std::int32_t*>(out_indices), out_values);
  else
    assembly_detail::sort_rows_by_value_type(pool, m.value_dtype, rows, cols, row_ptr.data(),
                                             static_cast<std::int64_t*>(out_indices), out_values);
  target.commit();
}

}  // namespace spindle::runtime

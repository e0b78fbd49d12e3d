// spindle::einsum: tensor algebra by subscripts, for users who do not want to declare axes.
//
//   auto Y = spindle::einsum("ij,jk->ik", A, X).tensor();      // SpMM: A Csr, X Tensor
//   auto S = spindle::einsum("ij,ik,jk->ij", A, X, Y).csr();   // SDDMM: a Csr with A's pattern
//   spindle::einsum_into("ij,j->i", y, A, x);                  // SpMV into an existing y
//   std::cout << spindle::einsum_explain("ij,jk->ik", A, X);
//   spindle::einsum(runtime, "ij,jk->ik", A, X);               // with another runtime
//
// Operands are anything a kernel takes (Csr, Tensor, views, Csf, Ragged, Bsr, Ell, Eigen with
// spindle/eigen.hpp), all of one element type. The result is numpy's einsum of the operands
// (an absent sparse element is 0). Its format is inferred: a Csr with the pattern of the
// sparse operand that drives the iteration when the output subscripts are exactly that
// operand's (the result vanishes off it), else a dense Tensor (rank 0 for "ij,ij->").
// frontend/einsum.hpp turns the subscripts into the same stage-I IR a lambda records; the
// plan — driver, output format, compiled kernel — is built once per (subscripts, operand
// formats, element type) and kept by the runtime, so a repeated call only checks its
// operands and runs. docs/einsum.md has the rules.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "spindle/format/csr.hpp"
#include "spindle/format/storage_of.hpp"
#include "spindle/format/tensor.hpp"
#include "spindle/frontend/einsum.hpp"
#include "spindle/kernel.hpp"
#include "spindle/runtime/compiled_kernel.hpp"
#include "spindle/runtime/runtime.hpp"

namespace spindle {

namespace detail {

struct EinsumPlan {
  EinsumSpec spec;
  int driver = -1;
  bool sparse_output = false;
  std::shared_ptr<const runtime::CompiledKernel> kernel;
  std::string summary;  // "# einsum: ..." lines for explain
};

// The plans of one runtime (kept by the runtime: Runtime::attached).
struct EinsumPlans {
  std::mutex mutex;
  std::unordered_map<std::string, std::shared_ptr<const EinsumPlan>> by_key;
};

inline std::string einsum_operand_name(const EinsumSpec& s, std::size_t o, const StorageView& v) {
  return message("operand ", o, " ('", s.inputs[o], "', ", v.description(), ")");
}

// Every subscript has one extent: ShapeError naming the subscript and both operands.
// `out` (einsum_into) is checked too.
inline void einsum_check_extents(const EinsumSpec& s, const std::vector<StorageView>& views, const StorageView* out) {
  struct Seen {
    std::int64_t length;
    std::string where;
  };
  std::unordered_map<char, Seen> seen;
  auto visit = [&](char c, std::int64_t length, const std::string& where) {
    auto [it, fresh] = seen.emplace(c, Seen{length, where});
    SPINDLE_CHECK(fresh || it->second.length == length, ShapeError, "einsum '", s.text, "': subscript '",
                  std::string(1, c), "' has extent ", it->second.length, " in ", it->second.where, " but ", length,
                  " in ", where);
  };
  for (std::size_t o = 0; o < views.size(); ++o)
    for (std::size_t l = 0; l < s.inputs[o].size(); ++l)
      visit(s.inputs[o][l], views[o].levels[l].length,
            message(einsum_operand_name(s, o, views[o]), " axis ", l));
  if (out && !s.output.empty())
    for (std::size_t l = 0; l < s.output.size(); ++l)
      visit(s.output[l], out->levels[l].length, message("the output (", out->description(), ") axis ", l));
}

// Checks the operands against the subscripts and returns the cached plan for them.
inline std::shared_ptr<const EinsumPlan> einsum_plan(std::string_view text, const std::vector<StorageView>& views,
                                                     DType dtype, runtime::Runtime& rt) {
  EinsumSpec s = parse_einsum(text, views.size());
  std::vector<EinsumOperandFormat> formats;
  std::vector<std::int64_t> stored;
  for (std::size_t o = 0; o < views.size(); ++o) {
    const StorageView& v = views[o];
    SPINDLE_CHECK(!v.on_device, UserError, "einsum '", s.text, "': ", einsum_operand_name(s, o, v),
                  " is in GPU memory; einsum runs on host containers (define a kernel with spindle::kernel "
                  "to run on the GPU)");
    SPINDLE_CHECK(v.dtype == dtype, DTypeError, "einsum '", s.text, "': ", einsum_operand_name(s, o, v),
                  " holds ", dtype_name(v.dtype), " but operand 0 holds ", dtype_name(dtype),
                  "; every operand must have one element type");
    SPINDLE_CHECK(v.levels.size() == s.inputs[o].size(), ShapeError, "einsum '", s.text, "': ",
                  einsum_operand_name(s, o, v), " has ", v.levels.size(), " axes but ", s.inputs[o].size(),
                  " subscripts");
    formats.push_back(einsum_format_of(v));
    stored.push_back(v.value_count);
  }
  einsum_check_extents(s, views, nullptr);
  const int driver = choose_einsum_driver(s, formats, stored);
  const bool sparse_output = einsum_sparse_output(s, formats, driver);

  std::string key = s.text + "|" + dtype_name(dtype) + "|" + std::to_string(driver);
  for (const auto& f : formats) {
    key += "|";
    for (std::size_t l = 0; l < f.levels.size(); ++l)
      key += std::string(level_kind_name(f.levels[l])) + ":" + dtype_name(f.index_dtypes[l]) + ",";
  }
  auto plans = rt.attached<EinsumPlans>("spindle::einsum", [] { return std::make_shared<EinsumPlans>(); });
  std::lock_guard<std::mutex> lock(plans->mutex);
  auto& slot = plans->by_key[key];
  if (slot) return slot;
  auto plan = std::make_shared<EinsumPlan>();
  plan->spec = s;
  plan->driver = driver;
  plan->sparse_output = sparse_output;
  ir::Function f = build_einsum_function(s, formats, dtype, driver, sparse_output);
  plan->kernel = std::make_shared<const runtime::CompiledKernel>(f, rt);
  std::string out_fmt = s.output.empty() ? std::string("a scalar (rank-0 Tensor)")
                        : sparse_output  ? message("Csr with the pattern of operand ", driver,
                                                   " (every product vanishes off it)")
                                         : message("dense Tensor [", s.output, "]");
  plan->summary = message("# einsum '", s.text, "' -> '", s.output, "': ",
                          driver >= 0 ? message("operand ", driver, " (", formats[static_cast<std::size_t>(driver)].kind,
                                                ") drives the iteration (the sparse operand with the fewest stored "
                                                "elements); other subscripts are dense loops, other sparse operands "
                                                "are looked up")
                                      : std::string("every operand is dense: every subscript is a dense loop"),
                          "\n# einsum output: ", out_fmt, "\n");
  slot = plan;
  return plan;
}

inline std::vector<std::int64_t> einsum_output_shape(const EinsumSpec& s, const std::vector<StorageView>& views) {
  std::vector<std::int64_t> shape;
  for (char c : s.output)
    for (std::size_t o = 0; o < views.size(); ++o)
      if (auto l = s.inputs[o].find(c); l != std::string::npos) {
        shape.push_back(views[o].levels[l].length);
        break;
      }
  return shape;
}

inline std::vector<runtime::CallArg> einsum_args(const std::vector<StorageView>& views, StorageView out) {
  std::vector<runtime::CallArg> args(views.size() + 1);
  for (std::size_t o = 0; o < views.size(); ++o) args[o].view = views[o];
  args.back().view = std::move(out);
  return args;
}

}  // namespace detail

// The result of spindle::einsum: a dense Tensor or a Csr with the driver's pattern.
template <class T>
class EinsumResult {
 public:
  using value_type = T;
  using Sparse = std::variant<Csr<T, std::int32_t>, Csr<T, std::int64_t>>;

  explicit EinsumResult(Tensor<T> t) : value_(std::move(t)) {}
  explicit EinsumResult(Csr<T, std::int32_t> c) : value_(std::move(c)) {}
  explicit EinsumResult(Csr<T, std::int64_t> c) : value_(std::move(c)) {}

  bool is_sparse() const { return !std::holds_alternative<Tensor<T>>(value_); }

  // The dense result; UserError when the result is a Csr (use csr() or to_dense()).
  Tensor<T>& tensor() {
    SPINDLE_CHECK(!is_sparse(), UserError, "einsum: the result is a Csr (the output subscripts are the sparse "
                                           "operand's); use .csr() or .to_dense()");
    return std::get<Tensor<T>>(value_);
  }
  const Tensor<T>& tensor() const { return const_cast<EinsumResult*>(this)->tensor(); }

  // The sparse result; UserError when the result is dense or has the other index type.
  template <class Index = std::int32_t>
  Csr<T, Index>& csr() {
    const bool held = std::holds_alternative<Csr<T, Index>>(value_);
    SPINDLE_CHECK(held, UserError, "einsum: the result is ",
                  is_sparse() ? "a Csr with another index type" : "a dense Tensor (use .tensor())");
    return std::get<Csr<T, Index>>(value_);
  }
  template <class Index = std::int32_t>
  const Csr<T, Index>& csr() const {
    return const_cast<EinsumResult*>(this)->template csr<Index>();
  }

  Tensor<T> to_dense() const {
    return std::visit([](const auto& v) -> Tensor<T> {
      if constexpr (std::is_same_v<std::decay_t<decltype(v)>, Tensor<T>>)
        return v;
      else
        return v.to_dense();
    }, value_);
  }

 private:
  std::variant<Tensor<T>, Csr<T, std::int32_t>, Csr<T, std::int64_t>> value_;
};

namespace detail {
template <class T, class Index>
EinsumResult<T> einsum_sparse_result(const StorageView& d, std::vector<runtime::CallArg>& args,
                                     const runtime::CompiledKernel& k) {
  const auto& rows = d.levels[0];
  const auto& cols = d.levels[1];
  const auto* ip = static_cast<const Index*>(cols.indptr);
  const auto* ix = static_cast<const Index*>(cols.indices);
  std::vector<Index> indptr(ip, ip + rows.length + 1), indices(ix, ix + cols.nnz);
  Csr<T, Index> c(rows.length, cols.length, std::move(indptr), std::move(indices),
                  std::vector<T>(static_cast<std::size_t>(cols.nnz)));
  StorageView out = d;  // the driver's structure arrays: the binder sees one structure
  out.data = c.values().data();
  out.value_count = cols.nnz;
  out.writable = true;
  out.name = "einsum result";
  args.back().view = out;
  k.call(args);
  return EinsumResult<T>(std::move(c));
}
}  // namespace detail

// einsum(subscripts, operands...): the result in the inferred format (see the top of this file).
template <class First, class... Rest>
auto einsum(runtime::Runtime& rt, std::string_view subscripts, First&& first, Rest&&... rest) {
  using T = std::remove_const_t<typename detail::arg_element<std::remove_cvref_t<First>>::type>;
  static_assert(!std::is_void_v<T>, "spindle::einsum: the first operand's type must say its element type");
  std::vector<StorageView> views{storage_of(std::forward<First>(first)), storage_of(std::forward<Rest>(rest))...};
  auto plan = detail::einsum_plan(subscripts, views, dtype_v<T>, rt);
  auto args = detail::einsum_args(views, StorageView{});
  if (plan->sparse_output) {
    const StorageView& d = views[static_cast<std::size_t>(plan->driver)];
    if (d.levels[1].index_dtype == DType::i64) return detail::einsum_sparse_result<T, std::int64_t>(d, args, *plan->kernel);
    return detail::einsum_sparse_result<T, std::int32_t>(d, args, *plan->kernel);
  }
  auto shape = detail::einsum_output_shape(plan->spec, views);
  Tensor<T> out = Tensor<T>::zeros(shape);
  if (shape.empty()) shape.push_back(1);  // a scalar result: the kernel writes a one-element vector
  args.back().view = TensorView<T>(out.data(), shape).storage();
  plan->kernel->call(args);
  return EinsumResult<T>(std::move(out));
}
template <class First, class... Rest>
auto einsum(std::string_view subscripts, First&& first, Rest&&... rest) {
  return einsum(runtime::default_runtime(), subscripts, std::forward<First>(first), std::forward<Rest>(rest)...);
}

// einsum_into(subscripts, out, operands...): writes the result into `out` (a Tensor or view of
// the output's shape, or — for a sparse result — a Csr with the driving operand's pattern).
// Every element of `out` is overwritten. A scalar result goes into a one-element vector.
template <class Out, class... Ops>
void einsum_into(runtime::Runtime& rt, std::string_view subscripts, Out&& out, Ops&&... ops) {
  static_assert(sizeof...(Ops) > 0, "spindle::einsum_into: give the output, then at least one operand");
  std::vector<StorageView> views{storage_of(std::forward<Ops>(ops))...};
  StorageView o = storage_of(std::forward<Out>(out));
  auto plan = detail::einsum_plan(subscripts, views, views.front().dtype, rt);
  const auto& s = plan->spec;
  SPINDLE_CHECK(o.dtype == views.front().dtype, DTypeError, "einsum '", s.text, "': the output (", o.description(),
                ") holds ", dtype_name(o.dtype), " but the operands hold ", dtype_name(views.front().dtype));
  const std::size_t rank = s.output.empty() ? 1 : s.output.size();
  SPINDLE_CHECK(o.levels.size() == rank, ShapeError, "einsum '", s.text, "': the output (", o.description(), ") has ",
                o.levels.size(), " axes but the result has ", rank,
                s.output.empty() ? " (a scalar result goes into a one-element vector)" : "");
  if (s.output.empty())
    SPINDLE_CHECK(o.levels[0].length == 1, ShapeError, "einsum '", s.text, "': a scalar result goes into a "
                  "one-element vector, not ", o.description());
  if (plan->sparse_output)
    SPINDLE_CHECK(o.levels[1].kind == LevelKind::sparse_variable, ShapeError, "einsum '", s.text,
                  "': the result is sparse with the pattern of operand ", plan->driver, "; the output (",
                  o.description(), ") must be a Csr with that pattern");
  else
    for (const auto& l : o.levels)
      SPINDLE_CHECK(l.kind == LevelKind::dense_fixed, ShapeError, "einsum '", s.text, "': the result is dense; ",
                    "the output (", o.description(), ") must be a dense Tensor");
  detail::einsum_check_extents(s, views, &o);
  plan->kernel->call(detail::einsum_args(views, std::move(o)));
}
template <class Out, class... Ops>
void einsum_into(std::string_view subscripts, Out&& out, Ops&&... ops) {
  einsum_into(runtime::default_runtime(), subscripts, std::forward<Out>(out), std::forward<Ops>(ops)...);
}

// What einsum does for these operands: the plan's choices, then the kernel's explain().
template <class... Ops>
std::string einsum_explain(runtime::Runtime& rt, std::string_view subscripts, Ops&&... ops) {
  static_assert(sizeof...(Ops) > 0, "spindle::einsum_explain: give at least one operand");
  std::vector<StorageView> views{storage_of(std::forward<Ops>(ops))...};
  auto plan = detail::einsum_plan(subscripts, views, views.front().dtype, rt);
  return plan->summary + plan->kernel->explain();
}
template <class... Ops>
std::string einsum_explain(std::string_view subscripts, Ops&&... ops) {
  return einsum_explain(runtime::default_runtime(), subscripts, std::forward<Ops>(ops)...);
}

}  // namespace spindle

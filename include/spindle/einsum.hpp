// spindle::einsum: tensor algebra by subscripts, for users who do not want to declare axes.
// Opt-in (not behind spindle.hpp, which keeps a user TU's compile time within its budget):
//   #include <spindle/einsum.hpp>
//
//   auto Y = spindle::einsum("ij,jk->ik", A, X).tensor();      // SpMM: A Csr, X Tensor
//   auto S = spindle::einsum("ij,ik,jk->ij", A, X, Y).csr();   // SDDMM: a Csr with A's pattern
//   spindle::einsum_into("ij,j->i", y, A, x);                  // SpMV into an existing y
//   std::cout << spindle::einsum_explain("ij,jk->ik", A, X);
//   spindle::einsum(runtime, "ij,jk->ik", A, X);               // with another runtime
//
// Operands are anything a kernel takes (tested: Csr, Tensor, Csf; views, Ragged, Bsr, Ell and
// Eigen pass the same level description, untested), all of one element type. The result is numpy's einsum of the operands
// (an absent sparse element is 0). Its format is inferred: a Csr with the pattern of the
// sparse operand that drives the iteration when the output subscripts are exactly that
// operand's (the result vanishes off it); a Csr whose pattern is assembled for a product of
// two CSR operands ("ij,jk->ik": Gustavson's SpGEMM, docs/language.md §4.6) and for an
// element-wise product of CSR operands ("ij,ij->ij": the intersection, one merge per row,
// §3.1) — a CSR operand these need by columns ("ij,kj->ik", "ji,jk->ik", a Csc, "ij->ji")
// is transposed first (einsum_transposed); a Csr assembled step by step for a product of
// three or more CSR operands ("ij,jk,kl->il", A Bᵀ C, (A .* B) C: EinsumPath::assembled_result)
// whose single statement would be dense; else a dense
// Tensor (rank 0 for "ij,ij->"). einsum_into writes the caller's output in its format.
// frontend/einsum.hpp turns the subscripts into the same stage-I IR a lambda records; the
// plan — driver, output format, compiled kernel — is built once per (subscripts, operand
// formats, element type) and kept by the runtime, so a repeated call only checks its
// operands and runs. docs/einsum.md has the rules.
#pragma once

#include <cctype>

#include <array>
#include <charconv>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "spindle/format/csr.hpp"
#include "spindle/format/storage_of.hpp"
#include "spindle/format/tensor.hpp"
#include "spindle/format/transpose.hpp"
#include "spindle/autosched/einsum_path.hpp"
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
  // A sparse product (einsum_product_form): the result's pattern is assembled.
  EinsumProduct product;
  DType product_index = DType::i32;  // the index type of its result
  std::shared_ptr<const runtime::AssembledKernel> assembled;
  std::string summary;  // "# einsum: ..." lines for explain

  std::string explain() const { return summary + (assembled ? assembled->explain() : kernel->explain()); }
};

// The parsed subscripts and the plans of one runtime (kept by it: Runtime::attached).
struct EinsumPlans {
  std::mutex mutex;
  std::unordered_map<std::string, std::shared_ptr<const EinsumSpec>> specs;  // "subscripts#operands"
  std::unordered_map<std::string, std::shared_ptr<const EinsumPlan>> by_key;
  // Factorisations by (subscripts, formats, extents, stored counts): planning is a dynamic
  // program over operand subsets, so repeated calls on the same shapes look it up. Cleared
  // when it grows past kMaxPaths (a caller sweeping many shapes).
  std::unordered_map<std::string, std::shared_ptr<const autosched::EinsumPath>> paths;
  static constexpr std::size_t kMaxPaths = 4096;
};

inline EinsumPlans& einsum_plans(runtime::Runtime& rt) {
  return *rt.attached<EinsumPlans>("spindle::einsum", [] { return std::make_shared<EinsumPlans>(); });
}

// parse_einsum, remembered per (subscripts, operand count): a repeated call does not parse.
inline std::shared_ptr<const EinsumSpec> einsum_parsed(EinsumPlans& plans, std::string_view text,
                                                       std::size_t operands) {
  // The key is built in a buffer kept per thread: a cached call allocates nothing here.
  thread_local std::string key;
  key.assign(text);
  key += '#';
  char digits[24];
  const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, operands);
  (void)ec;
  key.append(digits, end);
  {
    std::lock_guard<std::mutex> lock(plans.mutex);
    if (auto it = plans.specs.find(key); it != plans.specs.end()) return it->second;
  }
  auto spec = std::make_shared<const EinsumSpec>(parse_einsum(text, operands));  // throws on bad subscripts
  std::lock_guard<std::mutex> lock(plans.mutex);
  return plans.specs.emplace(key, std::move(spec)).first->second;
}

inline std::string einsum_operand_name(const EinsumSpec& s, std::size_t o, const StorageView& v) {
  return message("operand ", o, " ('", s.inputs[o], "', ", v.description(), ")");
}

// Every subscript has one extent: ShapeError naming the subscript and both places.
// `out` (einsum_into) is checked too. Messages are built only on a mismatch.
inline void einsum_check_extents(const EinsumSpec& s, const std::vector<StorageView>& views, const StorageView* out) {
  // (subscript, extent) pairs: a statement has a handful of distinct subscripts.
  char subscript[64];  // (left uninitialised: only the first `known` are read)
  std::int64_t extent[64];
  std::size_t known = 0;
  auto where = [&](char c) -> std::string {  // the first place subscript c appears
    for (std::size_t o = 0; o < views.size(); ++o)
      if (auto l = s.inputs[o].find(c); l != std::string::npos)
        return message(einsum_operand_name(s, o, views[o]), " axis ", l);
    return "?";
  };
  auto visit = [&](char c, std::int64_t length, auto&& here) {
    std::size_t k = 0;
    while (k < known && subscript[k] != c) ++k;
    if (k == known) {
      SPINDLE_INTERNAL_CHECK(known < 64, "einsum", "more than 64 distinct subscripts");
      subscript[known] = c;
      extent[known++] = length;
      return;
    }
    const std::int64_t e = extent[k];
    SPINDLE_CHECK(e == length, ShapeError, "einsum '", s.text, "': subscript '", std::string(1, c), "' has extent ", e,
                  " in ", where(c), " but ", length, " in ", here());
  };
  for (std::size_t o = 0; o < views.size(); ++o)
    for (std::size_t l = 0; l < s.inputs[o].size(); ++l)
      visit(s.inputs[o][l], views[o].levels[l].length,
            [&] { return message(einsum_operand_name(s, o, views[o]), " axis ", l); });
  if (out && !s.output.empty())
    for (std::size_t l = 0; l < s.output.size(); ++l)
      visit(s.output[l], out->levels[l].length,
            [&] { return message("the output (", out->description(), ") axis ", l); });
}

// The operands against the subscripts: host memory, one element type, one subscript per
// axis, one extent per subscript.
inline void einsum_check_operands(const EinsumSpec& s, const std::vector<StorageView>& views, DType dtype) {
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
  }
  einsum_check_extents(s, views, nullptr);
}

inline bool einsum_view_is_csr(const StorageView& v) {
  return v.levels.size() == 2 && v.levels[0].kind == LevelKind::dense_fixed &&
         v.levels[1].kind == LevelKind::sparse_variable;
}

// A statement rewritten over transposed copies of some CSR operands (einsum_transposed_form:
// A Bᵀ, Aᵀ B, A .* Bᵀ, the transpose of a CSR): its subscripts, its operands (the copies in
// place of the transposed ones) and the copies themselves. `spec` is null when the statement
// needs no transpose.
template <class T>
struct EinsumTransposed {
  std::shared_ptr<const EinsumSpec> spec;
  std::vector<StorageView> views;
  std::vector<std::variant<Csr<T, std::int32_t>, Csr<T, std::int64_t>>> copies;
  std::string summary;  // "# einsum: operand 1 transposed first ..." for explain
};

template <class T>
EinsumTransposed<T> einsum_transposed(EinsumPlans& plans, const EinsumSpec& s, const std::vector<StorageView>& views,
                                      bool assemble) {
  EinsumTransposed<T> t;
  if (s.output.size() != 2) return t;  // every form has a matrix result
  const auto form = einsum_transposed_form(
      s.inputs, s.output, [&](std::size_t o) { return einsum_view_is_csr(views[o]); }, assemble);
  if (!form.found()) return t;
  t.copies.reserve(views.size());
  t.views = views;
  std::string which;
  for (std::size_t o = 0; o < views.size(); ++o) {
    if (!form.transpose[o]) continue;
    const StorageView& v = views[o];
    const LevelView& l = v.levels[1];
    auto copy = [&](auto index) {
      using Index = decltype(index);
      auto tr = transpose<T, Index>(v.levels[0].length, l.length, static_cast<const Index*>(l.indptr),
                                    static_cast<const Index*>(l.indices), static_cast<const T*>(v.data));
      t.copies.emplace_back(std::move(tr.matrix));
      t.views[o] = std::get<Csr<T, Index>>(t.copies.back()).storage();
    };
    if (l.index_dtype == DType::i64)
      copy(std::int64_t{});
    else
      copy(std::int32_t{});
    which += message(which.empty() ? "" : " and ", "operand ", o, " ('", s.inputs[o], "' -> '", form.inputs[o], "')");
  }
  t.spec = einsum_parsed(plans, form.spec(), views.size());
  t.summary = message("# einsum '", s.text, "': ", which,
                      " transposed first (a counting sort, O(rows + cols + nnz) each), then '", t.spec->text, "'\n");
  return t;
}

// The plan for checked operands: looked up by (subscripts, element type, driver, level kinds
// and index types); built and compiled on a miss. `assemble`: a sparse product may assemble
// its result's pattern (einsum; einsum_into writes the caller's dense output instead).
inline std::shared_ptr<const EinsumPlan> einsum_plan_for(EinsumPlans& plans, const EinsumSpec& s,
                                                         const std::vector<StorageView>& views, DType dtype,
                                                         runtime::Runtime& rt, bool assemble = true) {
  const int driver = choose_einsum_driver_by(
      s, [&](std::size_t o, std::size_t l) { return views[o].levels[l].kind; },
      [&](std::size_t o) { return views[o].value_count; });
  thread_local std::string key;  // kept per thread: a cached call allocates nothing here
  key.clear();
  key += s.text;
  key += '|';
  key += static_cast<char>('A' + static_cast<int>(dtype));
  key += static_cast<char>('A' + driver + 1);
  key += assemble ? '+' : '-';
  for (const auto& v : views) {
    key += '|';
    for (const auto& l : v.levels) {
      key += static_cast<char>('0' + static_cast<int>(l.kind));
      key += static_cast<char>('a' + static_cast<int>(l.index_dtype));
    }
  }
  std::lock_guard<std::mutex> lock(plans.mutex);
  if (auto it = plans.by_key.find(key); it != plans.by_key.end() && it->second) return it->second;
  auto& slot = plans.by_key[key];
  std::vector<EinsumOperandFormat> formats;
  for (const auto& v : views) formats.push_back(einsum_format_of(v));
  auto plan = std::make_shared<EinsumPlan>();
  plan->spec = s;
  plan->product = einsum_product_form(s.inputs, s.output, formats);
  if (plan->product.found() && !assemble) {  // the caller's dense output: Gustavson into it
    plan->kernel = std::make_shared<const runtime::CompiledKernel>(
        build_einsum_product_function(s, formats, dtype, plan->product, /*assembled_output=*/false), rt);
    plan->summary = message("# einsum '", s.text, "' -> '", s.output, "': a product of two CSR operands (operand ",
                            plan->product.left, " by rows, operand ", plan->product.right,
                            "'s row at each of its columns: Gustavson)\n# einsum output: dense Tensor [", s.output,
                            "]\n");
    plan->product = {};
    slot = plan;
    return plan;
  }
  if (plan->product.found()) {
    ir::Function f = build_einsum_product_function(s, formats, dtype, plan->product);
    plan->assembled = std::make_shared<const runtime::AssembledKernel>(f, rt);
    plan->product_index = f.buffers.back().buffer->axes[1]->index_dtype;
    plan->summary = message("# einsum '", s.text, "' -> '", s.output, "': a product of two CSR operands (operand ",
                            plan->product.left, " by rows, operand ", plan->product.right,
                            "'s row at each of its columns: Gustavson)\n# einsum output: Csr<",
                            dtype_name(dtype), ", ", dtype_name(plan->product_index),
                            "> whose pattern is assembled (a symbolic and a numeric phase, docs/language.md §4.6)\n");
    slot = plan;
    return plan;
  }
  if (assemble && einsum_intersection_form(s.inputs, s.output, formats)) {
    ir::Function f = build_einsum_intersection_function(s, formats, dtype);
    plan->assembled = std::make_shared<const runtime::AssembledKernel>(f, rt);
    plan->product_index = f.buffers.back().buffer->axes[1]->index_dtype;
    plan->summary = message("# einsum '", s.text, "' -> '", s.output, "': an element-wise product of ",
                            s.inputs.size(), " CSR operands: one merge per row over the intersection of their "
                            "columns (intersection_of, docs/language.md §3.1; no search)\n# einsum output: Csr<",
                            dtype_name(dtype), ", ", dtype_name(plan->product_index),
                            "> whose pattern is the intersection, appended in column order (docs/language.md §4.6)\n");
    slot = plan;
    return plan;
  }
  const bool sparse_output = einsum_sparse_output(s, formats, driver);
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

// Parses (cached), checks the operands and returns the plan for them.
inline std::shared_ptr<const EinsumPlan> einsum_plan(std::string_view text, const std::vector<StorageView>& views,
                                                     DType dtype, runtime::Runtime& rt, bool assemble = true) {
  auto& plans = einsum_plans(rt);
  auto s = einsum_parsed(plans, text, views.size());
  einsum_check_operands(*s, views, dtype);
  return einsum_plan_for(plans, *s, views, dtype, rt, assemble);
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
  // Whether the result is a Csr with this index type.
  template <class Index>
  bool holds_csr() const {
    return std::holds_alternative<Csr<T, Index>>(value_);
  }

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

  // The result as a kernel argument (for the next statement of a factored einsum).
  StorageView storage() const {
    return std::visit([](const auto& v) { return v.storage(); }, value_);
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

// A sparse product's result: a fresh Csr whose pattern the kernel assembles.
template <class T, class Index>
EinsumResult<T> einsum_assembled_result(const std::vector<std::int64_t>& shape, std::vector<runtime::CallArg>& args,
                                        const runtime::AssembledKernel& k) {
  Csr<T, Index> c(shape.at(0), shape.at(1));
  args.back().view = c.storage();
  CsrAssembly<T, Index> target(c);
  k.call(args, target);
  return EinsumResult<T>(std::move(c));
}
}  // namespace detail

namespace detail {

// One statement over checked operands (no factorisation): the plan's kernel into a fresh result.
// `assemble`: a sparse product may return a Csr it assembles (not the final statement of a
// factored einsum, whose format is the single statement's).
template <class T>
EinsumResult<T> einsum_statement(runtime::Runtime& rt, EinsumPlans& plans, const EinsumSpec& s,
                                 const std::vector<StorageView>& views, bool assemble = true) {
  if (auto t = einsum_transposed<T>(plans, s, views, assemble); t.spec)
    return einsum_statement<T>(rt, plans, *t.spec, t.views, assemble);  // the result owns its arrays
  auto plan = einsum_plan_for(plans, s, views, dtype_v<T>, rt, assemble);
  auto args = einsum_args(views, StorageView{});
  if (plan->assembled) {
    auto shape = einsum_output_shape(s, views);
    if (plan->product_index == DType::i64) return einsum_assembled_result<T, std::int64_t>(shape, args, *plan->assembled);
    return einsum_assembled_result<T, std::int32_t>(shape, args, *plan->assembled);
  }
  if (plan->sparse_output) {
    const StorageView& d = views[static_cast<std::size_t>(plan->driver)];
    if (d.levels[1].index_dtype == DType::i64) return einsum_sparse_result<T, std::int64_t>(d, args, *plan->kernel);
    return einsum_sparse_result<T, std::int32_t>(d, args, *plan->kernel);
  }
  auto shape = einsum_output_shape(s, views);
  Tensor<T> out = Tensor<T>::zeros(shape);
  if (shape.empty()) shape.push_back(1);  // a scalar result: the kernel writes a one-element vector
  args.back().view = TensorView<T>(out.data(), shape).storage();
  plan->kernel->call(args);
  return EinsumResult<T>(std::move(out));
}

// One statement over checked operands into the caller's output, checked first (nothing is
// written on an error; a wrong output compiles nothing). `checked`: the output's element type,
// rank and extents were checked against the caller's subscripts (a statement rewritten over
// transposed operands).
template <class T>
void einsum_statement_into(runtime::Runtime& rt, EinsumPlans& plans, const EinsumSpec& s,
                           const std::vector<StorageView>& views, StorageView o, bool checked = false) {
  if (!checked) {
    SPINDLE_CHECK(o.dtype == views.front().dtype, DTypeError, "einsum '", s.text, "': the output (", o.description(),
                  ") holds ", dtype_name(o.dtype), " but the operands hold ", dtype_name(views.front().dtype));
    const std::size_t rank = s.output.empty() ? 1 : s.output.size();
    SPINDLE_CHECK(o.levels.size() == rank, ShapeError, "einsum '", s.text, "': the output (", o.description(),
                  ") has ", o.levels.size(), " axes but the result has ", rank,
                  s.output.empty() ? " (a scalar result goes into a one-element vector)" : "");
    if (s.output.empty())
      SPINDLE_CHECK(o.levels[0].length == 1, ShapeError, "einsum '", s.text, "': a scalar result goes into a "
                    "one-element vector, not ", o.description());
    einsum_check_extents(s, views, &o);
  }
  auto check_dense_output = [&] {
    for (const auto& l : o.levels)
      SPINDLE_CHECK(l.kind == LevelKind::dense_fixed, ShapeError, "einsum '", s.text, "': the result is dense; ",
                    "the output (", o.description(), ") must be a dense Tensor");
  };
  if (auto t = einsum_transposed<T>(plans, s, views, /*assemble=*/false); t.spec) {
    check_dense_output();  // a product into a dense output
    return einsum_statement_into<T>(rt, plans, *t.spec, t.views, std::move(o), /*checked=*/true);
  }
  auto plan = einsum_plan_for(plans, s, views, views.front().dtype, rt, /*assemble=*/false);
  if (plan->sparse_output)
    SPINDLE_CHECK(o.levels[1].kind == LevelKind::sparse_variable, ShapeError, "einsum '", s.text,
                  "': the result is sparse with the pattern of operand ", plan->driver, "; the output (",
                  o.description(), ") must be a Csr with that pattern");
  else
    check_dense_output();
  plan->kernel->call(einsum_args(views, std::move(o)));
}

// The factorisation of this call for checked operands (autosched/einsum_path.hpp): no steps
// = one statement. Two operands or fewer are always one statement.
inline autosched::EinsumPath einsum_path(const EinsumSpec& s, const std::vector<StorageView>& views,
                                        runtime::Runtime& rt) {
  if (views.size() < 3 || rt.options().einsum_single) return {};  // SPINDLE_EINSUM_PATH=single
  std::string key = s.text;
  for (const auto& v : views) {
    key += '|';
    key += std::to_string(v.value_count);
    for (const auto& l : v.levels) {
      key += static_cast<char>('0' + static_cast<int>(l.kind));
      key += std::to_string(l.length);
    }
  }
  auto& plans = einsum_plans(rt);
  {
    std::lock_guard<std::mutex> lock(plans.mutex);
    if (auto it = plans.paths.find(key); it != plans.paths.end()) return *it->second;
  }
  std::vector<autosched::EinsumOperandInfo> infos;
  for (const auto& v : views) {
    autosched::EinsumOperandInfo info;
    info.format = einsum_format_of(v);
    for (const auto& l : v.levels) info.extents.push_back(l.length);
    info.stored = v.value_count;
    infos.push_back(std::move(info));
  }
  auto path = std::make_shared<const autosched::EinsumPath>(autosched::plan_einsum_path(s, infos));
  std::lock_guard<std::mutex> lock(plans.mutex);
  if (plans.paths.size() >= EinsumPlans::kMaxPaths) plans.paths.clear();
  plans.paths.emplace(std::move(key), path);
  return *path;
}

// Runs the path's steps but the last; returns the spec and views of the last one.
template <class T>
std::vector<StorageView> einsum_run_steps(runtime::Runtime& rt, EinsumPlans& plans, const autosched::EinsumPath& path,
                                          const std::vector<StorageView>& views,
                                          std::vector<EinsumResult<T>>& results) {
  const int n = static_cast<int>(views.size());
  auto view_of = [&](int id) {
    return id < n ? views[static_cast<std::size_t>(id)] : results[static_cast<std::size_t>(id - n)].storage();
  };
  for (std::size_t k = 0; k + 1 < path.steps.size(); ++k) {
    std::vector<StorageView> in;
    for (int id : path.steps[k].operands) in.push_back(view_of(id));
    auto s = einsum_parsed(plans, path.steps[k].spec, in.size());
    einsum_check_operands(*s, in, in.front().dtype);
    results.push_back(einsum_statement<T>(rt, plans, *s, in));
  }
  std::vector<StorageView> last;
  for (int id : path.steps.back().operands) last.push_back(view_of(id));
  return last;
}

// Runs every step of a factored einsum into a fresh result; `assemble`: the last statement may
// assemble a Csr (EinsumPath::assembled_result).
template <class T>
EinsumResult<T> einsum_run_path(runtime::Runtime& rt, EinsumPlans& plans, const autosched::EinsumPath& path,
                                const std::vector<StorageView>& views, bool assemble) {
  std::vector<EinsumResult<T>> results;
  auto last = einsum_run_steps<T>(rt, plans, path, views, results);
  auto ls = einsum_parsed(plans, path.steps.back().spec, last.size());
  einsum_check_operands(*ls, last, dtype_v<T>);
  return einsum_statement<T>(rt, plans, *ls, last, assemble);
}

// A Csc operand is stored by columns (a dense column level over compressed rows) but its
// subscripts name the matrix's row, then column, as for any matrix: they are swapped here so
// that everything after sees them in stored order. Only an operand of exactly two subscripts
// is swapped; anything else is left for parse_einsum to report.
inline std::string storage_order_subscripts(std::string_view text, const std::vector<StorageView>& views) {
  std::string out(text);
  const std::size_t arrow = out.find("->");
  const std::size_t end = arrow == std::string::npos ? out.size() : arrow;
  std::size_t operand = 0;
  std::size_t letters[2] = {0, 0}, count = 0;  // an operand's first two subscripts, and how many it has
  auto finish = [&] {
    if (operand < views.size() && std::string_view(views[operand].kind) == "Csc" && count == 2)
      std::swap(out[letters[0]], out[letters[1]]);
    count = 0;
    ++operand;
  };
  for (std::size_t q = 0; q < end; ++q) {
    if (out[q] == ',') {
      finish();
    } else if (std::isalpha(static_cast<unsigned char>(out[q]))) {
      if (count < 2) letters[count] = q;
      ++count;
    }
  }
  finish();
  return out;
}

template <class T>
EinsumResult<T> einsum_views(runtime::Runtime& rt, std::string_view written, const std::vector<StorageView>& views) {
  const std::string stored = storage_order_subscripts(written, views);
  const std::string_view subscripts = stored;
  auto& plans = einsum_plans(rt);
  auto s = einsum_parsed(plans, subscripts, views.size());
  einsum_check_operands(*s, views, dtype_v<T>);
  const auto path = einsum_path(*s, views, rt);
  if (path.steps.empty()) return einsum_statement<T>(rt, plans, *s, views);
  return einsum_run_path<T>(rt, plans, path, views, /*assemble=*/path.assembled_result);
}

// A product of CSR operands that einsum assembles as a Csr (EinsumPath::assembled_result),
// written into the caller's dense output: checked before anything runs, then every element
// written (zeros off the result's pattern).
template <class T>
void einsum_assembled_into(runtime::Runtime& rt, const EinsumSpec& s, const std::vector<StorageView>& views,
                           const autosched::EinsumPath& path, StorageView o) {
  SPINDLE_CHECK(o.dtype == dtype_v<T>, DTypeError, "einsum '", s.text, "': the output (", o.description(),
                ") holds ", dtype_name(o.dtype), " but the operands hold ", dtype_name(dtype_v<T>));
  SPINDLE_CHECK(o.levels.size() == 2 && o.levels[0].kind == LevelKind::dense_fixed &&
                    o.levels[1].kind == LevelKind::dense_fixed && o.writable,
                ShapeError, "einsum '", s.text, "': a product of CSR operands goes into a writable dense ",
                "matrix (einsum returns it as a Csr); the output is ", o.description());
  einsum_check_extents(s, views, &o);
  EinsumResult<T> r = einsum_run_path<T>(rt, einsum_plans(rt), path, views, /*assemble=*/true);
  T* out = static_cast<T*>(o.data);
  const std::int64_t cols = o.levels[1].length;
  std::fill(out, out + o.levels[0].length * cols, T(0));
  auto scatter = [&](const auto& c) {
    for (std::int64_t i = 0; i < c.rows(); ++i) {
      auto idx = c.row_indices(i);
      auto val = c.row_values(i);
      for (std::size_t q = 0; q < idx.size(); ++q) out[i * cols + static_cast<std::int64_t>(idx[q])] = val[q];
    }
  };
  if (!r.is_sparse()) {  // a last statement the planner costed as sparse but ran dense: the same values
    const Tensor<T>& t = r.tensor();
    std::copy(t.values().begin(), t.values().end(), out);
  } else if (r.template holds_csr<std::int32_t>()) {
    scatter(r.template csr<std::int32_t>());
  } else {
    scatter(r.template csr<std::int64_t>());
  }
}

template <class T>
void einsum_into_views(runtime::Runtime& rt, std::string_view written, const std::vector<StorageView>& views,
                       StorageView out) {
  const std::string stored = storage_order_subscripts(written, views);
  const std::string_view subscripts = stored;
  auto& plans = einsum_plans(rt);
  auto s = einsum_parsed(plans, subscripts, views.size());
  einsum_check_operands(*s, views, views.front().dtype);
  const auto path = einsum_path(*s, views, rt);
  if (path.steps.empty()) return einsum_statement_into<T>(rt, plans, *s, views, std::move(out));
  if (path.assembled_result) return einsum_assembled_into<T>(rt, *s, views, path, std::move(out));
  std::vector<EinsumResult<T>> results;
  auto last = einsum_run_steps<T>(rt, plans, path, views, results);
  auto ls = einsum_parsed(plans, path.steps.back().spec, last.size());
  einsum_check_operands(*ls, last, last.front().dtype);
  einsum_statement_into<T>(rt, plans, *ls, last, std::move(out));
}

// What one statement's plan does (explain), the transposes of einsum_transposed first.
template <class T>
std::string einsum_statement_explain(runtime::Runtime& rt, std::string_view text, const std::vector<StorageView>& views,
                                     bool assemble = true) {
  auto& plans = einsum_plans(rt);
  auto s = einsum_parsed(plans, text, views.size());
  einsum_check_operands(*s, views, dtype_v<T>);
  if (auto t = einsum_transposed<T>(plans, *s, views, assemble); t.spec)
    return t.summary + einsum_plan_for(plans, *t.spec, t.views, dtype_v<T>, rt, assemble)->explain();
  return einsum_plan_for(plans, *s, views, dtype_v<T>, rt, assemble)->explain();
}

inline std::string einsum_path_summary(const EinsumSpec& s, const autosched::EinsumPath& path) {
  if (path.steps.empty())
    return message("# einsum '", s.text, "': one statement",
                   path.single_cost > 0 ? message(" (estimated cost ", path.single_cost, ")") : std::string(), "\n");
  std::string text = message("# einsum '", s.text, "': factored into ", path.steps.size(),
                             " statements (estimated cost ", path.cost, " vs ", path.single_cost,
                             " as one statement; autosched/einsum_path.hpp):\n");
  const std::size_t n = s.inputs.size();
  for (std::size_t k = 0; k < path.steps.size(); ++k) {
    const auto& st = path.steps[k];
    text += message("#   t", k, " = '", st.spec, "' of");
    for (int id : st.operands)
      text += static_cast<std::size_t>(id) < n ? message(" operand ", id) : message(" t", static_cast<std::size_t>(id) - n);
    text += message(st.sparse_result ? " (a Csr)" : " (dense)", ", cost ", st.cost, "\n");
  }
  return text;
}

template <class T>
struct einsum_element {
  using type = std::remove_const_t<typename arg_element<std::remove_cvref_t<T>>::type>;
};

}  // namespace detail

// einsum(subscripts, operands...): the result in the inferred format (see the top of this file).
template <class First, class... Rest>
auto einsum(runtime::Runtime& rt, std::string_view subscripts, First&& first, Rest&&... rest) {
  using T = typename detail::einsum_element<First>::type;
  static_assert(!std::is_void_v<T>, "spindle::einsum: the first operand's type must say its element type");
  return detail::einsum_views<T>(rt, subscripts,
                                 {storage_of(std::forward<First>(first)), storage_of(std::forward<Rest>(rest))...});
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
  using T = typename detail::einsum_element<Out>::type;
  static_assert(!std::is_void_v<T>, "spindle::einsum_into: the output's type must say its element type");
  detail::einsum_into_views<T>(rt, subscripts, {storage_of(std::forward<Ops>(ops))...},
                               storage_of(std::forward<Out>(out)));
}
template <class Out, class... Ops>
void einsum_into(std::string_view subscripts, Out&& out, Ops&&... ops) {
  einsum_into(runtime::default_runtime(), subscripts, std::forward<Out>(out), std::forward<Ops>(ops)...);
}

// What einsum does for these operands: the factorisation, then per statement the plan's
// choices and the kernel's explain().
template <class... Ops>
std::string einsum_explain(runtime::Runtime& rt, std::string_view written, Ops&&... ops) {
  static_assert(sizeof...(Ops) > 0, "spindle::einsum_explain: give at least one operand");
  std::vector<StorageView> views{storage_of(std::forward<Ops>(ops))...};
  const std::string stored = detail::storage_order_subscripts(written, views);
  const std::string_view subscripts = stored;
  const EinsumSpec s = parse_einsum(subscripts, views.size());
  detail::einsum_check_operands(s, views, views.front().dtype);
  const auto path = detail::einsum_path(s, views, rt);
  std::string text = detail::einsum_path_summary(s, path);
  using T = typename detail::einsum_element<std::tuple_element_t<0, std::tuple<Ops...>>>::type;
  if (path.steps.empty()) return text + detail::einsum_statement_explain<T>(rt, subscripts, views);
  // The steps' plans need their operands' formats: run them on these operands.
  std::vector<EinsumResult<T>> results;
  const int n = static_cast<int>(views.size());
  for (std::size_t k = 0; k < path.steps.size(); ++k) {
    std::vector<StorageView> in;
    for (int id : path.steps[k].operands)
      in.push_back(id < n ? views[static_cast<std::size_t>(id)] : results[static_cast<std::size_t>(id - n)].storage());
    const bool last = k + 1 == path.steps.size();
    text += message("## statement t", k, "\n") +
            detail::einsum_statement_explain<T>(rt, path.steps[k].spec, in,
                                                /*assemble=*/!last || path.assembled_result);
    if (k + 1 < path.steps.size()) {
      auto& plans = detail::einsum_plans(rt);
      results.push_back(detail::einsum_statement<T>(rt, plans, *detail::einsum_parsed(plans, path.steps[k].spec, in.size()), in));
    }
  }
  return text;
}
template <class... Ops>
std::string einsum_explain(std::string_view subscripts, Ops&&... ops) {
  return einsum_explain(runtime::default_runtime(), subscripts, std::forward<Ops>(ops)...);
}

}  // namespace spindle

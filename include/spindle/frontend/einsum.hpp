// The einsum front end (Scorch's interface, seed 001): a subscript string and the storage
// formats of the operands in, a stage-I function out — the same IR a lambda would record,
// so the same passes, engines, cache and reference interpreter apply.
//
//   "ij,jk->ik"  A (Csr), X (Tensor)   ->  out[I, K] += A[I, J] * X[dense<J>, K]   (SpMM)
//   "ij,ik,jk->ij" A (Csr), X, Y       ->  out[I, J] += A[I, J] * X[I, K] * Y[dense<J>, K]   (SDDMM)
//
// What is computed is numpy's einsum: the output element at the output subscripts' values is
// the sum, over every value of the other subscripts, of the product of the operands' elements
// (an absent sparse element is 0). How (docs/einsum.md):
//   * One sparse operand *drives*: its axes are iterated, so only its stored elements are
//     visited. Every product vanishes off its pattern, so nothing is lost. The caller picks
//     it (choose_einsum_driver: the sparse operand with the fewest stored elements).
//   * Every other subscript is a dense loop over its extent. Other sparse operands are read
//     at the iterators' coordinates (a search in the fiber; absent = 0): an intersection by
//     lookup, correct for any pattern.
//   * Dense operands index the driver's sparse subscripts through dense<X> axes, and share
//     one dense axis per subscript otherwise, so the binder checks their extents.
//   * The output is dense, or — when its subscripts are exactly the driver's, in order, and
//     the driver is a CSR — a CSR with the driver's pattern (the result vanishes off it).
// One top-level iteration over every subscript; order_iterations picks the loop order.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "spindle/format/storage.hpp"
#include "spindle/frontend/builder.hpp"
#include "spindle/ir/ops.hpp"
#include "spindle/support/error.hpp"

namespace spindle {

// A parsed subscript string: one subscript list per operand and the output's.
struct EinsumSpec {
  std::string text;                 // as given
  std::vector<std::string> inputs;  // e.g. {"ij", "jk"}
  std::string output;               // e.g. "ik"; "" for a scalar result
  bool explicit_output = false;     // "->" given
};

// The storage format of one operand, as far as the generated code depends on it.
struct EinsumOperandFormat {
  std::vector<LevelKind> levels;
  std::vector<DType> index_dtypes;
  std::string kind;  // the container kind (Csr, Tensor, ...)
};

inline EinsumOperandFormat einsum_format_of(const StorageView& v) {
  EinsumOperandFormat f;
  for (const auto& l : v.levels) {
    f.levels.push_back(l.kind);
    f.index_dtypes.push_back(l.index_dtype);
  }
  f.kind = v.kind;
  return f;
}

namespace detail {
inline bool einsum_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
}  // namespace detail

// Parses "ij,jk->ik" for `operands` operands. Spaces are ignored. Without "->" the output
// is every subscript that appears exactly once, in alphabetical (ASCII) order, as numpy
// does. UserError for anything else: a character that is not a letter, "...", a wrong
// number of operands, an empty operand, an output subscript repeated or absent from the
// inputs.
inline EinsumSpec parse_einsum(std::string_view text, std::size_t operands) {
  EinsumSpec s;
  s.text = std::string(text);
  auto fail = [&](const std::string& why) -> void {
    throw UserError(message("einsum '", s.text, "': ", why));
  };
  std::string t;
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c))) t += c;
  if (t.find("...") != std::string::npos)
    fail("broadcasting with '...' is not supported; name every subscript");
  std::string lhs = t, rhs;
  if (auto arrow = t.find("->"); arrow != std::string::npos) {
    s.explicit_output = true;
    lhs = t.substr(0, arrow);
    rhs = t.substr(arrow + 2);
    if (rhs.find("->") != std::string::npos) fail("'->' appears more than once");
  }
  std::string cur;
  for (std::size_t k = 0; k <= lhs.size(); ++k) {
    if (k == lhs.size() || lhs[k] == ',') {
      s.inputs.push_back(cur);
      cur.clear();
      continue;
    }
    if (!detail::einsum_letter(lhs[k]))
      fail(message("'", std::string(1, lhs[k]), "' at position ", k,
                   " is not a subscript; subscripts are the letters a-z and A-Z, operands are separated by ','"));
    cur += lhs[k];
  }
  if (s.inputs.size() != operands)
    fail(message("the subscripts name ", s.inputs.size(), " operand", s.inputs.size() == 1 ? "" : "s", " but ",
                 operands, " were given"));
  for (std::size_t o = 0; o < s.inputs.size(); ++o)
    if (s.inputs[o].empty())
      fail(message("operand ", o, " has no subscripts; every operand is a tensor with one subscript per axis"));
  std::map<char, int> count;
  for (const auto& in : s.inputs)
    for (char c : in) ++count[c];
  if (s.explicit_output) {
    for (std::size_t k = 0; k < rhs.size(); ++k) {
      char c = rhs[k];
      if (!detail::einsum_letter(c))
        fail(message("'", std::string(1, c), "' in the output is not a subscript (the letters a-z and A-Z)"));
      if (!count.count(c))
        fail(message("output subscript '", std::string(1, c), "' appears in no operand"));
      if (rhs.find(c) != k) fail(message("output subscript '", std::string(1, c), "' appears twice"));
    }
    s.output = rhs;
  } else {
    for (auto& [c, n] : count)
      if (n == 1) s.output += c;  // std::map: ASCII order
  }
  return s;
}

// The operand whose stored elements the kernel visits: the one with a compressed or ragged
// level under a dense root, no repeated subscript and the fewest stored elements; failing
// that, such an operand with a sparse root level (a SparseVector, a Dcsr); -1 when every
// operand is dense (then every subscript is a dense loop). A CSR drives before a sparse
// vector: `ij,j->i` visits A's entries and looks x up (O(nnz(A) log nnz(x))) rather than
// x's entries times every row. `kind_at(o, l)` is the kind of operand o's
// level l (one level per subscript), `stored(o)` its number of stored elements.
template <class KindAt, class Stored>
int choose_einsum_driver_by(const EinsumSpec& s, KindAt&& kind_at, Stored&& stored) {
  int best = -1;
  for (int pass = 0; pass < 2 && best < 0; ++pass)
    for (std::size_t o = 0; o < s.inputs.size(); ++o) {
      const std::string& in = s.inputs[o];
      bool nested = false;
      for (std::size_t l = 1; l < in.size(); ++l) nested = nested || kind_at(o, l) != LevelKind::dense_fixed;
      const bool fits = pass == 0 ? nested && kind_at(o, 0) == LevelKind::dense_fixed
                                  : kind_at(o, 0) == LevelKind::sparse_fixed;
      if (!fits) continue;
      bool repeated = false;
      for (std::size_t l = 0; l < in.size(); ++l) repeated = repeated || in.find(in[l]) != l;
      if (repeated) continue;
      if (best < 0 || stored(o) < stored(static_cast<std::size_t>(best))) best = static_cast<int>(o);
    }
  return best;
}

inline int choose_einsum_driver(const EinsumSpec& s, const std::vector<EinsumOperandFormat>& formats,
                                const std::vector<std::int64_t>& stored) {
  return choose_einsum_driver_by(
      s, [&](std::size_t o, std::size_t l) { return formats[o].levels[l]; }, [&](std::size_t o) { return stored[o]; });
}

// True when the result is a CSR with the driver's pattern: the output subscripts are the
// driver's, in order, and the driver is a CSR (a dense row level and a compressed one).
inline bool einsum_sparse_output(const EinsumSpec& s, const std::vector<EinsumOperandFormat>& formats, int driver) {
  if (driver < 0) return false;
  const auto& f = formats[static_cast<std::size_t>(driver)];
  return s.output == s.inputs[static_cast<std::size_t>(driver)] && f.levels.size() == 2 &&
         f.levels[0] == LevelKind::dense_fixed && f.levels[1] == LevelKind::sparse_variable;
}

// A sparse matrix product whose result's pattern is assembled (docs/language.md §4.6):
// exactly two CSR operands, "ab,bc->ac" (in either operand order) with three distinct
// subscripts. `left` is the operand over (a, b), `right` the one over (b, c).
struct EinsumProduct {
  int left = -1, right = -1;
  bool found() const { return left >= 0; }
};

inline bool einsum_is_csr(const EinsumOperandFormat& f) {
  return f.levels.size() == 2 && f.levels[0] == LevelKind::dense_fixed && f.levels[1] == LevelKind::sparse_variable;
}

// The product form for subscripts `inputs` -> `output` over operands of formats `formats`;
// with `any_order` the output may list its two subscripts in either order (an intermediate
// of a factored einsum, whose order the planner chooses: then it is (a, c)).
inline EinsumProduct einsum_product_form(const std::vector<std::string>& inputs, const std::string& output,
                                         const std::vector<EinsumOperandFormat>& formats, bool any_order = false) {
  if (inputs.size() != 2 || output.size() != 2 || !einsum_is_csr(formats[0]) || !einsum_is_csr(formats[1]))
    return {};
  for (int l = 0; l < 2; ++l) {
    const std::string& x = inputs[static_cast<std::size_t>(l)];
    const std::string& y = inputs[static_cast<std::size_t>(1 - l)];
    if (x.size() != 2 || y.size() != 2) return {};
    const char a = x[0], b = x[1], c = y[1];
    if (y[0] != b || a == b || b == c || a == c) continue;
    if ((output[0] == a && output[1] == c) || (any_order && output[0] == c && output[1] == a)) return {l, 1 - l};
  }
  return {};
}

// The axis name of a subscript letter ('i' -> "I").
inline std::string einsum_axis_name(char c) {
  return std::string(1, static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
}

// Names the arguments of an einsum kernel: the operands "in0".."in{n-1}", then "out".
inline std::vector<std::string> einsum_argument_names(detail::KernelBuilder& b, std::size_t operands) {
  std::vector<std::string> names;
  for (std::size_t o = 0; o < operands; ++o) names.push_back("in" + std::to_string(o));
  names.push_back("out");
  b.set_names(names, operands + 1);
  return names;
}

// The stage-I function of a sparse product (einsum_product_form): Gustavson's row-by-row
// product, as a lambda would write it —
//   out(a, c) += left(a, b) * right(b, c)
// where right is over [dense<B>, K] (its row b is the fiber at b's coordinate, §3) and out
// is over [A, C] with C = assembled<A, K> (`assembled`), else over [A, dense<K>] (a dense
// result: the caller's einsum_into output, or the final statement of a factored einsum).
// Arguments: the two operands in order, then the output.
inline ir::Function build_einsum_product_function(const EinsumSpec& s, const std::vector<EinsumOperandFormat>& formats,
                                                  DType dtype, EinsumProduct pr, bool assembled_output = true) {
  SPINDLE_CHECK(pr.found() && formats.size() == 2, InternalError, "einsum '", s.text, "': not a sparse product");
  const auto l = static_cast<std::size_t>(pr.left), r = static_cast<std::size_t>(pr.right);
  detail::KernelBuilder b("einsum", ir::SourceLoc{"einsum", 0});
  einsum_argument_names(b, 2);
  const char ca = s.inputs[l][0], cb = s.inputs[l][1], cc = s.inputs[r][1];
  const DType li = formats[l].index_dtypes[1], ri = formats[r].index_dtypes[1];
  const DType out_index = li == DType::i64 || ri == DType::i64 ? DType::i64 : DType::i32;
  ir::Axis rows = b.new_axis(einsum_axis_name(ca), ir::AxisKind::dense_fixed, nullptr, DType::i32);
  ir::Axis inner = b.new_axis(einsum_axis_name(cb), ir::AxisKind::sparse_variable, rows, li);
  ir::Axis inner_rows = b.new_dense_view("dense_" + inner->name, inner);
  ir::Axis cols = b.new_axis(einsum_axis_name(cc), ir::AxisKind::sparse_variable, inner_rows, ri);
  ir::Axis out_cols;
  if (assembled_output) {
    out_cols = b.new_axis(einsum_axis_name(cc) + "_out", ir::AxisKind::sparse_variable, rows, out_index, dynamic, dynamic, cols);
    const_cast<ir::AxisNode&>(*out_cols).assembled = true;  // built just above, not shared yet
  } else {
    out_cols = b.new_dense_view("dense_" + cols->name, cols);
  }

  ir::Var i = b.iterator_var(rows), j = b.iterator_var(inner), k = b.iterator_var(cols);
  std::vector<ir::Buffer> in(2);
  in[l] = b.add_buffer(dtype, {rows, inner}, ir::BufferRole::input, static_cast<int>(l));
  in[r] = b.add_buffer(dtype, {inner_rows, cols}, ir::BufferRole::input, static_cast<int>(r));
  ir::Buffer out = b.add_buffer(dtype, {rows, out_cols}, ir::BufferRole::output, 2);
  ir::Expr product = ir::load(in[0], l == 0 ? std::vector<ir::Expr>{i, j} : std::vector<ir::Expr>{j, k}) *
                     ir::load(in[1], l == 1 ? std::vector<ir::Expr>{i, j} : std::vector<ir::Expr>{j, k});
  detail::KernelBuilder::Frame body;
  body.stmts.push_back(ir::reduce(out, {i, k}, ir::ReduceOp::add, product, b.loc()));
  ir::Stmt iteration = b.make_iteration("einsum", {rows, inner, cols}, {i, j, k}, std::move(body), b.loc());
  return b.finish(iteration);
}

// An element-wise product of CSR operands whose result's pattern is assembled: two or more
// CSR operands, all over the same two distinct subscripts "ab", and the output "ab" — the
// product vanishes wherever one operand does not store the element, so the result is the
// intersection of their patterns (Scorch's `A .* B`).
inline bool einsum_intersection_form(const std::vector<std::string>& inputs, const std::string& output,
                                     const std::vector<EinsumOperandFormat>& formats) {
  if (inputs.size() < 2 || output.size() != 2 || output[0] == output[1]) return false;
  for (std::size_t o = 0; o < inputs.size(); ++o)
    if (inputs[o] != output || !einsum_is_csr(formats[o])) return false;
  return true;
}

// A statement that becomes a sparse-result form (a product, an intersection, or a CSR's
// pattern) once some CSR operands are transposed — their two subscripts swapped and their
// arrays transposed by a counting sort (format/transpose.hpp), O(rows + cols + nnz) each:
//   "ij,kj->ik" (A Bᵀ), "ji,jk->ik" (Aᵀ B), "ji,kj->ik"        -> the product "ij,jk->ik";
//   "ij,ji->ij" (A .* Bᵀ, or a CSC operand next to a CSR)       -> the intersection "ij,ij->ij";
//   "ij->ji" of a CSR (the CSR -> CSC conversion)              -> "ji->ji", the transpose's pattern.
// Without it these read one operand by a search per element of another, O(nnz · extent · log).
// `is_csr(o)`: operand o is a CSR (dense rows over compressed columns). `assemble`: the
// result may be a Csr (einsum; einsum_into's dense output takes the product form only).
// `any_order`: the output may list its two subscripts in either order (an intermediate of a
// factored einsum); then the order needing fewer transposes is taken, and `output` says it.
struct EinsumTransposedForm {
  std::vector<bool> transpose;      // per operand
  std::vector<std::string> inputs;  // the subscripts after the transposes
  std::string output;
  bool found() const { return !inputs.empty(); }
  std::string spec() const {
    std::string t;
    for (std::size_t o = 0; o < inputs.size(); ++o) t += (o ? "," : "") + inputs[o];
    return t + "->" + output;
  }
};

template <class IsCsr>
EinsumTransposedForm einsum_transposed_form(const std::vector<std::string>& inputs, const std::string& output,
                                            IsCsr&& is_csr, bool assemble, bool any_order = false) {
  if (output.size() != 2 || output[0] == output[1] || inputs.empty() || inputs.size() > 8) return {};
  for (std::size_t o = 0; o < inputs.size(); ++o)
    if (inputs[o].size() != 2 || inputs[o][0] == inputs[o][1] || !is_csr(o)) return {};
  auto swapped = [](const std::string& x) { return std::string{x[1], x[0]}; };
  EinsumTransposedForm best;
  int fewest = 1 << 30;
  auto consider = [&](const std::string& out) {
    EinsumTransposedForm f;
    f.output = out;
    const char a = out[0], c = out[1];
    if (inputs.size() == 2 && inputs[0] != inputs[1] && inputs[0] != swapped(inputs[1])) {
      // A product: one shared subscript b; the operand holding a becomes (a, b), the other (b, c).
      for (std::size_t o = 0; o < 2; ++o) {
        const std::string& x = inputs[o];
        const bool has_a = x.find(a) != std::string::npos, has_c = x.find(c) != std::string::npos;
        if (has_a == has_c) return;  // both output subscripts, or neither
        const char b = x[0] == (has_a ? a : c) ? x[1] : x[0];
        if (b == a || b == c || inputs[1 - o].find(b) == std::string::npos) return;
        f.inputs.push_back(has_a ? std::string{a, b} : std::string{b, c});
      }
    } else {
      // One operand ("ab->ba") or an element-wise product: every operand over {a, c}.
      if (!assemble) return;
      for (const auto& x : inputs) {
        if (x != out && x != swapped(out)) return;
        f.inputs.push_back(out);
      }
    }
    int count = 0;
    for (std::size_t o = 0; o < inputs.size(); ++o) {
      f.transpose.push_back(f.inputs[o] != inputs[o]);
      count += f.transpose.back();
    }
    if (count == 0 || count >= fewest) return;  // nothing to transpose: not this form
    fewest = count;
    best = std::move(f);
  };
  consider(output);
  if (any_order) consider(swapped(output));
  return best;
}

// The stage-I function of an intersection (einsum_intersection_form), as a lambda writes it:
//   for_each<intersection_of<J0, J1, ...>>(j): out(i, j) = in0(i, j) * in1(i, j) * ...
// (docs/language.md §3.1: one merge of the rows' columns, no search), out over [A, C] with
// C = assembled<A, J0> (the append case of assemble_rows: no workspace, no sort). Its
// index type is the widest of the operands'. Arguments: the operands in order, then the output.
inline ir::Function build_einsum_intersection_function(const EinsumSpec& s,
                                                       const std::vector<EinsumOperandFormat>& formats, DType dtype) {
  const std::size_t n = s.inputs.size();
  SPINDLE_CHECK(einsum_intersection_form(s.inputs, s.output, formats), InternalError, "einsum '", s.text,
                "': not an element-wise product of CSR operands");
  detail::KernelBuilder b("einsum", ir::SourceLoc{"einsum", 0});
  const std::vector<std::string> arg_names = einsum_argument_names(b, n);
  const char ca = s.output[0], cb = s.output[1];
  ir::Axis rows = b.new_axis(einsum_axis_name(ca), ir::AxisKind::dense_fixed, nullptr, DType::i32);
  std::vector<ir::Axis> cols;
  DType out_index = DType::i32;
  for (std::size_t o = 0; o < n; ++o) {
    const DType index = formats[o].index_dtypes[1];
    if (index == DType::i64) out_index = DType::i64;
    cols.push_back(b.new_axis(einsum_axis_name(cb) + (o ? std::to_string(o) : std::string()), ir::AxisKind::sparse_variable, rows,
                              index, dynamic, dynamic, o ? cols.front() : ir::Axis()));
  }
  ir::Axis merged = b.merged_axis("X", ir::MergeOp::intersection, cols);
  ir::Axis out_cols =
      b.new_axis(einsum_axis_name(cb) + "_out", ir::AxisKind::sparse_variable, rows, out_index, dynamic, dynamic, cols.front());
  const_cast<ir::AxisNode&>(*out_cols).assembled = true;  // built just above, not shared yet

  ir::Var i = b.iterator_var(rows), j = b.iterator_var(merged);
  std::vector<ir::Buffer> in;
  for (std::size_t o = 0; o < n; ++o)
    in.push_back(b.add_buffer(dtype, {rows, cols[o]}, ir::BufferRole::input, static_cast<int>(o)));
  ir::Buffer out = b.add_buffer(dtype, {rows, out_cols}, ir::BufferRole::output, static_cast<int>(n));
  ir::Expr product;
  for (std::size_t o = 0; o < n; ++o) {
    ir::Expr v = ir::load(in[o], {i, j});
    product = product.defined() ? product * v : v;
  }
  detail::KernelBuilder::Frame inner;
  inner.stmts.push_back(ir::store(out, {i, j}, product, b.loc()));
  detail::KernelBuilder::Frame outer;
  outer.stmts.push_back(b.make_iteration("einsum_merge", {merged}, {j}, std::move(inner), b.loc()));
  ir::Stmt iteration = b.make_iteration("einsum", {rows}, {i}, std::move(outer), b.loc());
  return b.finish(iteration);
}

// The stage-I function of an einsum. Arguments: the operands in order, then the output
// (dense over the output subscripts; the driver's CSR pattern when `sparse_output`; a
// one-element vector for a scalar result).
inline ir::Function build_einsum_function(const EinsumSpec& s, const std::vector<EinsumOperandFormat>& formats,
                                          DType dtype, int driver, bool sparse_output) {
  const std::size_t n = s.inputs.size();
  SPINDLE_CHECK(formats.size() == n, InternalError, "einsum: ", formats.size(), " formats for ", n, " operands");
  detail::KernelBuilder b("einsum", ir::SourceLoc{"einsum", 0});
  const std::vector<std::string> arg_names = einsum_argument_names(b, n);

  auto axis_kind = [](LevelKind k) { return static_cast<ir::AxisKind>(static_cast<int>(k)); };
  static_assert(static_cast<int>(LevelKind::sparse_variable) == static_cast<int>(ir::AxisKind::sparse_variable));

  std::map<char, ir::Axis> driven;      // subscript -> the driver's axis for it
  std::map<char, ir::Axis> dense_axis;  // subscript -> the dense axis dense operands use for it
  std::vector<std::vector<ir::Axis>> operand_axes(n);
  auto level_axis = [&](std::size_t o, std::size_t l, const std::string& base, std::vector<ir::Axis>& chain) {
    LevelKind k = formats[o].levels[l];
    if (k == LevelKind::dense_fixed) return b.new_axis(base, ir::AxisKind::dense_fixed, nullptr, DType::i32);
    // An outermost level is dense or a sparse root (sparse_fixed: a SparseVector, a Dcsr's rows).
    SPINDLE_CHECK(l > 0 || k == LevelKind::sparse_fixed, UserError, "einsum '", s.text, "': operand ", o, " (",
                  formats[o].kind, ") has a ", level_kind_name(k),
                  " outermost level; an outermost level must be dense or a sparse root (sparse_fixed)");
    return b.new_axis(base, axis_kind(k), l > 0 ? chain[l - 1] : ir::Axis(), formats[o].index_dtypes[l]);
  };
  if (driver >= 0) {
    auto d = static_cast<std::size_t>(driver);
    for (std::size_t l = 0; l < s.inputs[d].size(); ++l) {
      ir::Axis a = level_axis(d, l, einsum_axis_name(s.inputs[d][l]), operand_axes[d]);
      operand_axes[d].push_back(a);
      driven[s.inputs[d][l]] = a;
    }
  }
  auto dense_for = [&](char c) {
    if (auto it = dense_axis.find(c); it != dense_axis.end()) return it->second;
    ir::Axis a;
    if (auto it = driven.find(c); it != driven.end())
      a = it->second->kind == ir::AxisKind::dense_fixed ? it->second
                                                        : b.new_dense_view("dense_" + it->second->name, it->second);
    else
      a = b.new_axis(einsum_axis_name(c), ir::AxisKind::dense_fixed, nullptr, DType::i32);
    dense_axis[c] = a;
    return a;
  };
  std::map<char, ir::Axis> own;  // subscript -> a non-driver sparse operand's axis for it (first one)
  for (std::size_t o = 0; o < n; ++o) {
    if (static_cast<int>(o) == driver) continue;
    bool all_dense = std::all_of(formats[o].levels.begin(), formats[o].levels.end(),
                                 [](LevelKind k) { return k == LevelKind::dense_fixed; });
    for (std::size_t l = 0; l < s.inputs[o].size(); ++l) {
      char c = s.inputs[o][l];
      if (all_dense) {
        operand_axes[o].push_back(dense_for(c));
      } else if (formats[o].levels[l] == LevelKind::dense_fixed && !dense_for(c)->dense_of) {
        operand_axes[o].push_back(dense_for(c));  // a shared root: the binder checks the extent
      } else {  // its own axis, read at the iterators' coordinates (a search in the fiber)
        ir::Axis a = level_axis(o, l, einsum_axis_name(c) + "_" + arg_names[o], operand_axes[o]);
        operand_axes[o].push_back(a);
        own.emplace(c, a);
      }
    }
  }

  // The iteration: a unit axis for a scalar result, the driver's subscripts, then the rest.
  std::vector<ir::Axis> iter_axes;
  std::map<char, ir::Var> iterator;
  std::map<char, ir::Axis> iter_axis;
  std::vector<ir::Var> vars;
  ir::Axis unit;
  if (s.output.empty()) {
    unit = b.new_axis("Unit", ir::AxisKind::dense_fixed, nullptr, DType::i32, 1);
    iter_axes.push_back(unit);
    vars.push_back(b.iterator_var(unit));
  }
  auto add_iter = [&](char c) {
    if (iterator.count(c)) return;
    ir::Axis a;
    if (auto it = driven.find(c); it != driven.end())
      a = it->second;
    else if (dense_axis.count(c) || s.output.find(c) != std::string::npos || !own.count(c))
      a = dense_for(c);
    else  // only in other sparse operands and summed: a dense loop over that operand's extent
      a = b.new_dense_view("dense_" + own.at(c)->name, own.at(c));
    iter_axes.push_back(a);
    vars.push_back(b.iterator_var(a));
    iterator[c] = vars.back();
    iter_axis[c] = a;
  };
  if (driver >= 0)
    for (char c : s.inputs[static_cast<std::size_t>(driver)]) add_iter(c);
  for (const auto& in : s.inputs)
    for (char c : in) add_iter(c);

  std::vector<ir::Buffer> buffers;
  for (std::size_t o = 0; o < n; ++o)
    buffers.push_back(b.add_buffer(dtype, operand_axes[o], ir::BufferRole::input, static_cast<int>(o)));
  std::vector<ir::Axis> out_axes;
  std::vector<ir::Expr> out_index;
  if (s.output.empty()) {
    out_axes.push_back(unit);
    out_index.push_back(vars.front());
  } else if (sparse_output) {
    out_axes = operand_axes[static_cast<std::size_t>(driver)];
    for (char c : s.output) out_index.push_back(iterator.at(c));
  } else {
    for (char c : s.output) {
      out_axes.push_back(dense_for(c));
      out_index.push_back(iterator.at(c));
    }
  }
  ir::Buffer out = b.add_buffer(dtype, out_axes, ir::BufferRole::output, static_cast<int>(n));

  ir::Expr product;
  for (std::size_t o = 0; o < n; ++o) {
    std::vector<ir::Expr> idx;
    for (std::size_t l = 0; l < s.inputs[o].size(); ++l) {
      const ir::Var& it = iterator.at(s.inputs[o][l]);
      // An iterator of another coordinate space (the driver's j in the row slot of a second
      // CSR) reads by coordinate: a bounds guard or a search, absent = 0. A bare iterator
      // there is a definition error for lambdas, so it is wrapped in an i64 -> i64 cast.
      if (ir::coordinate_space(iter_axis.at(s.inputs[o][l])) == ir::coordinate_space(operand_axes[o][l]))
        idx.push_back(it);
      else
        idx.push_back(ir::Expr(std::make_shared<ir::CastNode>(DType::i64, it)));
    }
    ir::Expr v = ir::load(buffers[o], std::move(idx));
    product = product.defined() ? product * v : v;
  }
  detail::KernelBuilder::Frame body;
  body.stmts.push_back(ir::reduce(out, out_index, ir::ReduceOp::add, product, b.loc()));
  ir::Stmt iteration = b.make_iteration("einsum", std::move(iter_axes), std::move(vars), std::move(body), b.loc());
  return b.finish(iteration);
}

}  // namespace spindle

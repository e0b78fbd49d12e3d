// Factorisation of a multi-operand einsum (the einsum-path problem; Scorch, seed 001): one
// statement over several operands — a GCN layer "i,ij,j,jk,kl->il" = D A D X W, attention's
// "ij,ik,jk,jl->il" — run as one loop nest visits every combination of its subscripts; the
// same math as a sequence of smaller einsums with materialised intermediates can cost orders
// of magnitude less (X W first, then one SpMM).
//
// plan_einsum_path picks the sequence by dynamic programming over subsets of the operands
// (3^n splits, n <= 8): the result of a subset is either one statement over its operands or
// the combination of the results of two disjoint subsets. A step's cost is the work of the
// loop nest einsum would generate for it (frontend/einsum.hpp): the driving sparse operand's
// stored elements times the extents of the other subscripts (every extent when all operands
// are dense), times the reads per point (a lookup in another sparse operand counts 8), plus
// the elements of its output. An intermediate keeps only the subscripts used later (by
// another operand or the output). It is a Csr with the driving operand's pattern when its
// subscripts are exactly that operand's (D A D stays sparse), a Csr whose pattern is assembled
// when it is a product of two CSR operands ("ij,jk->ik", costed by its multiply-adds: left's
// entries times right's mean row length; A B C with A, B sparse and C dense runs as (A B) C),
// else dense. The path replaces the
// single statement only when it costs less than `kFactorGain` times as much and the result is
// dense either way (a sparse result — the driver's pattern — stays one statement, so the
// result's format never depends on the path). One exception, decided by the operands alone:
// when every operand is a CSR matrix and the single statement's result would be dense
// ("ij,jk,kl->il"), the path is made of pairwise steps whose results are all Csr — products
// and element-wise products, the last one assembled too — whenever such a path exists, at
// any cost: einsum then returns a Csr of the product's pattern (EinsumPath::assembled_result),
// not a dense rows x cols array. The choice is printed by einsum_explain, and
// SPINDLE_EINSUM_PATH=single (Options::einsum_single) turns it off. Shapes and stored counts are the call's: cheap to plan per call
// (microseconds), and the steps' kernels are cached like any einsum.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "spindle/frontend/einsum.hpp"

namespace spindle::autosched {

// One operand as the planner sees it: its format, the extent of each of its subscripts and
// the number of stored elements.
struct EinsumOperandInfo {
  EinsumOperandFormat format;
  std::vector<std::int64_t> extents;
  std::int64_t stored = 0;
};

struct EinsumStep {
  std::vector<int> operands;  // < n: the call's operands; n + k: the result of step k
  std::string spec;           // e.g. "jk,kl->jl"
  bool sparse_result = false;
  double cost = 0;
};

struct EinsumPath {
  std::vector<EinsumStep> steps;  // empty: run the single statement
  double cost = 0;                // of the steps
  double single_cost = 0;         // of the single statement
  // Every operand a CSR matrix and every step a product or an element-wise product of two
  // CSR operands: the final statement assembles its result too (einsum returns a Csr).
  bool assembled_result = false;
};

inline constexpr double kFactorGain = 0.8;
inline constexpr int kMaxFactorOperands = 8;

namespace detail {

struct PathValue {
  std::string subs;
  EinsumOperandFormat format;
  std::int64_t stored = 0;
  bool sparse_result = false;  // a statement's result that keeps its driver's pattern
};

// The cost of one einsum statement over `ins` producing `out`, and whether its result is a
// Csr with the driver's pattern (then `out` is reordered to the driver's subscripts).
// `fixed`: the output's order is the caller's (the final statement), so a sparse result needs
// the driver's subscripts in exactly that order.
// `assemble_final`: the final statement of an all-CSR path (see plan_einsum_path), whose
// product is assembled in the caller's order rather than written into a dense output.
inline double statement_cost(const std::vector<PathValue>& ins, std::string& out, bool& sparse,
                             const std::map<char, std::int64_t>& extent, bool fixed, int* driver = nullptr,
                             std::int64_t* product_stored = nullptr, bool assemble_final = false) {
  EinsumSpec s;
  std::vector<EinsumOperandFormat> formats;
  std::vector<std::int64_t> stored;
  for (const auto& v : ins) {
    s.inputs.push_back(v.subs);
    formats.push_back(v.format);
    stored.push_back(v.stored);
  }
  if (product_stored) *product_stored = -1;
  // A product of two CSR operands (einsum_product_form): Gustavson into an assembled CSR. Its
  // work is the multiply-adds, left's entries times right's mean row length, done twice
  // (symbolic and numeric phases) plus the result's entries (at most its dense size).
  // As an intermediate its result is an assembled Csr; as the final statement, whose result
  // keeps the single statement's format (dense unless it has the driver's pattern) so the path
  // never changes what einsum returns, the same product into a dense output.
  if (const EinsumProduct pr = einsum_product_form(s.inputs, out, formats, !fixed); pr.found()) {
    const PathValue& l = ins[static_cast<std::size_t>(pr.left)];
    const PathValue& r = ins[static_cast<std::size_t>(pr.right)];
    const char a = l.subs[0], b = l.subs[1], c = r.subs[1];
    const double flops = static_cast<double>(l.stored) * static_cast<double>(r.stored) /
                         static_cast<double>(std::max<std::int64_t>(extent.at(b), 1));
    const double result = std::min(flops, static_cast<double>(std::max<std::int64_t>(extent.at(a), 1)) *
                                              static_cast<double>(std::max<std::int64_t>(extent.at(c), 1)));
    if (driver) *driver = pr.left;
    if (fixed && !assemble_final)
      return flops + static_cast<double>(l.stored) + static_cast<double>(std::max<std::int64_t>(extent.at(a), 1)) *
                                                         static_cast<double>(std::max<std::int64_t>(extent.at(c), 1));
    out = std::string{a, c};
    sparse = true;
    if (product_stored) *product_stored = static_cast<std::int64_t>(std::max(result, 1.0));
    return 2 * flops + static_cast<double>(l.stored) + result;
  }
  // A product after transposing one or both operands (einsum_transposed_form: A Bᵀ, Aᵀ B):
  // the product's cost over the transposed operands plus the transposes (a counting sort each).
  if (ins.size() == 2) {
    const auto tf = einsum_transposed_form(
        s.inputs, out, [&](std::size_t o) { return einsum_is_csr(formats[o]); }, /*assemble=*/false, !fixed);
    if (tf.found()) {
      std::vector<PathValue> swapped = ins;
      double transposes = 0;
      for (std::size_t o = 0; o < 2; ++o) {
        if (!tf.transpose[o]) continue;
        swapped[o].subs = tf.inputs[o];
        transposes += 2.0 * static_cast<double>(ins[o].stored) +
                      static_cast<double>(std::max<std::int64_t>(extent.at(ins[o].subs[0]), 1)) +
                      static_cast<double>(std::max<std::int64_t>(extent.at(ins[o].subs[1]), 1));
      }
      std::string o2 = tf.output;
      const double c = statement_cost(swapped, o2, sparse, extent, fixed, driver, product_stored, assemble_final);
      out = o2;
      return c + transposes;
    }
  }
  const int d = choose_einsum_driver(s, formats, stored);
  if (driver) *driver = d;
  sparse = false;
  if (d >= 0) {
    std::string ds = ins[static_cast<std::size_t>(d)].subs, a = ds, b = out;
    if (!fixed) {
      std::sort(a.begin(), a.end());
      std::sort(b.begin(), b.end());
    }
    const auto& f = formats[static_cast<std::size_t>(d)];
    if (a == b && f.levels.size() == 2 && f.levels[0] == LevelKind::dense_fixed &&
        f.levels[1] == LevelKind::sparse_variable) {  // einsum_sparse_output: a CSR driver
      sparse = true;
      out = ds;
    }
  }
  std::string letters;
  for (const auto& v : ins)
    for (char c : v.subs)
      if (letters.find(c) == std::string::npos) letters += c;
  double visits = d >= 0 ? static_cast<double>(std::max<std::int64_t>(stored[static_cast<std::size_t>(d)], 1)) : 1.0;
  for (char c : letters)
    if (d < 0 || ins[static_cast<std::size_t>(d)].subs.find(c) == std::string::npos)
      visits *= static_cast<double>(std::max<std::int64_t>(extent.at(c), 1));
  double reads = 0;
  for (std::size_t o = 0; o < ins.size(); ++o) {
    bool nested = std::any_of(ins[o].format.levels.begin(), ins[o].format.levels.end(),
                              [](LevelKind k) { return k != LevelKind::dense_fixed; });  // read by a search
    reads += (static_cast<int>(o) != d && nested) ? 8.0 : 1.0;
  }
  double out_size = 1;
  if (sparse)
    out_size = static_cast<double>(stored[static_cast<std::size_t>(d)]);
  else
    for (char c : out) out_size *= static_cast<double>(std::max<std::int64_t>(extent.at(c), 1));
  return visits * reads + out_size;
}

}  // namespace detail

inline EinsumPath plan_einsum_path(const EinsumSpec& s, const std::vector<EinsumOperandInfo>& ops) {
  const int n = static_cast<int>(ops.size());
  std::map<char, std::int64_t> extent;
  std::vector<detail::PathValue> leaves;
  for (int o = 0; o < n; ++o) {
    const auto& in = s.inputs[static_cast<std::size_t>(o)];
    for (std::size_t l = 0; l < in.size(); ++l) extent[in[l]] = ops[static_cast<std::size_t>(o)].extents[l];
    leaves.push_back({in, ops[static_cast<std::size_t>(o)].format, ops[static_cast<std::size_t>(o)].stored});
  }
  EinsumPath path;
  bool single_sparse = false;
  {
    std::string out = s.output;
    path.single_cost = detail::statement_cost(leaves, out, single_sparse, extent, true);
  }
  // A sparse result (the driver's pattern) stays one statement, so that the result's format
  // never depends on the path.
  if (n <= 2 || n > kMaxFactorOperands || single_sparse) return path;

  // The subscripts a subset's result keeps: those used outside it, in their order of first
  // use in the operands ("i,ij,j,jk,kl": X W keeps "jl", the layout the SpMM after it reads).
  const unsigned all = (1u << n) - 1;
  auto kept = [&](unsigned set) {
    if (set == all) return s.output;
    std::string order, keep;
    for (const auto& in : s.inputs) order += in;
    for (char c : order) {
      if (keep.find(c) != std::string::npos) continue;
      bool inside = false, outside = s.output.find(c) != std::string::npos;
      for (int o = 0; o < n; ++o) {
        bool has = s.inputs[static_cast<std::size_t>(o)].find(c) != std::string::npos;
        if (set >> o & 1u)
          inside = inside || has;
        else
          outside = outside || has;
      }
      if (inside && outside) keep += c;
    }
    return keep;
  };
  struct Best {
    double cost = std::numeric_limits<double>::infinity();
    unsigned left = 0;  // 0: one statement over the subset's operands
    detail::PathValue value;
    double step_cost = 0;
  };
  std::vector<Best> best;
  // The dynamic programme. `assembled`: only pairwise steps whose results are Csr (the
  // final one assembled in the caller's order); a set of three operands or more is never one
  // statement.
  auto solve = [&](bool assembled) {
    best.assign(all + 1, Best{});
    for (int o = 0; o < n; ++o) {
      best[1u << o].cost = 0;
      best[1u << o].value = leaves[static_cast<std::size_t>(o)];
    }
    for (unsigned set = 1; set <= all; ++set) {
      if ((set & (set - 1)) == 0) continue;  // a single operand
      const std::string out = kept(set);
      if (out.empty() && set != all) continue;  // a scalar intermediate: einsum takes no rank-0 operand
      Best& b = best[set];
      auto consider = [&](double below, unsigned left, const std::vector<detail::PathValue>& ins) {
        std::string o = out;
        bool sparse = false;
        int d = -1;
        std::int64_t product_stored = -1;
        double c = detail::statement_cost(ins, o, sparse, extent, set == all, &d, &product_stored,
                                          assembled && set == all);
        if (assembled && !sparse) return;
        if (below + c >= b.cost) return;
        b.cost = below + c;
        b.step_cost = c;
        b.left = left;
        b.value.subs = o;
        b.value.stored = 1;
        b.value.sparse_result = sparse;
        if (sparse) {  // the driver's pattern, or an assembled product's (a CSR of about product_stored entries)
          b.value.stored = product_stored >= 0 ? product_stored : ins[static_cast<std::size_t>(d)].stored;
          b.value.format = ins[static_cast<std::size_t>(d)].format;
          if (product_stored >= 0) b.value.format.kind = "Csr";
        } else {
          b.value.format = EinsumOperandFormat{};
          for (char ch : o) {
            b.value.format.levels.push_back(LevelKind::dense_fixed);
            b.value.format.index_dtypes.push_back(DType::i32);
            b.value.stored *= std::max<std::int64_t>(extent.at(ch), 1);
          }
          b.value.format.kind = "Tensor";
        }
      };
      std::vector<detail::PathValue> direct;
      for (int o = 0; o < n; ++o)
        if (set >> o & 1u) direct.push_back(leaves[static_cast<std::size_t>(o)]);
      if (!assembled || direct.size() == 2) consider(0, 0, direct);
      const unsigned low = set & (~set + 1u);
      for (unsigned left = (set - 1) & set; left; left = (left - 1) & set) {
        if (!(left & low)) continue;  // each split once: the left part holds the lowest operand
        const unsigned right = set & ~left;
        if (!std::isfinite(best[left].cost) || !std::isfinite(best[right].cost)) continue;
        consider(best[left].cost + best[right].cost, left, {best[left].value, best[right].value});
      }
    }
  };
  // A product of CSR matrices whose single statement would give a dense result ("ij,jk,kl->il",
  // A Bᵀ C, (A .* B) C): run as pairwise assembled steps when there are such, whatever the
  // single statement costs — the result is a Csr (of about as many entries as the product
  // has), not a dense rows x cols array.
  const bool all_csr =
      s.output.size() == 2 && std::all_of(ops.begin(), ops.end(), [](const EinsumOperandInfo& o) {
        return o.extents.size() == 2 && einsum_is_csr(o.format);
      });
  if (all_csr) {
    solve(true);
    path.assembled_result = std::isfinite(best[all].cost);
  }
  if (!path.assembled_result) {
    solve(false);
    if (!(best[all].left != 0 && best[all].cost < kFactorGain * path.single_cost) || best[all].value.sparse_result)
      return path;
  }

  // The steps, children first.
  std::vector<std::string> subs_of(s.inputs.begin(), s.inputs.end());  // per operand id
  auto emit = [&](auto&& self, unsigned set) -> int {
    if ((set & (set - 1)) == 0) return std::countr_zero(set);
    const Best& b = best[set];
    std::vector<int> operands;
    if (b.left == 0) {
      for (int o = 0; o < n; ++o)
        if (set >> o & 1u) operands.push_back(o);
    } else {
      operands.push_back(self(self, b.left));
      operands.push_back(self(self, set & ~b.left));
    }
    EinsumStep step;
    step.operands = operands;
    for (std::size_t k = 0; k < operands.size(); ++k)
      step.spec += (k ? "," : "") + subs_of[static_cast<std::size_t>(operands[k])];
    step.spec += "->" + b.value.subs;
    subs_of.push_back(b.value.subs);
    step.sparse_result = b.value.sparse_result;
    step.cost = b.step_cost;
    path.steps.push_back(step);
    return n + static_cast<int>(path.steps.size()) - 1;
  };
  emit(emit, all);
  path.cost = best[all].cost;
  return path;
}

}  // namespace spindle::autosched

// A random-kernel generator that writes kernels the way users write them: C++ source
// through the public API (axis tag types, in/out/inout/param buffers, lambdas, nested
// for_each, locals, named Values, every compound assignment and max_with/min_with, unary
// and binary operators nested in every combination, abs/min/max/select, casts, C++
// literals of every sign and type, user names that C or CUDA reserve or that collide with
// generated ones). Each kernel is a *model* (Kernel below) printed two ways:
//
//   cpp_source(k)   the C++ definition (a namespace with the axis types and a function that
//                   defines the kernel with spindle::kernel and calls it), compiled by the
//                   front-end fuzzer against the installed package;
//   expected_ir(k)  stage-I IR built directly from the model, by the semantics of
//                   docs/language.md, without the front end: what the reference
//                   interpreter runs to get the expected outputs.
//
// Axes are dense roots (dense_fixed, dense_fixed_n<N>), root sparse axes (sparse_root<>,
// sparse_fixed<void, N>: a sparse vector's stored coordinates, one fiber; docs/language.md
// §1), children of either (dense_variable, sparse_variable, sparse_fixed), coordinates_of<X>
// axes and dense<X> views. Writes follow §4 rule 1: a slot with a parent, a slot followed
// by a child and a sparse root slot take the iterator of the slot's own axis, a dense root
// slot any iterator of its coordinate space (or, on the computed target, a computed index).
//
// About one kernel in six (decided by a generator of its own, so the other kernels of a seed
// are unchanged) assembles a sparse output (§4.6): `struct C : sp::assembled<P, X> {}`, an
// `out<T, P, C>` that is its only written buffer, written c(i, x) with i the lambda's first
// iterator (over P) and x any iterator over X's coordinates; X is a child J of P, a dense
// root, or the columns K of b[dense<J>, K] iterated at the coordinate of an iterator of J
// (§3, the SpGEMM pattern). The call passes a Csr<T[, Index]> (Call::csr) holding an old
// pattern that the kernel replaces; the harness compares it with Interpreter::assembled.
// When X is a child J of P and a second pattern J2 over J's coordinates is read, half of them
// (a generator of their own) also get union_of / intersection_of J and J2, an iterator for c's
// column slot (a sparse add or product row by row: the append path, bounded on the host).
// About one of those in three (decided by a generator of its own) writes c at scattered rows
// (§4.6, lower/assemble_scattered.hpp): it also reads a[P, Jt], Jt declared coordinates_of<P>
// (a square pattern), and most writes take the row from an iterator of Jt (`c(jt, x)`; with X
// = P sometimes, `c(jt, i) = a(i, jt)` is the transpose); every write of c uses one operator.
//
// Adjacent iterators of one iteration over a parent and its child, whose iterator kinds will
// be equal, are sometimes one iter<fuse<...>> (§3.2), unpacked in one of four ways (decided
// by a generator of its own too; Generator::add_fusions).
//
// About one write in five is followed by a second update of the same element with the same
// operator (two products summed in one pass; decided by a generator of its own as well).
//
// About one kernel in four (a generator of its own; make_scatter) also has an output written at
// indirect indices (§4.1): `y(idx(e), ...) op= v` with idx an integer in buffer read at its
// stored elements; make_data draws idx's values inside y's first axis, and the harness also
// moves one outside it (the call must be refused, nothing written). About one for_each in
// eight runs under sp::when (guarded_loop; §4.7): the expected IR keeps the IfThenElse around
// the iteration, which the interpreter runs as written, while the front end pushes the test
// into the loops.
//
// A disagreement between the compiled kernel and the interpreter is a bug in the front
// end, the lowering, the schedules or a backend. Data come in three sizes (small random
// shapes, edge cases with empty axes, and large inputs of thousands of rows so that every
// parallel schedule splits its loops), from make_data(k, size, seed).
//
// Kernels are reproducible from (seed, shrink steps): generate(seed) then shrink(k, step)
// for each step, so a disagreement can be printed as a minimal C++ kernel.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "spindle/ir/function.hpp"
#include "spindle/ir/ops.hpp"
#include "support/random_kernel.hpp"

namespace spindle::test::fe {

// --- the model ---------------------------------------------------------------------------

struct Axis {
  std::string type;        // C++ tag type name ("" for a dense<X> view, printed sp::dense<X>)
  std::string axis_name;   // static axis_name given in the tag ("" = none)
  bool has_axis_name = false;
  ir::AxisKind kind = ir::AxisKind::dense_fixed;
  int parent = -1;
  int dense_of = -1;       // a dense<X> view of axis X
  int coordinates_of = -1; // a sparse axis declared coordinates_of<X>: X's coordinates
  std::int64_t fixed_npr = -1;  // sparse_fixed<P, N>: N >= 0, else dynamic
  std::int64_t fixed_length = -1;  // dense_fixed_n<N>: N >= 1, else dynamic
  DType index_dtype = DType::i32;
  bool computed_target = false;  // a root axis written at computed indices; its extent is fitted to them
  bool scatter_target = false;   // a root axis written at indirect indices; make_data gives it >= 1 coordinate
  bool assembled = false;  // assembled<P, X> (docs/language.md §4.6): parent P, coordinates_of X
  // union_of / intersection_of (docs/language.md §3.1): a view (dense_of = the first operand)
  // that only iterations use, over sparse axes of one coordinate space.
  ir::MergeOp merge = ir::MergeOp::none;
  std::vector<int> merge_operands;
};

struct Buffer {
  std::string var;        // C++ lambda parameter name
  ir::BufferRole role = ir::BufferRole::input;
  DType dtype = DType::f32;
  std::vector<int> axes;
  bool const_ref = false;  // declared `const sp::in<...>& x`
  bool index = false;      // an integer buffer used for indirect read indices
  int scatter_of = -1;     // an integer buffer whose values index axis scatter_of in indirect writes
};

struct Param {
  std::string var;
  DType dtype = DType::f32;
  double value = 0;
};

enum class Op : std::uint8_t {
  Const, Read, Param, Local, Iter, Named,  // leaves
  Neg, Not, Add, Sub, Mul, Div, Mod, Min, Max, Lt, Le, Gt, Ge, Eq, Ne, And, Or, Select, Cast, Abs, Exp, Log, Sqrt,
  Tanh, Pow
};

struct Expr;
using ExprP = std::shared_ptr<const Expr>;

// A read index: an iterator, an iterator plus a constant, a literal, or a value loaded from
// an integer buffer (cast to int64_t or not).
struct Index {
  enum Kind : std::uint8_t { Iter, IterPlus, Literal, Indirect, IndirectCast } kind = Iter;
  int iter = -1;
  std::int64_t k = 0;
  ExprP indirect;
};

// A computed write index (docs/language.md §4.1): iterators and constants joined by +, * c,
// / c, % c, min, and max(x - c, 0).
struct CIdx {
  enum Kind : std::uint8_t { Iter, Const, Add, MulC, DivC, ModC, Min, MaxShift } kind = Const;
  int iter = -1;
  std::int64_t c = 0;
  std::shared_ptr<const CIdx> a, b;
};
using CIdxP = std::shared_ptr<const CIdx>;

struct Expr {
  Op op = Op::Const;
  DType t = DType::f32;       // boolean for comparisons, &&, ||, !
  // Const: the C++ literal and the value it converts to (static_cast<T>)
  std::string literal;        // e.g. "-2", "2.5f", "3000000000LL"
  double fvalue = 0;          // the converted value of a float T
  std::int64_t ivalue = 0;    // ... of an integer T
  int id = -1;                // Read: buffer; Param; Local; Iter: iterator; Named: named value
  std::vector<Index> idx;     // Read
  DType cast_to = DType::f32; // Cast
  std::vector<ExprP> kids;
};

enum class WriteOp : std::uint8_t { assign, add, sub, mul, max, min };

struct Stmt;
using StmtP = std::shared_ptr<const Stmt>;

struct Iterator {
  int axis = -1;
  std::string var;  // C++ name
};

struct Stmt {
  enum Kind : std::uint8_t { Write, LocalDecl, LocalWrite, ForEach, Named } kind = Write;
  int target = -1;               // Write: buffer; LocalDecl/LocalWrite: local; Named: named value
  std::vector<int> iters;        // Write: one iterator per buffer axis; ForEach: the iterators
  int bad_slot = -1;             // Write: this slot is indexed by bad_index instead (the
  Index bad_index;               //   language must reject it: "which is not an iterator")
  int computed_slot = -1;        // Write: this slot is indexed by `computed` (§4.1)
  CIdxP computed;
  int indirect_slot = -1;        // Write: this slot is indexed by `indirect`, a value read from
  Index indirect;                //   an index buffer (an indirect write, §4.1)
  WriteOp op = WriteOp::assign;
  ExprP value;                   // Write/LocalWrite value, LocalDecl init, Named expression
  bool via_ref = false;          // Write through `auto r = b(...); r += v;`
  bool auto_params = false;      // ForEach lambda takes `auto` parameters
  std::vector<bool> fused;       // ForEach: fused[q]: iterator q and q + 1 are one fuse<...> (§3.2)
  int fuse_style = 0;            // ForEach: how a fused iterator is unpacked (Kernel::fuse_style)
  std::vector<StmtP> body;       // ForEach
  std::string local_name;        // LocalDecl: the name string given to local<T> ("" = none)
  bool local_named = false;
  int named_style = 0;           // Named: 0 auto, 1 sp::Value<T>, 2 const auto&
  ExprP cond;                    // Write/LocalWrite: runs under sp::when(cond, ...) (§4.7), and
  ExprP else_value;              //   when set, writes else_value (same target, same op) otherwise
};

struct Local {
  std::string var;
  DType dtype = DType::f32;
};

struct Named {
  std::string var;
  DType dtype = DType::f32;
};

// One lambda parameter, in order: a buffer, a scalar parameter or an iterator.
struct LambdaParam {
  enum Kind : std::uint8_t { buffer, param, iter } kind = buffer;
  int id = -1;
  bool fuse_next = false;  // iter: fused with the next iter parameter (one iter<fuse<...>>, §3.2)
};

struct Kernel {
  std::uint64_t seed = 0;
  std::vector<int> steps;     // shrink steps applied after generation
  std::string ns;             // C++ namespace of the kernel
  std::string name;           // kernel name string
  std::vector<std::string> given_names;  // spindle::names (empty = none)
  DType T = DType::f32;
  bool exact = true;
  std::vector<Axis> axes;
  std::vector<Buffer> buffers;
  std::vector<Param> params;
  std::vector<Iterator> iterators;  // every iterator of the kernel (lambda ones and for_each ones)
  std::vector<Local> locals;
  std::vector<Named> named;
  std::vector<LambdaParam> lambda;  // the kernel lambda's parameters in order
  std::vector<StmtP> body;          // the lambda body
  // How the lambda's fused iterators are unpacked: 0 `auto [i, j] = f;`, 1 `const auto& [i, j]
  // = f;`, 2 `auto i = f.get<I>();` per axis, 3 `auto i = f.get<0>();` per position.
  int fuse_style = 0;
};

inline bool is_leaf(Op op) { return op <= Op::Named; }

// A root sparse axis (sparse_root<>, sparse_fixed<void, N>): one fiber of stored coordinates.
// Its slots are written only by its own iterator; an `out` buffer may not list it twice.
inline bool is_sparse_root(const Axis& a) { return a.dense_of < 0 && a.parent < 0 && a.kind != ir::AxisKind::dense_fixed; }
inline bool is_sparse_root(const Kernel& k, int a) { return is_sparse_root(k.axes[static_cast<std::size_t>(a)]); }

// Does the kernel iterate a root sparse axis (the lambda's iterators or a for_each's)?
// Whether some iterator of the kernel (the lambda's or a for_each's) is over an axis `pred` accepts.
inline bool iterates_axis(const Kernel& k, const std::function<bool(int)>& pred) {
  for (const LambdaParam& p : k.lambda)
    if (p.kind == LambdaParam::iter && pred(k.iterators[static_cast<std::size_t>(p.id)].axis)) return true;
  std::function<bool(const std::vector<StmtP>&)> scan = [&](const std::vector<StmtP>& body) {
    for (auto& s : body)
      if (s->kind == Stmt::ForEach) {
        for (int it : s->iters)
          if (pred(k.iterators[static_cast<std::size_t>(it)].axis)) return true;
        if (scan(s->body)) return true;
      }
    return false;
  };
  return scan(k.body);
}
inline bool iterates_sparse_root(const Kernel& k) {
  return iterates_axis(k, [&](int a) { return is_sparse_root(k, a); });
}
// Whether the kernel iterates a union_of / intersection_of (docs/language.md §3.1).
inline bool iterates_merge(const Kernel& k) {
  return iterates_axis(k, [&](int a) { return k.axes[static_cast<std::size_t>(a)].merge != ir::MergeOp::none; });
}

// Whether the kernel fuses axes (iter<fuse<...>>, docs/language.md §3.2), in its lambda or a for_each.
inline bool fuses_axes(const Kernel& k) {
  for (const LambdaParam& p : k.lambda)
    if (p.fuse_next) return true;
  std::function<bool(const std::vector<StmtP>&)> scan = [&](const std::vector<StmtP>& body) {
    for (auto& s : body)
      if (s->kind == Stmt::ForEach &&
          (std::find(s->fused.begin(), s->fused.end(), true) != s->fused.end() || scan(s->body)))
        return true;
    return false;
  };
  return scan(k.body);
}

// Whether some write of the kernel runs under sp::when (docs/language.md §4.7).
inline bool has_when(const Kernel& k) {
  std::function<bool(const std::vector<StmtP>&)> scan = [&](const std::vector<StmtP>& body) {
    for (auto& s : body)
      if (s->cond || (s->kind == Stmt::ForEach && scan(s->body))) return true;
    return false;
  };
  return scan(k.body);
}

// Whether some for_each of the kernel runs under sp::when (§4.7).
inline bool has_when_around_loop(const Kernel& k) {
  std::function<bool(const std::vector<StmtP>&)> scan = [&](const std::vector<StmtP>& body) {
    for (auto& s : body)
      if (s->kind == Stmt::ForEach && (s->cond || scan(s->body))) return true;
    return false;
  };
  return scan(k.body);
}

// Whether some write of the kernel takes an index from an index buffer (an indirect write, §4.1).
inline bool writes_indirect(const Kernel& k) {
  std::function<bool(const std::vector<StmtP>&)> scan = [&](const std::vector<StmtP>& body) {
    for (auto& s : body)
      if ((s->kind == Stmt::Write && s->indirect_slot >= 0) || (s->kind == Stmt::ForEach && scan(s->body))) return true;
    return false;
  };
  return scan(k.body);
}

// The buffer of a kernel that assembles a sparse output (over [P, C], C = assembled<P, X>), or -1.
inline int assembled_buffer(const Kernel& k) {
  for (std::size_t b = 0; b < k.buffers.size(); ++b)
    for (int a : k.buffers[b].axes)
      if (k.axes[static_cast<std::size_t>(a)].assembled) return static_cast<int>(b);
  return -1;
}

// Whether some write of the assembled output takes its row from an iterator other than the
// lambda's first (docs/language.md §4.6: the rows are then scattered).
inline bool writes_scattered_rows(const Kernel& k) {
  const int c = assembled_buffer(k);
  int first = -1;
  for (auto& p : k.lambda)
    if (p.kind == LambdaParam::iter) {
      first = p.id;
      break;
    }
  std::function<bool(const std::vector<StmtP>&)> scan = [&](const std::vector<StmtP>& body) {
    for (auto& s : body) {
      if (s->kind == Stmt::Write && s->target == c && !s->iters.empty() && s->iters[0] != first) return true;
      if (s->kind == Stmt::ForEach && scan(s->body)) return true;
    }
    return false;
  };
  return c >= 0 && scan(k.body);
}

// The axis whose coordinates axis a has: X for dense<X> and coordinates_of<X>, recursively.
inline int coordinate_space_of(const Kernel& k, int a) {
  for (;;) {
    const Axis& x = k.axes[static_cast<std::size_t>(a)];
    if (x.dense_of >= 0) a = x.dense_of;
    else if (x.coordinates_of >= 0) a = x.coordinates_of;
    else return a;
  }
}

// --- helpers -------------------------------------------------------------------------------

inline const char* cpp_type(DType t, int style = 0) {
  switch (t) {
    case DType::f32: return "float";
    case DType::f64: return "double";
    case DType::i32: return style == 1 ? "int" : "std::int32_t";
    case DType::i64: return style == 1 ? "long" : "std::int64_t";
    case DType::boolean: return "bool";
    default: return "?";
  }
}

inline std::string float_text(double v, bool f32) {
  char buf[64];
  auto r = f32 ? std::to_chars(buf, buf + sizeof buf, static_cast<float>(v)) : std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s + (f32 ? "f" : "");
}

// A C++ string literal for any bytes.
inline std::string string_literal(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 32 && c < 127) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\%03o", c);
      out += buf;
    }
  }
  return out + "\"";
}

// The value a C++ literal of type S converts to in T (static_cast<T>, integers wrapping).
inline void convert_literal(Expr& e, double value, bool s_is_float) {
  if (is_float(e.t)) {
    e.fvalue = e.t == DType::f32 ? static_cast<double>(static_cast<float>(value)) : value;
  } else {
    std::int64_t v = s_is_float ? static_cast<std::int64_t>(value) : static_cast<std::int64_t>(value);
    if (e.t == DType::i32) v = static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<std::uint64_t>(v)));
    e.ivalue = v;
  }
}

// --- C++ printing ------------------------------------------------------------------------------

class CppPrinter {
 public:
  explicit CppPrinter(const Kernel& k, std::uint64_t style_seed) : k_(k), rng_(style_seed) {}

  std::string source() {
    std::ostringstream os;
    os << "// kernel seed " << k_.seed;
    if (!k_.steps.empty()) {
      os << ", shrink steps";
      for (int s : k_.steps) os << " " << s;
    }
    os << "\nnamespace " << k_.ns << " {\n";
    for (const Axis& a : k_.axes) {
      if (a.dense_of >= 0) continue;
      os << "struct " << a.type << " : " << axis_base(a) << " {";
      if (a.has_axis_name) os << " static constexpr const char* axis_name = " << string_literal(a.axis_name) << "; ";
      os << "};\n";
    }
    os << "spindle::fefuzz::Defined define() {\n";
    os << "  auto kernel = sp::kernel(" << string_literal(k_.name);
    if (!k_.given_names.empty()) {
      os << ", sp::names{";
      for (std::size_t q = 0; q < k_.given_names.size(); ++q) os << (q ? ", " : "") << string_literal(k_.given_names[q]);
      os << "}";
    }
    os << ", [](";
    std::vector<std::vector<int>> fused_chains;  // the lambda's iter<fuse<...>> parameters
    for (std::size_t q = 0, printed = 0; q < k_.lambda.size(); ++q) {
      const LambdaParam& p = k_.lambda[q];
      if (!(p.kind == LambdaParam::iter && q > 0 && k_.lambda[q - 1].kind == LambdaParam::iter && k_.lambda[q - 1].fuse_next))
        os << (printed++ ? ", " : "");
      if (p.kind == LambdaParam::buffer) {
        const Buffer& b = k_.buffers[static_cast<std::size_t>(p.id)];
        std::string t = std::string(b.role == ir::BufferRole::input ? "sp::in<" : b.role == ir::BufferRole::output
                                                                                    ? "sp::out<"
                                                                                    : "sp::inout<") +
                        cpp_type(b.dtype, style(0.3)) ;
        for (int a : b.axes) t += ", " + axis_type(a);
        t += ">";
        os << (b.const_ref ? "const " + t + "& " : t + " ") << b.var;
      } else if (p.kind == LambdaParam::param) {
        const Param& s = k_.params[static_cast<std::size_t>(p.id)];
        os << "sp::param<" << cpp_type(s.dtype) << "> " << s.var;
      } else if (q > 0 && k_.lambda[q - 1].kind == LambdaParam::iter && k_.lambda[q - 1].fuse_next) {
        continue;  // printed with the chain it belongs to
      } else {
        std::vector<int> chain{p.id};
        for (std::size_t r = q; r + 1 < k_.lambda.size() && k_.lambda[r].fuse_next; ++r) chain.push_back(k_.lambda[r + 1].id);
        if (chain.size() == 1) {
          const Iterator& it = k_.iterators[static_cast<std::size_t>(p.id)];
          os << "sp::iter<" << axis_type(it.axis) << "> " << it.var;
        } else {
          os << fused_type(chain) << " " << fused_var(chain);
          fused_chains.push_back(chain);
        }
      }
    }
    os << ") {\n";
    indent_ = 2;
    for (auto& chain : fused_chains) unpack(os, chain, k_.fuse_style);
    for (auto& s : k_.body) stmt(os, *s);
    os << "  });\n";
    // The call: arguments in order, scalars converted to the parameter's type.
    // A kernel that assembles a sparse output is called two ways: with the Csr, and with
    // spindle::unsorted(csr) when the harness asks for rows left as gathered (§4.6).
    os << "  return spindle::fefuzz::make_defined(kernel, [](auto& k, const spindle::fefuzz::Call& c) { ";
    const bool assembles = assembled_buffer(k_) >= 0;
    for (int way = assembles ? 0 : 1; way < 2; ++way) {
      if (assembles) os << (way == 0 ? "if (c.unsorted_rows) " : " else ");
      os << "k(";
      int arg = 0;
      for (const LambdaParam& p : k_.lambda) {
        if (p.kind == LambdaParam::iter) continue;
        os << (arg ? ", " : "");
        if (p.kind == LambdaParam::buffer && p.id == assembled_buffer(k_)) {  // a Csr<T, Index>& (§4.6)
          const Buffer& b = k_.buffers[static_cast<std::size_t>(p.id)];
          const Axis& cols = k_.axes[static_cast<std::size_t>(b.axes.back())];
          os << (way == 0 ? "spindle::unsorted(" : "") << "c.csr<" << cpp_type(b.dtype)
             << (cols.index_dtype == DType::i64 ? ", std::int64_t" : "") << ">(" << arg << ")" << (way == 0 ? ")" : "");
        } else if (p.kind == LambdaParam::buffer) os << "c.arg(" << arg << ")";
        else os << "c.scalar<" << cpp_type(k_.params[static_cast<std::size_t>(p.id)].dtype) << ">(" << arg << ")";
        ++arg;
      }
      os << ");";
    }
    os << " });\n}\n";
    os << "const spindle::fefuzz::Registration registration(" << k_.seed << "ull, " << string_literal(steps_text(k_.steps))
       << ", &define);\n}  // namespace " << k_.ns << "\n";
    return os.str();
  }

  static std::string steps_text(const std::vector<int>& steps) {
    std::string s;
    for (int x : steps) s += (s.empty() ? "" : ",") + std::to_string(x);
    return s;
  }

 private:
  bool style(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  std::string axis_base(const Axis& a) {
    std::string idx = a.index_dtype == DType::i64 ? ", std::int64_t" : "";
    switch (a.kind) {
      case ir::AxisKind::dense_fixed:
        return a.fixed_length >= 1 ? "sp::dense_fixed_n<" + std::to_string(a.fixed_length) + ">" : "sp::dense_fixed";
      case ir::AxisKind::dense_variable: return "sp::dense_variable<" + axis_type(a.parent) + idx + ">";
      case ir::AxisKind::sparse_variable:
        if (a.assembled)
          return "sp::assembled<" + axis_type(a.parent) + ", " + axis_type(a.coordinates_of) +
                 (a.index_dtype == DType::i64 ? ", std::int64_t" : "") + ">";
        return "sp::sparse_variable<" + axis_type(a.parent) + idx + ">" +
               (a.coordinates_of >= 0 ? ", sp::coordinates_of<" + axis_type(a.coordinates_of) + ">" : "");
      case ir::AxisKind::sparse_fixed:
        if (a.parent < 0) {  // a root sparse axis: sparse_root<Index>, or sparse_fixed<void, N[, Index]>
          if (a.fixed_npr >= 0) return "sp::sparse_fixed<void, " + std::to_string(a.fixed_npr) + idx + ">";
          if (style(0.15)) return "sp::sparse_fixed<void, sp::dynamic" + idx + ">";
          return a.index_dtype == DType::i64 ? "sp::sparse_root<std::int64_t>" : "sp::sparse_root<>";
        }
        return "sp::sparse_fixed<" + axis_type(a.parent) + ", " +
               (a.fixed_npr >= 0 ? std::to_string(a.fixed_npr) : std::string("sp::dynamic")) + idx + ">";
    }
    return "?";
  }
  std::string axis_type(int a) const {
    const Axis& x = k_.axes[static_cast<std::size_t>(a)];
    if (x.merge != ir::MergeOp::none) {
      std::string t = x.merge == ir::MergeOp::union_ ? "sp::union_of<" : "sp::intersection_of<";
      for (std::size_t q = 0; q < x.merge_operands.size(); ++q) t += (q ? ", " : "") + axis_type(x.merge_operands[q]);
      return t + ">";
    }
    return x.dense_of >= 0 ? "sp::dense<" + axis_type(x.dense_of) + ">" : x.type;
  }

  std::ostream& line(std::ostream& os) { return os << std::string(static_cast<std::size_t>(indent_), ' '); }

  std::string target(const Stmt& s) {
    const Buffer& b = k_.buffers[static_cast<std::size_t>(s.target)];
    std::string t = b.var + "(";
    for (std::size_t q = 0; q < s.iters.size(); ++q)
      t += (q ? ", " : "") + (static_cast<int>(q) == s.bad_slot        ? index(s.bad_index)
                              : static_cast<int>(q) == s.computed_slot ? cidx(*s.computed)
                              : static_cast<int>(q) == s.indirect_slot ? index(s.indirect)
                                                                       : k_.iterators[static_cast<std::size_t>(s.iters[q])].var);
    return t + ")";
  }

  std::string cidx(const CIdx& x) {
    const std::string c = std::to_string(x.c);
    switch (x.kind) {
      case CIdx::Iter: return k_.iterators[static_cast<std::size_t>(x.iter)].var;
      case CIdx::Const: return "std::int64_t{" + c + "}";
      case CIdx::Add: return "(" + cidx(*x.a) + " + " + cidx(*x.b) + ")";
      case CIdx::MulC: return "(" + cidx(*x.a) + " * " + c + ")";
      case CIdx::DivC: return "(" + cidx(*x.a) + " / " + c + ")";
      case CIdx::ModC: return "(" + cidx(*x.a) + " % " + c + ")";
      case CIdx::Min: return "sp::min(sp::Value<std::int64_t>(" + cidx(*x.a) + "), sp::Value<std::int64_t>(" + cidx(*x.b) + "))";
      case CIdx::MaxShift: return "sp::max(sp::Value<std::int64_t>(" + cidx(*x.a) + " - " + c + "), sp::Value<std::int64_t>(std::int64_t{0}))";
    }
    return "?";
  }

  void write_op(std::ostream& os, const std::string& lhs, WriteOp op, const Expr& v) {
    // A literal may stand alone on the right of =, +=, -=, *= and in max_with/min_with.
    std::string rhs = v.op == Op::Const && style(0.7) ? v.literal : value(v);
    switch (op) {
      case WriteOp::assign: line(os) << lhs << " = " << rhs << ";\n"; break;
      case WriteOp::add: line(os) << lhs << " += " << rhs << ";\n"; break;
      case WriteOp::sub: line(os) << lhs << " -= " << rhs << ";\n"; break;
      case WriteOp::mul: line(os) << lhs << " *= " << rhs << ";\n"; break;
      case WriteOp::max: line(os) << lhs << ".max_with(" << rhs << ");\n"; break;
      case WriteOp::min: line(os) << lhs << ".min_with(" << rhs << ");\n"; break;
    }
  }

  void stmt(std::ostream& os, const Stmt& s) {
    if (s.cond) {  // sp::when (§4.7), around a write or a for_each
      line(os) << "sp::when(" << value(*s.cond) << ", [&] {\n";
      indent_ += 2;
      Stmt plain = s;
      plain.cond = nullptr;
      plain.else_value = nullptr;
      stmt(os, plain);
      indent_ -= 2;
      if (s.else_value) {
        line(os) << "}, [&] {\n";
        indent_ += 2;
        plain.value = s.else_value;
        plain.via_ref = false;
        stmt(os, plain);
        indent_ -= 2;
      }
      line(os) << "});\n";
      return;
    }
    switch (s.kind) {
      case Stmt::Write:
        if (s.via_ref) {
          std::string r = "ref" + std::to_string(refs_++);
          line(os) << "auto " << r << " = " << target(s) << ";\n";
          write_op(os, r, s.op, *s.value);
        } else {
          write_op(os, target(s), s.op, *s.value);
        }
        return;
      case Stmt::LocalDecl: {
        const Local& l = k_.locals[static_cast<std::size_t>(s.target)];
        if (s.value->op == Op::Local && !s.local_named && style(0.6)) {  // a copy of a local is a new local
          const std::string& from = k_.locals[static_cast<std::size_t>(s.value->id)].var;
          if (style(0.5)) line(os) << "auto " << l.var << " = " << from << ";\n";
          else line(os) << "sp::local<" << cpp_type(l.dtype) << "> " << l.var << "(" << from << ");\n";
          return;
        }
        line(os) << "sp::local<" << cpp_type(l.dtype) << "> " << l.var << "("
                 << (s.value->op == Op::Const && style(0.6) ? s.value->literal : value(*s.value));
        if (s.local_named) os << ", " << string_literal(s.local_name);
        os << ");\n";
        return;
      }
      case Stmt::LocalWrite:
        write_op(os, k_.locals[static_cast<std::size_t>(s.target)].var, s.op, *s.value);
        return;
      case Stmt::Named: {
        const Named& n = k_.named[static_cast<std::size_t>(s.target)];
        const char* decl = s.named_style == 0 ? "auto" : s.named_style == 1 ? nullptr : "const auto&";
        std::string v = value(*s.value);
        if (s.value->op == Op::Const || s.value->op == Op::Local) decl = nullptr;  // auto would not be a Value
        if (decl) line(os) << decl << " " << n.var << " = " << v << ";\n";
        else line(os) << "sp::Value<" << cpp_type(n.dtype) << "> " << n.var << " = " << v << ";\n";
        return;
      }
      case Stmt::ForEach: {
        // The iterators in groups: a fused chain is one iter<fuse<...>> (§3.2).
        std::vector<std::vector<int>> groups;
        for (std::size_t q = 0; q < s.iters.size(); ++q) {
          if (q == 0 || !(q - 1 < s.fused.size() && s.fused[q - 1])) groups.emplace_back();
          groups.back().push_back(s.iters[q]);
        }
        line(os) << "sp::for_each<";
        for (std::size_t g = 0; g < groups.size(); ++g)
          os << (g ? ", " : "")
             << (groups[g].size() > 1 ? fused_axes(groups[g]) : axis_type(k_.iterators[static_cast<std::size_t>(groups[g][0])].axis));
        os << ">([&](";
        for (std::size_t g = 0; g < groups.size(); ++g) {
          const Iterator& it = k_.iterators[static_cast<std::size_t>(groups[g][0])];
          std::string type = groups[g].size() > 1 ? fused_type(groups[g]) : "sp::iter<" + axis_type(it.axis) + ">";
          os << (g ? ", " : "") << (s.auto_params ? std::string("auto") : type) << " "
             << (groups[g].size() > 1 ? fused_var(groups[g]) : it.var);
        }
        os << ") {\n";
        indent_ += 2;
        for (auto& g : groups)
          if (g.size() > 1) unpack(os, g, s.auto_params ? s.fuse_style % 2 : s.fuse_style);  // no get<> on `auto`
        for (auto& c : s.body) stmt(os, *c);
        indent_ -= 2;
        line(os) << "});\n";
        return;
      }
    }
  }

  // A fused chain of iterators (§3.2): sp::fuse<A, B, ...>, its iter type, its variable.
  std::string fused_axes(const std::vector<int>& chain) const {
    std::string t = "sp::fuse<";
    for (std::size_t q = 0; q < chain.size(); ++q)
      t += (q ? ", " : "") + axis_type(k_.iterators[static_cast<std::size_t>(chain[q])].axis);
    return t + ">";
  }
  std::string fused_type(const std::vector<int>& chain) const { return "sp::iter<" + fused_axes(chain) + ">"; }
  static std::string fused_var(const std::vector<int>& chain) { return "fz" + std::to_string(chain[0]); }
  // The chain's iterators out of its fused iterator, in one of four styles (Kernel::fuse_style).
  void unpack(std::ostream& os, const std::vector<int>& chain, int style) {
    const std::string f = fused_var(chain);
    if (style <= 1) {
      line(os) << (style == 0 ? "auto [" : "const auto& [");
      for (std::size_t q = 0; q < chain.size(); ++q) os << (q ? ", " : "") << k_.iterators[static_cast<std::size_t>(chain[q])].var;
      os << "] = " << f << ";\n";
      return;
    }
    for (std::size_t q = 0; q < chain.size(); ++q) {
      const Iterator& it = k_.iterators[static_cast<std::size_t>(chain[q])];
      line(os) << "auto " << it.var << " = " << f << ".get<" << (style == 2 ? axis_type(it.axis) : std::to_string(q)) << ">();\n";
    }
  }

  // C++ precedence levels (higher binds tighter).
  static int prec(Op op) {
    switch (op) {
      case Op::Neg: case Op::Not: return 90;
      case Op::Mul: case Op::Div: case Op::Mod: return 80;
      case Op::Add: case Op::Sub: return 70;
      case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge: return 60;
      case Op::Eq: case Op::Ne: return 50;
      case Op::And: return 40;
      case Op::Or: return 30;
      default: return 100;
    }
  }
  static const char* symbol(Op op) {
    switch (op) {
      case Op::Add: return "+"; case Op::Sub: return "-"; case Op::Mul: return "*"; case Op::Div: return "/";
      case Op::Mod: return "%"; case Op::Lt: return "<"; case Op::Le: return "<="; case Op::Gt: return ">";
      case Op::Ge: return ">="; case Op::Eq: return "=="; case Op::Ne: return "!="; case Op::And: return "&&";
      case Op::Or: return "||"; default: return "?";
    }
  }

  std::string wrap_const(const Expr& e) {
    return std::string("sp::Value<") + cpp_type(e.t, style(0.3)) + ">(" + e.literal + ")";
  }

  // An expression that is a Value<T> (constants wrapped), printed at precedence >= p.
  std::string value(const Expr& e, int p = 0) {
    if (e.op == Op::Const) return wrap_const(e);
    return expr(e, p);
  }

  std::string index(const Index& x) {
    switch (x.kind) {
      case Index::Iter: return k_.iterators[static_cast<std::size_t>(x.iter)].var;
      case Index::IterPlus: {
        const std::string& v = k_.iterators[static_cast<std::size_t>(x.iter)].var;
        if (x.k < 0) return v + " - " + std::to_string(-x.k);
        return style(0.5) ? v + " + " + std::to_string(x.k) : std::to_string(x.k) + " + " + v;
      }
      case Index::Literal: return std::to_string(x.k);
      case Index::Indirect: return expr(*x.indirect, 0);
      case Index::IndirectCast: return "sp::cast<std::int64_t>(" + expr(*x.indirect, 0) + ")";
    }
    return "?";
  }

  std::string expr(const Expr& e, int p) {
    std::string s;
    int mine = prec(e.op);
    switch (e.op) {
      case Op::Const: return wrap_const(e);
      case Op::Read: {
        s = k_.buffers[static_cast<std::size_t>(e.id)].var + "(";
        for (std::size_t q = 0; q < e.idx.size(); ++q) s += (q ? ", " : "") + index(e.idx[q]);
        return s + ")";
      }
      case Op::Param: return k_.params[static_cast<std::size_t>(e.id)].var;
      case Op::Local: return k_.locals[static_cast<std::size_t>(e.id)].var;
      case Op::Named: return k_.named[static_cast<std::size_t>(e.id)].var;
      case Op::Iter: {
        const std::string& v = k_.iterators[static_cast<std::size_t>(e.id)].var;
        if (e.t == DType::i64 && style(0.5)) return v;
        return std::string("sp::cast<") + cpp_type(e.t, style(0.3)) + ">(" + v + ")";
      }
      case Op::Neg:
      case Op::Not: {
        // A negative literal operand is a Value here (bare it would be a plain C++ number).
        std::string a = value(*e.kids[0], 90);
        if (!a.empty() && (a[0] == '-' || a[0] == '!' || a[0] == '+')) a = style(0.5) ? "(" + a + ")" : " " + a;
        s = std::string(e.op == Op::Neg ? "-" : "!") + a;
        break;
      }
      case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::Mod:
      case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge: case Op::Eq: case Op::Ne:
      case Op::And: case Op::Or: {
        const Expr &a = *e.kids[0], &b = *e.kids[1];
        // A literal next to a Value may stay a bare C++ literal (converted as static_cast<T>).
        std::string sa = a.op == Op::Const && b.op != Op::Const && style(0.7) ? a.literal : value(a, mine);
        std::string sb = b.op == Op::Const && a.op != Op::Const && style(0.7) ? b.literal : value(b, mine + 1);
        if (sa.size() && sa[0] == '-' && a.op == Op::Const && mine > 90) sa = "(" + sa + ")";
        s = sa + " " + symbol(e.op) + " " + sb;
        break;
      }
      case Op::Min:
      case Op::Max:
      case Op::Pow: {
        // One operand may be a bare literal (converted to T); not both.
        const Expr &a = *e.kids[0], &b = *e.kids[1];
        std::string sa = a.op == Op::Const && b.op != Op::Const && style(0.6) ? a.literal : value(a);
        std::string sb = b.op == Op::Const && a.op != Op::Const && style(0.6) ? b.literal : value(b);
        return std::string(e.op == Op::Min ? "sp::min(" : e.op == Op::Max ? "sp::max(" : "sp::pow(") + sa + ", " + sb + ")";
      }
      case Op::Select: {
        const Expr &a = *e.kids[1], &b = *e.kids[2];
        std::string sa = a.op == Op::Const && b.op != Op::Const && style(0.5) ? a.literal : value(a);
        std::string sb = b.op == Op::Const && a.op != Op::Const && style(0.5) ? b.literal : value(b);
        return "sp::select(" + value(*e.kids[0]) + ", " + sa + ", " + sb + ")";
      }
      case Op::Cast: return std::string("sp::cast<") + cpp_type(e.cast_to, style(0.3)) + ">(" + value(*e.kids[0]) + ")";
      case Op::Abs: return "sp::abs(" + value(*e.kids[0]) + ")";
      case Op::Exp: return "sp::exp(" + value(*e.kids[0]) + ")";
      case Op::Log: return "sp::log(" + value(*e.kids[0]) + ")";
      case Op::Sqrt: return "sp::sqrt(" + value(*e.kids[0]) + ")";
      case Op::Tanh: return "sp::tanh(" + value(*e.kids[0]) + ")";
    }
    if (mine < p || (mine < 100 && style(0.1))) return "(" + s + ")";
    return s;
  }

  const Kernel& k_;
  std::mt19937_64 rng_;
  int indent_ = 2;
  int refs_ = 0;
};

inline std::string cpp_source(const Kernel& k) { return CppPrinter(k, k.seed * 7919 + k.steps.size()).source(); }

// --- the expected stage-I IR -------------------------------------------------------------

class IrBuilder {
 public:
  explicit IrBuilder(const Kernel& k) : k_(k) {}

  struct Result {
    ir::Function function;
    std::vector<ir::Axis> axes;  // per model axis
    std::vector<ir::Buffer> buffers;
  };

  Result build() {
    Result r;
    ir::Function& f = r.function;
    f.name = "expected";
    f.stage = ir::Stage::coordinate;
    for (std::size_t a = 0; a < k_.axes.size(); ++a) r.axes.push_back(make_axis(static_cast<int>(a), r, f));
    axes_ = r.axes;
    int arg = 0;
    std::vector<ir::FuncScalar> user;
    for (const LambdaParam& p : k_.lambda) {
      if (p.kind == LambdaParam::iter) continue;
      if (p.kind == LambdaParam::buffer) {
        const Buffer& b = k_.buffers[static_cast<std::size_t>(p.id)];
        ir::BufferNode n;
        n.name = b.var;
        n.dtype = b.dtype;
        for (int a : b.axes) n.axes.push_back(r.axes[static_cast<std::size_t>(a)]);
        n.role = b.role;
        ir::Buffer buf = ir::make_buffer(std::move(n));
        buffers_[p.id] = buf;
        f.buffers.push_back({buf, {ir::ParamOrigin::values, arg, nullptr}});
      } else {
        const Param& s = k_.params[static_cast<std::size_t>(p.id)];
        ir::Var v(s.var, s.dtype);
        params_[p.id] = v;
        user.push_back({v, {ir::ParamOrigin::scalar, arg, nullptr}});
      }
      ++arg;
    }
    for (auto& s : user) f.scalars.push_back(s);
    for (std::size_t b = 0; b < k_.buffers.size(); ++b) r.buffers.push_back(buffers_.at(static_cast<int>(b)));
    for (std::size_t i = 0; i < k_.iterators.size(); ++i)
      iters_.push_back(ir::Var(k_.iterators[i].var, DType::i64));
    // The body: one iteration over the lambda's iterators, or the statements themselves.
    std::vector<ir::Axis> axes;
    std::vector<ir::Var> vars;
    for (const LambdaParam& p : k_.lambda)
      if (p.kind == LambdaParam::iter) {
        axes.push_back(r.axes[static_cast<std::size_t>(k_.iterators[static_cast<std::size_t>(p.id)].axis)]);
        vars.push_back(iters_[static_cast<std::size_t>(p.id)]);
      }
    ir::Stmt body = scope(k_.body);
    if (!axes.empty()) body = iteration(axes, vars, body);
    f.body = body;
    // As the front end does: the kernel declares the axes its buffers use, parents and view bases.
    std::set<const ir::AxisNode*> used;
    for (auto& fb : f.buffers)
      for (auto& a : fb.buffer->axes) mark_declared_axes(a, used);
    for (auto& a : r.axes)
      if (used.count(a.get())) f.axes.push_back(a);
    std::vector<ir::FuncScalar> kept;
    for (auto& s : f.scalars)
      if (s.origin.kind == ir::ParamOrigin::scalar || used.count(s.origin.axis.get())) kept.push_back(s);
    f.scalars = std::move(kept);
    return r;
  }

 private:
  ir::Axis make_axis(int id, Result& r, ir::Function& f) {
    const Axis& a = k_.axes[static_cast<std::size_t>(id)];
    auto n = std::make_shared<ir::AxisNode>();
    n->name = "axis" + std::to_string(id);
    if (a.dense_of >= 0) {
      const ir::Axis& base = r.axes[static_cast<std::size_t>(a.dense_of)];
      n->kind = ir::AxisKind::dense_fixed;
      n->length = base->length;
      n->dense_of = base;
      n->merge = a.merge;
      for (int o : a.merge_operands) n->merge_operands.push_back(r.axes[static_cast<std::size_t>(o)]);
      return n;
    }
    n->kind = a.kind;
    if (a.parent >= 0) n->parent = r.axes[static_cast<std::size_t>(a.parent)];
    n->index_dtype = a.index_dtype;
    ir::Var len;
    n->assembled = a.assembled;
    if (a.coordinates_of >= 0) {  // X's coordinate space and extent
      n->coordinates_of = r.axes[static_cast<std::size_t>(a.coordinates_of)];
      n->length = n->coordinates_of->length;
    } else if (a.fixed_length >= 1) n->length = ir::int_imm(a.fixed_length);
    else n->length = len = ir::Var(n->name + "_len", DType::i64);
    ir::Var nnz, npr;
    if (n->is_variable()) n->nnz = nnz = ir::Var(n->name + "_nnz", DType::i64);
    if (n->kind == ir::AxisKind::sparse_fixed) {
      if (a.fixed_npr >= 0) n->nnz_per_row = ir::int_imm(a.fixed_npr);
      else n->nnz_per_row = npr = ir::Var(n->name + "_npr", DType::i64);
    }
    ir::Axis ax = n;
    if (len.defined()) f.scalars.push_back({len, {ir::ParamOrigin::length, -1, ax}});
    if (nnz.defined()) f.scalars.push_back({nnz, {ir::ParamOrigin::nnz, -1, ax}});
    if (npr.defined()) f.scalars.push_back({npr, {ir::ParamOrigin::nnz_per_row, -1, ax}});
    return ax;
  }

  ir::Stmt iteration(std::vector<ir::Axis> axes, std::vector<ir::Var> vars, ir::Stmt body) {
    std::vector<ir::IterKind> kinds(axes.size(), ir::IterKind::spatial);
    return ir::Stmt(std::make_shared<ir::SparseIterationNode>("it" + std::to_string(counter_++), std::move(axes),
                                                              std::move(vars), std::move(kinds), ir::Stmt(),
                                                              body.defined() ? body : ir::seq({}), ir::SourceLoc{}));
  }

  // The statements of one lambda body; its locals live in a block around them (a fresh
  // local per visit of the body).
  ir::Stmt scope(const std::vector<StmtP>& stmts) {
    std::vector<ir::Buffer> allocs;
    std::vector<ir::Stmt> out;
    for (auto& s : stmts) out.push_back(stmt(*s, allocs));
    ir::Stmt b = ir::seq(std::move(out));
    if (!allocs.empty()) b = ir::block("locals" + std::to_string(counter_++), allocs, b.defined() ? b : ir::seq({}));
    return b;
  }

  static ir::ReduceOp reduce_op(WriteOp op) {
    switch (op) {
      case WriteOp::mul: return ir::ReduceOp::mul;
      case WriteOp::max: return ir::ReduceOp::max;
      case WriteOp::min: return ir::ReduceOp::min;
      default: return ir::ReduceOp::add;
    }
  }

  ir::Stmt write(const ir::Buffer& b, std::vector<ir::Expr> idx, WriteOp op, const Expr& v) {
    ir::Expr x = expr(v);
    if (op == WriteOp::assign) return ir::store(b, std::move(idx), x);
    if (op == WriteOp::sub) x = ir::unary(ir::UnOp::neg, x);  // x -= v adds -v
    return ir::reduce(b, std::move(idx), reduce_op(op), x);
  }

  ir::Expr cidx(const CIdx& x) {
    switch (x.kind) {
      case CIdx::Iter: return iters_[static_cast<std::size_t>(x.iter)];
      case CIdx::Const: return ir::int_imm(x.c);
      case CIdx::Add: return ir::binary(ir::BinOp::add, cidx(*x.a), cidx(*x.b));
      case CIdx::MulC: return ir::binary(ir::BinOp::mul, cidx(*x.a), ir::int_imm(x.c));
      case CIdx::DivC: return ir::binary(ir::BinOp::div, cidx(*x.a), ir::int_imm(x.c));
      case CIdx::ModC: return ir::binary(ir::BinOp::mod, cidx(*x.a), ir::int_imm(x.c));
      case CIdx::Min: return ir::binary(ir::BinOp::min, cidx(*x.a), cidx(*x.b));
      case CIdx::MaxShift:
        return ir::binary(ir::BinOp::max, ir::binary(ir::BinOp::sub, cidx(*x.a), ir::int_imm(x.c)), ir::int_imm(0));
    }
    return ir::Expr();
  }

  ir::Stmt stmt(const Stmt& s, std::vector<ir::Buffer>& allocs) {
    if (s.cond) {  // sp::when (§4.7), around a write or a for_each (the interpreter runs the
                   // iteration inside the IfThenElse as it stands; the front end pushes the test in)
      Stmt plain = s;
      plain.cond = nullptr;
      plain.else_value = nullptr;
      ir::Expr c = expr(*s.cond);
      ir::Stmt then_case = stmt(plain, allocs);
      ir::Stmt else_case;
      if (s.else_value) {
        plain.value = s.else_value;
        else_case = stmt(plain, allocs);
      }
      return ir::if_then_else(c, then_case, else_case);
    }
    switch (s.kind) {
      case Stmt::Write: {
        std::vector<ir::Expr> idx;
        for (std::size_t q = 0; q < s.iters.size(); ++q)
          idx.push_back(static_cast<int>(q) == s.bad_slot        ? index(s.bad_index)
                        : static_cast<int>(q) == s.computed_slot ? cidx(*s.computed)
                        : static_cast<int>(q) == s.indirect_slot ? index(s.indirect)
                                                                 : ir::Expr(iters_[static_cast<std::size_t>(s.iters[q])]));
        return write(buffers_.at(s.target), std::move(idx), s.op, *s.value);
      }
      case Stmt::LocalDecl: {
        const Local& l = k_.locals[static_cast<std::size_t>(s.target)];
        ir::BufferNode n;
        n.name = l.var;
        n.dtype = l.dtype;
        n.scope = ir::BufferScope::local;
        n.role = ir::BufferRole::temp;
        ir::Buffer buf = ir::make_buffer(std::move(n));
        locals_[s.target] = buf;
        allocs.push_back(buf);
        return ir::store(buf, {}, expr(*s.value));
      }
      case Stmt::LocalWrite: return write(locals_.at(s.target), {}, s.op, *s.value);
      case Stmt::Named: named_[s.target] = expr(*s.value); return ir::Stmt();
      case Stmt::ForEach: {
        std::vector<ir::Axis> axes;
        std::vector<ir::Var> vars;
        for (int i : s.iters) {
          axes.push_back(axes_[static_cast<std::size_t>(k_.iterators[static_cast<std::size_t>(i)].axis)]);
          vars.push_back(iters_[static_cast<std::size_t>(i)]);
        }
        return iteration(axes, vars, scope(s.body));
      }
    }
    return ir::Stmt();
  }

  ir::Expr index(const Index& x) {
    switch (x.kind) {
      case Index::Iter: return iters_[static_cast<std::size_t>(x.iter)];
      case Index::IterPlus: return ir::binary(ir::BinOp::add, iters_[static_cast<std::size_t>(x.iter)], ir::int_imm(x.k));
      case Index::Literal: return ir::int_imm(x.k);
      case Index::Indirect: return expr(*x.indirect);
      case Index::IndirectCast: return ir::cast(DType::i64, expr(*x.indirect));
    }
    return ir::Expr();
  }

  static ir::Intrinsic intrinsic(Op op) {
    switch (op) {
      case Op::Exp: return ir::Intrinsic::exp;
      case Op::Log: return ir::Intrinsic::log;
      case Op::Sqrt: return ir::Intrinsic::sqrt;
      case Op::Tanh: return ir::Intrinsic::tanh;
      case Op::Pow: return ir::Intrinsic::pow;
      default: return ir::Intrinsic::abs;
    }
  }

  static ir::BinOp binop(Op op) {
    switch (op) {
      case Op::Add: return ir::BinOp::add; case Op::Sub: return ir::BinOp::sub; case Op::Mul: return ir::BinOp::mul;
      case Op::Div: return ir::BinOp::div; case Op::Mod: return ir::BinOp::mod; case Op::Min: return ir::BinOp::min;
      case Op::Max: return ir::BinOp::max; case Op::Lt: return ir::BinOp::lt; case Op::Le: return ir::BinOp::le;
      case Op::Gt: return ir::BinOp::gt; case Op::Ge: return ir::BinOp::ge; case Op::Eq: return ir::BinOp::eq;
      case Op::Ne: return ir::BinOp::ne; case Op::And: return ir::BinOp::land; default: return ir::BinOp::lor;
    }
  }

  ir::Expr expr(const Expr& e) {
    switch (e.op) {
      case Op::Const:
        if (is_float(e.t)) return ir::float_imm(e.fvalue, e.t);
        return ir::int_imm(e.ivalue, e.t);
      case Op::Read: {
        std::vector<ir::Expr> idx;
        for (auto& x : e.idx) idx.push_back(index(x));
        return ir::load(buffers_.at(e.id), std::move(idx));
      }
      case Op::Param: return params_.at(e.id);
      case Op::Local: return ir::load(locals_.at(e.id), {});
      case Op::Iter: return ir::cast(e.t, iters_[static_cast<std::size_t>(e.id)]);
      case Op::Named: return named_.at(e.id);
      case Op::Neg: return ir::unary(ir::UnOp::neg, expr(*e.kids[0]));
      case Op::Not: return ir::unary(ir::UnOp::lnot, expr(*e.kids[0]));
      case Op::Select: return ir::select(expr(*e.kids[0]), expr(*e.kids[1]), expr(*e.kids[2]));
      case Op::Cast: return ir::cast(e.cast_to, expr(*e.kids[0]));
      case Op::Abs: {
        ir::Expr a = expr(*e.kids[0]);
        if (is_float(e.t)) return ir::call(ir::Intrinsic::abs, {a});
        // |x| of an integer: x < 0 ? -x : x (wrapping: |INT_MIN| is INT_MIN)
        return ir::select(ir::binary(ir::BinOp::lt, a, ir::int_imm(0, e.t)), ir::unary(ir::UnOp::neg, a), a);
      }
      case Op::Exp: case Op::Log: case Op::Sqrt: case Op::Tanh: {
        return ir::call(intrinsic(e.op), {expr(*e.kids[0])});
      }
      case Op::Pow: return ir::call(ir::Intrinsic::pow, {expr(*e.kids[0]), expr(*e.kids[1])});
      default: return ir::binary(binop(e.op), expr(*e.kids[0]), expr(*e.kids[1]));
    }
  }

  const Kernel& k_;
  std::vector<ir::Axis> axes_;
  std::map<int, ir::Buffer> buffers_, locals_;
  std::map<int, ir::Var> params_;
  std::map<int, ir::Expr> named_;
  std::vector<ir::Var> iters_;
  int counter_ = 0;
};

// --- the generator -----------------------------------------------------------------------------

namespace detail {

class Generator {
 public:
  explicit Generator(std::uint64_t seed)
      : rng_(seed), twin_rng_(seed ^ 0x510e527fade682d1ULL), when_rng_(seed ^ 0x2545f4914f6cdd1dULL),
        scatter_rng_(seed ^ 0x1f83d9abfb41bd6bULL), loop_when_rng_(seed ^ 0x5be0cd19137e2179ULL) {
    k_.seed = seed;
  }

  Kernel make() {
    k_.ns = "k" + std::to_string(k_.seed);
    k_.name = kernel_name();
    k_.T = pick({DType::f32, DType::f32, DType::f64, DType::i32, DType::i64});
    k_.exact = !(is_float(k_.T) && chance(0.2));
    // About one kernel in six assembles a sparse output (docs/language.md §4.6), decided by a
    // generator of its own so that the other kernels of a seed stay as they were.
    // One in three of those writes it at scattered rows (also decided on its own).
    if (std::mt19937_64(k_.seed ^ 0x3c6ef372fe94f82bULL)() % 6 == 0) {
      scattered_ = std::mt19937_64(k_.seed ^ 0xbb67ae8584caa73bULL)() % 3 == 0;
      return make_assembled();
    }
    make_axes();
    make_merged_axes();
    make_arguments();
    give_merge_operands_arguments();
    // The lambda's own iterators: none (top-level for_each), or 1-3 axes.
    std::vector<int> top;
    if (chance(0.75)) top = choose_axes(static_cast<int>(range(1, 3)));
    for (int it : top) k_.lambda.push_back({LambdaParam::iter, it});
    std::shuffle(k_.lambda.begin(), k_.lambda.end(), rng_);
    // Buffers before their use is not required: keep the shuffle, but make sure iterators of
    // the same lambda come in parent-first order (they are iterated in declaration order).
    order_iterators();
    k_.body = body(0, 1 + static_cast<int>(range(0, 3)), top.empty());
    add_fusions();
    return std::move(k_);
  }

  // Fused chains (docs/language.md §3.2), decided by a generator of their own so the rest of
  // the kernel is what the seed gave before: adjacent iterators of one iteration, each over a
  // child of the one before, whose iterator kinds the front end will (most likely) infer
  // equal, become one iter<fuse<...>> — of the lambda or of a for_each. A wrong guess of the
  // kinds is a rejection at definition, not a failure.
  void add_fusions() {
    std::mt19937_64 frng(k_.seed ^ 0x9b05688c2b3e6c1fULL);
    auto coin = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(frng) < p; };
    k_.fuse_style = static_cast<int>(frng() % 4);
    // The lambda's iterators, in iteration order (order_iterators keeps it the lambda order).
    std::vector<std::size_t> slots;
    for (std::size_t q = 0; q < k_.lambda.size(); ++q)
      if (k_.lambda[q].kind == LambdaParam::iter) slots.push_back(q);
    std::vector<int> its;
    for (auto q : slots) its.push_back(k_.lambda[q].id);
    std::vector<bool> fuse = choose_fusions(its, k_.body, coin);
    // Fused parameters must be adjacent in the lambda: move each chain's members after its head.
    std::vector<LambdaParam> reordered;
    for (std::size_t q = 0; q < k_.lambda.size(); ++q) {
      const auto at = std::find(slots.begin(), slots.end(), q);
      if (at == slots.end()) {
        reordered.push_back(k_.lambda[q]);
        continue;
      }
      std::size_t r = static_cast<std::size_t>(at - slots.begin());
      if (r > 0 && fuse[r - 1]) continue;  // placed with its chain
      for (;;) {
        LambdaParam p = k_.lambda[slots[r]];
        p.fuse_next = r < fuse.size() && fuse[r];
        reordered.push_back(p);
        if (!p.fuse_next) break;
        ++r;
      }
    }
    k_.lambda = std::move(reordered);
    std::function<void(std::vector<StmtP>&)> walk = [&](std::vector<StmtP>& body) {
      for (auto& s : body) {
        if (s->kind != Stmt::ForEach) continue;
        auto c = std::make_shared<Stmt>(*s);
        c->fused = choose_fusions(c->iters, c->body, coin);
        c->fuse_style = static_cast<int>(frng() % 4);
        walk(c->body);
        s = c;
      }
    };
    walk(k_.body);
  }

  // fused[q]: iterators q and q + 1 of one iteration (over `body`) fused.
  template <class Coin>
  std::vector<bool> choose_fusions(const std::vector<int>& its, const std::vector<StmtP>& body, Coin& coin) const {
    std::vector<bool> fused(its.empty() ? 0 : its.size() - 1, false);
    for (std::size_t q = 0; q + 1 < its.size(); ++q) {
      const int a = k_.iterators[static_cast<std::size_t>(its[q])].axis, b = k_.iterators[static_cast<std::size_t>(its[q + 1])].axis;
      const Axis& A = k_.axes[static_cast<std::size_t>(a)];
      const Axis& B = k_.axes[static_cast<std::size_t>(b)];
      if (B.parent != a || A.merge != ir::MergeOp::none || B.merge != ir::MergeOp::none) continue;
      const bool starts = q == 0 || !fused[q - 1];
      if (starts && A.parent >= 0 && A.kind != ir::AxisKind::sparse_variable && A.kind != ir::AxisKind::dense_variable)
        continue;  // a chain cannot start at a sparse_fixed child
      if (predicted_spatial(body, its[q]) != predicted_spatial(body, its[q + 1])) continue;
      if (!starts && predicted_spatial(body, its[q]) != predicted_spatial(body, its[q - 1])) continue;
      fused[q] = coin(0.6);
    }
    return fused;
  }

  // Whether the front end infers iterator `it` spatial in an iteration over `body` (§3): every
  // write of a buffer there indexes a slot by it, and no local declared outside is written.
  static bool predicted_spatial(const std::vector<StmtP>& body, int it) {
    std::set<int> declared;
    bool spatial = true;
    std::function<void(const std::vector<StmtP>&)> walk = [&](const std::vector<StmtP>& b) {
      for (auto& s : b) {
        if (s->kind == Stmt::LocalDecl) declared.insert(s->target);
        if (s->kind == Stmt::LocalWrite && !declared.count(s->target)) spatial = false;
        if (s->kind == Stmt::Write && std::find(s->iters.begin(), s->iters.end(), it) == s->iters.end()) spatial = false;
        if (s->kind == Stmt::ForEach) walk(s->body);
      }
    };
    walk(body);
    return spatial;
  }

  // A kernel that assembles a sparse output c = out<T, P, C>, C = assembled<P, X>: its only
  // written buffer, written c(i, x) with i the lambda's first iterator (over P) and x any
  // iterator over X's coordinates. X is a child J of P (a copy of a pattern), the columns K of
  // b[dense<J>, K] iterated at the coordinate of an iterator of J (§3: SpGEMM), or a dense
  // root F; sometimes with an axis declared coordinates_of<X> and a dense<X> view.
  Kernel make_assembled() {
    auto axis = [&](ir::AxisKind kind, int parent) {
      Axis a;
      a.type = type_name();
      a.kind = kind;
      a.parent = parent;
      a.index_dtype = chance(0.2) ? DType::i64 : DType::i32;
      k_.axes.push_back(a);
      return static_cast<int>(k_.axes.size()) - 1;
    };
    auto view = [&](int x) {
      Axis v;
      v.dense_of = x;
      k_.axes.push_back(v);
      return static_cast<int>(k_.axes.size()) - 1;
    };
    const int P = axis(ir::AxisKind::dense_fixed, -1);
    const int variant = scattered_ && chance(0.4) ? 3 : static_cast<int>(range(0, 2));
    int X = -1;
    std::vector<std::vector<int>> ins;
    if (variant == 3) {  // columns over the rows' own coordinates (with Jt below: a transpose)
      X = P;
    } else if (variant == 2) {  // dense columns
      X = axis(ir::AxisKind::dense_fixed, -1);
      ins.push_back({P, X});
      if (chance(0.4)) ins.push_back({X});
    } else {
      const int J = axis(chance(0.2) ? ir::AxisKind::sparse_fixed : ir::AxisKind::sparse_variable, P);
      ins.push_back({P, J});
      if (variant == 1) {  // SpGEMM: row j of b[dense<J>, K]
        const int dJ = view(J);
        X = axis(ir::AxisKind::sparse_variable, dJ);
        ins.push_back({dJ, X});
      } else {
        X = J;
      }
    }
    int merged = -1;
    if (chance(0.3)) {  // another pattern over X's coordinates
      const int J2 = axis(ir::AxisKind::sparse_variable, P);
      k_.axes[static_cast<std::size_t>(J2)].coordinates_of = X;
      ins.push_back({P, J2});
      // Half the time (a generator of its own) also their union or intersection (§3.1) when X
      // is a child of P: rows written per merged coordinate, the append path (bounded rows
      // on the host: lower/assemble_rows.hpp).
      std::mt19937_64 g(k_.seed ^ 0x510e527fade682d1ULL);
      if (variant == 0 && k_.axes[static_cast<std::size_t>(X)].kind == ir::AxisKind::sparse_variable && g() % 2 == 0) {
        Axis v;
        v.dense_of = g() % 2 ? X : J2;
        v.merge = g() % 2 ? ir::MergeOp::union_ : ir::MergeOp::intersection;
        v.merge_operands = v.dense_of == X ? std::vector<int>{X, J2} : std::vector<int>{J2, X};
        k_.axes.push_back(v);
        merged = static_cast<int>(k_.axes.size()) - 1;
      }
    }
    if (scattered_) {  // a square pattern a[P, Jt]: its iterators give rows to scatter to
      const int Jt = axis(ir::AxisKind::sparse_variable, P);
      k_.axes[static_cast<std::size_t>(Jt)].coordinates_of = P;
      ins.push_back({P, Jt});
    }
    if (k_.axes[static_cast<std::size_t>(X)].kind != ir::AxisKind::dense_fixed && chance(0.3)) ins.push_back({view(X)});
    Axis c;
    c.type = type_name();
    c.kind = ir::AxisKind::sparse_variable;
    c.parent = P;
    c.coordinates_of = X;
    c.assembled = true;
    c.index_dtype = chance(0.2) ? DType::i64 : DType::i32;
    k_.axes.push_back(c);
    const int C = static_cast<int>(k_.axes.size()) - 1;
    for (auto& axes : ins) inputs_.push_back(add_buffer(ir::BufferRole::input, k_.T, false, axes));
    if (merged >= 0) in_buffers_.insert(merged);  // iterable: both operands have inputs
    if (chance(0.4)) {
      Param p;
      p.var = var_name("s");
      p.dtype = chance(0.85) ? k_.T : pick({DType::f32, DType::f64, DType::i32, DType::i64});
      p.value = static_cast<double>(range(-2, 3));
      k_.params.push_back(p);
      k_.lambda.push_back({LambdaParam::param, static_cast<int>(k_.params.size()) - 1});
    }
    assembled_buf_ = add_buffer(ir::BufferRole::output, k_.T, false, {P, C});
    k_.buffers[static_cast<std::size_t>(assembled_buf_)].const_ref = false;
    outputs_.push_back(assembled_buf_);
    ops_[assembled_buf_] = scattered_ && chance(0.25)
                               ? WriteOp::assign  // every write `=`: each element its last assignment
                               : pick({WriteOp::add, WriteOp::add, WriteOp::add, WriteOp::sub, WriteOp::max, WriteOp::min, WriteOp::mul});
    in_buffers_.erase(C);  // never iterated
    // The lambda's iterators: i over P first, then up to two more.
    Iterator row;
    row.axis = P;
    row.var = var_name("i");
    k_.iterators.push_back(row);
    scope_.push_back(0);
    std::vector<int> top{0};
    for (int it : choose_axes(static_cast<int>(range(0, 2)))) top.push_back(it);
    scope_.clear();
    for (int it : top) k_.lambda.push_back({LambdaParam::iter, it});
    std::shuffle(k_.lambda.begin(), k_.lambda.end(), rng_);
    order_iterators();
    k_.body = body(0, 1 + static_cast<int>(range(0, 2)), false);
    // Mostly at least one write of c: at the top level when an iterator over X's
    // coordinates is there, else inside a for_each over one.
    if (!writes_assembled(k_.body) && chance(0.9)) {
      if (auto w = write(); w && w->kind == Stmt::Write) {
        k_.body.push_back(w);
      } else {
        std::vector<int> cols;
        for (std::size_t a = 0; a < k_.axes.size(); ++a)
          if (in_buffers_.count(static_cast<int>(a)) && coord_space(static_cast<int>(a)) == coord_space(X)) cols.push_back(static_cast<int>(a));
        std::vector<int> its = choose_axes_from(cols);
        if (!its.empty()) {
          auto f = std::make_shared<Stmt>();
          f->kind = Stmt::ForEach;
          f->iters = its;
          const std::size_t depth0 = scope_.size();
          for (int it : its) scope_.push_back(it);
          if (auto w2 = write(); w2 && w2->kind == Stmt::Write) f->body.push_back(w2);
          scope_.resize(depth0);
          if (!f->body.empty()) k_.body.push_back(f);
        }
      }
    }
    return std::move(k_);
  }

  bool writes_assembled(const std::vector<StmtP>& b) const {
    for (auto& s : b)
      if ((s->kind == Stmt::Write && s->target == assembled_buf_) || (s->kind == Stmt::ForEach && writes_assembled(s->body)))
        return true;
    return false;
  }

  // One iterator over an axis of `options` iterable here (its parent bound, or a root dense
  // parent at the coordinate of an iterator in scope), preceded by its parent's when needed.
  std::vector<int> choose_axes_from(const std::vector<int>& options) {
    for (int a : options) {
      if (k_.axes[static_cast<std::size_t>(a)].merge != ir::MergeOp::none) {
        if (in_buffers_.count(a) && merge_ready(a, {})) return {new_iterator(a)};
        continue;
      }
      std::vector<int> chain;
      for (int x = a; x >= 0 && !bound(x); x = k_.axes[static_cast<std::size_t>(x)].parent) {
        if (!in_buffers_.count(x)) {
          chain.clear();
          break;
        }
        chain.insert(chain.begin(), x);
        const int p = k_.axes[static_cast<std::size_t>(x)].parent;
        if (p >= 0 && !bound(p) && by_coordinate(p, {})) break;
      }
      if (chain.empty()) continue;
      const int root_parent = k_.axes[static_cast<std::size_t>(chain.front())].parent;
      if (root_parent >= 0 && !bound(root_parent) && !by_coordinate(root_parent, {})) continue;
      std::vector<int> its;
      for (int x : chain) its.push_back(new_iterator(x));
      return its;
    }
    return {};
  }

  // In an assembled kernel, a child of a root dense axis p (dense<J>) may be iterated at the
  // coordinate of an iterator over p's coordinate space (docs/language.md §3).
  bool by_coordinate(int p, const std::vector<int>& chosen) const {
    if (assembled_buf_ < 0) return false;
    const Axis& pa = k_.axes[static_cast<std::size_t>(p)];
    if (pa.parent >= 0 || (pa.dense_of < 0 && pa.kind != ir::AxisKind::dense_fixed)) return false;
    for (int it : scope_)
      if (coordinate_space_of(k_, k_.iterators[static_cast<std::size_t>(it)].axis) == coordinate_space_of(k_, p)) return true;
    for (int a : chosen)
      if (coordinate_space_of(k_, a) == coordinate_space_of(k_, p)) return true;
    return false;
  }

 private:
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  std::int64_t range(std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng_); }
  template <class X>
  X pick(std::initializer_list<X> xs) {
    auto it = xs.begin();
    std::advance(it, range(0, static_cast<std::int64_t>(xs.size()) - 1));
    return *it;
  }
  template <class X>
  const X& pick_from(const std::vector<X>& xs) {
    return xs[static_cast<std::size_t>(range(0, static_cast<std::int64_t>(xs.size()) - 1))];
  }

  std::string kernel_name() {
    static const char* names[] = {"k",         "spmm",     "if",      "for */ x", "",        "spindle", "__global__",
                                  "main",      "a b",      "x\"y",    "J_pos",    "int",     "threadIdx", "K1",
                                  "\xc3\xa4x", "kernel\\", "restrict", "_Bool",   "the kernel with a rather long name "
                                                                                  "that goes on and on past any limit"};
    std::string n = names[range(0, std::size(names) - 1)];
    return chance(0.5) ? n + std::to_string(k_.seed % 1000) : n;
  }

  // --- names ---------------------------------------------------------------------------
  std::string type_name() {
    static const char* pool[] = {"I",    "J",     "K",        "L",         "M",        "N",      "P",       "Q",
                                 "If",   "For",   "While",    "Int",       "Float",    "Double", "Restrict", "Register",
                                 "Main", "Rt",    "Buffers",  "Scalars",   "ThreadIdx", "BlockIdx", "Float4", "J_pos",
                                 "I_len", "J_indptr", "K_dense", "Spindle_rt", "Auto", "Goto", "Static", "Exp", "Min",
                                 "Max", "A__B", "Xy_", "i", "j", "t", "s0", "X_dense"};
    for (;;) {
      std::string n = pool[range(0, std::size(pool) - 1)];
      if (used_cpp_.insert(n).second) return n;
    }
  }
  std::string var_name(const char* base) {
    static const char* tricky[] = {"restrict", "threadIdx", "float4", "main", "rt", "buffers", "scalars", "Bool_",
                                   "spindle_rt", "blockDim", "expf", "atomicAdd", "select_", "min_", "I_len_"};
    for (;;) {
      std::string n = chance(0.15) ? std::string(tricky[range(0, std::size(tricky) - 1)])
                                   : std::string(base) + std::to_string(var_counter_++);
      if (used_cpp_.insert(n).second) return n;
    }
  }
  std::string axis_name_string() {
    static const char* pool[] = {"if", "my axis", "J-2", "*/", "x y", "I", "J", "i", "", "int", "float4", "J_len",
                                 "rt */ int z; /*", "\xe2\x82\xac", "_X", "A__B", "0lead"};
    return pool[range(0, std::size(pool) - 1)];
  }

  // --- axes ----------------------------------------------------------------------------
  static int depth_of(const Kernel& k, int a) {
    int d = 0;
    for (int x = a; x >= 0; x = k.axes[static_cast<std::size_t>(x)].parent) ++d;
    return d;
  }

  void make_axes() {
    int roots = static_cast<int>(range(1, 3)), total = roots + static_cast<int>(range(0, 3));
    for (int r = 0; r < total; ++r) {
      Axis a;
      a.type = type_name();
      if (chance(0.15)) {
        a.has_axis_name = true;
        a.axis_name = axis_name_string();
      }
      a.index_dtype = chance(0.2) ? DType::i64 : DType::i32;
      std::vector<int> parents;
      for (std::size_t x = 0; x < k_.axes.size(); ++x)
        if (k_.axes[x].dense_of < 0 && depth_of(k_, static_cast<int>(x)) < 3) parents.push_back(static_cast<int>(x));
      if (r < roots || parents.empty()) {
        if (r > 0 && chance(0.25)) {  // a root sparse axis (sparse_root: a sparse vector's nonzeros)
          a.kind = ir::AxisKind::sparse_fixed;
          if (chance(0.25)) a.fixed_npr = range(0, 4);  // sparse_fixed<void, N>
          k_.axes.push_back(a);
          continue;
        }
        a.kind = ir::AxisKind::dense_fixed;
        // dense_fixed_n<N>; sometimes 7 or 10 (register_tile: constant extents of 2..8 rows
        // are one two-dimensional tile, larger ones blocks of six and the rest by row).
        if (r > 0 && chance(0.2)) a.fixed_length = chance(0.15) ? (chance(0.5) ? 7 : 10) : range(1, 5);
      } else {
        a.kind = pick({ir::AxisKind::dense_variable, ir::AxisKind::sparse_variable, ir::AxisKind::sparse_variable,
                       ir::AxisKind::sparse_fixed});
        a.parent = pick_from(parents);
        if (a.kind == ir::AxisKind::sparse_fixed && chance(0.5)) a.fixed_npr = range(0, 3);
      }
      k_.axes.push_back(a);
    }
    // A second sparse axis over the coordinates of another (coordinates_of<X>, docs/language.md §1).
    if (chance(0.35)) {
      std::vector<int> parents, spaces;
      for (std::size_t x = 0; x < k_.axes.size(); ++x) {
        if (k_.axes[x].dense_of < 0 && depth_of(k_, static_cast<int>(x)) < 3) parents.push_back(static_cast<int>(x));
        if (k_.axes[x].dense_of < 0 && k_.axes[x].kind != ir::AxisKind::dense_variable)
          spaces.push_back(static_cast<int>(x));
      }
      if (!parents.empty() && !spaces.empty()) {
        Axis a;
        a.type = type_name();
        a.kind = ir::AxisKind::sparse_variable;
        a.parent = pick_from(parents);
        a.coordinates_of = pick_from(spaces);
        a.index_dtype = chance(0.2) ? DType::i64 : DType::i32;
        k_.axes.push_back(a);
      }
    }
    std::size_t n = k_.axes.size();
    for (std::size_t x = 0; x < n; ++x)
      if (k_.axes[x].kind != ir::AxisKind::dense_fixed && chance(0.5)) {
        Axis v;
        v.dense_of = static_cast<int>(x);
        k_.axes.push_back(v);
      }
    // dense<X> of a root axis too, sometimes (a second pass over its coordinates)
    for (std::size_t x = 0; x < n; ++x)
      if (k_.axes[x].kind == ir::AxisKind::dense_fixed && chance(0.25)) {
        Axis v;
        v.dense_of = static_cast<int>(x);
        k_.axes.push_back(v);
      }
    // A root axis written at computed indices (no children, views or coordinates_of users):
    // make_data fits its extent to those writes.
    if (chance(0.3)) {
      Axis t;
      t.type = type_name();
      t.kind = ir::AxisKind::dense_fixed;
      t.computed_target = true;
      k_.axes.push_back(t);
      target_axis_ = static_cast<int>(k_.axes.size()) - 1;
    }
  }

  std::vector<int> chain_of(int a) const {
    std::vector<int> c;
    for (int x = a; x >= 0; x = k_.axes[static_cast<std::size_t>(x)].parent) c.insert(c.begin(), x);
    return c;
  }

  std::vector<int> random_chain() {
    std::vector<int> views, real;
    for (std::size_t x = 0; x < k_.axes.size(); ++x)
      if (k_.axes[x].merge == ir::MergeOp::none) (k_.axes[x].dense_of >= 0 ? views : real).push_back(static_cast<int>(x));
    if (!views.empty() && chance(0.25)) return {pick_from(views)};
    return chain_of(pick_from(real));
  }

  // --- buffers and parameters --------------------------------------------------------------
  int add_buffer(ir::BufferRole role, DType t, bool index = false, std::vector<int> axes = {}) {
    Buffer b;
    b.var = var_name(role == ir::BufferRole::input ? "in" : role == ir::BufferRole::output ? "out" : "io");
    b.role = role;
    b.dtype = t;
    b.index = index;
    b.const_ref = chance(0.2);
    b.axes = axes.empty() ? random_chain() : axes;
    if (axes.empty() && b.axes.size() < 4 && chance(0.35)) {
      auto more = random_chain();
      // An out buffer that lists an axis twice with a child after the first ([I, J, I]),
      // or a root sparse axis twice ([V, V]), is rejected (Spindle cannot fill it); generate
      // one only now and then (an inout one is fine).
      bool repeats = false, sparse_repeats = false;
      for (int a : more)
        if (std::count(b.axes.begin(), b.axes.end(), a) > 0) {
          repeats = true;
          sparse_repeats = sparse_repeats || is_sparse_root(k_, a);
        }
      if (b.axes.size() + more.size() <= 4 &&
          (!repeats || role == ir::BufferRole::input ||
           chance(sparse_repeats && role == ir::BufferRole::output ? 0.03 : 0.1)))
        b.axes.insert(b.axes.end(), more.begin(), more.end());
    }
    for (int a : b.axes) in_buffers_.insert(a);
    k_.buffers.push_back(b);
    int id = static_cast<int>(k_.buffers.size()) - 1;
    k_.lambda.push_back({LambdaParam::buffer, id});
    return id;
  }

  void make_arguments() {
    int ins = static_cast<int>(range(1, 3)), outs = static_cast<int>(range(1, 3));
    for (int q = 0; q < ins; ++q) inputs_.push_back(add_buffer(ir::BufferRole::input, k_.T));
    if (chance(0.3)) index_buffers_.push_back(add_buffer(ir::BufferRole::input, chance(0.7) ? DType::i32 : DType::i64, true));
    int params = chance(0.4) ? static_cast<int>(range(1, 2)) : 0;
    for (int q = 0; q < params; ++q) {
      Param p;
      p.var = var_name("s");
      p.dtype = chance(0.85) ? k_.T : pick({DType::f32, DType::f64, DType::i32, DType::i64});
      p.value = static_cast<double>(range(-2, 3));
      k_.params.push_back(p);
      k_.lambda.push_back({LambdaParam::param, static_cast<int>(k_.params.size()) - 1});
    }
    for (int q = 0; q < outs; ++q) {
      ir::BufferRole role = chance(0.3) ? ir::BufferRole::inout : ir::BufferRole::output;
      int b = add_buffer(role, k_.T);
      outputs_.push_back(b);
      ops_[b] = pick({WriteOp::add, WriteOp::add, WriteOp::add, WriteOp::sub, WriteOp::max, WriteOp::min, WriteOp::mul});
    }
    if (target_axis_ >= 0) {  // an output written at computed indices: [T] or [T, chain]
      std::vector<int> axes{target_axis_};
      if (chance(0.5)) {
        auto more = random_chain();
        if (std::count(more.begin(), more.end(), target_axis_) == 0 && more.size() < 4)
          axes.insert(axes.end(), more.begin(), more.end());
      }
      int b = add_buffer(chance(0.3) ? ir::BufferRole::inout : ir::BufferRole::output, k_.T, false, axes);
      outputs_.push_back(b);
      ops_[b] = pick({WriteOp::add, WriteOp::add, WriteOp::sub, WriteOp::max, WriteOp::min});
    }
    make_scatter();
    // Names for the call arguments, sometimes: keyword-like, colliding with generated names.
    if (chance(0.25)) {
      static const char* pool[] = {"float", "if", "threadIdx", "spindle_x", "I_len", "a", "b", "rt", "J_indptr",
                                   "A", "x", "y", "main", "restrict", "_Bool", "out", "t", "i"};
      std::set<std::string> seen;
      for (const LambdaParam& p : k_.lambda) {
        if (p.kind == LambdaParam::iter) continue;
        std::string n;
        do n = chance(0.6) ? pool[range(0, std::size(pool) - 1)] : "arg" + std::to_string(range(0, 99));
        while (!seen.insert(n).second);
        k_.given_names.push_back(n);
      }
    }
  }

  // About one kernel in four (decided, and its buffers drawn, by a generator of its own, so the
  // other kernels of a seed stay as they were) scatters into an output at indirect indices
  // (docs/language.md §4.1, the pattern of COO SpMM, segment reductions and GNN message
  // passing): an integer index buffer over a random chain whose values index a root dense axis
  // A, and an output [A] or [A, chain] whose writes take A's slot from a read of that buffer at
  // its stored elements (`y(seg(e), f) += x(e, f)`, `y(sp::cast<std::int64_t>(eid(r, c))) += ...`)
  // when the iterators in scope reach them. Every write of y is a reduction and no statement
  // reads y (the iteration that scatters into it must not). make_data keeps A non-empty and the
  // index values inside it; the harness also moves one outside (the call must be refused).
  void make_scatter() {
    if (std::uniform_real_distribution<double>(0, 1)(scatter_rng_) >= 0.25) return;
    std::vector<int> roots;
    for (std::size_t x = 0; x < k_.axes.size(); ++x) {
      const Axis& ax = k_.axes[x];
      if (ax.kind == ir::AxisKind::dense_fixed && ax.parent < 0 && ax.dense_of < 0 && !ax.computed_target &&
          !ax.assembled && ax.merge == ir::MergeOp::none)
        roots.push_back(static_cast<int>(x));
    }
    if (roots.empty()) return;
    std::swap(rng_, scatter_rng_);
    const int a = pick_from(roots);
    k_.axes[static_cast<std::size_t>(a)].scatter_target = true;
    scatter_index_ = add_buffer(ir::BufferRole::input, chance(0.7) ? DType::i32 : DType::i64, false);
    k_.buffers[static_cast<std::size_t>(scatter_index_)].scatter_of = a;
    std::vector<int> axes{a};
    if (chance(0.5)) {
      auto more = random_chain();
      if (std::count(more.begin(), more.end(), a) == 0 && more.size() < 4) axes.insert(axes.end(), more.begin(), more.end());
    }
    scatter_buf_ = add_buffer(chance(0.3) ? ir::BufferRole::inout : ir::BufferRole::output, k_.T, false, axes);
    outputs_.push_back(scatter_buf_);
    ops_[scatter_buf_] = pick({WriteOp::add, WriteOp::add, WriteOp::sub, WriteOp::max, WriteOp::min, WriteOp::mul});
    std::swap(rng_, scatter_rng_);
  }

  // The read of the scatter index buffer at its stored elements by iterators in scope (each
  // slot indexed as a write's slot would be), or none.
  bool scatter_index(Index& x) {
    const Buffer& ib = k_.buffers[static_cast<std::size_t>(scatter_index_)];
    auto e = std::make_shared<Expr>();
    e->op = Op::Read;
    e->id = scatter_index_;
    e->t = ib.dtype;
    for (std::size_t s = 0; s < ib.axes.size(); ++s) {
      const int it = iterator_for_slot(ib, s);
      if (it < 0) return false;
      Index i;
      i.kind = Index::Iter;
      i.iter = it;
      e->idx.push_back(i);
    }
    x.kind = chance(0.5) ? Index::IndirectCast : Index::Indirect;
    x.indirect = e;
    return true;
  }

  // --- iterators -------------------------------------------------------------------------
  bool bound(int axis) const {
    for (int it : scope_)
      if (k_.iterators[static_cast<std::size_t>(it)].axis == axis) return true;
    return false;
  }

  // Up to `want` axes iterable here (parents bound or chosen first); registers iterators.
  std::vector<int> choose_axes(int want) {
    std::vector<int> chosen_axes, its;
    auto can = [&](int a) {
      if (!in_buffers_.count(a)) return false;  // no argument would give its extent
      if (bound(a) || std::count(chosen_axes.begin(), chosen_axes.end(), a)) return false;
      if (k_.axes[static_cast<std::size_t>(a)].merge != ir::MergeOp::none) return merge_ready(a, chosen_axes);
      int p = k_.axes[static_cast<std::size_t>(a)].parent;
      if (p < 0) return true;
      return bound(p) || std::count(chosen_axes.begin(), chosen_axes.end(), p) > 0 || by_coordinate(p, chosen_axes);
    };
    for (int tries = 0; tries < 12 && static_cast<int>(chosen_axes.size()) < want; ++tries) {
      std::vector<int> options;
      std::vector<int> merges;  // co-iterations, when there are some, get every other pick
      for (std::size_t a = 0; a < k_.axes.size(); ++a)
        if (can(static_cast<int>(a))) {
          options.push_back(static_cast<int>(a));
          if (k_.axes[a].merge != ir::MergeOp::none) merges.push_back(static_cast<int>(a));
        }
      if (options.empty()) break;
      chosen_axes.push_back(!merges.empty() && chance(0.5) ? pick_from(merges) : pick_from(options));
    }
    for (int a : chosen_axes) its.push_back(new_iterator(a));
    return its;
  }

  // Co-iteration (§3.1): every operand's parent is bound, chosen before, or named by
  // coordinate (an operand without a parent is a sparse root).
  bool merge_ready(int a, const std::vector<int>& chosen) const {
    for (int o : k_.axes[static_cast<std::size_t>(a)].merge_operands) {
      const int p = k_.axes[static_cast<std::size_t>(o)].parent;
      if (p >= 0 && !bound(p) && !std::count(chosen.begin(), chosen.end(), p) && !by_coordinate(p, chosen)) return false;
    }
    return true;
  }

  // About one kernel in four iterates the union or intersection of sparse axes over one
  // coordinate space (docs/language.md §3.1), decided by a generator of its own: when no two
  // sparse axes share a space, a second sparse axis declared coordinates_of one is added.
  void make_merged_axes() {
    std::mt19937_64 g(k_.seed ^ 0x9e3779b97f4a7c15ULL);
    auto draw = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(g); };
    if (g() % 4 != 0) return;
    auto groups = [&] {
      std::map<int, std::vector<int>> m;
      for (std::size_t x = 0; x < k_.axes.size(); ++x) {
        const Axis& ax = k_.axes[x];
        if (ax.dense_of < 0 && !ax.assembled && ax.kind != ir::AxisKind::dense_fixed && ax.kind != ir::AxisKind::dense_variable)
          m[coord_space(static_cast<int>(x))].push_back(static_cast<int>(x));
      }
      return m;
    };
    auto m = groups();
    bool pair = false;
    for (auto& [space, members] : m) pair = pair || members.size() >= 2;
    if (!pair && !m.empty()) {
      auto it = m.begin();
      std::advance(it, draw(0, static_cast<std::int64_t>(m.size()) - 1));
      std::vector<int> parents;
      for (std::size_t x = 0; x < k_.axes.size(); ++x)
        if (k_.axes[x].dense_of < 0 && !k_.axes[x].computed_target && depth_of(k_, static_cast<int>(x)) < 3)
          parents.push_back(static_cast<int>(x));
      const int X = it->second[static_cast<std::size_t>(draw(0, static_cast<std::int64_t>(it->second.size()) - 1))];
      Axis a;
      a.type = type_name();
      a.kind = ir::AxisKind::sparse_variable;
      // Mostly X's own parent (two CSRs over the same rows), else any.
      const int xp = k_.axes[static_cast<std::size_t>(X)].parent;
      a.parent = xp >= 0 && draw(0, 3) > 0 ? xp : parents[static_cast<std::size_t>(draw(0, static_cast<std::int64_t>(parents.size()) - 1))];
      a.coordinates_of = X;
      a.index_dtype = draw(0, 4) == 0 ? DType::i64 : DType::i32;
      k_.axes.push_back(a);
      m = groups();
    }
    int made = 0;
    for (auto& [space, members] : m) {
      if (members.size() < 2 || made == 2) continue;
      std::vector<int> ops = members;
      std::shuffle(ops.begin(), ops.end(), g);
      ops.resize(std::min<std::size_t>(ops.size(), static_cast<std::size_t>(draw(2, 3))));
      Axis v;
      v.dense_of = ops[0];
      v.merge = draw(0, 1) ? ir::MergeOp::union_ : ir::MergeOp::intersection;
      v.merge_operands = ops;
      k_.axes.push_back(v);
      ++made;
    }
  }

  // Each operand of a merged axis gets an input over its chain, when no buffer has it, so
  // that the call binds it; a merged axis is iterable when all its operands are.
  void give_merge_operands_arguments() {
    for (std::size_t x = 0; x < k_.axes.size(); ++x) {
      const Axis& ax = k_.axes[x];
      if (ax.merge == ir::MergeOp::none) continue;
      for (int o : ax.merge_operands)
        if (!in_buffers_.count(o)) {
          inputs_.push_back(add_buffer(ir::BufferRole::input, k_.T, false, chain_of(o)));
          // One name more when the call's arguments are named (make_arguments named the others).
          if (!k_.given_names.empty()) k_.given_names.push_back("operand_" + std::to_string(k_.given_names.size()));
        }
      in_buffers_.insert(static_cast<int>(x));
    }
  }

  // A fresh iterator over axis `a`; its index in k_.iterators.
  int new_iterator(int a) {
    Iterator it;
    it.axis = a;
    it.var = var_name("i");
    k_.iterators.push_back(it);
    return static_cast<int>(k_.iterators.size()) - 1;
  }

  void order_iterators() {
    // The lambda's iterators are iterated in the order they appear: keep that order.
    std::vector<std::size_t> slots;
    std::vector<int> its;
    for (std::size_t q = 0; q < k_.lambda.size(); ++q)
      if (k_.lambda[q].kind == LambdaParam::iter) {
        slots.push_back(q);
        its.push_back(k_.lambda[q].id);
      }
    std::sort(its.begin(), its.end());  // creation order is parent-first
    for (std::size_t q = 0; q < slots.size(); ++q) {
      k_.lambda[slots[q]].id = its[q];
      scope_.push_back(its[q]);
    }
  }

  // --- statements ----------------------------------------------------------------------------
  std::vector<StmtP> body(int nest, int n, bool top_without_iterators) {
    std::vector<StmtP> out;
    const std::size_t locals0 = visible_locals_.size(), named0 = visible_named_.size();
    if (chance(0.35) || (top_without_iterators && chance(0.3))) out.push_back(local_decl());
    for (int s = 0; s < n; ++s) {
      double r = std::uniform_real_distribution<double>(0, 1)(rng_);
      if ((top_without_iterators && s == 0) || (nest < 3 && r < 0.25)) {
        if (auto f = for_each(nest)) out.push_back(guarded_loop(f));
        continue;
      }
      if (r < 0.35 && !visible_locals_.empty()) {
        out.push_back(guarded(local_write()));
        continue;
      }
      if (r < 0.45) {
        out.push_back(named_value());
        continue;
      }
      if (r < 0.5) {
        out.push_back(local_decl());
        continue;
      }
      if (auto w = guarded(write())) {
        out.push_back(w);
        if (auto t = twin(*w)) out.push_back(t);
      }
    }
    visible_locals_.resize(locals0);
    visible_named_.resize(named0);
    return out;
  }

  StmtP for_each(int nest) {
    std::vector<int> its = choose_axes(static_cast<int>(range(1, 2)));
    if (its.empty()) return nullptr;
    auto s = std::make_shared<Stmt>();
    s->kind = Stmt::ForEach;
    s->iters = its;
    s->auto_params = chance(0.25);
    const std::size_t depth0 = scope_.size();
    for (int it : its) scope_.push_back(it);
    s->body = body(nest + 1, static_cast<int>(range(1, 3)), false);
    scope_.resize(depth0);
    if (s->body.empty()) return nullptr;
    return s;
  }

  StmtP local_decl() {
    Local l;
    l.var = var_name("t");
    l.dtype = k_.T;
    k_.locals.push_back(l);
    auto s = std::make_shared<Stmt>();
    s->kind = Stmt::LocalDecl;
    s->target = static_cast<int>(k_.locals.size()) - 1;
    s->value = value(2);
    if (!visible_locals_.empty() && chance(0.2)) {  // a copy of another local
      auto e = make(Op::Local, k_.T, {});
      const_cast<Expr&>(*e).id = pick_from(visible_locals_);
      s->value = e;
    }
    if (chance(0.4)) {
      static const char* pool[] = {"t", "if", "acc", "", "a b", "J_len", "row_max", "spindle_t", "__x", "float"};
      s->local_named = true;
      s->local_name = pool[range(0, std::size(pool) - 1)];
    }
    visible_locals_.push_back(s->target);
    return s;
  }

  StmtP local_write() {
    auto s = std::make_shared<Stmt>();
    s->kind = Stmt::LocalWrite;
    s->target = pick_from(visible_locals_);
    s->op = pick({WriteOp::assign, WriteOp::add, WriteOp::add, WriteOp::sub, WriteOp::mul, WriteOp::max, WriteOp::min});
    s->value = s->op == WriteOp::mul ? sign_value() : value(2);
    return s;
  }

  StmtP named_value() {
    Named n;
    n.var = var_name("v");
    n.dtype = k_.T;
    k_.named.push_back(n);
    auto s = std::make_shared<Stmt>();
    s->kind = Stmt::Named;
    s->target = static_cast<int>(k_.named.size()) - 1;
    s->value = value(2);
    s->named_style = static_cast<int>(range(0, 2));
    visible_named_.push_back(s->target);
    return s;
  }

  // The iterator in scope over the coordinate space of axis a (for a dense root slot), or of
  // a itself (for a slot with a parent, a slot followed by a child, a root sparse slot).
  int iterator_for_slot(const Buffer& b, std::size_t slot) {
    const int a = b.axes[slot];
    const Axis& ax = k_.axes[static_cast<std::size_t>(a)];
    // The rows and columns of an assembled output: any iterator over P's, X's coordinates (§4.6).
    const Axis* next = slot + 1 < b.axes.size() ? &k_.axes[static_cast<std::size_t>(b.axes[slot + 1])] : nullptr;
    const bool exact = (!ax.assembled && (ax.parent >= 0 || is_sparse_root(ax))) || (next && next->parent >= 0 && !next->assembled);
    std::vector<int> c, shared;
    for (int it : scope_) {
      int x = k_.iterators[static_cast<std::size_t>(it)].axis;
      if (exact ? x == a : coord_space(x) == coord_space(a)) {
        c.push_back(it);
        if (x != a && k_.axes[static_cast<std::size_t>(x)].coordinates_of >= 0) shared.push_back(it);
      }
    }
    if (!shared.empty() && chance(0.5)) c = shared;  // exercise coordinates_of iterators in foreign slots
    return c.empty() ? -1 : pick_from(c);
  }
  int coord_space(int a) const { return coordinate_space_of(k_, a); }

  StmtP write() {
    std::vector<int> options = outputs_;
    std::shuffle(options.begin(), options.end(), rng_);
    if (scatter_buf_ >= 0 && chance(0.4)) {  // the scattered output first, more often than its share
      options.erase(std::find(options.begin(), options.end(), scatter_buf_));
      options.insert(options.begin(), scatter_buf_);
    }
    for (int b : options) {
      const Buffer& buf = k_.buffers[static_cast<std::size_t>(b)];
      std::vector<int> idx;
      bool ok = true;
      int computed_slot = -1, indirect_slot = -1;
      Index indirect;
      for (std::size_t s = 0; s < buf.axes.size() && ok; ++s) {
        if (buf.axes[s] == target_axis_ && computed_slot < 0 && ops_.at(b) != WriteOp::mul && chance(0.6)) {
          computed_slot = static_cast<int>(s);
          idx.push_back(-1);
          continue;
        }
        if (b == scatter_buf_ && s == 0 && chance(0.85) && scatter_index(indirect)) {
          indirect_slot = 0;
          idx.push_back(-1);
          continue;
        }
        int it = iterator_for_slot(buf, s);
        ok = it >= 0;
        idx.push_back(it);
      }
      if (!ok) continue;
      auto s = std::make_shared<Stmt>();
      s->kind = Stmt::Write;
      s->target = b;
      s->iters = idx;
      s->via_ref = chance(0.08);
      bool all = true;
      for (int it : scope_) all = all && std::count(idx.begin(), idx.end(), it) > 0;
      WriteOp op = ops_.at(b);
      // Scattered rows: every write of c uses c's one operator (`-=` counts as `+=`), and `=`
      // needs every enclosing iterator in its indices (§4.2).
      const bool one_op = scattered_ && b == assembled_buf_;
      if (one_op && op == WriteOp::assign && !all) continue;
      if (buf.role == ir::BufferRole::inout && b != scatter_buf_ && chance(0.15))
        op = pick({WriteOp::add, WriteOp::sub, WriteOp::mul, WriteOp::max, WriteOp::min});
      if (op == WriteOp::sub && chance(0.5)) op = WriteOp::add;
      if (all && computed_slot < 0 && !one_op && b != scatter_buf_ && chance(0.35)) op = WriteOp::assign;
      if (computed_slot >= 0) {  // a reduction (§4.1); the index avoids T's own iterators
        if (op == WriteOp::assign || op == WriteOp::mul) op = WriteOp::add;
        s->computed_slot = computed_slot;
        s->computed = computed_index(2);
      }
      if (b == scatter_buf_ && op == WriteOp::assign) op = WriteOp::add;  // every write of y reduces
      if (indirect_slot >= 0) {
        s->indirect_slot = indirect_slot;
        s->indirect = indirect;
      }
      s->op = op;
      s->value = op == WriteOp::mul ? sign_value() : value(3);
      if (chance(0.03) && !s->iters.empty() && computed_slot < 0 && indirect_slot < 0 && assembled_buf_ < 0) {  // break rule 4.1 on purpose: must be rejected
        s->bad_slot = static_cast<int>(range(0, static_cast<std::int64_t>(s->iters.size()) - 1));
        s->bad_index.kind = chance(0.5) ? Index::IterPlus : Index::Literal;
        s->bad_index.iter = s->iters[static_cast<std::size_t>(s->bad_slot)];
        s->bad_index.k = s->bad_index.kind == Index::IterPlus ? pick({-1, 1}) : range(0, 2);
        // A reduction into a dense root slot accepts a computed index whose bounds can be
        // proved (§4.1: `y(i + 1) += ...`, `y(0) += ...`); `i - 1` there is never provably
        // >= 0. A root sparse slot takes no index but its own iterator.
        const Axis& slot = k_.axes[static_cast<std::size_t>(buf.axes[static_cast<std::size_t>(s->bad_slot)])];
        if (slot.parent < 0 && !is_sparse_root(slot) && op != WriteOp::assign) {
          s->bad_index.kind = Index::IterPlus;
          s->bad_index.k = -1;
        }
      }
      return s;
    }
    // No output can be written here: accumulate into a local if there is one.
    if (!visible_locals_.empty()) return local_write();
    return nullptr;
  }

  // About one write in five (a Write or LocalWrite) runs under sp::when(cond, ...) (§4.7), a
  // third of those with an else branch writing another value into the same target. Decided,
  // and the condition and the value drawn, by a generator of its own, so the other kernels of
  // a seed stay as they were.
  StmtP guarded(StmtP w) {
    if (!w || (w->kind != Stmt::Write && w->kind != Stmt::LocalWrite)) return w;
    if (std::uniform_real_distribution<double>(0, 1)(when_rng_) >= 0.2) return w;
    auto s = std::make_shared<Stmt>(*w);
    std::swap(rng_, when_rng_);
    s->cond = condition(1);
    if (chance(0.35)) s->else_value = s->op == WriteOp::mul ? sign_value() : value(2);
    std::swap(rng_, when_rng_);
    return s;
  }

  // About one for_each in eight runs under sp::when(cond, ...) (§4.7: the front end tests
  // cond in the loop's body; a condition that reads what the loop writes is a definition
  // error, a rejection here). Decided, and the condition drawn (in the scope around the loop),
  // by a generator of its own.
  StmtP guarded_loop(StmtP f) {
    if (std::uniform_real_distribution<double>(0, 1)(loop_when_rng_) >= 0.125) return f;
    auto s = std::make_shared<Stmt>(*f);
    std::swap(rng_, loop_when_rng_);
    s->cond = condition(1);
    std::swap(rng_, loop_when_rng_);
    return s;
  }

  // A second update of the element a write just updated, with the same operator and another
  // value (`c(i, n) += a(i, k) * w(k, n); c(i, n) += b(i, k) * v(k, n)`: two products summed in
  // one pass, which the CPU schedule's register tile keeps in one tile). Decided, and its value
  // drawn, by a generator of its own, so the other kernels of a seed stay as they were. Not for
  // a write that must be rejected nor for an assembled output.
  StmtP twin(const Stmt& w) {
    if (w.kind != Stmt::Write || w.bad_slot >= 0 || assembled_buf_ >= 0) return nullptr;
    if (std::uniform_real_distribution<double>(0, 1)(twin_rng_) >= 0.2) return nullptr;
    auto s = std::make_shared<Stmt>(w);
    s->via_ref = false;
    std::swap(rng_, twin_rng_);
    s->value = s->op == WriteOp::mul ? sign_value() : value(3);
    std::swap(rng_, twin_rng_);
    return s;
  }

  // A computed write index over the iterators in scope that are not over T's coordinates
  // (T's extent is fitted to the index) nor of a dense_variable axis.
  CIdxP computed_index(int d) {
    std::vector<int> its;
    for (int it : scope_) {
      const int a = k_.iterators[static_cast<std::size_t>(it)].axis;
      if (coord_space(a) != coord_space(target_axis_) && k_.axes[static_cast<std::size_t>(a)].kind != ir::AxisKind::dense_variable)
        its.push_back(it);
    }
    auto x = std::make_shared<CIdx>();
    if (d <= 0 || chance(0.25)) {
      if (!its.empty() && chance(0.8) && d < 2) {
        x->kind = CIdx::Iter;
        x->iter = pick_from(its);
      } else {
        x->kind = CIdx::Const;
        x->c = range(0, 3);
      }
      return x;
    }
    x->kind = pick({CIdx::Add, CIdx::Add, CIdx::MulC, CIdx::DivC, CIdx::ModC, CIdx::Min, CIdx::MaxShift});
    x->a = computed_index(d - 1);
    if (x->kind == CIdx::Add || x->kind == CIdx::Min) x->b = computed_index(d - 1);
    x->c = x->kind == CIdx::MaxShift ? range(1, 2) : range(1, 4);
    return x;
  }

  // --- expressions --------------------------------------------------------------------------
  ExprP make(Op op, DType t, std::vector<ExprP> kids) {
    auto e = std::make_shared<Expr>();
    e->op = op;
    e->t = t;
    e->kids = std::move(kids);
    return e;
  }

  // A C++ literal of some type whose value converts to T: small numbers of both signs,
  // sometimes large ones (integers wrap), written as int, long long, unsigned, float, double.
  ExprP constant(DType t, bool small = false) {
    auto e = std::make_shared<Expr>();
    e->op = Op::Const;
    e->t = t;
    double v = static_cast<double>(range(-3, 3));
    int form = static_cast<int>(range(0, is_float(t) ? 3 : 2));
    if (!small && !is_float(t) && chance(0.08)) {
      static const long long big[] = {2147483647LL, -2147483647LL, 3000000000LL, 4294967296LL, 9007199254740993LL,
                                      -9223372036854775807LL};
      long long b = big[range(0, std::size(big) - 1)];
      e->literal = std::to_string(b) + "LL";
      e->ivalue = t == DType::i32 ? static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<std::uint64_t>(b))) : b;
      return e;
    }
    if (is_float(t) && chance(0.3)) v = pick({0.5, -0.5, 1.5, -2.5, 0.25, -0.0});
    switch (form) {
      case 0: e->literal = std::to_string(static_cast<long long>(v)); convert_literal(*e, static_cast<long long>(v), false); break;
      case 1: e->literal = std::to_string(static_cast<long long>(v)) + "LL"; convert_literal(*e, static_cast<long long>(v), false); break;
      case 2: e->literal = float_text(v, false); convert_literal(*e, v, true); break;
      default: e->literal = float_text(v, true); convert_literal(*e, static_cast<float>(v), true); break;
    }
    if (e->literal == "-0.0" && !is_float(t)) e->literal = "0";
    return e;
  }

  // A value whose magnitude is 1: the factor of a *= reduction (no overflow over thousands).
  ExprP sign_value() {
    ExprP v = value(1);
    ExprP one = constant_exact(k_.T, 1), minus = constant_exact(k_.T, -1);
    return make(Op::Select, k_.T, {make(Op::Gt, DType::boolean, {v, constant_exact(k_.T, 0)}), one, minus});
  }
  ExprP constant_exact(DType t, long long v) {
    auto e = std::make_shared<Expr>();
    e->op = Op::Const;
    e->t = t;
    e->literal = std::to_string(v);
    convert_literal(*e, static_cast<double>(v), false);
    return e;
  }

  Index read_index(int slot_axis, int depth) {
    Index x;
    double r = std::uniform_real_distribution<double>(0, 1)(rng_);
    if (r < 0.72) {
      std::vector<int> c, own;
      const Axis& ax = k_.axes[static_cast<std::size_t>(slot_axis)];
      for (int it : scope_) {
        int a = k_.iterators[static_cast<std::size_t>(it)].axis;
        if ((ax.parent >= 0 && a == slot_axis) || coord_space(a) == coord_space(slot_axis)) c.push_back(it);
        if (a == slot_axis) own.push_back(it);
      }
      // A root sparse slot: mostly its own iterator (a position), else a lookup of the
      // coordinate of another iterator of its coordinate space (absent = 0).
      if (is_sparse_root(ax) && !own.empty() && chance(0.7)) c = own;
      if (!c.empty()) {
        x.kind = Index::Iter;
        x.iter = pick_from(c);
        return x;
      }
    }
    if (r < 0.82 && !scope_.empty()) {
      x.kind = Index::IterPlus;
      x.iter = pick_from(scope_);
      x.k = pick({-1, 1, 2});
      return x;
    }
    if (r < 0.92 && !index_buffers_.empty() && depth < 2) {
      x.kind = chance(0.5) ? Index::IndirectCast : Index::Indirect;
      x.indirect = read(pick_from(index_buffers_), depth + 1);
      return x;
    }
    x.kind = Index::Literal;
    x.k = range(0, 3);
    return x;
  }

  ExprP read(int b, int depth = 0) {
    auto e = std::make_shared<Expr>();
    e->op = Op::Read;
    e->id = b;
    e->t = k_.buffers[static_cast<std::size_t>(b)].dtype;
    for (int a : k_.buffers[static_cast<std::size_t>(b)].axes) e->idx.push_back(read_index(a, depth));
    return e;
  }

  ExprP leaf() {
    double r = std::uniform_real_distribution<double>(0, 1)(rng_);
    if (r < 0.5) {
      std::vector<int> readable = inputs_;
      if (chance(0.05) && assembled_buf_ < 0)
        for (int o : outputs_)
          if (o != scatter_buf_) readable.push_back(o);
      return read(pick_from(readable));
    }
    if (r < 0.58) {
      std::vector<int> same;
      for (std::size_t p = 0; p < k_.params.size(); ++p)
        if (k_.params[p].dtype == k_.T) same.push_back(static_cast<int>(p));
      if (!same.empty()) {
        auto e = make(Op::Param, k_.T, {});
        const_cast<Expr&>(*e).id = pick_from(same);
        return e;
      }
      for (std::size_t p = 0; p < k_.params.size(); ++p) {  // another type: cast it
        auto e = make(Op::Param, k_.params[p].dtype, {});
        const_cast<Expr&>(*e).id = static_cast<int>(p);
        auto c = make(Op::Cast, k_.T, {e});
        const_cast<Expr&>(*c).cast_to = k_.T;
        return c;
      }
    }
    if (r < 0.68 && !visible_locals_.empty()) {
      auto e = make(Op::Local, k_.T, {});
      const_cast<Expr&>(*e).id = pick_from(visible_locals_);
      return e;
    }
    if (r < 0.74 && !visible_named_.empty()) {
      auto e = make(Op::Named, k_.T, {});
      const_cast<Expr&>(*e).id = pick_from(visible_named_);
      return e;
    }
    if (r < 0.84 && !scope_.empty()) {
      auto e = make(Op::Iter, k_.T, {});
      const_cast<Expr&>(*e).id = pick_from(scope_);
      return e;
    }
    return constant(k_.T);
  }

  ExprP condition(int d) {
    double r = std::uniform_real_distribution<double>(0, 1)(rng_);
    if (d > 0 && r < 0.15) return make(Op::And, DType::boolean, {condition(d - 1), condition(d - 1)});
    if (d > 0 && r < 0.25) return make(Op::Or, DType::boolean, {condition(d - 1), condition(d - 1)});
    if (d > 0 && r < 0.33) return make(Op::Not, DType::boolean, {condition(d - 1)});
    Op op = pick({Op::Lt, Op::Le, Op::Gt, Op::Ge, Op::Eq, Op::Ne});
    ExprP a = value(d - 1), b = chance(0.4) ? constant(k_.T, true) : value(d - 1);
    if (a->op == Op::Const && b->op == Op::Const) b = leaf();
    return chance(0.5) ? make(op, DType::boolean, {a, b}) : make(op, DType::boolean, {b, a});
  }

  ExprP value(int d) {
    const DType T = k_.T;
    if (d <= 0 || chance(0.3)) return leaf();
    double r = std::uniform_real_distribution<double>(0, 1)(rng_);
    if (r < 0.18) return make(Op::Add, T, {value(d - 1), chance(0.3) ? constant(T, true) : value(d - 1)});
    if (r < 0.3) return make(Op::Sub, T, {chance(0.2) ? constant(T, true) : value(d - 1), value(d - 1)});
    if (r < 0.38 && muls_ < 2) {
      ++muls_;
      ExprP e = make(Op::Mul, T, {value(d - 1), chance(0.4) ? constant(T, true) : leaf()});
      --muls_;
      return e;
    }
    if (r < 0.46) return make(Op::Neg, T, {chance(0.2) ? make(Op::Neg, T, {value(d - 1)}) : value(d - 1)});
    if (r < 0.52) {
      ExprP a = value(d - 1), b = chance(0.3) ? constant(T, true) : value(d - 1);
      return chance(0.5) ? make(Op::Max, T, {a, b}) : make(Op::Max, T, {b, a});
    }
    if (r < 0.57) {
      ExprP a = value(d - 1), b = chance(0.3) ? constant(T, true) : value(d - 1);
      return chance(0.5) ? make(Op::Min, T, {a, b}) : make(Op::Min, T, {b, a});
    }
    if (r < 0.67) {
      ExprP a = chance(0.2) ? constant(T, true) : value(d - 1), b = chance(0.2) ? constant(T, true) : value(d - 1);
      return make(Op::Select, T, {condition(d - 1), a, b});
    }
    if (r < 0.72) return make(Op::Abs, T, {value(d - 1)});
    if (r < 0.78) {  // a round trip through another type (exact for the small values here)
      DType u = is_float(T) ? pick({DType::f64, DType::i64, DType::i32}) : pick({DType::f64, DType::f32, DType::i64, DType::i32});
      if (u == T) u = DType::f64 == T ? DType::i64 : DType::f64;
      auto inner = make(Op::Cast, u, {value(d - 1)});
      const_cast<Expr&>(*inner).cast_to = u;
      auto outer = make(Op::Cast, T, {inner});
      const_cast<Expr&>(*outer).cast_to = T;
      return outer;
    }
    if (r < 0.84 && !is_float(T)) {  // division and remainder by something never 0 (nor -1)
      ExprP den = constant_exact(T, pick({2, 3, -3, 5, -7}));
      if (chance(0.5)) {
        auto pos = make(Op::Add, T, {make(Op::Abs, T, {make(Op::Max, T, {value(d - 1), constant_exact(T, -100)})}),
                                     constant_exact(T, 2)});
        den = pos;
      }
      return make(chance(0.5) ? Op::Div : Op::Mod, T, {value(d - 1), den});
    }
    if (r < 0.84 && !k_.exact) {
      switch (range(0, 5)) {
        case 0: return make(Op::Div, T, {value(d - 1), make(Op::Add, T, {make(Op::Abs, T, {value(d - 1)}), constant_exact(T, 1)})});
        case 1:  // exp(-min(|v|, 60)): away from underflow (see random_kernel.hpp)
          return make(Op::Exp, T,
                      {make(Op::Neg, T, {make(Op::Min, T, {make(Op::Abs, T, {value(d - 1)}), constant_exact(T, 60)})})});
        case 2: return make(Op::Sqrt, T, {make(Op::Abs, T, {value(d - 1)})});
        case 3: return make(Op::Tanh, T, {value(d - 1)});
        case 4: return make(Op::Log, T, {make(Op::Add, T, {make(Op::Abs, T, {value(d - 1)}), constant_exact(T, 1)})});
        default: return make(Op::Pow, T, {make(Op::Add, T, {make(Op::Abs, T, {value(d - 1)}), constant_exact(T, 1)}),
                                          constant(T, true)});
      }
    }
    if (r < 0.84 && is_float(T)) {  // exact float division by a power of two
      auto den = std::make_shared<Expr>();
      den->op = Op::Const;
      den->t = T;
      double dv = pick({2.0, -4.0, 0.5});
      den->literal = float_text(dv, chance(0.5));
      convert_literal(*den, dv, true);
      return make(Op::Div, T, {value(d - 1), den});
    }
    return make(Op::Add, T, {value(d - 1), leaf()});
  }

  std::mt19937_64 rng_, twin_rng_, when_rng_, scatter_rng_, loop_when_rng_;
  Kernel k_;
  std::set<std::string> used_cpp_{"sp", "spindle", "std", "kernel", "k", "c", "define", "registration"};
  int var_counter_ = 0, muls_ = 0;
  std::vector<int> inputs_, outputs_, index_buffers_;
  std::map<int, WriteOp> ops_;
  std::set<int> in_buffers_;
  std::vector<int> scope_;  // iterators in scope
  int target_axis_ = -1;    // the computed-write target axis T, if any
  int scatter_buf_ = -1;    // the output written at indirect indices (make_scatter), if any
  int scatter_index_ = -1;  // ... and the index buffer whose values index its first slot
  int assembled_buf_ = -1;  // the assembled output c, in an assembled kernel
  bool scattered_ = false;  // assembled kernel: c written at scattered rows, one operator
  std::vector<int> visible_locals_, visible_named_;
};

}  // namespace detail

// --- shrinking -----------------------------------------------------------------------------
// Step t: drop the t-th statement (pre-order over all bodies, a for_each with its body), or
// replace the t-th non-leaf expression (after the statements) by its first operand of the
// same type, or by a constant. Returns false when t is past the last candidate.
namespace detail {

class Shrinker {
 public:
  explicit Shrinker(int target) : target_(target) {}
  bool applied = false;

  std::vector<StmtP> stmts(const std::vector<StmtP>& in) {
    std::vector<StmtP> out;
    for (auto& s : in) {
      if (phase_ == 0 && !applied && hit()) continue;  // drop it
      out.push_back(stmt(s));
    }
    return out;
  }

  void exprs_phase() { phase_ = 1; }

 private:
  bool hit() {
    if (count_++ != target_) return false;
    applied = true;
    return true;
  }
  StmtP stmt(const StmtP& s) {
    if (applied) return s;
    auto c = std::make_shared<Stmt>(*s);
    if (s->kind == Stmt::ForEach) c->body = stmts(s->body);
    else if (phase_ == 1 && s->value) {
      c->value = expr(s->value);
      if (s->else_value) c->else_value = expr(s->else_value);
    }
    return c;
  }
  ExprP expr(const ExprP& e) {
    if (applied || !e) return e;
    if (phase_ == 1 && !is_leaf(e->op) && e->t != DType::boolean && hit()) {
      for (auto& k : e->kids)
        if (k->t == e->t) return k;
      auto c = std::make_shared<Expr>();
      c->op = Op::Const;
      c->t = e->t;
      c->literal = "1";
      convert_literal(*c, 1, false);
      return c;
    }
    auto c = std::make_shared<Expr>(*e);
    for (auto& k : c->kids) k = expr(k);
    return c;
  }
  int target_, count_ = 0, phase_ = 0;
};

}  // namespace detail

inline Kernel generate(std::uint64_t seed) { return detail::Generator(seed).make(); }

// Does the kernel contain a write that breaks rule 4.1 on purpose (a non-iterator index)?
inline bool has_bad_write(const std::vector<StmtP>& body) {
  for (auto& s : body)
    if ((s->kind == Stmt::Write && s->bad_slot >= 0) || (s->kind == Stmt::ForEach && has_bad_write(s->body))) return true;
  return false;
}

// Does every use of a local or a named value follow its declaration in an enclosing body?
// (Shrinking can drop a declaration; such a candidate is not a C++ program.)
inline bool well_formed(const Kernel& k) {
  std::vector<std::set<int>> locals(1), named(1);
  std::function<bool(const Expr&)> expr_ok = [&](const Expr& e) {
    auto visible = [&](const std::vector<std::set<int>>& scopes, int id) {
      for (auto& sc : scopes)
        if (sc.count(id)) return true;
      return false;
    };
    if (e.op == Op::Local && !visible(locals, e.id)) return false;
    if (e.op == Op::Named && !visible(named, e.id)) return false;
    for (auto& x : e.idx)
      if (x.indirect && !expr_ok(*x.indirect)) return false;
    for (auto& c : e.kids)
      if (!expr_ok(*c)) return false;
    return true;
  };
  std::function<bool(const std::vector<StmtP>&)> body_ok = [&](const std::vector<StmtP>& b) {
    locals.emplace_back();
    named.emplace_back();
    bool ok = true;
    for (auto& s : b) {
      if (s->value && !expr_ok(*s->value)) ok = false;
      if (s->kind == Stmt::LocalWrite) {
        bool seen = false;
        for (auto& sc : locals) seen = seen || sc.count(s->target);
        ok = ok && seen;
      }
      if (s->kind == Stmt::LocalDecl) locals.back().insert(s->target);
      if (s->kind == Stmt::Named) named.back().insert(s->target);
      if (s->kind == Stmt::ForEach && !body_ok(s->body)) ok = false;
    }
    locals.pop_back();
    named.pop_back();
    return ok;
  };
  return body_ok(k.body);
}

// Applies shrink step `t` (see above); false when there is no such candidate.
inline bool shrink(Kernel& k, int t) {
  {
    detail::Shrinker s(t);
    auto body = s.stmts(k.body);
    if (s.applied) {
      k.body = body;
      k.steps.push_back(t);
      return true;
    }
  }
  // Expressions are counted after every statement.
  int statements = 0;
  std::function<void(const std::vector<StmtP>&)> count = [&](const std::vector<StmtP>& b) {
    for (auto& s : b) {
      ++statements;
      if (s->kind == Stmt::ForEach) count(s->body);
    }
  };
  count(k.body);
  detail::Shrinker s(t - statements);
  s.exprs_phase();
  auto body = s.stmts(k.body);
  if (!s.applied) return false;
  k.body = body;
  k.steps.push_back(t);
  return true;
}

inline Kernel regenerate(std::uint64_t seed, const std::vector<int>& steps) {
  Kernel k = generate(seed);
  for (int t : steps) shrink(k, t);
  return k;
}

// --- data ----------------------------------------------------------------------------------------

enum class Size : std::uint8_t { small, edge, large };
inline const char* size_name(Size s) { return s == Size::small ? "small" : s == Size::edge ? "edge" : "large"; }

// Arguments for one call of k: host data of every axis and buffer, in a RandomKernel (its
// `function` is the expected IR). `scale` < 1 shrinks the large sizes (see the harness).
inline RandomKernel make_data(const Kernel& k, const IrBuilder::Result& ir, Size size, std::uint64_t seed,
                              double scale = 1.0) {
  std::mt19937_64 rng(seed), share_rng(seed ^ 0x9b05688c2b3e6c1fULL);
  auto range = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); };
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  RandomKernel r;
  r.seed = seed;
  r.function = ir.function;
  r.exact = k.exact;
  r.axes = ir.axes;
  auto big = [&](std::int64_t v) { return std::max<std::int64_t>(1, static_cast<std::int64_t>(static_cast<double>(v) * scale)); };
  for (std::size_t a = 0; a < k.axes.size(); ++a) {
    const Axis& ax = k.axes[a];
    const ir::Axis& node = ir.axes[a];
    AxisArrays d;
    if (ax.dense_of >= 0) {
      d.length = r.data.at(ir.axes[static_cast<std::size_t>(ax.dense_of)].get()).length;
      d.positions = d.length;
      d.finish();
      r.data[node.get()] = d;
      continue;
    }
    d.index_dtype = ax.index_dtype;
    if (ax.assembled) {  // the columns of the assembled output: X's extent, no entries (the call's Csr is empty)
      d.length = r.data.at(ir.axes[static_cast<std::size_t>(coordinate_space_of(k, ax.coordinates_of))].get()).length;
      d.indptr.assign(static_cast<std::size_t>(r.data.at(ir.axes[static_cast<std::size_t>(ax.parent)].get()).positions) + 1, 0);
      d.positions = 0;
      d.finish();
      r.data[node.get()] = d;
      continue;
    }
    const std::int64_t parents = ax.parent >= 0 ? r.data.at(ir.axes[static_cast<std::size_t>(ax.parent)].get()).positions : 1;
    switch (ax.kind) {
      case ir::AxisKind::dense_fixed:
        if (size == Size::small) d.length = std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 7, 9}[static_cast<std::size_t>(range(0, 7))];
        else if (size == Size::edge) d.length = range(0, 1);
        else d.length = ax.parent < 0 && a == 0 ? big(std::vector<std::int64_t>{997, 1531, 2048, 2999, 3001}[static_cast<std::size_t>(range(0, 4))])
                                                : big(std::vector<std::int64_t>{3, 16, 17, 32, 64, 129, 1000}[static_cast<std::size_t>(range(0, 6))]);
        if (ax.fixed_length >= 1) d.length = ax.fixed_length;
        if (ax.scatter_target) d.length = std::max<std::int64_t>(d.length, 1);  // the index values need a row
        d.positions = d.length;
        break;
      case ir::AxisKind::dense_variable: {
        d.indptr.push_back(0);
        std::int64_t longest = 0;
        for (std::int64_t p = 0; p < parents; ++p) {
          std::int64_t n = size == Size::edge ? (chance(0.7) ? 0 : 1) : chance(0.25) ? 0 : range(1, size == Size::large ? 6 : 4);
          longest = std::max(longest, n);
          d.indptr.push_back(d.indptr.back() + n);
        }
        d.length = longest;
        d.positions = d.indptr.back();
        break;
      }
      case ir::AxisKind::sparse_variable: {
        d.length = size == Size::small ? range(0, 9) : size == Size::edge ? range(0, 1) : big(range(40, 3000));
        if (ax.coordinates_of >= 0)  // coordinates_of<X>: X's extent
          d.length = r.data.at(ir.axes[static_cast<std::size_t>(coordinate_space_of(k, ax.coordinates_of))].get()).length;
        d.indptr.push_back(0);
        for (std::int64_t p = 0; p < parents; ++p) {
          std::vector<std::int64_t> fiber;
          if (size == Size::large) {
            std::int64_t n = std::min<std::int64_t>(d.length, chance(0.15) ? 0 : range(1, 8));
            std::set<std::int64_t> picked;
            while (static_cast<std::int64_t>(picked.size()) < n) picked.insert(range(0, d.length - 1));
            fiber.assign(picked.begin(), picked.end());
          } else {
            double density = size == Size::edge ? 0.5 : chance(0.2) ? 0.0 : (chance(0.5) ? 0.3 : 0.7);
            for (std::int64_t c = 0; c < d.length; ++c)
              if (chance(density)) fiber.push_back(c);
          }
          d.indices.insert(d.indices.end(), fiber.begin(), fiber.end());
          d.indptr.push_back(static_cast<std::int64_t>(d.indices.size()));
        }
        d.positions = d.indptr.back();
        share_merge_fibers(ir.axes, r.data, ir.axes[a], d, share_rng);  // merge operands over one pattern
        break;
      }
      case ir::AxisKind::sparse_fixed: {
        if (ax.parent < 0) {  // a root sparse axis (a sparse vector): one fiber, thousands of entries when large
          d.nnz_per_row = ax.fixed_npr >= 0 ? ax.fixed_npr
                          : size == Size::edge ? range(0, 1)
                          : size == Size::small ? range(0, 6)
                                                : big(range(500, 3000));
          d.length = d.nnz_per_row + (size == Size::large ? big(range(0, 3000)) : size == Size::edge ? range(0, 1) : range(0, 5));
        } else {
          d.nnz_per_row = ax.fixed_npr >= 0 ? ax.fixed_npr : size == Size::edge ? range(0, 1) : range(0, 3);
          d.length = d.nnz_per_row + (size == Size::large ? big(range(0, 1000)) : size == Size::edge ? 0 : range(0, 4));
        }
        for (std::int64_t p = 0; p < parents; ++p) {
          std::set<std::int64_t> picked;
          while (static_cast<std::int64_t>(picked.size()) < d.nnz_per_row) picked.insert(range(0, d.length - 1));
          d.indices.insert(d.indices.end(), picked.begin(), picked.end());
        }
        d.positions = parents * d.nnz_per_row;
        break;
      }
    }
    d.finish();
    r.data[node.get()] = d;
    if (ax.computed_target) r.computed_target = node.get();
  }
  fit_computed_target(r, range);
  int arg = 0;
  for (const LambdaParam& p : k.lambda) {
    if (p.kind == LambdaParam::iter) continue;
    if (p.kind == LambdaParam::param) {
      r.arg_buffer.push_back(-1);
      r.arg_is_scalar.push_back(static_cast<int>(r.scalar_values.size()));
      r.scalar_values.push_back(k.params[static_cast<std::size_t>(p.id)].value);
      ++arg;
      continue;
    }
    const Buffer& b = k.buffers[static_cast<std::size_t>(p.id)];
    const ir::Buffer& buf = ir.buffers[static_cast<std::size_t>(p.id)];
    std::int64_t count = 1;
    std::vector<ir::Axis> chain;
    for (std::size_t s = 0; s < buf->axes.size(); ++s) {
      chain.push_back(buf->axes[s]);
      if (s + 1 == buf->axes.size() || !buf->axes[s + 1]->parent) {
        count *= r.data.at(chain.back().get()).positions;
        chain.clear();
      }
    }
    BufferData d;
    d.buffer = buf;
    d.count = count;
    if (b.scatter_of >= 0) d.write_target = ir.axes[static_cast<std::size_t>(b.scatter_of)].get();
    for (std::int64_t q = 0; q < count; ++q) {
      double v = b.role == ir::BufferRole::output ? -777 : static_cast<double>(range(-2, 2));
      if (b.index) v = static_cast<double>(range(-1, size == Size::large ? 40 : 6));
      if (d.write_target) v = static_cast<double>(range(0, r.data.at(d.write_target).length - 1));
      d.initial.push_back(v);
    }
    if (p.id == assembled_buffer(k)) r.assembled = static_cast<int>(r.buffers.size());
    r.arg_buffer.push_back(static_cast<int>(r.buffers.size()));
    r.arg_is_scalar.push_back(-1);
    r.buffers.push_back(std::move(d));
    ++arg;
  }
  return r;
}

}  // namespace spindle::test::fe

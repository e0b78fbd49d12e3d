// The C-family printer shared by the C and (later) CUDA emitters: identifiers, types,
// expressions and every statement but loops, which each dialect prints its own way
// (outlined parallel loops for C, thread/block bindings for CUDA). It is a strict functor:
// a node kind it does not handle does not compile.
#pragma once

#include <cctype>
#include <map>
#include <ostream>
#include <set>
#include <string>

#include "spindle/codegen/identifiers.hpp"
#include "spindle/ir/function.hpp"
#include "spindle/ir/functor.hpp"
#include "spindle/ir/printer.hpp"

namespace spindle::codegen {

// Helper functions and macros every generated C unit starts with.
inline const char* c_prelude() {
  return R"SPINDLE(#if defined(__clang__)
#define SPINDLE_VECTORIZE _Pragma("clang loop vectorize(enable) interleave(enable)")
#define SPINDLE_INDEPENDENT
#define SPINDLE_UNROLL _Pragma("clang loop unroll(enable)")
#define SPINDLE_REASSOCIATE _Pragma("clang fp reassociate(on)")
#define SPINDLE_SCALAR_CHAIN _Pragma("clang loop unroll(disable)")
#define SPINDLE_NO_CONTRACT _Pragma("clang fp contract(off)")
#define SPINDLE_NO_VECTORIZE _Pragma("clang loop vectorize(disable)")
#elif defined(__GNUC__)
/* GCC's unroll-and-jam (-O3) jams two nonzeros' row loops into one, which then reads two
   rows of the dense operand and is vectorised with gathers: SpMM's register tiles ran 2-6x
   slower than without it (gcc 12, AVX-512). */
#pragma GCC optimize("no-loop-unroll-and-jam")
#define SPINDLE_VECTORIZE
#define SPINDLE_INDEPENDENT _Pragma("GCC ivdep")
#define SPINDLE_UNROLL _Pragma("GCC unroll 4")
#define SPINDLE_REASSOCIATE
#define SPINDLE_SCALAR_CHAIN
#define SPINDLE_NO_CONTRACT
#define SPINDLE_NO_VECTORIZE
#else
#define SPINDLE_VECTORIZE
#define SPINDLE_INDEPENDENT
#define SPINDLE_UNROLL
#define SPINDLE_REASSOCIATE
#define SPINDLE_SCALAR_CHAIN
#define SPINDLE_NO_CONTRACT
#define SPINDLE_NO_VECTORIZE
#endif
#define SPINDLE_MINMAX(T, S) \
  static inline T spindle_min_##S(T a, T b) { return b < a ? b : a; } \
  static inline T spindle_max_##S(T a, T b) { return a < b ? b : a; }
SPINDLE_MINMAX(float, f32)
SPINDLE_MINMAX(double, f64)
SPINDLE_MINMAX(int, i32)
SPINDLE_MINMAX(long long, i64)
/* Position of v in the sorted fiber idx[begin, end), relative to begin, or -1. */
#define SPINDLE_FIND(T, S) \
  static inline long long spindle_find_##S(const T* idx, long long begin, long long end, long long v) { \
    long long lo = begin, hi = end; \
    while (lo < hi) { \
      long long mid = lo + ((hi - lo) >> 1); \
      if ((long long)idx[mid] < v) lo = mid + 1; else hi = mid; \
    } \
    return (lo < end && (long long)idx[lo] == v) ? lo - begin : -1; \
  }
SPINDLE_FIND(int, i32)
SPINDLE_FIND(long long, i64)
/* The last r in [begin, end) of the non-decreasing x with x[r] <= v, relative to begin
   (-1 when none): the parent position of child position v (a fused loop). */
#define SPINDLE_SEGMENT(T, S) \
  static inline long long spindle_segment_##S(const T* x, long long begin, long long end, long long v) { \
    long long lo = begin, hi = end; \
    while (lo < hi) { \
      long long mid = lo + ((hi - lo) >> 1); \
      if ((long long)x[mid] <= v) lo = mid + 1; else hi = mid; \
    } \
    return lo - 1 - begin; \
  }
SPINDLE_SEGMENT(int, i32)
SPINDLE_SEGMENT(long long, i64)
/* The same search, starting from the answer for an earlier (not larger) v kept in *hint: a
   loop over consecutive positions (a fused loop) mostly stays in the row or steps to the
   next. Any hint gives the same result; one that does not fit costs a full search. */
#define SPINDLE_SEGMENT_HINT(T, S) \
  static inline long long spindle_segment_hint_##S(const T* x, long long begin, long long end, long long v, \
                                                  long long* hint) { \
    long long r = *hint, lo = begin, hi = end; \
    if (r >= begin && r < end && (long long)x[r] <= v) { \
      for (int s = 0; s < 4 && r + 1 < end && (long long)x[r + 1] <= v; ++s) ++r; \
      if (r + 1 >= end || (long long)x[r + 1] > v) { *hint = r; return r - begin; } \
      lo = r + 1; \
    } \
    while (lo < hi) { \
      long long mid = lo + ((hi - lo) >> 1); \
      if ((long long)x[mid] <= v) lo = mid + 1; else hi = mid; \
    } \
    *hint = lo - 1; \
    return lo - 1 - begin; \
  }
SPINDLE_SEGMENT_HINT(int, i32)
SPINDLE_SEGMENT_HINT(long long, i64)
/* What a guarded read reads when its guard fails (a buffer's default value 0). */
static const float spindle_zero_f32 = 0.0f;
static const double spindle_zero_f64 = 0.0;
static const int spindle_zero_i32 = 0;
static const long long spindle_zero_i64 = 0;
)SPINDLE";
}

class CFamilyPrinter : public ir::StrictExprFunctor<std::string>, public ir::StrictStmtFunctor<void> {
 public:
  explicit CFamilyPrinter(const ir::Function& f) : fn_(f) {}

  using ir::StrictStmtFunctor<void>::dispatch;
  std::string expr(const ir::Expr& e, int parent_prec = -1) {
    int saved = prec_;
    prec_ = parent_prec;
    std::string s = ir::StrictExprFunctor<std::string>::dispatch(e);
    prec_ = saved;
    return s;
  }

  static const char* ctype(DType t) {
    switch (t) {
      case DType::f16: return "_Float16";
      case DType::f32: return "float";
      case DType::f64: return "double";
      case DType::i32: return "int";
      case DType::i64: return "long long";
      case DType::boolean: return "int";
    }
    return "void";
  }

 protected:
  // --- identifiers: one C name per IR object, legal and unique within the unit ----------
  // (codegen/identifiers.hpp: never a keyword, a reserved name, or a name the generated
  // code uses for something else). Every identifier the emitters print goes through here.
  std::string fresh(const std::string& base) {
    std::string n = legal_identifier(base);
    std::string candidate = n;
    for (int k = 1; used_.count(candidate); ++k) candidate = n + (n.back() == '_' ? "" : "_") + std::to_string(k);
    used_.insert(candidate);
    return candidate;
  }
  std::string name_of(const void* key, const std::string& base) {
    auto it = names_.find(key);
    if (it != names_.end()) return it->second;
    return names_[key] = fresh(base);
  }
  std::string name(const ir::VarNode* v) { return name_of(v, v->name); }
  std::string name(const ir::Var& v) { return name(v.node()); }
  std::string name(const ir::BufferNode& b) { return name_of(&b, b.name); }

  static std::string suffix(DType t) { return dtype_name(t); }

  std::ostream& line() { return *out_ << std::string(static_cast<std::size_t>(indent_) * 2, ' '); }
  void indented(const ir::Stmt& s) {
    ++indent_;
    dispatch(s);
    --indent_;
  }

  // Row-major linear index of a multi-dimensional access.
  std::string linear_index(const ir::BufferNode& b, const std::vector<ir::Expr>& idx) {
    if (idx.empty()) return "";
    SPINDLE_INTERNAL_CHECK(idx.size() == b.shape.size(), "emit_c", "buffer ", b.name, " of rank ",
                           b.shape.size(), " indexed with ", idx.size(), " indices");
    std::string s = expr(idx[0], 4);
    for (std::size_t k = 1; k < idx.size(); ++k)
      s = "(" + s + ") * " + expr(b.shape[k], 6) + " + " + expr(idx[k], 5);
    return s;
  }
  std::string access(const ir::BufferNode& b, const std::vector<ir::Expr>& idx) {
    if (idx.empty()) return name(b);
    return name(b) + "[" + linear_index(b, idx) + "]";
  }

  // --- expressions ----------------------------------------------------------------------
  std::string paren(const std::string& s, int prec) { return prec < prec_ ? "(" + s + ")" : s; }

  // Integer constants keep their C type: an i32 constant is an `int` (INT32_MIN is spelled
  // as an int expression, since -2147483648 would be a long long), an i64 constant outside
  // the int range is a long long.
  std::string on_IntImm(const ir::IntImmNode* n) override {
    if (n->dtype == DType::i32 && n->value == INT32_MIN) return paren("-2147483647 - 1", 4);
    if (n->value == INT64_MIN) return paren("-9223372036854775807LL - 1", 4);
    std::string s = std::to_string(n->value);
    if (n->value > 2147483647LL || n->value < -2147483647LL) s += "LL";
    return n->value < 0 ? paren(s, 10) : s;
  }
  std::string on_FloatImm(const ir::FloatImmNode* n) override {
    bool f32 = n->dtype == DType::f32;
    if (std::isinf(n->value))
      return paren(std::string(n->value < 0 ? "-" : "") + (f32 ? "__builtin_inff()" : "__builtin_inf()"), 10);
    if (std::isnan(n->value)) return f32 ? "__builtin_nanf(\"\")" : "__builtin_nan(\"\")";
    std::string s = ir::format_float(n->value, n->dtype) + (f32 ? "f" : "");
    return n->value < 0 ? paren(s, 10) : s;
  }
  std::string on_Var(const ir::VarNode* n) override { return name(n); }
  std::string on_Binary(const ir::BinaryNode* n) override {
    if (n->op == ir::BinOp::min || n->op == ir::BinOp::max)
      return std::string("spindle_") + (n->op == ir::BinOp::min ? "min_" : "max_") + suffix(n->dtype) + "(" +
             expr(n->a) + ", " + expr(n->b) + ")";
    int p = ir::binop_precedence(n->op);
    std::string a = expr(n->a, p);
    // i64 arithmetic on two operands that C types as int (constants, selects of
    // constants) would be done in int: make it long long.
    if (n->dtype == DType::i64 && !ir::is_comparison(n->op) && int_in_c(n->a) && int_in_c(n->b))
      a = "(long long)" + expr(n->a, 10);
    return paren(a + " " + ir::binop_symbol(n->op) + " " + expr(n->b, p + 1), p);
  }
  // Unary operators never touch their operand's first token: -(-t), not --t (a decrement).
  std::string on_Unary(const ir::UnaryNode* n) override {
    std::string a = expr(n->a, 10);
    if (!a.empty() && (a[0] == '-' || a[0] == '+' || a[0] == '!' || a[0] == '&' || a[0] == '*')) a = "(" + a + ")";
    return paren((n->op == ir::UnOp::neg ? "-" : "!") + a, 10);
  }
  // Is e, of an integer type, an `int` in C (no long long operand anywhere at its top)?
  static bool int_in_c(const ir::Expr& e) {
    if (auto* k = e.as<ir::IntImmNode>()) return k->value >= -2147483647LL && k->value <= 2147483647LL;
    if (auto* u = e.as<ir::UnaryNode>()) return u->op == ir::UnOp::neg && int_in_c(u->a);
    if (auto* s = e.as<ir::SelectNode>()) return int_in_c(s->t) && int_in_c(s->f);
    return false;
  }
  std::string on_Select(const ir::SelectNode* n) override {
    return "(" + expr(n->cond, 1) + " ? " + expr(n->t, 1) + " : " + expr(n->f, 1) + ")";
  }
  std::string on_Cast(const ir::CastNode* n) override {
    if (n->dtype == DType::boolean)  // C's (int) would truncate 0.5 to 0; a bool is "nonzero"
      return paren("(" + expr(n->value, 2) + " != 0)", 10);
    return paren(std::string("(") + ctype(n->dtype) + ")" + expr(n->value, 10), 10);
  }
  std::string on_Call(const ir::CallNode* n) override {
    SPINDLE_INTERNAL_CHECK(n->fn != ir::Intrinsic::warp_sum, "emit_c", "warp_sum has no C meaning (GPU schedule in C code)");
    static const char* names[] = {"exp", "log", "sqrt", "fabs", "tanh", "pow"};
    std::string f = std::string("__builtin_") + names[static_cast<int>(n->fn)] + (n->dtype == DType::f32 ? "f" : "");
    std::string s = f + "(";
    for (std::size_t k = 0; k < n->args.size(); ++k) s += (k ? ", " : "") + expr(n->args[k]);
    return s + ")";
  }
  std::string on_Load(const ir::LoadNode* n) override { return access(*n->buffer, n->indices); }
  std::string on_FindPos(const ir::FindPosNode* n) override {
    SPINDLE_INTERNAL_CHECK(n->begin.defined(), "emit_c", "stage-II search reached code generation");
    return (n->mode == ir::FindMode::segment ? "spindle_segment_" : "spindle_find_") + suffix(n->indices->dtype) + "(" + name(*n->indices) + ", " + expr(n->begin) + ", " +
           expr(n->end) + ", " + expr(n->value) + ")";
  }

  // --- statements -----------------------------------------------------------------------
  void on_Store(const ir::StoreNode* n) override {
    line() << access(*n->buffer, n->indices) << " = " << expr(n->value) << ";\n";
  }
  void on_Reduce(const ir::ReduceNode* n) override {
    SPINDLE_INTERNAL_CHECK(!n->atomic, "emit_c", "atomic update of '", n->buffer->name, "' in C code");
    std::string target = access(*n->buffer, n->indices);
    switch (n->op) {
      case ir::ReduceOp::add: line() << target << " += " << expr(n->value) << ";\n"; break;
      case ir::ReduceOp::mul: line() << target << " *= " << expr(n->value) << ";\n"; break;
      case ir::ReduceOp::min:
      case ir::ReduceOp::max:
        line() << target << " = spindle_" << (n->op == ir::ReduceOp::min ? "min_" : "max_")
               << suffix(n->buffer->dtype) << "(" << target << ", " << expr(n->value) << ");\n";
        break;
    }
  }
  void on_LetStmt(const ir::LetStmtNode* n) override {
    line() << "const " << ctype(n->var.dtype()) << " " << name(n->var) << " = " << expr(n->value) << ";\n";
    dispatch(n->body);
  }
  void on_IfThenElse(const ir::IfThenElseNode* n) override {
    line() << "if (" << expr(n->cond) << ") {\n";
    indented(n->then_case);
    if (n->else_case.defined()) {
      line() << "} else {\n";
      indented(n->else_case);
    }
    line() << "}\n";
  }
  // Co-iteration (ir::CoIterateNode): a merge of the operands' fibers. The main loop runs
  // while every operand has positions left (its keys load unconditionally); a union then
  // finishes the operands that remain in a second loop whose exhausted operands read as
  // INT64_MAX (TACO's sub-lattices, folded into one).
  // Before the merge, a loop takes the fibers' common prefix: while every operand has a
  // position left and all hold the same key at the same position, the body runs with every
  // operand present and all advance — the steps the merge would take there, in the same order,
  // but without its chain of compare, select and advance from one key load to the next (the
  // exit is one predictable test): fibers over one pattern (A + A^T of a symmetric matrix, two
  // arrays over one graph) never reach the merge. The merge goes on from where it stops.
  void on_CoIterate(const ir::CoIterateNode* n) override {
    const bool uni = n->op == ir::MergeOp::union_;
    std::vector<std::string> pos, ext;
    line() << "{ /* " << comment_text(std::string(ir::merge_op_name(n->op)) + " over " + n->axis) << " */\n";
    ++indent_;
    for (auto& o : n->operands) {
      pos.push_back(name(o.pos));
      ext.push_back(fresh(o.pos.name() + "_end"));
      line() << "long long " << pos.back() << " = 0;\n";
      line() << "const long long " << ext.back() << " = " << expr(o.extent) << ";\n";
    }
    if (pos.size() >= 2) {
      std::string cond;
      for (std::size_t q = 0; q < pos.size(); ++q) cond += (q ? " && " : "") + pos[q] + " < " + ext[q];
      const std::string first = "(long long)" + expr(n->operands[0].key, 10);
      for (std::size_t q = 1; q < pos.size(); ++q) cond += " && " + first + " == (long long)" + expr(n->operands[q].key, 10);
      line() << "while (" << cond << ") { /* the common prefix */\n";
      ++indent_;
      line() << "const long long " << name(n->var) << " = " << first << ";\n";
      for (std::size_t q = 0; q < pos.size(); ++q) line() << "const int " << name(n->operands[q].present) << " = 1;\n";
      dispatch(n->body);
      for (std::size_t q = 0; q < pos.size(); ++q) line() << pos[q] << " += 1;\n";
      --indent_;
      line() << "}\n";
    }
    auto loop = [&](bool all_active) {
      std::string cond;
      for (std::size_t q = 0; q < pos.size(); ++q)
        cond += (q ? (all_active ? " && " : " || ") : "") + pos[q] + " < " + ext[q];
      line() << "while (" << cond << ") {\n";
      ++indent_;
      std::vector<std::string> key, has;
      for (std::size_t q = 0; q < pos.size(); ++q) {
        key.push_back(fresh(n->operands[q].pos.name() + "_key"));
        line() << "const long long " << key[q] << " = ";
        if (all_active)
          *out_ << "(long long)" << expr(n->operands[q].key, 10) << ";\n";
        else
          *out_ << pos[q] << " < " << ext[q] << " ? (long long)" << expr(n->operands[q].key, 10)
                << " : 9223372036854775807LL;\n";
      }
      std::string least = key[0];
      for (std::size_t q = 1; q < key.size(); ++q) least = "spindle_min_i64(" + least + ", " + key[q] + ")";
      line() << "const long long " << name(n->var) << " = " << least << ";\n";
      for (std::size_t q = 0; q < pos.size(); ++q) {
        has.push_back(name(n->operands[q].present));
        line() << "const int " << has[q] << " = " << key[q] << " == " << name(n->var) << ";\n";
      }
      if (uni) {
        dispatch(n->body);
      } else {
        std::string every;
        for (std::size_t q = 0; q < has.size(); ++q) every += (q ? " && " : "") + has[q];
        line() << "if (" << every << ") {\n";
        indented(n->body);
        line() << "}\n";
      }
      for (std::size_t q = 0; q < pos.size(); ++q) line() << pos[q] << " += " << has[q] << ";\n";
      --indent_;
      line() << "}\n";
    };
    loop(true);
    if (uni) loop(false);
    --indent_;
    line() << "}\n";
  }
  void on_Seq(const ir::SeqNode* n) override {
    for (auto& s : n->stmts) dispatch(s);
  }
  void on_Block(const ir::BlockNode* n) override {
    line() << "{ /* " << comment_text(n->name) << " */\n";
    ++indent_;
    for (auto& a : n->allocs) {
      std::int64_t elems = 1;
      for (auto& d : a->shape) {
        auto* c = d.as<ir::IntImmNode>();
        SPINDLE_INTERNAL_CHECK(c && c->value > 0, "emit_c", "local buffer ", a->name, " needs a constant shape");
        elems *= c->value;
      }
      if (a->scope == ir::BufferScope::shared) {
        shared_alloc(*a, elems);
        continue;
      }
      line() << ctype(a->dtype) << " " << name(*a);
      if (!a->shape.empty()) *out_ << "[" << elems << "]";
      *out_ << ";\n";
    }
    dispatch(n->body);
    --indent_;
    line() << "}\n";
  }
  // A shared-memory allocation (one copy per GPU thread block): CUDA only.
  virtual void shared_alloc(const ir::BufferNode& a, std::int64_t) {
    throw InternalError(message("emit_c: shared-memory buffer '", a.name, "' reached C code generation"));
  }
  void on_Prefetch(const ir::PrefetchNode* n) override {
    line() << "__builtin_prefetch(&" << access(*n->buffer, n->indices) << ", 0, 3);\n";
  }
  void on_Barrier(const ir::BarrierNode*) override {
    throw InternalError("emit_c: a GPU thread-block barrier reached C code generation");
  }
  void on_SparseIteration(const ir::SparseIterationNode* n) override {
    throw InternalError(message("emit_c: sparse iteration '", n->name, "' reached code generation"));
  }

  const ir::Function& fn_;
  std::ostream* out_ = nullptr;
  int indent_ = 0;
  int prec_ = -1;
  std::map<const void*, std::string> names_;
  std::set<std::string> used_;
};

}  // namespace spindle::codegen

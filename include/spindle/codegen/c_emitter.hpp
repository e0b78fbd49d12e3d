// emit_c: stage-III IR -> one self-contained C translation unit (no #include), following
// the ABI of kernel_abi.hpp.
//
//   static void <kernel>_body(T* __restrict c, const T* __restrict a, ..., long long I_len, ...,
//                             const spindle_rt* rt)          the kernel itself
//   int spindle_<kernel>_<hash>(void* const* buffers, const long long* scalars, const spindle_rt* rt)
//                                                             unpacks the ABI arrays, calls _body
//
// Buffers reach every function as restrict-qualified *parameters*: C compilers only use
// restrict there (not on locals), and without it they add runtime overlap checks and
// scalar fallbacks to vectorised loops. Parallel loops are outlined the same way: a
// `<kernel>_parallel_range(captures..., begin, end)` with restrict parameters, and a
// `<kernel>_parallel(void* closure, begin, end)` trampoline that the runtime pool calls.
// Vectorised loops get the compiler's vectorisation hint; vectorised reductions also allow
// reassociation (clang fp reassociate), so the sum is split across vector lanes.
// Multi-dimensional buffers are indexed row-major. The entry symbol is
// spindle_<kernel>_<hash of the code>, so equal code gets equal names.
#pragma once

#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "spindle/codegen/c_family.hpp"
#include "spindle/codegen/kernel_abi.hpp"
#include "spindle/ir/equal.hpp"
#include "spindle/support/hash.hpp"

namespace spindle::codegen {

struct EmittedSource {
  std::string source;
  std::string symbol;
};

namespace detail {

// e = v, v + c, c + v, v - c, v * c or c * v (c free of v, recursively): distinct values of
// v give distinct values of e (for a nonzero constant stride).
inline bool injective_in(const ir::Expr& e, const ir::VarNode* v) {
  if (e.get() == v) return true;
  if (auto* c = e.as<ir::CastNode>()) return is_int(c->dtype) && injective_in(c->value, v);
  auto* b = e.as<ir::BinaryNode>();
  if (!b) return false;
  auto invariant = [&](const ir::Expr& x) { return !ir::uses_var(x, v); };
  switch (b->op) {
    case ir::BinOp::add: return (injective_in(b->a, v) && invariant(b->b)) || (invariant(b->a) && injective_in(b->b, v));
    case ir::BinOp::sub: return injective_in(b->a, v) && invariant(b->b);
    case ir::BinOp::mul: {
      auto nonzero_const = [](const ir::Expr& x) {
        auto* k = x.as<ir::IntImmNode>();
        return k && k->value != 0;
      };
      return (injective_in(b->a, v) && nonzero_const(b->b)) || (nonzero_const(b->a) && injective_in(b->b, v));
    }
    default: return false;
  }
}

// True when the iterations of loop n write disjoint elements and read no element another
// iteration writes: every buffer written in the body (scalar locals aside) is accessed
// with one index list only, and that list is injective in the loop variable.
inline bool independent_iterations(const ir::ForNode& n) {
  struct Accesses : ir::IRVisitor {
    std::vector<std::pair<const ir::BufferNode*, const std::vector<ir::Expr>*>> reads, writes;
    void visit_Load(const ir::LoadNode* l) override {
      reads.push_back({l->buffer.get(), &l->indices});
      ir::IRVisitor::visit_Load(l);
    }
    void visit_Store(const ir::StoreNode* s) override {
      writes.push_back({s->buffer.get(), &s->indices});
      ir::IRVisitor::visit_Store(s);
    }
    void visit_Reduce(const ir::ReduceNode* s) override {
      writes.push_back({s->buffer.get(), &s->indices});
      ir::IRVisitor::visit_Reduce(s);
    }
  } acc;
  acc.visit(n.body);
  const ir::VarNode* v = n.var.node();
  for (auto& [buf, idx] : acc.writes) {
    if (buf->scope == ir::BufferScope::local && buf->shape.empty()) continue;
    bool injective = false;
    for (auto& e : *idx) injective = injective || injective_in(e, v);
    if (!injective) return false;
    for (auto* list : {&acc.reads, &acc.writes})
      for (auto& [b2, idx2] : *list)
        if (b2 == buf && !ir::equal(*idx2, *idx)) return false;
  }
  return true;
}


class CEmitter : public CFamilyPrinter {
 public:
  explicit CEmitter(const ir::Function& f) : CFamilyPrinter(f) {}

  EmittedSource run() {
    // Parameters of the body: every function buffer, then every scalar.
    std::vector<std::string> params, args;
    for (std::size_t k = 0; k < fn_.buffers.size(); ++k) {
      const auto& b = *fn_.buffers[k].buffer;
      params.push_back(pointer_decl(b));
      args.push_back(std::string("(") + (is_written(b) ? "" : "const ") + ctype(b.dtype) + "*)buffers[" +
                     std::to_string(k) + "]");
    }
    std::ostringstream unpack;
    for (std::size_t k = 0; k < fn_.scalars.size(); ++k) {
      const auto& v = fn_.scalars[k].var;
      params.push_back("const " + std::string(ctype(v.dtype())) + " " + name(v));
      if (is_int(v.dtype())) {
        args.push_back("scalars[" + std::to_string(k) + "]");
      } else {
        std::string tmp = "spindle_scalar_" + std::to_string(k);
        unpack << "  " << ctype(v.dtype()) << " " << tmp << "; __builtin_memcpy(&" << tmp << ", &scalars[" << k
               << "], sizeof " << tmp << ");\n";
        args.push_back(tmp);
      }
    }
    params.push_back("const spindle_rt* rt");
    args.push_back("rt");

    std::ostringstream body;
    out_ = &body;
    indent_ = 1;
    line() << "(void)rt;\n";
    for (auto& s : fn_.scalars) line() << "(void)" << name(s.var) << ";\n";
    dispatch(fn_.body);

    std::ostringstream src;
    src << "/* generated by spindle: kernel " << comment_text(fn_.name) << " */\n";
    src << kernel_abi_c_text;
    src << c_prelude();
    src << outlined_.str();
    std::string body_fn = fresh(fn_.name + "_body");
    src << "static void " << body_fn << "(" << join(params, ", ") << ") {\n" << body.str() << "}\n";
    src << "int " << kEntryPlaceholder << "(void* const* buffers, const long long* scalars, const spindle_rt* rt) {\n";
    src << "  (void)buffers; (void)scalars;\n" << unpack.str();
    src << "  " << body_fn << "(" << join(args, ", ") << ");\n";
    src << "  return 0;\n}\n";
    return finish(src.str());
  }

 protected:
  // A guarded read (lowering gives select(guard, x[pos], 0) for a read at a computed index or
  // through a search) reads through a pointer that the guard picks: `*(guard ? &x[pos] :
  // &spindle_zero_f32)`. Same value, but the load itself is unconditional, so the vectoriser
  // turns it into a gather; a conditional load it may not speculate stays scalar (a sliced-ELL
  // SpMV written with `x(cast<int64_t>(col(s, w, l)))` ran 2.9x faster on delaunay_n16 in a
  // stand-alone measurement with clang 19).
  std::string on_Select(const ir::SelectNode* n) override {
    auto* load = n->t.as<ir::LoadNode>();
    if (!load || load->indices.empty() || !zero_constant(n->f)) return CFamilyPrinter::on_Select(n);
    const DType t = load->buffer->dtype;
    if (t != DType::f32 && t != DType::f64 && t != DType::i32 && t != DType::i64) return CFamilyPrinter::on_Select(n);
    return "(*(" + expr(n->cond, 1) + " ? &" + access(*load->buffer, load->indices) + " : &spindle_zero_" + suffix(t) +
           "))";
  }

  // A segment search in the leading lets of a loop body (a fused loop recovering its rows,
  // lower_sparse_iter) keeps the last answer in a local declared before the loop, per thread
  // in a parallel loop: consecutive positions mostly need one or two comparisons
  // (spindle_segment_hint_*; the result does not depend on the hint).
  std::string on_FindPos(const ir::FindPosNode* n) override {
    auto it = hints_.find(n);
    if (it == hints_.end()) return CFamilyPrinter::on_FindPos(n);
    return "spindle_segment_hint_" + suffix(n->indices->dtype) + "(" + name(*n->indices) + ", " + expr(n->begin) +
           ", " + expr(n->end) + ", " + expr(n->value) + ", &" + it->second + ")";
  }
  // Declares the hints of loop n's searches; returns them, for forget_hints after the loop
  // (peel_split_tails may emit the same body twice, each loop with its own hint).
  std::vector<const ir::FindPosNode*> declare_segment_hints(const ir::ForNode* n) {
    std::vector<const ir::FindPosNode*> out;
    if (n->for_kind == ir::ForKind::vectorized) return out;
    for (const ir::Stmt* s = &n->body; auto* let = s->as<ir::LetStmtNode>(); s = &let->body) {
      auto* f = let->value.as<ir::FindPosNode>();
      if (auto* add = let->value.as<ir::BinaryNode>(); !f && add && add->op == ir::BinOp::add)
        f = add->b.as<ir::FindPosNode>();
      if (!f || f->mode != ir::FindMode::segment || hints_.count(f)) continue;
      std::string h = fresh("spindle_hint");
      line() << "long long " << h << " = -1;\n";
      hints_[f] = h;
      out.push_back(f);
    }
    return out;
  }
  void forget_hints(const std::vector<const ir::FindPosNode*>& hs) {
    for (auto* f : hs) hints_.erase(f);
  }

  void on_For(const ir::ForNode* n) override {
    if (n->for_kind == ir::ForKind::parallel) return emit_parallel(n);
    const auto hints = declare_segment_hints(n);
    if (n->for_kind == ir::ForKind::vectorized) {
      // GCC's ivdep lets the vectoriser ignore loop-carried dependences: only where no two
      // iterations can touch the same element of a buffer the loop writes.
      if (independent_iterations(*n)) line() << "SPINDLE_INDEPENDENT\n";
      line() << "SPINDLE_VECTORIZE\n";
    }
    if (n->for_kind == ir::ForKind::unrolled) line() << "SPINDLE_UNROLL\n";
    if (rows_of_vector_loops(*n)) line() << "SPINDLE_NO_VECTORIZE\n";
    const bool chain = scalar_accumulation_chain(*n);
    if (chain || partial_sums_loop(*n)) line() << "SPINDLE_SCALAR_CHAIN\n";
    std::string v = name(n->var);
    auto* lo = n->min.as<ir::IntImmNode>();
    bool from_zero = lo && lo->value == 0;
    if (from_zero && n->extent.as<ir::IntImmNode>()) {
      line() << "for (long long " << v << " = 0; " << v << " < " << expr(n->extent) << "; ++" << v << ") {\n";
    } else {
      std::string end = fresh(v + "_end");
      std::string bound = from_zero ? expr(n->extent) : expr(n->min, 4) + " + " + expr(n->extent, 5);
      line() << "for (long long " << v << " = " << expr(n->min) << ", " << end << " = " << bound << "; " << v
             << " < " << end << "; ++" << v << ") {\n";
    }
    if (n->for_kind == ir::ForKind::vectorized && n->iter_kind == ir::IterKind::reduction)
      line() << "  SPINDLE_REASSOCIATE\n";
    if (chain) line() << "  SPINDLE_NO_CONTRACT\n";
    indented(n->body);
    line() << "}\n";
    forget_hints(hints);
  }

 private:
  static bool zero_constant(const ir::Expr& e) {
    if (auto* f = e.as<ir::FloatImmNode>()) return f->value == 0.0 && !std::signbit(f->value);
    if (auto* i = e.as<ir::IntImmNode>()) return i->value == 0;
    return false;
  }

  // A serial loop of constant extent around a vectorised loop: the rows of a register tile
  // (register_tile: `for k_row < 6 { for n < 32 vectorized }`). Clang unrolls the inner loop
  // first and may then vectorise the rows instead, with gathers and scatters of the tile —
  // found on gnn_gemm_tn_blocks, whose six rows read adjacent elements: 17x slower than
  // GCC's code (56 vs 3.3 ms at 2708 x 512 x 64). The schedule chose the vector loop.
  // The same for a serial loop of any extent directly around a vectorised loop of constant
  // extent (a user's split("k", 16).vectorize("k_i"): `for k_o { for k_i < 16 vectorized }`):
  // Clang unrolled the sixteen and vectorised k_o with gathers and scatters, 20x slower than
  // split("k", 8) at K = 128 on cora.
  static bool rows_of_vector_loops(const ir::ForNode& n) {
    if (n.for_kind != ir::ForKind::serial) return false;
    if (!n.extent.as<ir::IntImmNode>()) {
      struct Direct : ir::IRVisitor {  // loops directly inside (not inside another loop)
        bool found = false;
        void visit_For(const ir::ForNode* f) override {
          found = found || (f->for_kind == ir::ForKind::vectorized && f->extent.as<ir::IntImmNode>());
        }
      } direct;
      direct.visit(n.body);
      return direct.found;
    }
    struct Find : ir::IRVisitor {
      bool found = false;
      void visit_For(const ir::ForNode* f) override {
        found = found || f->for_kind == ir::ForKind::vectorized;
        if (!found) ir::IRVisitor::visit_For(f);
      }
    } find;
    find.visit(n.body);
    return find.found;
  }

  // A serial loop whose body only adds into a scalar local (SpMV's row sum): one dependent
  // chain of additions. Keeping the multiply off that chain (no FMA contraction) and the
  // loop compact (no unrolling: rows are short) measured 1.1-1.5x faster on real graphs.
  static bool scalar_accumulation_chain(const ir::ForNode& n) {
    if (n.for_kind != ir::ForKind::serial || n.iter_kind != ir::IterKind::reduction) return false;
    ir::Stmt s = n.body;
    while (true) {
      if (auto* l = s.as<ir::LetStmtNode>()) s = l->body;
      else if (auto* c = s.as<ir::IfThenElseNode>(); c && !c->else_case.defined()) s = c->then_case;
      else break;
    }
    return adds_into_float_local(s, /*scalar_only=*/true);
  }

  // `local += ...` into a float local (a scalar, or an element of a small local array when
  // !scalar_only).
  static bool adds_into_float_local(const ir::Stmt& s, bool scalar_only) {
    auto* r = s.as<ir::ReduceNode>();
    return r && r->op == ir::ReduceOp::add && r->buffer->scope == ir::BufferScope::local &&
           (!scalar_only || r->buffer->shape.empty()) && is_float(r->buffer->dtype);
  }

  // A loop of data-dependent extent that adds into a few scalar partial sums (rfactor's
  // `for j_o { for j_lane < 4: partial[j_lane] += ... }` and its tail `partial[0] += ...`):
  // kept compact too. Clang unrolled the outer loop four times, so a row of 30 nonzeros ran
  // one 16-wide step, then a remainder loop and the tail, each with its own exit branch;
  // without the unrolling, SpMV under rfactor("j", 4) ran 1.2-1.4x faster (ppi, bcsstk25,
  // delaunay_n16; 1 and 2 threads, stand-alone). Lanes that are vectorised gain little.
  static bool partial_sums_loop(const ir::ForNode& n) {
    if (n.for_kind != ir::ForKind::serial || n.iter_kind != ir::IterKind::reduction ||
        n.extent.as<ir::IntImmNode>())
      return false;
    auto skip_lets = [](ir::Stmt s) {
      while (auto* l = s.as<ir::LetStmtNode>()) s = l->body;
      return s;
    };
    ir::Stmt body = skip_lets(n.body);
    if (adds_into_float_local(body, /*scalar_only=*/false)) return true;
    auto* lanes = body.as<ir::ForNode>();
    auto* extent = lanes ? lanes->extent.as<ir::IntImmNode>() : nullptr;
    return lanes && lanes->for_kind == ir::ForKind::serial && extent && extent->value <= 16 &&
           adds_into_float_local(skip_lets(lanes->body), /*scalar_only=*/false);
  }

  static std::string join(const std::vector<std::string>& parts, const std::string& sep) {
    std::string s;
    for (std::size_t k = 0; k < parts.size(); ++k) s += (k ? sep : "") + parts[k];
    return s;
  }

  std::string pointer_decl(const ir::BufferNode& b) {
    return std::string(is_written(b) ? "" : "const ") + ctype(b.dtype) + "* __restrict " + name(b);
  }

  // Free variables and buffers of a statement: what an outlined loop must capture.
  struct Captures : ir::IRVisitor {
    std::vector<const ir::VarNode*> vars;
    std::vector<ir::Buffer> buffers;  // global buffers and local arrays: captured as pointers
    std::vector<ir::Buffer> scalars;  // scalar locals of the enclosing scope: captured by value
    std::set<const ir::ExprNode*> bound, seen_vars;
    std::set<const ir::BufferNode*> local, seen_bufs;
    void add_buffer(const ir::Buffer& b) {
      if (local.count(b.get()) || !seen_bufs.insert(b.get()).second) return;
      // Strides of flat accesses are products of the shape after the first dimension: an
      // axis length used only as a stride (K_len of B[J, K]) is still a free variable.
      for (std::size_t d = 1; d < b->shape.size(); ++d) visit(b->shape[d]);
      if (b->scope == ir::BufferScope::local && b->shape.empty())
        scalars.push_back(b);
      else
        buffers.push_back(b);
    }
    void visit_Var(const ir::VarNode* n) override {
      if (!bound.count(n) && seen_vars.insert(n).second) vars.push_back(n);
    }
    void visit_Load(const ir::LoadNode* n) override {
      add_buffer(n->buffer);
      ir::IRVisitor::visit_Load(n);
    }
    void visit_FindPos(const ir::FindPosNode* n) override {
      add_buffer(n->indices);
      ir::IRVisitor::visit_FindPos(n);
    }
    void visit_Store(const ir::StoreNode* n) override {
      add_buffer(n->buffer);
      ir::IRVisitor::visit_Store(n);
    }
    void visit_Reduce(const ir::ReduceNode* n) override {
      add_buffer(n->buffer);
      ir::IRVisitor::visit_Reduce(n);
    }
    void visit_For(const ir::ForNode* n) override {
      bound.insert(n->var.get());
      ir::IRVisitor::visit_For(n);
    }
    void visit_LetStmt(const ir::LetStmtNode* n) override {
      visit(n->value);
      bound.insert(n->var.get());
      visit(n->body);
    }
    void visit_CoIterate(const ir::CoIterateNode* n) override {
      for (auto* v : ir::co_iterate_vars(*n)) bound.insert(v);
      ir::IRVisitor::visit_CoIterate(n);
    }
    void visit_Block(const ir::BlockNode* n) override {
      for (auto& a : n->allocs) {
        local.insert(a.get());
        for (auto& e : a->shape) visit(e);
      }
      ir::IRVisitor::visit_Block(n);
    }
  };

  // A parallel loop: a range function with restrict parameters, a closure struct and a
  // trampoline for the pool; a parallel loop only reads scalar locals of the enclosing
  // scope (writing one would make it a reduction loop), so those travel by value.
  void emit_parallel(const ir::ForNode* n) {
    Captures cap;
    cap.bound.insert(n->var.get());
    cap.visit(n->body);
    cap.visit(n->min);
    std::string fname = fresh(fn_.name + "_parallel");
    std::string range = fresh(fname + "_range");
    std::string args_t = fresh(fname + "_args");
    std::vector<std::string> params, fields, from_closure, at_call;
    for (auto& b : cap.buffers) {
      params.push_back(pointer_decl(*b));
      fields.push_back(std::string(is_written(*b) ? "" : "const ") + ctype(b->dtype) + "* " + name(*b));
      from_closure.push_back("spindle_args->" + name(*b));
      at_call.push_back(name(*b));
    }
    auto value = [&](DType t, const std::string& nm) {
      params.push_back("const " + std::string(ctype(t)) + " " + nm);
      fields.push_back(std::string(ctype(t)) + " " + nm);
      from_closure.push_back("spindle_args->" + nm);
      at_call.push_back(nm);
    };
    for (auto* v : cap.vars) value(v->dtype, name(v));
    for (auto& b : cap.scalars) value(b->dtype, name(*b));

    std::ostringstream os;
    os << "static void " << range << "(" << join(params, ", ") << (params.empty() ? "" : ", ")
       << "long long spindle_begin, long long spindle_end) {\n";
    std::ostream* saved = out_;
    int saved_indent = indent_;
    out_ = &os;
    indent_ = 1;
    std::string v = name(n->var);
    auto* lo = n->min.as<ir::IntImmNode>();
    const auto hints = declare_segment_hints(n);
    if (lo && lo->value == 0) {
      line() << "for (long long " << v << " = spindle_begin; " << v << " < spindle_end; ++" << v << ") {\n";
      ++indent_;
    } else {
      std::string p = fresh(v + "_p");
      line() << "for (long long " << p << " = spindle_begin; " << p << " < spindle_end; ++" << p << ") {\n";
      ++indent_;
      line() << "const long long " << v << " = " << expr(n->min, 4) << " + " << p << ";\n";
    }
    dispatch(n->body);
    forget_hints(hints);
    --indent_;
    line() << "}\n";
    os << "}\n";
    os << "typedef struct {\n";
    for (auto& f : fields) os << "  " << f << ";\n";
    if (fields.empty()) os << "  char unused;\n";
    os << "} " << args_t << ";\n";
    os << "static void " << fname << "(void* spindle_closure, long long spindle_begin, long long spindle_end) {\n";
    os << "  const " << args_t << "* spindle_args = (const " << args_t << "*)spindle_closure;\n";
    os << "  (void)spindle_args;\n";
    os << "  " << range << "(" << join(from_closure, ", ") << (from_closure.empty() ? "" : ", ")
       << "spindle_begin, spindle_end);\n";
    os << "}\n";
    out_ = saved;
    indent_ = saved_indent;
    outlined_ << os.str();
    // The call site.
    line() << "{\n";
    ++indent_;
    line() << args_t << " spindle_args = {" << (at_call.empty() ? "0" : join(at_call, ", ")) << "};\n";
    std::string ext = fresh(v + "_extent");
    line() << "const long long " << ext << " = " << expr(n->extent) << ";\n";
    line() << "if (rt) rt->parallel_for(rt->pool, " << ext << ", 0, " << fname << ", &spindle_args);\n";
    line() << "else " << fname << "(&spindle_args, 0, " << ext << ");\n";
    --indent_;
    line() << "}\n";
  }

  EmittedSource finish(const std::string& text) {
    std::string symbol = "spindle_" + symbol_part(fn_.name) + "_" + Hasher().add(text).digest().hex().substr(0, 16);
    std::string source = text;
    for (std::size_t p; (p = source.find(kEntryPlaceholder)) != std::string::npos;)
      source.replace(p, std::string(kEntryPlaceholder).size(), symbol);
    return {source, symbol};
  }

  static constexpr const char* kEntryPlaceholder = "SPINDLE_ENTRY_SYMBOL";
  std::ostringstream outlined_;
  std::map<const ir::FindPosNode*, std::string> hints_;  // declare_segment_hints
};

}  // namespace detail

inline EmittedSource emit_c(const ir::Function& f) {
  SPINDLE_INTERNAL_CHECK(f.stage == ir::Stage::flat, "emit_c", "expects stage III");
  return detail::CEmitter(f).run();
}

}  // namespace spindle::codegen

// Completes and checks recorded stage-I IR at kernel definition, in program order. The rules
// are those of docs/language.md; every program that passes them has a defined result.
//
// Checks (each a UserError at definition time):
//  * no write into an `in` buffer;
//  * no iteration over an axis that an enclosing iteration already iterates;
//  * every index of a write into a buffer is an iterator that keeps the write inside the
//    buffer's storage: an iterator of the slot's coordinate space for a root dense axis,
//    the iterator of the slot's own axis for a root sparse axis (sparse_root) and (under
//    the iterators of its ancestors, also in their own slots) for an axis with a parent. Writes that could fall outside a dense
//    extent or a sparse pattern are rejected instead of being dropped. The exceptions, in a
//    root dense slot and in reductions only: an indirect index (ir/indirect.hpp), a value of an
//    integer `in` buffer read at its stored elements, whose values the binder checks at call
//    time; a computed index (ir/affine_index.hpp), an expression of iterators and constants
//    whose lower bound is proved >= 0 here and whose upper bound is proved here or, from the
//    extents, by the binder; the iteration that writes a buffer so does not read it;
//  * `=` into a buffer is only allowed where every enclosing iterator indexes the write
//    (one write per element, no "last write wins");
//  * one reduction operator per `out` buffer (its initial value is that operator's identity).
// Completion:
//  * iterator kinds: an iterator is spatial (S) when every write of its iteration indexes a
//    slot of the written buffer by that very iterator (over the same coordinate space);
//    otherwise it is a reduction (R). Writes to locals declared inside the iteration are
//    private and do not count;
//  * `out` buffers: every element is written by every call. Each starts from the identity of
//    the reduction into it (0 for += and for buffers that are only assigned). Where the
//    first write of the buffer provably visits every element of it exactly at the place
//    where the element's reduction starts (the write indexes every slot by the iterator of
//    the slot's own axis, its iteration's iterator kinds are those of this write, every
//    enclosing iteration indexes it, the buffer is never read), the identity is stored per
//    element by the iteration's init (before its outermost reduction loop, SparseTIR's
//    `with init()`); otherwise the whole buffer is filled by an iteration over its axes at
//    the start of the kernel.
#pragma once

#include <algorithm>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "spindle/frontend/iteration_inference_decl.hpp"
#include "spindle/ir/affine_index.hpp"
#include "spindle/ir/equal.hpp"
#include "spindle/ir/functor.hpp"
#include "spindle/ir/fused_chain.hpp"
#include "spindle/ir/indirect.hpp"
#include "spindle/ir/ops.hpp"
#include "spindle/ir/printer.hpp"

namespace spindle::detail {

class IterationInference : public ir::IRMutator {
 public:
  IterationInference(std::string kernel, const std::vector<ir::FuncBuffer>& buffers)
      : kernel_(std::move(kernel)), buffers_(buffers) {}

  ir::Stmt run(const ir::Stmt& body) {
    Analysis a(kernel_);
    a.visit(body);
    // Decide, per `out` buffer, per-element init in its first write's iteration or a fill.
    std::vector<ir::Stmt> fills;
    for (auto& fb : buffers_) {
      const ir::Buffer& b = fb.buffer;
      if (b->role != ir::BufferRole::output || ir::is_assembled(*b)) continue;  // assembly starts it empty
      auto op = a.reduce_op.find(b.get());
      ir::Expr fill = op != a.reduce_op.end() ? ir::reduce_identity(op->second, b->dtype) : ir::make_const(b->dtype, 0);
      auto first = a.first_write.find(b.get());
      const bool init_here = first != a.first_write.end() && !a.loaded.count(b.get()) &&
                             later_writes_follow_init(first->second, a.write_sites[b.get()]);
      if (init_here && first->second.per_element) {
        if (first->second.reduce) per_element_init_[first->second.iteration].push_back({b, first->second.indices, fill});
        continue;  // a store that writes every element once needs no initial value
      }
      if (init_here && first->second.gaps_of) {
        // Written at the coordinates of sparse root R (slot 0, dense<R> indexed by R's
        // iterator): when R's indices ascend (a call-time scalar), each stored coordinate is
        // visited once, so its elements get the per-element init and the fill covers only
        // the coordinates R does not store; otherwise (R may repeat a coordinate) the whole
        // buffer is filled and nothing is initialised in the iteration.
        const ir::Axis& root = first->second.gaps_of;
        ir::Expr sorted = ir::binary(ir::BinOp::ne, ir::Expr(sorted_scalar(root)), ir::int_imm(0));
        if (first->second.reduce)
          per_element_init_[first->second.iteration].push_back({b, first->second.indices, fill, sorted});
        fills.push_back(ir::if_then_else(sorted, fill_iteration(b, fill, root), fill_iteration(b, fill)));
        continue;
      }
      fills.push_back(fill_iteration(b, fill));
    }
    ir::Stmt out = mutate(body);
    if (fills.empty()) return out;
    fills.push_back(out);
    return ir::seq(std::move(fills));
  }

 protected:
  ir::Stmt mutate_SparseIteration(const ir::SparseIterationNode* n, const ir::Stmt&) override {
    std::vector<ir::IterKind> kinds = iterator_kinds(n);
    std::vector<ir::Stmt> inits;
    if (auto it = per_element_init_.find(n); it != per_element_init_.end())
      for (auto& i : it->second) {
        ir::Stmt st = ir::store(i.buffer, i.indices, i.value, n->loc);
        inits.push_back(i.when.defined() ? ir::if_then_else(i.when, st, ir::Stmt(), n->loc) : st);
      }
    ir::Stmt init = n->init.defined() ? n->init : ir::seq(std::move(inits), n->loc);
    ir::Stmt body = mutate(n->body);
    ir::Stmt out = n->edited([&](ir::SparseIterationNode& c) {
      c.kinds = std::move(kinds);
      c.init = init;
      c.body = body;
    });
    check_fused_chains(*out.as<ir::SparseIterationNode>());
    return out;
  }

 public:
  // The chains of iter<fuse<...>> (docs/language.md §3.2), once the iterator kinds are known:
  // the rule of ir/fused_chain.hpp, and no assembled output (its row-by-row phases need the
  // rows as a loop of their own).
  void check_fused_chains(const ir::SparseIterationNode& n) const {
    for (std::size_t first = 0; first < n.axes.size(); ++first) {
      if (!n.fused_with_next(first) || (first > 0 && n.fused_with_next(first - 1))) continue;
      std::size_t last = first + 1;
      while (n.fused_with_next(last)) ++last;
      std::string chain;
      for (std::size_t k = first; k <= last; ++k) chain += (k > first ? ", " : "") + n.axes[k]->name;
      const std::string problem = ir::fused_chain_problem(n, first, last);
      SPINDLE_CHECK(problem.empty(), UserError, "kernel '", kernel_, "': iteration '", n.name, "' fuses axes ",
                    chain, " (iter<fuse<", chain, ">>): ", problem);
      for (auto& fb : buffers_)
        SPINDLE_CHECK(!ir::is_assembled(*fb.buffer), UserError, "kernel '", kernel_, "': iteration '", n.name,
                      "' fuses axes ", chain, " (iter<fuse<", chain, ">>) in a kernel that assembles output '",
                      fb.buffer->name, "', whose phases build it row by row; hint: iterate the axes unfused");
    }
  }

  // Spatial iterators index every (non-private) write of their iteration's body.
  static std::vector<ir::IterKind> iterator_kinds(const ir::SparseIterationNode* n) {
    Writes w;
    w.visit(n->body);
    std::vector<ir::IterKind> kinds;
    for (std::size_t k = 0; k < n->vars.size(); ++k)
      kinds.push_back(is_spatial(n->vars[k], n->axes[k], w) ? ir::IterKind::spatial : ir::IterKind::reduction);
    return kinds;
  }

 private:
  struct Writes : ir::IRVisitor {
    std::vector<std::pair<ir::Buffer, std::vector<ir::Expr>>> writes;
    std::set<const ir::BufferNode*> private_locals;
    void visit_Store(const ir::StoreNode* n) override {
      writes.push_back({n->buffer, n->indices});
      ir::IRVisitor::visit_Store(n);
    }
    void visit_Reduce(const ir::ReduceNode* n) override {
      writes.push_back({n->buffer, n->indices});
      ir::IRVisitor::visit_Reduce(n);
    }
    void visit_Block(const ir::BlockNode* n) override {
      for (auto& a : n->allocs) private_locals.insert(a.get());
      ir::IRVisitor::visit_Block(n);
    }
  };

  // The slots of a write that v indexes (over v's coordinate space), in increasing order.
  static std::vector<std::size_t> slots_of(const ir::Var& v, const ir::Axis& axis, const ir::Buffer& buf,
                                           const std::vector<ir::Expr>& idx) {
    std::vector<std::size_t> slots;
    for (std::size_t s = 0; s < idx.size() && s < buf->axes.size(); ++s)
      if (idx[s].same_as(v) && ir::coordinate_space(buf->axes[s]) == ir::coordinate_space(axis)) slots.push_back(s);
    return slots;
  }

  // Spatial: every write of each buffer indexes, in one common slot, the buffer by v (over
  // v's coordinate space). Then iterations with different values of v write disjoint
  // elements and may run concurrently. A buffer written at v in different slots
  // (c(i, i2) and c(i2, i)) makes v a reduction: two iterations could update one element.
  static bool is_spatial(const ir::Var& v, const ir::Axis& axis, const Writes& w) {
    std::map<const ir::BufferNode*, std::vector<std::size_t>> common;  // buffer -> slots of v in every write
    for (auto& [buf, idx] : w.writes) {
      if (w.private_locals.count(buf.get())) continue;
      std::vector<std::size_t> slots = slots_of(v, axis, buf, idx);
      auto [it, first] = common.emplace(buf.get(), slots);
      if (!first) {
        std::vector<std::size_t> both;
        std::set_intersection(it->second.begin(), it->second.end(), slots.begin(), slots.end(),
                              std::back_inserter(both));
        it->second = std::move(both);
      }
      if (it->second.empty()) return false;
    }
    return true;
  }

  // What the checks learn about the program, in program order.
  struct FirstWrite {
    const ir::SparseIterationNode* iteration = nullptr;
    std::vector<ir::Expr> indices;
    bool reduce = false;
    bool per_element = false;
    // Or per element where sparse root `gaps_of` stores a coordinate, if its indices ascend
    // (gaps_of_root below).
    ir::Axis gaps_of;
    int top = -1;  // which top-level statement (program order)
  };

  // Every write into an `out` buffer: an init placed at the first write (per element) is
  // right only if no other write can reach an element before that element's init runs.
  struct WriteSite {
    std::vector<ir::Expr> indices;
    int top = -1;
  };

  // The init at the first write runs, for each element, before that element's reduction;
  // another write is safe after it when it indexes by the very same iterators (so it runs
  // inside the same element's scope, after its init) or comes in a later top-level
  // statement (all inits have run). A write elsewhere in the same statement (b[j2] while
  // b[d] is initialised per d) could reach an element before its init: fill instead.
  static bool later_writes_follow_init(const FirstWrite& first, const std::vector<WriteSite>& sites) {
    for (auto& w : sites) {
      if (w.top > first.top) continue;
      bool same = w.indices.size() == first.indices.size();
      for (std::size_t s = 0; same && s < w.indices.size(); ++s) same = w.indices[s].same_as(first.indices[s]);
      if (!same) return false;
    }
    return true;
  }

  class Analysis : public ir::IRVisitor {
   public:
    explicit Analysis(const std::string& kernel) : kernel_(kernel) {}
    std::map<const ir::BufferNode*, FirstWrite> first_write;
    std::map<const ir::BufferNode*, std::vector<WriteSite>> write_sites;
    std::map<const ir::BufferNode*, ir::ReduceOp> reduce_op;
    std::set<const ir::BufferNode*> loaded;

   protected:
    void visit_SparseIteration(const ir::SparseIterationNode* n) override {
      const std::size_t depth = scope_.size();
      if (depth == 0) ++top_;
      for (std::size_t k = 0; k < n->axes.size(); ++k) {
        const ir::Axis& a = n->axes[k];
        for (std::size_t q = 0; q < k; ++q)
          SPINDLE_CHECK(n->axes[q] != a, UserError, "kernel '", kernel_, "': iteration '", n->name, "' lists axis ",
                        a->name, " twice");
        for (auto& b : scope_)
          SPINDLE_CHECK(b.axis != a, UserError, "kernel '", kernel_, "': iteration '", n->name, "' iterates axis ",
                        a->name, " inside an iteration that already iterates it; hint: use the enclosing "
                        "iterator, or iterate dense<", a->name, "> for a second pass over its coordinates");
        if (a->parent)
          SPINDLE_CHECK(bound(a->parent.get()) || bound_by_coordinate(*a), UserError, "kernel '", kernel_, "': iteration '", n->name,
                        "' iterates axis ", a->name, " without its parent ", a->parent->name, "; hint: iterate ",
                        a->parent->name, " before ", a->name, " (in the same iteration or an enclosing one)");
        // A merge (language §3.1): every operand's parent before it, as for the operand itself.
        for (auto& o : a->merge_operands)
          SPINDLE_CHECK(!o->parent || bound(o->parent.get()) || bound_by_coordinate(*o), UserError, "kernel '", kernel_,
                        "': iteration '", n->name, "' iterates ", a->name, " (", ir::merge_op_name(a->merge),
                        " of the fibers of ", o->name, ", ...) without the parent ", o->parent->name, " of ", o->name,
                        "; hint: iterate ", o->parent->name, " before it (in the same iteration or an enclosing one)");
        // The iterator whose position names the fiber this one runs over: the parent's, or
        // (§3, a root dense parent not iterated yet) the innermost one over its coordinates.
        const ir::VarNode* under = nullptr;
        if (a->parent) {
          if (const Binding* p = bound(a->parent.get())) under = p->var;
          else
            for (auto it = scope_.rbegin(); it != scope_.rend() && !under; ++it)
              if (ir::coordinate_space(it->axis) == ir::coordinate_space(a->parent)) under = it->var;
        }
        scope_.push_back({n->vars[k].node(), a, n, under});
      }
      std::vector<ir::IterKind> kinds = IterationInference::iterator_kinds(n);
      kinds_.push_back({n, kinds});
      visit(n->body);
      kinds_.pop_back();
      scope_.resize(depth);
      if (depth == 0) check_reads_of_written(n);
    }

    void visit_Block(const ir::BlockNode* n) override {
      for (auto& a : n->allocs) locals_.insert(a.get());
      ir::IRVisitor::visit_Block(n);
    }

    void visit_IfThenElse(const ir::IfThenElseNode* n) override {
      ++conditional_;
      ir::IRVisitor::visit_IfThenElse(n);
      --conditional_;
    }

    void visit_Load(const ir::LoadNode* n) override {
      SPINDLE_CHECK(!ir::is_assembled(*n->buffer), UserError, "kernel '", kernel_, "': buffer '", n->buffer->name,
                    "' is read at (", ir::IRPrinter().list(n->indices), "), but its pattern is assembled by this "
                    "kernel (axis ", n->buffer->axes.back()->name, " is assembled<...>): it is only written; hint: "
                    "accumulate into a local, or read the result in another kernel");
      if (n->buffer->role == ir::BufferRole::output) loaded.insert(n->buffer.get());
      record(n->buffer, n->indices, false, kRead);
      ir::IRVisitor::visit_Load(n);
    }

    void visit_Store(const ir::StoreNode* n) override {
      ir::IRVisitor::visit_Store(n);
      if (locals_.count(n->buffer.get()) || n->buffer->scope == ir::BufferScope::local) return;
      check_write(n->buffer, n->indices, "=");
      record(n->buffer, n->indices, true, kAssign);
      for (auto& b : scope_)
        SPINDLE_CHECK(uses(b.var, n->indices), UserError, "kernel '", kernel_, "': `=` into buffer '",
                      n->buffer->name, "' inside the iteration over ", b.axis->name, ", whose iterator '",
                      b.var->name, "' does not index the write: every ", b.axis->name,
                      " coordinate would overwrite the same element (last write wins); hint: reduce with += "
                      "(or max_with/min_with), or index '", n->buffer->name, "' by '", b.var->name, "'");
      note_first(n->buffer, n->indices, false);
      if (n->buffer->role == ir::BufferRole::output) write_sites[n->buffer.get()].push_back({n->indices, top_});
    }

    void visit_Reduce(const ir::ReduceNode* n) override {
      ir::IRVisitor::visit_Reduce(n);
      if (locals_.count(n->buffer.get()) || n->buffer->scope == ir::BufferScope::local) return;
      check_write(n->buffer, n->indices, ir::reduce_op_name(n->op));
      record(n->buffer, n->indices, true, static_cast<int>(n->op));
      if (n->buffer->role == ir::BufferRole::output) {
        auto [it, fresh] = reduce_op.emplace(n->buffer.get(), n->op);
        SPINDLE_CHECK(fresh || it->second == n->op, UserError, "kernel '", kernel_, "': `out` buffer '",
                      n->buffer->name, "' is reduced with both ", ir::reduce_op_name(it->second), " and ",
                      ir::reduce_op_name(n->op), ", so its initial value (the reduction's identity) is "
                      "ambiguous; hint: declare it inout and initialise it yourself, or use two buffers");
      }
      note_first(n->buffer, n->indices, true);
      if (n->buffer->role == ir::BufferRole::output) write_sites[n->buffer.get()].push_back({n->indices, top_});
    }

   private:
    // Inside one top-level iteration, a read of a buffer that the iteration also writes must
    // touch the written element in the same iterations of every loop the two share: for each
    // iterator enclosing both, the read indexes a slot by it exactly where the write does.
    // (e(i, j2) after e(i, j) = ... in an earlier for_each is fine; y(i + 1) while y(i) is
    // written is not: it would depend on the order in which the iterations run, which the
    // language leaves to the schedule.)
    static constexpr int kRead = -2, kAssign = -1;  // else the ir::ReduceOp of a reduction
    struct Access {
      const ir::BufferNode* buffer;
      std::vector<ir::Expr> indices;
      std::vector<const ir::VarNode*> scope;
      bool write;
      int op;
    };
    static const char* op_name(int op) {
      return op == kAssign ? "=" : ir::reduce_op_name(static_cast<ir::ReduceOp>(op));
    }
    // Do the accesses index by v in exactly the same slots (and in at least one)?
    static bool same_slots(const ir::VarNode* v, const std::vector<ir::Expr>& a, const std::vector<ir::Expr>& b) {
      if (a.size() != b.size()) return false;
      bool used = false;
      for (std::size_t s = 0; s < a.size(); ++s) {
        if ((a[s].get() == v) != (b[s].get() == v)) return false;
        used = used || a[s].get() == v;
      }
      return used;
    }
    void record(const ir::Buffer& b, const std::vector<ir::Expr>& idx, bool write, int op) {
      if (scope_.empty() || b->scope != ir::BufferScope::global || locals_.count(b.get())) return;
      Access a{b.get(), idx, {}, write, op};
      for (auto& x : scope_) a.scope.push_back(x.var);
      accesses_.push_back(std::move(a));
    }
    void check_reads_of_written(const ir::SparseIterationNode* n) {
      for (auto& r : accesses_) {
        if (r.write) continue;
        auto sc = scattered_.find(r.buffer);
        SPINDLE_CHECK(sc == scattered_.end(), UserError, "kernel '", kernel_, "': buffer '", r.buffer->name,
                      "' is read at (", ir::IRPrinter().list(r.indices), ") in iteration '", n->name,
                      "', which also writes it at ", sc == scattered_.end() ? "" : sc->second,
                      ": the value read would depend on the order in "
                      "which the iterations run; hint: read it in a later statement, or from another buffer");
        for (auto& w : accesses_) {
          if (!w.write || w.buffer != r.buffer) continue;
          for (const ir::VarNode* v : r.scope) {
            if (std::find(w.scope.begin(), w.scope.end(), v) == w.scope.end()) continue;
            // A write that does not index by v accumulates across v's iterations: reading it
            // inside one of them sees a partial state, unless it is the very element written.
            bool ok = ir::equal(r.indices, w.indices);
            if (!ok && std::any_of(w.indices.begin(), w.indices.end(), [&](const ir::Expr& e) { return e.get() == v; })) {
              ok = r.indices.size() == w.indices.size();
              for (std::size_t s = 0; ok && s < r.indices.size(); ++s)
                ok = (r.indices[s].get() == v) == (w.indices[s].get() == v);
            }
            SPINDLE_CHECK(ok, UserError, "kernel '", kernel_, "': buffer '", r.buffer->name, "' is read at (",
                          ir::IRPrinter().list(r.indices), ") and written at (", ir::IRPrinter().list(w.indices),
                          ") in the same iteration '", n->name, "', which differ in how they use iterator '", v->name,
                          "': the result would depend on the order in which the iterations run; hint: read "
                          "it in a later statement, or from another buffer");
          }
        }
      }
      // Two writes of one buffer whose order matters (an assignment, or reductions with
      // different operators) must meet only inside the same iterations of every loop they
      // share: each shared iterator indexes both in exactly the same slots. Otherwise one
      // element could get them from different iterations, in an order that the language
      // leaves to the schedule (c(i, i2) = ... and c(i2, i) = ...).
      for (std::size_t p = 0; p < accesses_.size(); ++p) {
        const Access& w1 = accesses_[p];
        if (!w1.write) continue;
        for (std::size_t q = p + 1; q < accesses_.size(); ++q) {
          const Access& w2 = accesses_[q];
          if (!w2.write || w2.buffer != w1.buffer) continue;
          if (w1.op == w2.op && w1.op != kAssign) continue;  // one commutative reduction
          for (const ir::VarNode* v : w1.scope) {
            if (std::find(w2.scope.begin(), w2.scope.end(), v) == w2.scope.end()) continue;
            SPINDLE_CHECK(same_slots(v, w1.indices, w2.indices), UserError, "kernel '", kernel_, "': buffer '",
                          w1.buffer->name, "' is written with ", op_name(w1.op), " at (",
                          ir::IRPrinter().list(w1.indices), ") and with ", op_name(w2.op), " at (",
                          ir::IRPrinter().list(w2.indices), ") in the same iteration '", n->name,
                          "', which differ in how they use iterator '", v->name,
                          "': one element could get both from different iterations, and the result would "
                          "depend on the order in which the iterations run; hint: write the two patterns in "
                          "separate statements (a later top-level iteration), or reduce with one operator");
          }
        }
      }
      accesses_.clear();
      scattered_.clear();
    }

    struct Binding {
      const ir::VarNode* var;
      ir::Axis axis;
      const ir::SparseIterationNode* iteration;
      const ir::VarNode* under = nullptr;  // the iterator naming its fiber (null for a root)
    };

    const Binding* bound(const ir::AxisNode* a) const {
      for (auto& b : scope_)
        if (b.axis.get() == a) return &b;
      return nullptr;
    }
    // A parent that is a root dense axis is named by any enclosing iterator over its
    // coordinates: `for_each<K>` under j iterates row j of b[dense<J>, K] (§3).
    bool bound_by_coordinate(const ir::AxisNode& a) const {
      if (!ir::parent_by_coordinate(a)) return false;
      for (auto& b : scope_)
        if (ir::coordinate_space(b.axis) == ir::coordinate_space(a.parent)) return true;
      return false;
    }
    const Binding* binding_of(const ir::Expr& e) const {
      const ir::VarNode* v = e.as<ir::VarNode>();
      for (auto& b : scope_)
        if (b.var == v) return &b;
      return nullptr;
    }
    static bool uses(const ir::VarNode* v, const std::vector<ir::Expr>& idx) {
      for (auto& e : idx)
        if (e.get() == v) return true;
      return false;
    }

    // A write's indices must keep it inside the buffer's storage (see the top of the file).
    void check_write(const ir::Buffer& buf, const std::vector<ir::Expr>& idx, const char* op) {
      SPINDLE_CHECK(buf->role != ir::BufferRole::input, UserError, "kernel '", kernel_, "': `", op,
                    "` into buffer '", buf->name, "', which is an `in` (read-only) buffer; hint: declare it "
                    "out (written) or inout (read and written)");
      const bool reduction = std::string(op) != "=";
      if (ir::is_assembled(*buf)) return check_assembled_write(buf, idx, op);
      for (std::size_t s = 0; s < idx.size() && s < buf->axes.size(); ++s) {
        const ir::Axis& a = buf->axes[s];
        std::string where = message("kernel '", kernel_, "': `", op, "` into buffer '", buf->name, "' indexes axis ",
                                    a->name, " (index ", s, ") with ", ir::to_string(idx[s]));
        if (!a->parent && a->is_dense() && !binding_of(idx[s])) {
          if (ir::indirect_index_load(idx[s]))
            check_indirect(buf, idx[s], a, where, reduction);
          else
            check_computed(buf, idx[s], a, where, reduction);
          continue;
        }
        std::string problem = slot_problem(buf, idx, s);
        SPINDLE_CHECK(problem.empty(), UserError, where, problem,
                      "; writes at other coordinates (outputs of unknown pattern) are not supported yet");
      }
    }

    // A write into an assembled output c[P, C] (C = assembled<P, X>, docs/language.md §4.6):
    // c(r, x) with r over P's coordinates and x over X's: each an iterator of that coordinate
    // space, or (as in a root slot, §4.1) an indirect or a computed index in a reduction. When
    // r is the first iterator of the top-level iteration, a dense P, rows are assembled one at
    // a time, in parallel (lower/assemble_rows.hpp); otherwise the rows are scattered
    // (lower/assemble_scattered.hpp: the writes are collected per row and combined per element
    // afterwards), which needs one operator for every write of c. Every write of c in one
    // top-level iteration.
    void check_assembled_write(const ir::Buffer& buf, const std::vector<ir::Expr>& idx, const char* op) {
      const ir::Axis& rows = buf->axes[0];
      const ir::Axis& cols = buf->axes[1];
      ir::Axis space = cols->coordinates_of;  // X's coordinate space, a root
      while (space->dense_of || space->coordinates_of) space = space->dense_of ? space->dense_of : space->coordinates_of;
      std::string where = message("kernel '", kernel_, "': `", op, "` into buffer '", buf->name, "' (assembled over [",
                                  rows->name, ", ", cols->name, "]) at (", ir::IRPrinter().list(idx), ")");
      const bool reduction = std::string(op) != "=";
      const Binding* r = binding_of(idx[0]);
      const bool by_row = r && r == &scope_.front() && !r->axis->parent && r->axis->kind == ir::AxisKind::dense_fixed &&
                          r->axis->merge == ir::MergeOp::none &&
                          ir::coordinate_space(r->axis) == ir::coordinate_space(rows);
      if (!by_row) {
        if (r)
          SPINDLE_CHECK(ir::coordinate_space(r->axis) == ir::coordinate_space(rows), UserError, where,
                        ": the row index is an iterator of ", r->axis->name, ", not over the coordinates of ",
                        rows->name, "; it could fall outside the output's rows");
        else if (ir::indirect_index_load(idx[0]))
          check_indirect(buf, idx[0], rows, where, reduction);
        else
          check_computed(buf, idx[0], rows, where, reduction);
      }
      const Binding* c = binding_of(idx[1]);
      if (c)
        SPINDLE_CHECK(ir::coordinate_space(c->axis) == ir::coordinate_space(cols), UserError, where,
                      ": the column index must be over the coordinates of ", ir::coordinate_space(cols)->name,
                      " (the X of assembled<P, X>), not an iterator of ", c->axis->name,
                      "; it could fall outside the output's columns");
      else if (ir::indirect_index_load(idx[1]))
        check_indirect(buf, idx[1], space, where, reduction);
      else
        check_computed(buf, idx[1], space, where, reduction);
      AssembledWrites& w = assembled_writes_[buf.get()];
      w.scattered = w.scattered || !by_row;
      w.ops.insert(op == std::string("-=") ? "+=" : op);
      SPINDLE_CHECK(!w.scattered || w.ops.size() == 1, UserError, where, ": '", buf->name, "' is written with ",
                    *w.ops.begin(), " and with ", *w.ops.rbegin(), "; an assembled output whose rows are scattered "
                    "(written at a row other than the first iterator of the top-level iteration, or at an indirect "
                    "or computed index) collects its writes and combines them per element afterwards, so all of "
                    "them use one operator");
      const ir::SparseIterationNode* top = scope_.empty() ? nullptr : scope_.front().iteration;
      SPINDLE_CHECK(top, UserError, where, ": the output is written outside any iteration; an assembled output is "
                    "written in one iteration (hint: write it inside a for_each, or in the kernel lambda's body)");
      auto [it, fresh] = assembled_top_.emplace(buf.get(), top);
      SPINDLE_CHECK(fresh || it->second == top, UserError, where, ": the output is already written in "
                    "another top-level iteration; an assembled output is written in one iteration over its rows "
                    "(hint: put the two loops in for_each blocks inside one iteration over ", rows->name, ")");
    }
    struct AssembledWrites {
      bool scattered = false;
      std::set<std::string> ops;
    };
    std::map<const ir::BufferNode*, AssembledWrites> assembled_writes_;
    std::map<const ir::BufferNode*, const ir::SparseIterationNode*> assembled_top_;

    // Why slot s of an access does not address a stored element by iterators ("" when it
    // does): a root slot takes an iterator of its coordinate space; a child slot the
    // iterator of its own axis, under the iterator of its parent in the slot before.
    std::string slot_problem(const ir::Buffer& buf, const std::vector<ir::Expr>& idx, std::size_t s) const {
      const ir::Axis& a = buf->axes[s];
      const Binding* b = binding_of(idx[s]);
      if (!b)
        return message(", which is not an iterator: a write there could fall outside the ",
                       a->is_sparse() ? "buffer's sparsity pattern" : "axis's extent",
                       " and be lost; hint: index writes by iterators of the written axes (other indices "
                       "are fine for reads; a root axis may take a value read from an integer `in` buffer in a "
                       "reduction, see docs/language.md §4.1)");
      if (!a->parent && a->is_sparse()) {  // sparse_root: its own iterator, as a child slot
        if (b->axis == a) return "";
        return message(": a write into the sparse root axis ", a->name, " must use the iterator of ", a->name,
                       " itself (here an iterator of ", b->axis->name, "), or it could fall outside the buffer's "
                       "sparsity pattern");
      }
      if (!a->parent) {
        if (ir::coordinate_space(b->axis) == ir::coordinate_space(a)) return "";
        return message(", an iterator of axis ", b->axis->name,
                       ", which ranges over a different coordinate space; hint: index it with an iterator of ",
                       a->name);
      }
      // The parent slot must hold the very iterator whose fiber this one runs over (its
      // parent's, or the one over the parent's coordinates it was taken at, §3).
      const Binding* parent = binding_of(idx[s - 1]);
      if (b->axis == a && parent && parent->var == b->under) return "";
      return message(": a write into axis ", a->name, " (which has parent ", a->parent->name,
                     ") must use the iterator of ", a->name, " itself, under the iterator of ", a->parent->name,
                     " in the slot before it, or it could fall outside the buffer's ",
                     a->is_sparse() ? "sparsity pattern" : "fibers");
    }

    // An indirect index (a scatter: `c(idx(e), k) += ...`) in a root slot: a reduction, by a
    // value of an integer `in` buffer read at one of its stored elements. The binder checks
    // every stored value against the slot's extent before the call (ir/indirect.hpp).
    void check_indirect(const ir::Buffer& buf, const ir::Expr& index, const ir::Axis& a, const std::string& where,
                        bool reduction) {
      const ir::LoadNode* l = ir::indirect_index_load(index);
      SPINDLE_CHECK(reduction, UserError, where,
                    ", an indirect index: `=` there would let two iterations that read the same index value "
                    "assign one element (last write wins); hint: reduce with += (or max_with/min_with)");
      for (std::size_t q = 0; q < l->indices.size() && q < l->buffer->axes.size(); ++q) {
        std::string problem = slot_problem(l->buffer, l->indices, q);
        SPINDLE_CHECK(problem.empty(), UserError, where, ": the index buffer '", l->buffer->name,
                      "' must be read at its stored elements (by iterators of its own axes), so that every "
                      "index value the write uses is one that the call checks against the extent of ", a->name,
                      "; its index ", q, " (", ir::to_string(l->indices[q]), ") is not such an iterator");
      }
      scattered_.emplace(buf.get(), "an indirect index");
    }

    // A computed index (ir/affine_index.hpp: `d(io * 4 + ii, k) += ...`, `c(i / 2) += ...`) in
    // a root slot: a reduction, by an expression of iterators and constants whose lower bound
    // interval arithmetic proves >= 0 here; its upper bound is proved here when every extent
    // it involves is a compile-time constant, else by the binder from the call's extents.
    void check_computed(const ir::Buffer& buf, const ir::Expr& index, const ir::Axis& a, const std::string& where,
                        bool reduction) {
      const ir::AxisNode* variable = nullptr;
      auto range = ir::index_range(index, [&](const ir::VarNode* v) -> std::optional<ir::IndexRange> {
        const Binding* b = nullptr;
        for (auto& x : scope_)
          if (x.var == v) b = &x;
        if (!b) return std::nullopt;
        if (b->axis->kind == ir::AxisKind::dense_variable) {
          variable = b->axis.get();
          return std::nullopt;
        }
        const ir::IntImmNode* len = ir::coordinate_space(b->axis)->length.as<ir::IntImmNode>();
        return ir::IndexRange{0, len ? std::max<std::int64_t>(len->value - 1, 0) : ir::IndexRange::unbounded};
      });
      SPINDLE_CHECK(!variable, UserError, where, ", which uses the iterator of ", variable ? variable->name : "",
                    ", a dense_variable axis: its coordinates have no extent that the call could check the write "
                    "against; hint: index the write by that iterator alone, in a slot of its own axis");
      SPINDLE_CHECK(range, UserError, where,
                    ", which is not an iterator, an indirect index or a computed index (iterators and integer "
                    "constants joined by +, -, *, min, max, and / or % by a positive constant): a write there "
                    "could fall outside the axis's extent and be lost; hint: index writes by iterators of the "
                    "written axes, by such an expression of them (docs/language.md §4.1), or by a value read from "
                    "an integer `in` buffer (an indirect write; casts other than to int64_t are not accepted "
                    "there); other indices are fine for reads");
      SPINDLE_CHECK(reduction, UserError, where,
                    ", a computed index: `=` there could let two iterations assign one element (last write wins); "
                    "hint: reduce with += (or max_with/min_with) into an `out` buffer, which starts at 0");
      SPINDLE_CHECK(range->lo >= 0, UserError, where, ": could not prove the index >= 0 (over the iterators' "
                    "coordinates, each from 0 up to its axis's extent - 1, it can be as low as ",
                    ir::range_bound_string(range->lo), "), so the write could fall outside axis ", a->name,
                    " and be lost; hint: write at a non-negative expression, e.g. shift the iterator");
      const ir::IntImmNode* ext = ir::coordinate_space(a)->length.as<ir::IntImmNode>();
      if (ext && range->hi_known())  // else the binder proves it from the call's extents
        SPINDLE_CHECK(range->hi < ext->value, UserError, where, ": could not prove the index < ", ext->value,
                      " (the extent of ", a->name, "): it can reach ", ir::range_bound_string(range->hi),
                      ", so the write could fall outside the axis and be lost; hint: declare the written axis "
                      "longer, or bound the index (min(..., ", ext->value - 1, ") clamps it)");
      scattered_.emplace(buf.get(), "a computed index");
    }
    // Buffers written at an indirect or a computed index in this top-level iteration.
    std::map<const ir::BufferNode*, const char*> scattered_;

    void note_first(const ir::Buffer& buf, const std::vector<ir::Expr>& idx, bool reduce) {
      if (buf->role != ir::BufferRole::output || first_write.count(buf.get())) return;
      FirstWrite w;
      w.indices = idx;
      w.reduce = reduce;
      w.iteration = kinds_.empty() ? nullptr : kinds_.back().first;
      w.per_element = per_element(buf, idx);
      if (!w.per_element) w.gaps_of = gaps_of_root(buf, idx);
      w.top = top_;
      first_write.emplace(buf.get(), std::move(w));
    }

    // Does this write visit every element of `buf` at the place where the element's
    // reduction starts, so that an init in its iteration covers the whole buffer?
    // `gaps_of`: slot 0 may be a root dense axis over the coordinates of a sparse root R,
    // indexed by R's iterator (dense<R> by R: the stored coordinates only).
    bool per_element(const ir::Buffer& buf, const std::vector<ir::Expr>& idx, const ir::AxisNode* gaps_of = nullptr) const {
      if (kinds_.empty() || conditional_ > 0) return false;
      for (std::size_t s = 0; s < idx.size(); ++s) {
        const Binding* b = binding_of(idx[s]);
        if (s == 0 && b && gaps_of && b->axis.get() == gaps_of) continue;
        if (!b || b->axis != buf->axes[s]) return false;  // dense<J> by J: only stored coordinates
        for (std::size_t q = 0; q < s; ++q)
          if (idx[q].same_as(idx[s])) return false;  // f(i, i): only the diagonal
      }
      const ir::SparseIterationNode* n = kinds_.back().first;
      const std::vector<ir::IterKind>& kinds = kinds_.back().second;
      for (auto& b : scope_)
        if (b.iteration != n && !uses(b.var, idx)) return false;  // an enclosing reduction loop
      // The iteration's kinds are this write's; the init loops (spatial axes after the first
      // reduction) must not depend on a reduction axis.
      int first_reduction = -1;
      for (std::size_t k = 0; k < n->vars.size(); ++k) {
        bool spatial = uses(n->vars[k].node(), idx);
        if (spatial != (kinds[k] == ir::IterKind::spatial)) return false;
        if (!spatial && first_reduction < 0) first_reduction = static_cast<int>(k);
        if (spatial && first_reduction >= 0 && n->axes[k]->parent) {
          bool parent_ok = false;
          for (auto& b : scope_)
            if (b.axis == n->axes[k]->parent && (b.iteration != n || uses(b.var, idx))) parent_ok = true;
          if (!parent_ok) return false;
        }
      }
      return true;
    }

    // The sparse root R when this write would visit every element of `buf` at the place
    // where its reduction starts but for slot 0, a root dense axis over R's coordinates that
    // R's iterator indexes (DBSR's C rows, a sparse vector scattered into a dense one): each
    // coordinate R stores, once when R's indices ascend. Else null.
    ir::Axis gaps_of_root(const ir::Buffer& buf, const std::vector<ir::Expr>& idx) const {
      if (idx.empty() || buf->axes.empty()) return nullptr;
      const Binding* b = binding_of(idx[0]);
      const ir::Axis& slot = buf->axes[0];
      if (!b || b->axis == slot || b->axis->parent || b->axis->kind != ir::AxisKind::sparse_fixed ||
          !b->axis->merge_operands.empty() || slot->parent || slot->kind != ir::AxisKind::dense_fixed ||
          ir::coordinate_space(slot) != ir::coordinate_space(b->axis))
        return nullptr;
      for (std::size_t s = 1; s < buf->axes.size(); ++s)
        if (buf->axes[s] == slot || buf->axes[s]->parent == slot) return nullptr;  // [X, X], [X, child of X]
      return per_element(buf, idx, b->axis.get()) ? b->axis : nullptr;
    }

    std::string kernel_;
    std::vector<Binding> scope_;
    std::vector<std::pair<const ir::SparseIterationNode*, std::vector<ir::IterKind>>> kinds_;
    std::set<const ir::BufferNode*> locals_;
    std::vector<Access> accesses_;  // of the current top-level iteration
    int conditional_ = 0;
    int top_ = -1;
  };

  // The call-time scalar "R's indices ascend" (ParamOrigin::sorted), one per root.
  ir::Var sorted_scalar(const ir::Axis& root) {
    for (auto& s : scalars_)
      if (s.origin.axis == root) return s.var;
    ir::Var v(root->name + "_sorted", DType::i64);
    scalars_.push_back({v, {ir::ParamOrigin::sorted, -1, root}});
    return v;
  }

 public:
  // The scalars the completion added (sorted_scalar): the caller appends them to the kernel's.
  std::vector<ir::FuncScalar> scalars_;

 private:
  // for every position of `b`'s axes: b[...] = value (spatial, no reduction); with
  // `gaps_of` (a sparse root over the coordinates of b's first axis), only at the
  // coordinates it does not store (SparseIterationNode::gaps_of).
  ir::Stmt fill_iteration(const ir::Buffer& b, const ir::Expr& value, const ir::Axis& gaps_of = nullptr) {
    std::vector<ir::Var> vars;
    std::vector<ir::Expr> idx;
    std::vector<ir::Axis> axes;
    for (std::size_t s = 0; s < b->axes.size(); ++s) {
      ir::Axis a = b->axes[s];
      if (std::find(b->axes.begin() + static_cast<long>(s) + 1, b->axes.end(), a) != b->axes.end()) {
        // A buffer over [I, I, J]: the first I is iterated as a dense view of I, the last
        // one (the parent of what follows it) as I itself. A sparse axis listed twice
        // (sparse_root: [V, V]) has no view that visits only its stored coordinates.
        SPINDLE_CHECK(!a->parent && a->is_dense() && !(s + 1 < b->axes.size() && b->axes[s + 1]->parent),
                      UserError, "kernel '", kernel_, "': `out` buffer '", b->name, "' lists axis ", a->name,
                      a->is_sparse() ? " (a sparse axis) twice" : " twice with a child axis after the first",
                      "; Spindle cannot write every element of it; hint: declare it inout");
        auto view = std::make_shared<ir::AxisNode>(*a);
        view->name = a->name + "_2";
        view->dense_of = a;
        a = view;
      }
      axes.push_back(a);
      std::string base = a->name;
      for (char& c : base) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      vars.emplace_back(base + "_fill", DType::i64);
      idx.push_back(vars.back());
    }
    std::vector<ir::IterKind> kinds(vars.size(), ir::IterKind::spatial);
    auto node = std::make_shared<ir::SparseIterationNode>(kernel_ + (gaps_of ? "_fill_gaps_" : "_fill_") + b->name,
                                                          std::move(axes), std::move(vars), std::move(kinds),
                                                          ir::Stmt(), ir::store(b, std::move(idx), value),
                                                          ir::SourceLoc{});
    node->gaps_of = gaps_of;
    return ir::Stmt(std::move(node));
  }

  struct Init {
    ir::Buffer buffer;
    std::vector<ir::Expr> indices;
    ir::Expr value;
    ir::Expr when;  // undefined: always
  };

  std::string kernel_;
  const std::vector<ir::FuncBuffer>& buffers_;
  std::map<const ir::SparseIterationNode*, std::vector<Init>> per_element_init_;
};

SPINDLE_DECL ir::Stmt infer_iteration_kinds(ir::Stmt body, const std::string& kernel,
                                            const std::vector<ir::FuncBuffer>& buffers,
                                            std::vector<ir::FuncScalar>& scalars) {
  IterationInference inference(kernel, buffers);
  ir::Stmt out = inference.run(body);
  scalars.insert(scalars.end(), inference.scalars_.begin(), inference.scalars_.end());
  return out;
}

SPINDLE_DECL void check_assembled_outputs(const std::string& kernel, const std::vector<ir::FuncBuffer>& buffers) {
  const ir::BufferNode* assembled = nullptr;
  for (auto& fb : buffers) {
    const ir::BufferNode& b = *fb.buffer;
    if (!ir::is_assembled(b)) continue;
    const ir::Axis& c = b.axes.back();
    SPINDLE_CHECK(b.axes.size() == 2 && c->assembled && b.axes[0] == c->parent, UserError, "kernel '", kernel,
                  "': buffer '", b.name, "' lists an assembled axis but is not over exactly [P, C] with C = "
                  "assembled<P, X> (a CSR output: rows P, assembled columns C); hint: declare out<T, P, C>");
    SPINDLE_CHECK(b.role == ir::BufferRole::output, UserError, "kernel '", kernel, "': buffer '", b.name,
                  "' is over the assembled axis ", c->name, " but is declared ", ir::buffer_role_name(b.role),
                  "; the pattern of an assembled axis is built by the kernel that writes it, so only an `out` "
                  "buffer may have one; hint: pass the result to the next kernel as a Csr over a sparse_variable "
                  "axis");
    SPINDLE_CHECK(!assembled, UserError, "kernel '", kernel, "': buffers '", assembled ? assembled->name : "",
                  "' and '", b.name, "' are both assembled; a kernel assembles one sparse output");
    assembled = &b;
  }
  if (!assembled) return;
  for (auto& fb : buffers) {
    const ir::BufferNode& b = *fb.buffer;
    SPINDLE_CHECK(&b == assembled || (b.role != ir::BufferRole::output && b.role != ir::BufferRole::inout),
                  UserError, "kernel '", kernel, "': buffer '", b.name, "' is written (", ir::buffer_role_name(b.role),
                  ") in a kernel that assembles '", assembled->name, "'; such a kernel runs its body twice (a "
                  "symbolic phase counts each row, a numeric phase fills it), so it writes nothing else; hint: "
                  "compute '", b.name, "' in another kernel");
  }
}

}  // namespace spindle::detail

// apply_user_schedule (stage III -> stage III): the loop steps of a user's spindle::Schedule
// (schedule/user_schedule.hpp), in order, on the unscheduled flat loops, instead of the
// default schedule of the target (autosched/cpu_default.hpp, autosched/cuda_default.hpp).
//
// Each step is one of the primitives of this folder; besides their own checks, a user's
// step must keep the kernel's result (docs/language.md §4.3 lets schedules re-associate
// reductions, nothing more), so:
//   - parallel: the loop is spatial (bind's check), runs on the CPU pool, is not inside
//     or around another parallel loop, and writes no local allocated outside it (every
//     thread would share it);
//   - reorder / vectorize: when reduction loops change their relative order (reorder) or
//     a reduction loop is vectorised, every write under them is a reduction (+=, *=,
//     min=, max=) whose target they do not read, or a store to a local allocated under
//     them: re-association is all that may change;
//   - GPU steps (bind, cache_read, atomic) only in a GPU schedule, parallel only in a CPU
//     one; rfactor is warp lanes on the GPU (rfactor.hpp), register partial sums on the CPU
//     (rfactor_cpu.hpp).
// A GPU schedule must launch every top-level nest from a loop bound to blockIdx, with at most
// 1024 threads per block, and every write to a global or shared buffer inside a loop bound
// to each threadIdx dimension the launch uses (check_gpu_launches): every thread runs the
// statements outside its thread loops, so such a write would run once per thread.
// split, parallel, vectorize, unroll and bind apply to every loop of the name when several
// sibling loops share it (SpMM's init loop and reduction loop over k).
// A failing step raises UserError "kernel 'K': schedule step N, split("k", 32): <why>".
// Pre/post: stage III; semantics preserved up to the re-association of reductions.
#pragma once

#include <algorithm>
#include <array>
#include <functional>
#include <set>
#include <string>

#include "spindle/ir/function.hpp"
#include "spindle/ir/printer.hpp"
#include "spindle/schedule/atomic_writeback.hpp"
#include "spindle/schedule/bind.hpp"
#include "spindle/schedule/cache_read.hpp"
#include "spindle/schedule/cache_write.hpp"
#include "spindle/schedule/fuse.hpp"
#include "spindle/schedule/reorder.hpp"
#include "spindle/schedule/rfactor.hpp"
#include "spindle/schedule/rfactor_cpu.hpp"
#include "spindle/schedule/split.hpp"
#include "spindle/schedule/user_schedule.hpp"

namespace spindle::schedule {

enum class ScheduleTarget : std::uint8_t { cpu, gpu };

namespace detail {

// Applies `f` to every loop named `name` (each as the root of its own sub-statement);
// loops of that name may not be nested in one another.
template <class F>
ir::Stmt each_loop_named(const ir::Stmt& body, const std::string& name, const char* primitive, F&& f) {
  require_loop(body, name, primitive);
  auto loops = loops_named(body, name);
  // A transformation may share one loop node between two places of the tree (rfactor of a loop
  // that encloses an earlier rfactor's lanes does); replace_stmt rewrites every occurrence of
  // a node, so each distinct node is transformed once.
  std::vector<const ir::ForNode*> distinct;
  for (auto* l : loops)
    if (std::find(distinct.begin(), distinct.end(), l) == distinct.end()) distinct.push_back(l);
  loops = std::move(distinct);
  for (auto* a : loops)
    for (auto* b : loops)
      SPINDLE_CHECK(a == b || !contains(a->body, b), UserError, primitive, ": loop '", name,
                    "' is nested in another loop named '", name, "' (loops: ", loop_names(body),
                    "); hint: split or fuse renames the loops it makes");
  ir::Stmt out = body;
  for (auto* l : loops) {
    auto path = path_to(out, l);
    SPINDLE_INTERNAL_CHECK(!path.empty(), "apply_user_schedule", "lost loop '", name, "'");
    out = replace_stmt(out, l, f(path.back()));
  }
  return out;
}

// Writes in `s` whose order matters beyond re-association: a store to anything but a local
// allocated in `s`, or a reduction into a buffer that `s` also reads. "" when none.
inline std::string order_sensitive_write(const ir::Stmt& s) {
  auto uses = buffer_uses(s);
  for (auto* w : uses.stores)
    if (!(w->buffer->scope == ir::BufferScope::local && uses.allocated.count(w->buffer.get())))
      return "it stores to '" + w->buffer->name + "' (a plain store, whose last value depends on the order)";
  for (auto* r : uses.reduces) {
    if (r->buffer->scope == ir::BufferScope::local && uses.allocated.count(r->buffer.get())) continue;
    for (auto* l : uses.loads)
      if (l->buffer == r->buffer) return "it reads '" + r->buffer->name + "', which it reduces into";
  }
  return {};
}

inline void check_parallel(const ir::Stmt& body, const ir::ForNode* loop) {
  const std::string name = loop->var.name();
  for (auto& s : path_to(body, loop)) {
    auto* f = s.as<ir::ForNode>();
    SPINDLE_CHECK(!f || f == loop || f->for_kind != ir::ForKind::parallel, UserError, "parallel: loop '", name,
                  "' is inside loop '", f->var.name(), "', which is parallel already; hint: one parallel loop per nest");
  }
  for (auto* in : all_loops(loop->body))
    SPINDLE_CHECK(in->for_kind != ir::ForKind::parallel, UserError, "parallel: loop '", name, "' encloses loop '",
                  in->var.name(), "', which is parallel already; hint: one parallel loop per nest");
  auto uses = buffer_uses(loop->body);
  auto check = [&](const ir::Buffer& b) {
    SPINDLE_CHECK(b->scope != ir::BufferScope::local || uses.allocated.count(b.get()), UserError, "parallel: loop '",
                  name, "' writes '", b->name, "', a local allocated outside it, which its threads would share; hint: "
                  "parallelise a loop outside the block that allocates it");
  };
  for (auto* w : uses.stores) check(w->buffer);
  for (auto* r : uses.reduces) check(r->buffer);
}

inline ir::Stmt apply_step(const ir::Stmt& body, const Schedule::Step& s, ScheduleTarget target) {
  using Op = Schedule::Op;
  const bool gpu = target == ScheduleTarget::gpu;
  auto gpu_only = [&](const char* what) {
    SPINDLE_CHECK(gpu, UserError, what, " is a GPU schedule step; hint: give it in the kernel's CUDA schedule "
                  "(with_cuda_schedule), or use parallel/vectorize on the CPU");
  };
  switch (s.op) {
    case Op::sparse_reorder:
    case Op::sparse_fuse: return body;  // stage I: schedule/sparse_reorder.hpp, sparse_fuse.hpp
    case Op::split: {
      const std::string& loop = s.names[0];
      check_fresh_name(body, loop + "_o", "split");
      check_fresh_name(body, loop + "_i", "split");
      return each_loop_named(body, loop, "split", [&](const ir::Stmt& l) { return split(l, loop, s.number); });
    }
    case Op::reorder: {
      auto band = find_band(body, s.names, "reorder");
      std::vector<const ir::ForNode*> reductions_before, reductions_after;
      for (auto* l : band)
        if (l->iter_kind == ir::IterKind::reduction) reductions_before.push_back(l);
      for (auto& n : s.names)
        for (auto* l : band)
          if (l->var.name() == n && l->iter_kind == ir::IterKind::reduction) reductions_after.push_back(l);
      if (reductions_before != reductions_after) {
        std::string why = order_sensitive_write(band.back()->body);
        SPINDLE_CHECK(why.empty(), UserError, "reorder: the new order changes the order of the reduction loops, and ",
                      why, "; hint: keep the reduction loops in their order");
      }
      return reorder(body, s.names);
    }
    case Op::fuse: return fuse(body, s.names[0], s.names[1]);
    case Op::parallel:
      SPINDLE_CHECK(!gpu, UserError, "parallel is a CPU schedule step; hint: on the GPU bind the loop to "
                    "blockIdx.x (bind(loop, \"blockIdx.x\"))");
      return each_loop_named(body, s.names[0], "parallel", [&](const ir::Stmt& l) {
        check_parallel(body, l.as<ir::ForNode>());
        return bind(l, s.names[0], ir::ForKind::parallel);
      });
    case Op::vectorize:
      return each_loop_named(body, s.names[0], "vectorize", [&](const ir::Stmt& l) {
        auto* f = l.as<ir::ForNode>();
        if (f->iter_kind == ir::IterKind::reduction) {
          std::string why = order_sensitive_write(f->body);
          SPINDLE_CHECK(why.empty(), UserError, "vectorize: loop '", s.names[0],
                        "' is a reduction loop, which runs with its sums re-associated, and ", why,
                        "; hint: vectorise a spatial loop");
        }
        return vectorize(l, s.names[0]);
      });
    case Op::unroll:
      return each_loop_named(body, s.names[0], "unroll", [&](const ir::Stmt& l) { return unroll(l, s.names[0]); });
    case Op::cache_write: return cache_write(body, s.names[0], s.names[1]);
    case Op::bind: {
      gpu_only("bind");
      static const std::pair<const char*, ir::ForKind> kinds[] = {
          {"blockIdx.x", ir::ForKind::gpu_block_x},   {"blockIdx.y", ir::ForKind::gpu_block_y},
          {"blockIdx.z", ir::ForKind::gpu_block_z},   {"threadIdx.x", ir::ForKind::gpu_thread_x},
          {"threadIdx.y", ir::ForKind::gpu_thread_y}, {"threadIdx.z", ir::ForKind::gpu_thread_z}};
      for (auto& [n, k] : kinds) {
        if (s.target != n) continue;
        for (auto* l : loops_named(body, s.names[0]))  // bind below sees only the loop's own nest
          for (auto* a : loops_of_kind(path_to(body, l), k))
            SPINDLE_CHECK(a == l, UserError, "bind: loop '", s.names[0], "' is inside loop '", a->var.name(),
                          "', which is already bound to ", n, "; hint: bind each GPU index once per nest");
        return each_loop_named(body, s.names[0], "bind", [&](const ir::Stmt& l) { return bind(l, s.names[0], k); });
      }
      SPINDLE_INTERNAL_CHECK(false, "apply_user_schedule", "unknown GPU index ", s.target);
      return body;
    }
    case Op::rfactor:  // GPU: lanes of a warp, combined by shuffles; CPU: partial sums in registers
      return gpu ? rfactor(body, s.names[0], static_cast<int>(s.number))
                 : rfactor_cpu(body, s.names[0], static_cast<int>(s.number));
    case Op::cache_read: {
      gpu_only("cache_read");
      std::vector<std::string> buffers(s.names.begin() + 1, s.names.end());
      return cache_read(body, s.names[0], buffers, s.number, s.target);
    }
    case Op::atomic: gpu_only("atomic"); return atomic_writeback(body, s.names[0]);
  }
  return body;
}

// What the CUDA emitter needs of a scheduled function (codegen/cuda_emitter.hpp), checked
// as UserErrors: every top-level statement is a loop bound to blockIdx (lets around it
// allowed), each blockIdx dimension is bound once per launch with an extent the host can
// compute (scalars only), and threadIdx loops have constant extents whose product is at
// most 1024.
inline void check_gpu_launches(const ir::Function& f) {
  std::vector<ir::Stmt> units;
  std::function<void(const ir::Stmt&)> collect = [&](const ir::Stmt& s) {
    if (!s.defined()) return;
    if (auto* b = s.as<ir::BlockNode>(); b && b->allocs.empty()) return collect(b->body);
    if (auto* q = s.as<ir::SeqNode>()) {
      for (auto& c : q->stmts) collect(c);
      return;
    }
    units.push_back(s);
  };
  collect(f.body);
  std::set<const ir::ExprNode*> scalars;
  for (auto& sc : f.scalars) scalars.insert(sc.var.get());
  for (auto& unit : units) {
    ir::Stmt root = unit;
    std::vector<std::pair<ir::Var, ir::Expr>> lets;
    while (auto* l = root.as<ir::LetStmtNode>()) {
      lets.push_back({l->var, l->value});
      root = l->body;
    }
    auto* top = root.as<ir::ForNode>();
    SPINDLE_CHECK(top && top->for_kind >= ir::ForKind::gpu_block_x && top->for_kind <= ir::ForKind::gpu_block_z,
                  UserError, "the GPU schedule leaves a statement outside a loop bound to blockIdx (each top-level "
                  "loop nest is one launch and needs a grid):\n", ir::to_string(unit),
                  "  hint: bind the outermost loop of every nest to blockIdx.x");
    bool block_seen[3] = {false, false, false};
    std::int64_t threads[3] = {1, 1, 1};
    for (auto* l : all_loops(root)) {
      if (l->for_kind >= ir::ForKind::gpu_block_x && l->for_kind <= ir::ForKind::gpu_block_z) {
        int d = static_cast<int>(l->for_kind) - static_cast<int>(ir::ForKind::gpu_block_x);
        SPINDLE_CHECK(!block_seen[d], UserError, "loop '", l->var.name(), "' is the second loop bound to blockIdx.",
                      "xyz"[d], " in one launch; hint: bind each blockIdx dimension once per nest");
        block_seen[d] = true;
        ir::Expr e = l->extent;
        for (auto it = lets.rbegin(); it != lets.rend(); ++it) e = ir::substitute(e, it->first, it->second);
        struct Free : ir::IRVisitor {
          const std::set<const ir::ExprNode*>* allowed;
          std::string bad;
          void visit_Var(const ir::VarNode* v) override {
            if (!allowed->count(v)) bad = "'" + v->name + "'";
          }
          void visit_Load(const ir::LoadNode* n) override { bad = "a load of '" + n->buffer->name + "'"; }
        } free;
        free.allowed = &scalars;
        free.visit(e);
        SPINDLE_CHECK(free.bad.empty(), UserError, "loop '", l->var.name(), "' is bound to blockIdx.", "xyz"[d],
                      " but its extent ", ir::to_string(l->extent), " depends on ", free.bad,
                      ", which the host does not know at launch; hint: bind loops whose extent is a kernel size "
                      "(the rows, the features), not a ragged loop");
      } else if (is_gpu_thread_kind(l->for_kind)) {
        int d = static_cast<int>(l->for_kind) - static_cast<int>(ir::ForKind::gpu_thread_x);
        auto c = const_int(l->extent);
        SPINDLE_CHECK(c && *c >= 1 && *c <= 1024, UserError, "loop '", l->var.name(), "' is bound to threadIdx.",
                      "xyz"[d], " but its extent ", ir::to_string(l->extent),
                      " is not a constant in [1, 1024]; hint: split the loop and bind the inner one");
        threads[d] = std::max(threads[d], *c);
      }
    }
    SPINDLE_CHECK(threads[0] * threads[1] * threads[2] <= 1024, UserError, "the launch of loop '", top->var.name(),
                  "' has ", threads[0], " x ", threads[1], " x ", threads[2],
                  " threads per block, more than 1024; hint: bind shorter loops to threadIdx");
    // Every thread of the block runs the statements outside its thread loops: a write there
    // to a global or shared buffer would run once per thread (a reduction counted blockDim
    // times: spindle-kernel-fuzz seed 7000031 under rfactor in one of two sibling nests).
    struct OutsideThreads : ir::IRVisitor {
      std::array<bool, 3> used{};
      std::array<int, 3> depth{};
      std::string bad;
      int dim = -1;
      void visit_For(const ir::ForNode* n) override {
        const int d = is_gpu_thread_kind(n->for_kind)
                          ? static_cast<int>(n->for_kind) - static_cast<int>(ir::ForKind::gpu_thread_x)
                          : -1;
        if (d >= 0) ++depth[static_cast<std::size_t>(d)];
        ir::IRVisitor::visit_For(n);
        if (d >= 0) --depth[static_cast<std::size_t>(d)];
      }
      void check(const ir::StmtNode* s, const ir::BufferNode& b) {
        if (!bad.empty() || b.scope == ir::BufferScope::local) return;
        for (int d = 0; d < 3; ++d)
          if (used[static_cast<std::size_t>(d)] && depth[static_cast<std::size_t>(d)] == 0) {
            // A non-owning Stmt for the printer (the node lives in the function).
            bad = ir::to_string(ir::Stmt(std::shared_ptr<const ir::StmtNode>(std::shared_ptr<const ir::StmtNode>(), s)));
            dim = d;
            return;
          }
      }
      void visit_Store(const ir::StoreNode* n) override {
        check(n, *n->buffer);
        ir::IRVisitor::visit_Store(n);
      }
      void visit_Reduce(const ir::ReduceNode* n) override {
        check(n, *n->buffer);
        ir::IRVisitor::visit_Reduce(n);
      }
    } outside;
    for (int d = 0; d < 3; ++d) outside.used[static_cast<std::size_t>(d)] = threads[d] > 1;
    outside.visit(root);
    SPINDLE_CHECK(outside.bad.empty(), UserError, "the launch of loop '", top->var.name(), "' has ", threads[0], " x ",
                  threads[1], " x ", threads[2], " threads per block, and every thread would run the write\n    ",
                  outside.bad, "  which is outside every loop bound to threadIdx.", "xyz"[outside.dim < 0 ? 0 : outside.dim],
                  " (a reduction would count each term once per thread); hint: bind a loop around the write to "
                  "threadIdx.", "xyz"[outside.dim < 0 ? 0 : outside.dim],
                  ", or schedule the nests that write outside the thread loops without threads");
  }
}

}  // namespace detail

inline ir::Function apply_user_schedule(const ir::Function& f, const Schedule& schedule, ScheduleTarget target) {
  SPINDLE_INTERNAL_CHECK(f.stage == ir::Stage::flat, "apply_user_schedule", "expects stage III");
  ir::Function out = f;
  int n = 0;
  for (auto& step : schedule.steps()) {
    ++n;
    if (Schedule::is_stage1(step.op)) continue;
    try {
      out.body = detail::apply_step(out.body, step, target);
    } catch (const UserError& e) {
      throw UserError(message("kernel '", f.name, "': schedule step ", n, ", ", Schedule::describe(step), ": ",
                              e.what(), "\n  the loops before this step:\n", ir::to_string(out.body)));
    }
  }
  if (target == ScheduleTarget::gpu) {
    try {
      detail::check_gpu_launches(out);
    } catch (const UserError& e) {
      throw UserError(message("kernel '", f.name, "': the GPU schedule ", schedule.to_string(), ": ", e.what(),
                              "\n  the scheduled loops:\n", ir::to_string(out.body)));
    }
  }
  return out;
}

}  // namespace spindle::schedule

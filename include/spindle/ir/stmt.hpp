// Statement nodes of the runtime IR. Each statement keeps the user's source location
// (the kernel definition or the nested iteration it came from).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "spindle/ir/axis.hpp"
#include "spindle/ir/expr.hpp"

namespace spindle::ir {

struct SourceLoc {
  const char* file = nullptr;
  unsigned line = 0;
};

struct StmtNode {
  const StmtKind kind;
  SourceLoc loc;
  virtual ~StmtNode() = default;

 protected:
  explicit StmtNode(StmtKind k, SourceLoc l) : kind(k), loc(l) {}
};

class Stmt {
 public:
  Stmt() = default;
  explicit Stmt(std::shared_ptr<const StmtNode> n) : node_(std::move(n)) {}
  bool defined() const { return node_ != nullptr; }
  StmtKind kind() const { return node_->kind; }
  const StmtNode* get() const { return node_.get(); }
  SourceLoc loc() const { return node_->loc; }
  template <class T>
  const T* as() const {
    return node_ && node_->kind == T::static_kind ? static_cast<const T*>(node_.get()) : nullptr;
  }
  bool same_as(const Stmt& o) const { return node_ == o.node_; }

 private:
  std::shared_ptr<const StmtNode> node_;
};

// buffer[indices] = value
struct StoreNode : StmtNode {
  static constexpr StmtKind static_kind = StmtKind::Store;
  Buffer buffer;
  std::vector<Expr> indices;
  Expr value;
  StoreNode(Buffer b, std::vector<Expr> i, Expr v, SourceLoc l)
      : StmtNode(static_kind, l), buffer(std::move(b)), indices(std::move(i)), value(std::move(v)) {}
};

enum class ReduceOp : std::uint8_t { add, mul, min, max };

inline const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::add: return "+=";
    case ReduceOp::mul: return "*=";
    case ReduceOp::min: return "min=";
    case ReduceOp::max: return "max=";
  }
  return "?";
}

// buffer[indices] = buffer[indices] <op> value: a reduction update. Kept apart from Store
// so that schedules can recognise reductions (local accumulation, atomics, rfactor).
// `atomic` updates are indivisible (CUDA atomicAdd/atomicMin/...): set by the atomic
// write-back schedule where parts of one reduction run in different threads or blocks.
struct ReduceNode : StmtNode {
  static constexpr StmtKind static_kind = StmtKind::Reduce;
  Buffer buffer;
  std::vector<Expr> indices;
  ReduceOp op;
  Expr value;
  bool atomic;
  ReduceNode(Buffer b, std::vector<Expr> i, ReduceOp o, Expr v, SourceLoc l, bool at = false)
      : StmtNode(static_kind, l), buffer(std::move(b)), indices(std::move(i)), op(o), value(std::move(v)),
        atomic(at) {}
};

// let var = value in body
struct LetStmtNode : StmtNode {
  static constexpr StmtKind static_kind = StmtKind::LetStmt;
  Var var;
  Expr value;
  Stmt body;
  LetStmtNode(Var v, Expr e, Stmt b, SourceLoc l)
      : StmtNode(static_kind, l), var(std::move(v)), value(std::move(e)), body(std::move(b)) {}
};

struct IfThenElseNode : StmtNode {
  static constexpr StmtKind static_kind = StmtKind::IfThenElse;
  Expr cond;
  Stmt then_case, else_case;  // else_case may be undefined
  IfThenElseNode(Expr c, Stmt t, Stmt e, SourceLoc l)
      : StmtNode(static_kind, l), cond(std::move(c)), then_case(std::move(t)), else_case(std::move(e)) {}
};

// How a loop runs. The GPU kinds bind the loop to a grid/block index (CUDA backend).
enum class ForKind : std::uint8_t {
  serial, parallel, vectorized, unrolled,
  gpu_block_x, gpu_block_y, gpu_block_z, gpu_thread_x, gpu_thread_y, gpu_thread_z
};

inline const char* for_kind_name(ForKind k) {
  switch (k) {
    case ForKind::serial: return "serial";
    case ForKind::parallel: return "parallel";
    case ForKind::vectorized: return "vectorized";
    case ForKind::unrolled: return "unrolled";
    case ForKind::gpu_block_x: return "blockIdx.x";
    case ForKind::gpu_block_y: return "blockIdx.y";
    case ForKind::gpu_block_z: return "blockIdx.z";
    case ForKind::gpu_thread_x: return "threadIdx.x";
    case ForKind::gpu_thread_y: return "threadIdx.y";
    case ForKind::gpu_thread_z: return "threadIdx.z";
  }
  return "?";
}

// Spatial iterators index every write of their iteration; reduction iterators do not.
enum class IterKind : std::uint8_t { spatial, reduction };

// for var in [min, min + extent): body. `axis` names the sparse-iteration axis the loop
// came from (schedules address loops by it); `iter_kind` is inherited from the iterator.
struct ForNode : StmtNode {
  static constexpr StmtKind static_kind = StmtKind::For;
  Var var;
  Expr min, extent;
  ForKind for_kind;
  IterKind iter_kind;
  std::string axis;
  Stmt body;
  ForNode(Var v, Expr lo, Expr ext, ForKind k, IterKind ik, std::string ax, Stmt b, SourceLoc l)
      : StmtNode(static_kind, l), var(std::move(v)), min(std::move(lo)), extent(std::move(ext)),
        for_kind(k), iter_kind(ik), axis(std::move(ax)), body(std::move(b)) {}
};

// Stage II/III: co-iteration of sparse fibers of one coordinate space (docs/language.md
// §3.1), the lowering of an iteration over union_of / intersection_of. Operand q has its
// own position `pos` in [0, extent) and `key`, the stored coordinate at `pos` (an i64
// expression of `pos`). The loop walks all positions in ascending coordinate order, merging:
//   pos_q = 0 for all q
//   while (union: some pos_q < extent_q | intersection: every pos_q < extent_q):
//     k_q = pos_q < extent_q ? key_q : INT64_MAX;  var = min_q k_q;  present_q = (k_q == var)
//     if (union, or every present_q): body     (pos_q valid where present_q)
//     pos_q += present_q
// Fibers are strictly ascending (validated formats), so each coordinate is visited once.
struct CoIterOperand {
  Var pos;      // i64: the operand's position in its fiber
  Var present;  // boolean: whether the operand stores `var`
  Expr extent;  // positions in the fiber
  Expr key;     // i64 coordinate at `pos`
};

struct CoIterateNode : StmtNode {
  static constexpr StmtKind static_kind = StmtKind::CoIterate;
  Var var;  // i64: the coordinate visited
  MergeOp op;
  std::vector<CoIterOperand> operands;
  IterKind iter_kind;
  std::string axis;
  Stmt body;
  CoIterateNode(Var v, MergeOp o, std::vector<CoIterOperand> ops, IterKind ik, std::string ax, Stmt b, SourceLoc l)
      : StmtNode(static_kind, l), var(std::move(v)), op(o), operands(std::move(ops)), iter_kind(ik),
        axis(std::move(ax)), body(std::move(b)) {}
};

struct SeqNode : StmtNode {
  static constexpr StmtKind static_kind = StmtKind::Seq;
  std::vector<Stmt> stmts;
  SeqNode(std::vector<Stmt> s, SourceLoc l) : StmtNode(static_kind, l), stmts(std::move(s)) {}
};

// A named scope that owns local buffers (allocated on entry, dead on exit).
struct BlockNode : StmtNode {
  static constexpr StmtKind static_kind = StmtKind::Block;
  std::string name;
  std::vector<Buffer> allocs;
  Stmt body;
  BlockNode(std::string n, std::vector<Buffer> a, Stmt b, SourceLoc l)
      : StmtNode(static_kind, l), name(std::move(n)), allocs(std::move(a)), body(std::move(b)) {}
};

// A GPU barrier: all threads of the thread block (CUDA __syncthreads) or of the warp
// (__syncwarp) wait here; placed by cache_read between filling a shared buffer and reading
// it. A warp barrier is safe under a per-warp condition, a block barrier only where every
// thread of the block reaches it. No C meaning.
enum class BarrierScope : std::uint8_t { block, warp };

struct BarrierNode : StmtNode {
  static constexpr StmtKind static_kind = StmtKind::Barrier;
  BarrierScope scope;
  BarrierNode(BarrierScope sc, SourceLoc l) : StmtNode(static_kind, l), scope(sc) {}
};

// A hint that buffer[indices] will be read soon (C: __builtin_prefetch, which never faults
// and has no effect on results; nothing on the GPU). Placed by schedule/prefetch_gathers.hpp
// for rows of a dense operand gathered by column index; computing the indices must itself
// read only what the program reads (the pass guards it).
struct PrefetchNode : StmtNode {
  static constexpr StmtKind static_kind = StmtKind::Prefetch;
  Buffer buffer;
  std::vector<Expr> indices;
  PrefetchNode(Buffer b, std::vector<Expr> i, SourceLoc l)
      : StmtNode(static_kind, l), buffer(std::move(b)), indices(std::move(i)) {}
};

// Stage I: iterate the product space of `axes` (coordinate space). `vars[k]` is the
// iterator of axes[k]; `kinds[k]` says spatial or reduction. `init` runs once per spatial
// point before its reduction (may be undefined). Nested iterations may appear in `body`.
// `fused[k]` (empty: none) says axes k and k + 1 run as one loop (schedule/sparse_fuse.hpp:
// the same points in the same order, one loop over the positions of the chain's last axis).
struct SparseIterationNode : StmtNode {
  static constexpr StmtKind static_kind = StmtKind::SparseIteration;
  std::string name;
  std::vector<Axis> axes;
  std::vector<Var> vars;
  std::vector<IterKind> kinds;
  Stmt init;
  Stmt body;
  std::vector<bool> fused;
  // When set (a sparse root R; frontend/iteration_inference.hpp), the first axis, a dense
  // axis over R's coordinates, visits only the coordinates R does not store: the gaps between
  // R's strictly ascending indices (lower_sparse_iter). Only the fill of an output written at
  // R's coordinates carries it, under a test that R's indices ascend.
  Axis gaps_of;
  SparseIterationNode(std::string n, std::vector<Axis> a, std::vector<Var> v,
                      std::vector<IterKind> k, Stmt i, Stmt b, SourceLoc l, std::vector<bool> f = {})
      : StmtNode(static_kind, l), name(std::move(n)), axes(std::move(a)), vars(std::move(v)),
        kinds(std::move(k)), init(std::move(i)), body(std::move(b)), fused(std::move(f)) {}
  bool fused_with_next(std::size_t k) const { return k < fused.size() && fused[k]; }
  // A copy with `edit` applied: passes that rebuild an iteration go through this (or
  // with_body) so that the fields they do not change (kinds, fused, loc, ...) are kept.
  template <class F>
  Stmt edited(F&& edit) const {
    auto copy = std::make_shared<SparseIterationNode>(*this);
    edit(*copy);
    return Stmt(std::move(copy));
  }
  Stmt with_body(Stmt new_init, Stmt new_body) const {
    return edited([&](SparseIterationNode& c) {
      c.init = std::move(new_init);
      c.body = std::move(new_body);
    });
  }
};

}  // namespace spindle::ir

// emit_cuda: stage-III IR whose loops a GPU schedule has bound to blocks and threads -> one
// self-contained CUDA C++ module (no #include) following cuda_abi.hpp.
//
// Every top-level statement of the body (after peeling the function's Block and Seq) is one
// launch: an optional chain of scalar `let`s around a loop bound to blockIdx.*. For each
// launch the emitter writes
//
//   extern "C" __global__ void __launch_bounds__(<threads>) <module>_k<n>(params...)
//
// and a CudaLaunch whose grid holds the extents of the loops bound to blockIdx.{x,y,z}
// (expressions over the scalar parameters, the enclosing lets substituted) and whose block
// holds the constant extents of the loops bound to threadIdx.{x,y,z}. A bound loop prints
// as its index plus a guard when its extent is below the launch dimension:
//
//   const long long i = <min> + (long long)blockIdx.x; if (i < <min> + <extent>) { ... }
//
// Other statements:
//   - buffers are `__restrict__` parameters; buffers the kernel only reads are read with
//     __ldg (the read-only data cache);
//   - local buffers are per-thread arrays (registers when every index is a constant after
//     unrolling), shared buffers are `__shared__` arrays of the thread block;
//   - barriers print as __syncthreads() / __syncwarp();
//   - warp_sum(x, w) is a butterfly of __shfl_xor_sync over groups of w lanes;
//   - atomic reductions use atomicAdd (f32, f64, i32, i64) or a compare-and-swap loop
//     (min, max, mul);
//   - unrolled loops get `#pragma unroll`; a vectorized loop of constant extent 2 or 4 whose
//     float loads and single store are contiguous in the last index (`X + v`) reads and
//     writes float2/float4 (double2) once and unrolls the arithmetic; the schedule that
//     creates such a loop guarantees the alignment (feature size a multiple of the width);
//     other vectorized loops print like unrolled ones.
// The module symbol is spindle_<kernel>_<hash of the code>, so equal code gets equal names.
#pragma once

#include <array>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "spindle/codegen/c_family.hpp"
#include "spindle/codegen/cuda_abi.hpp"
#include "spindle/support/hash.hpp"

namespace spindle::codegen {

inline const char* cuda_prelude() {
  return R"SPINDLE(#define SPINDLE_MINMAX(T, S) \
  static __device__ __forceinline__ T spindle_min_##S(T a, T b) { return b < a ? b : a; } \
  static __device__ __forceinline__ T spindle_max_##S(T a, T b) { return a < b ? b : a; }
SPINDLE_MINMAX(float, f32)
SPINDLE_MINMAX(double, f64)
SPINDLE_MINMAX(int, i32)
SPINDLE_MINMAX(long long, i64)
/* Position of v in the sorted fiber idx[begin, end), relative to begin, or -1. */
#define SPINDLE_FIND(T, S) \
  static __device__ __forceinline__ long long spindle_find_##S(const T* __restrict__ idx, long long begin, long long end, long long v) { \
    long long lo = begin, hi = end; \
    while (lo < hi) { \
      long long mid = lo + ((hi - lo) >> 1); \
      if ((long long)__ldg(&idx[mid]) < v) lo = mid + 1; else hi = mid; \
    } \
    return (lo < end && (long long)__ldg(&idx[lo]) == v) ? lo - begin : -1; \
  }
SPINDLE_FIND(int, i32)
SPINDLE_FIND(long long, i64)
/* The last r in [begin, end) of the non-decreasing x with x[r] <= v, relative to begin (-1 when none). */
#define SPINDLE_SEGMENT(T, S) \
  static __device__ __forceinline__ long long spindle_segment_##S(const T* __restrict__ x, long long begin, long long end, long long v) { \
    long long lo = begin, hi = end; \
    while (lo < hi) { \
      long long mid = lo + ((hi - lo) >> 1); \
      if ((long long)__ldg(&x[mid]) <= v) lo = mid + 1; else hi = mid; \
    } \
    return lo - 1 - begin; \
  }
SPINDLE_SEGMENT(int, i32)
SPINDLE_SEGMENT(long long, i64)
/* Sum over groups of w lanes (w a power of two <= 32); every lane of the warp must call it. */
#define SPINDLE_WARP_SUM(T, S) \
  static __device__ __forceinline__ T spindle_warp_sum_##S(T v, int w) { \
    for (int o = w >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o, w); \
    return v; \
  }
SPINDLE_WARP_SUM(float, f32)
SPINDLE_WARP_SUM(double, f64)
static __device__ __forceinline__ int spindle_warp_sum_i32(int v, int w) {
  for (int o = w >> 1; o > 0; o >>= 1) v = (int)((unsigned)v + (unsigned)__shfl_xor_sync(0xffffffffu, v, o, w));
  return v;
}
/* Integer arithmetic on values wraps (two's complement), as on the CPU engines' -fwrapv,
   which NVRTC has no switch for. */
#define SPINDLE_WRAP(T, U, S) \
  static __device__ __forceinline__ T spindle_wadd_##S(T a, T b) { return (T)((U)a + (U)b); } \
  static __device__ __forceinline__ T spindle_wsub_##S(T a, T b) { return (T)((U)a - (U)b); } \
  static __device__ __forceinline__ T spindle_wmul_##S(T a, T b) { return (T)((U)a * (U)b); } \
  static __device__ __forceinline__ T spindle_wneg_##S(T a) { return (T)((U)0 - (U)a); }
SPINDLE_WRAP(int, unsigned, i32)
SPINDLE_WRAP(long long, unsigned long long, i64)
/* Atomic min/max/mul by compare-and-swap. */
static __device__ __forceinline__ void spindle_atomic_f32(float* p, float v, int op) {
  unsigned int* a = (unsigned int*)p;
  unsigned int old = *a, assumed;
  do {
    assumed = old;
    float cur = __uint_as_float(assumed);
    float nv = op == 0 ? (v < cur ? v : cur) : op == 1 ? (cur < v ? v : cur) : cur * v;
    old = atomicCAS(a, assumed, __float_as_uint(nv));
  } while (assumed != old);
}
static __device__ __forceinline__ void spindle_atomic_f64(double* p, double v, int op) {
  unsigned long long* a = (unsigned long long*)p;
  unsigned long long old = *a, assumed;
  do {
    assumed = old;
    double cur = __longlong_as_double((long long)assumed);
    double nv = op == 0 ? (v < cur ? v : cur) : op == 1 ? (cur < v ? v : cur) : cur * v;
    old = atomicCAS(a, assumed, (unsigned long long)__double_as_longlong(nv));
  } while (assumed != old);
}
static __device__ __forceinline__ void spindle_atomic_i32(int* p, int v, int op) {
  int old = *p, assumed;
  do {
    assumed = old;
    int nv = op == 0 ? (v < assumed ? v : assumed) : op == 1 ? (assumed < v ? v : assumed)
                     : (int)((unsigned)assumed * (unsigned)v);
    old = atomicCAS(p, assumed, nv);
  } while (assumed != old);
}
static __device__ __forceinline__ void spindle_atomic_i64(long long* p, long long v, int op) {
  unsigned long long* a = (unsigned long long*)p;
  unsigned long long old = *a, assumed;
  do {
    assumed = old;
    long long cur = (long long)assumed;
    long long nv = op == 0 ? (v < cur ? v : cur) : op == 1 ? (cur < v ? v : cur)
                           : (long long)((unsigned long long)cur * (unsigned long long)v);
    old = atomicCAS(a, assumed, (unsigned long long)nv);
  } while (assumed != old);
}
)SPINDLE";
}

namespace detail {

class CudaEmitter : public CFamilyPrinter {
 public:
  explicit CudaEmitter(const ir::Function& f) : CFamilyPrinter(f) {}

  CudaSource run() {
    for (auto& b : fn_.buffers) {
      SPINDLE_INTERNAL_CHECK(b.buffer->dtype != DType::f16, "emit_cuda", "f16 buffer '", b.buffer->name,
                             "': half precision needs cuda_fp16.h, which generated code does not include");
      if (!is_written(*b.buffer)) read_only_.insert(b.buffer.get());
    }
    CudaSource out;
    std::vector<std::string> params;
    for (auto& b : fn_.buffers) {
      std::string t = std::string(is_written(*b.buffer) ? "" : "const ") + ctype(b.buffer->dtype) + "*";
      out.param_types.push_back(t);
      params.push_back(t + " __restrict__ " + name(*b.buffer));
    }
    for (auto& s : fn_.scalars) {
      std::string t = ctype(s.var.dtype());
      out.param_types.push_back(t);
      params.push_back(t + " " + name(s.var));
    }
    std::vector<ir::Stmt> units;
    collect_units(fn_.body, units);
    std::ostringstream kernels;
    for (std::size_t u = 0; u < units.size(); ++u) {
      launch_ = CudaLaunch{};
      launch_.symbol = std::string(kSymbolPlaceholder) + "_k" + std::to_string(u);
      for (auto& g : launch_.grid) g = ir::make_const(DType::i64, 1);
      std::ostringstream body;
      out_ = &body;
      indent_ = 1;
      lets_.clear();
      seen_block_.fill(false);
      seen_thread_.fill(false);
      dispatch(units[u]);
      int threads = launch_.block[0] * launch_.block[1] * launch_.block[2];
      kernels << "extern \"C\" __global__ void __launch_bounds__(" << threads << ") " << launch_.symbol << "("
              << join(params) << ") {\n";
      for (auto& s : fn_.scalars) kernels << "  (void)" << name(s.var) << ";\n";
      kernels << resolve_guards(body.str(), guards_, launch_) << "}\n";
      guards_.clear();
      out.launches.push_back(launch_);
    }
    std::ostringstream src;
    src << "/* generated by spindle: kernel " << comment_text(fn_.name) << " (CUDA) */\n" << cuda_prelude() << kernels.str();
    std::string text = src.str();
    out.module_symbol = "spindle_" + symbol_part(fn_.name) + "_" + Hasher().add(text).digest().hex().substr(0, 16);
    for (std::size_t p; (p = text.find(kSymbolPlaceholder)) != std::string::npos;)
      text.replace(p, std::string(kSymbolPlaceholder).size(), out.module_symbol);
    for (auto& l : out.launches) l.symbol.replace(0, std::string(kSymbolPlaceholder).size(), out.module_symbol);
    out.source = std::move(text);
    return out;
  }

 protected:
  // --- expressions that differ from C ---------------------------------------------------
  std::string on_FloatImm(const ir::FloatImmNode* n) override {
    bool f32 = n->dtype == DType::f32;
    if (std::isinf(n->value)) {
      std::string s = f32 ? "__int_as_float(0x7f800000)" : "__longlong_as_double(0x7ff0000000000000LL)";
      return n->value < 0 ? paren("-" + s, 10) : s;
    }
    if (std::isnan(n->value)) return f32 ? "__int_as_float(0x7fffffff)" : "__longlong_as_double(0x7ff8000000000000LL)";
    return CFamilyPrinter::on_FloatImm(n);
  }
  std::string on_Call(const ir::CallNode* n) override {
    if (n->fn == ir::Intrinsic::warp_sum) {
      auto* w = n->args.at(1).as<ir::IntImmNode>();
      SPINDLE_INTERNAL_CHECK(w, "emit_cuda", "warp_sum needs a constant width");
      return "spindle_warp_sum_" + suffix(n->dtype) + "(" + expr(n->args[0]) + ", " + std::to_string(w->value) + ")";
    }
    static const char* names[] = {"exp", "log", "sqrt", "fabs", "tanh", "pow"};
    std::string f = std::string(names[static_cast<int>(n->fn)]) + (n->dtype == DType::f32 ? "f" : "");
    std::string s = f + "(";
    for (std::size_t k = 0; k < n->args.size(); ++k) s += (k ? ", " : "") + expr(n->args[k]);
    return s + ")";
  }
  std::string on_Load(const ir::LoadNode* n) override {
    if (auto it = vector_loads_.find(n); it != vector_loads_.end()) return it->second + lane_field();
    if (read_only_.count(n->buffer.get()) && !n->indices.empty())
      return "__ldg(&" + access(*n->buffer, n->indices) + ")";
    return access(*n->buffer, n->indices);
  }
  std::string on_Var(const ir::VarNode* n) override {
    if (n == lane_var_) return std::to_string(lane_);
    return CFamilyPrinter::on_Var(n);
  }

  // Integer +, -, * and negation wrap: spindle_wadd_i32(a, b) instead of a + b, whose
  // overflow NVRTC's optimiser may treat as impossible (docs/language.md §2). All of them,
  // iterator arithmetic included: `i - INT64_MIN` in a dead local made NVRTC-style -O2 drop
  // the rest of the iteration (spindle-frontend-fuzz seed 12000964). Array subscripts are
  // printed by access() and stay plain.
  std::string on_Binary(const ir::BinaryNode* n) override {
    static const char* names[] = {"wadd", "wsub", "wmul"};
    int k = n->op == ir::BinOp::add ? 0 : n->op == ir::BinOp::sub ? 1 : n->op == ir::BinOp::mul ? 2 : -1;
    if (k < 0 || !wraps(n->dtype)) return CFamilyPrinter::on_Binary(n);
    std::string a = expr(n->a), b = expr(n->b);
    if (n->dtype == DType::i64) {  // operands C types as int become long long before the call
      if (int_in_c(n->a)) a = "(long long)" + expr(n->a, 10);
      if (int_in_c(n->b)) b = "(long long)" + expr(n->b, 10);
    }
    return std::string("spindle_") + names[k] + "_" + suffix(n->dtype) + "(" + a + ", " + b + ")";
  }
  std::string on_Unary(const ir::UnaryNode* n) override {
    if (n->op != ir::UnOp::neg || !wraps(n->dtype)) return CFamilyPrinter::on_Unary(n);
    return "spindle_wneg_" + suffix(n->dtype) + "(" + expr(n->a) + ")";
  }
  static bool wraps(DType t) { return t == DType::i32 || t == DType::i64; }

  // --- statements that differ from C ----------------------------------------------------
  void on_Reduce(const ir::ReduceNode* n) override {
    if (!n->atomic && wraps(n->buffer->dtype) && (n->op == ir::ReduceOp::add || n->op == ir::ReduceOp::mul)) {
      std::string target = access(*n->buffer, n->indices);
      line() << target << " = spindle_" << (n->op == ir::ReduceOp::add ? "wadd_" : "wmul_") << suffix(n->buffer->dtype)
             << "(" << target << ", " << expr(n->value) << ");\n";
      return;
    }
    if (!n->atomic) return CFamilyPrinter::on_Reduce(n);
    SPINDLE_INTERNAL_CHECK(n->buffer->scope != ir::BufferScope::local, "emit_cuda", "atomic update of the local '",
                           n->buffer->name, "'");
    std::string target = "&" + access(*n->buffer, n->indices);
    DType t = n->buffer->dtype;
    if (n->op == ir::ReduceOp::add) {
      if (t == DType::i64)
        line() << "atomicAdd((unsigned long long*)" << target << ", (unsigned long long)(" << expr(n->value) << "));\n";
      else
        line() << "atomicAdd(" << target << ", " << expr(n->value) << ");\n";
      return;
    }
    if (t == DType::i32 && n->op != ir::ReduceOp::mul) {
      line() << (n->op == ir::ReduceOp::min ? "atomicMin(" : "atomicMax(") << target << ", " << expr(n->value)
             << ");\n";
      return;
    }
    SPINDLE_INTERNAL_CHECK(is_float(t) || t == DType::i32 || t == DType::i64, "emit_cuda", "atomic ",
                           ir::reduce_op_name(n->op), " on ", dtype_name(t), " buffer '", n->buffer->name,
                           "' is not supported");
    int op = n->op == ir::ReduceOp::min ? 0 : n->op == ir::ReduceOp::max ? 1 : 2;
    line() << "spindle_atomic_" << suffix(t) << "(" << target << ", " << expr(n->value) << ", " << op << ");\n";
  }
  // A prefetch is a CPU cache hint (schedule/prefetch_gathers.hpp runs in the CPU schedule
  // only); the GPU's loads need none: nothing is emitted.
  void on_Prefetch(const ir::PrefetchNode*) override {}
  void on_Barrier(const ir::BarrierNode* n) override {
    line() << (n->scope == ir::BarrierScope::warp ? "__syncwarp();\n" : "__syncthreads();\n");
  }
  void shared_alloc(const ir::BufferNode& a, std::int64_t elems) override {
    line() << "__shared__ " << ctype(a.dtype) << " " << name(a) << "[" << elems << "];\n";
    launch_.static_shared_bytes += elems * static_cast<std::int64_t>(dtype_bytes(a.dtype));
  }
  void on_LetStmt(const ir::LetStmtNode* n) override {
    lets_.push_back({n->var, n->value});
    CFamilyPrinter::on_LetStmt(n);
    lets_.pop_back();
  }

  void on_For(const ir::ForNode* n) override {
    switch (n->for_kind) {
      case ir::ForKind::gpu_block_x: return bind_block(n, 0);
      case ir::ForKind::gpu_block_y: return bind_block(n, 1);
      case ir::ForKind::gpu_block_z: return bind_block(n, 2);
      case ir::ForKind::gpu_thread_x: return bind_thread(n, 0);
      case ir::ForKind::gpu_thread_y: return bind_thread(n, 1);
      case ir::ForKind::gpu_thread_z: return bind_thread(n, 2);
      case ir::ForKind::parallel:
        throw InternalError(message("emit_cuda: loop '", n->var.name(), "' is a CPU-parallel loop"));
      case ir::ForKind::vectorized:
        if (try_vector_loop(n)) return;
        [[fallthrough]];
      case ir::ForKind::unrolled:
        if (n->extent.as<ir::IntImmNode>()) line() << "#pragma unroll\n";
        return serial_loop(n);
      case ir::ForKind::serial: return serial_loop(n);
    }
  }

 private:
  static constexpr const char* kSymbolPlaceholder = "SPINDLE_MODULE_SYMBOL";

  static std::string join(const std::vector<std::string>& parts) {
    std::string s;
    for (std::size_t k = 0; k < parts.size(); ++k) s += (k ? ", " : "") + parts[k];
    return s;
  }

  // Peels the function's Block (no allocations) and Seq into launch units.
  void collect_units(const ir::Stmt& s, std::vector<ir::Stmt>& units) {
    if (!s.defined()) return;  // an empty body: no launch
    if (auto* b = s.as<ir::BlockNode>(); b && b->allocs.empty()) return collect_units(b->body, units);
    if (auto* q = s.as<ir::SeqNode>()) {
      for (auto& c : q->stmts) collect_units(c, units);
      return;
    }
    const ir::Stmt* root = &s;
    while (auto* l = root->as<ir::LetStmtNode>()) root = &l->body;
    auto* f = root->as<ir::ForNode>();
    SPINDLE_INTERNAL_CHECK(f && f->for_kind >= ir::ForKind::gpu_block_x && f->for_kind <= ir::ForKind::gpu_block_z,
                           "emit_cuda", "top-level statement of kernel '", fn_.name,
                           "' is not a loop bound to blockIdx (the GPU schedule must bind every launch):\n",
                           ir::to_string(s));
    units.push_back(s);
  }

  // The expression with the enclosing lets substituted (innermost first), so that it only
  // mentions scalar parameters; InternalError otherwise.
  ir::Expr launch_expr(const ir::Expr& e, const char* what, const ir::ForNode* n) {
    ir::Expr r = e;
    for (auto it = lets_.rbegin(); it != lets_.rend(); ++it) r = ir::substitute(r, it->first, it->second);
    struct Free : ir::IRVisitor {
      std::set<const ir::ExprNode*> allowed;
      std::string bad;
      void visit_Var(const ir::VarNode* v) override {
        if (!allowed.count(v)) bad = v->name;
      }
      void visit_Load(const ir::LoadNode* l) override { bad = "a load of " + l->buffer->name; }
    } free;
    for (auto& s : fn_.scalars) free.allowed.insert(s.var.get());
    free.visit(r);
    SPINDLE_INTERNAL_CHECK(free.bad.empty(), "emit_cuda", "the ", what, " of loop '", n->var.name(), "' depends on ",
                           free.bad, ", which the host does not know at launch");
    return r;
  }

  void bind_block(const ir::ForNode* n, int d) {
    SPINDLE_INTERNAL_CHECK(!seen_block_[d], "emit_cuda", "two loops bound to blockIdx.", "xyz"[d], " in one launch");
    seen_block_[d] = true;
    launch_.grid[d] = launch_expr(n->extent, "extent", n);
    std::string v = name(n->var);
    line() << "const long long " << v << " = " << offset(n) << "(long long)blockIdx." << "xyz"[d] << ";\n";
    dispatch(n->body);
  }

  void bind_thread(const ir::ForNode* n, int d) {
    auto* c = n->extent.as<ir::IntImmNode>();
    SPINDLE_INTERNAL_CHECK(c && c->value > 0 && c->value <= 1024, "emit_cuda", "loop '", n->var.name(),
                           "' is bound to threadIdx.", "xyz"[d], " but its extent ", ir::to_string(n->extent),
                           " is not a constant in [1, 1024]");
    if (!seen_thread_[d]) launch_.block[d] = static_cast<int>(c->value);
    else if (c->value > launch_.block[d]) launch_.block[d] = static_cast<int>(c->value);
    seen_thread_[d] = true;
    std::string v = name(n->var);
    // Block dimensions are final only after the whole launch is printed: always guard a
    // loop shorter than the largest loop bound to the same index.
    thread_loops_.push_back({n, d});
    line() << "const long long " << v << " = " << offset(n) << "(long long)threadIdx." << "xyz"[d] << ";\n";
    std::string guard = "SPINDLE_GUARD_" + std::to_string(thread_loops_.size() - 1) + "@";
    line() << guard << "{\n";
    guards_.push_back({guard, "(long long)threadIdx." + std::string(1, "xyz"[d]) + " < " + std::to_string(c->value), d,
                       c->value});
    indented(n->body);
    line() << "}\n";
  }

  std::string offset(const ir::ForNode* n) {
    auto* lo = n->min.as<ir::IntImmNode>();
    if (lo && lo->value == 0) return "";
    return expr(n->min, 4) + " + ";
  }

  void serial_loop(const ir::ForNode* n) {
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
    indented(n->body);
    line() << "}\n";
  }

  // --- vector loads/stores --------------------------------------------------------------
  struct Contig {
    const ir::LoadNode* load = nullptr;
    ir::Expr base;  // last index at v = 0
  };
  // Is `idx` (a buffer's last index) exactly `X + v` or `v` with X free of v?
  static bool contiguous(const ir::Expr& idx, const ir::VarNode* v, ir::Expr* base) {
    if (idx.get() == v) {
      *base = ir::make_const(DType::i64, 0);
      return true;
    }
    auto* b = idx.as<ir::BinaryNode>();
    if (!b || b->op != ir::BinOp::add) return false;
    if (b->b.get() == v && !ir::uses_var(b->a, v)) return *base = b->a, true;
    if (b->a.get() == v && !ir::uses_var(b->b, v)) return *base = b->b, true;
    return false;
  }

  std::string lane_field() const { return std::string(".") + "xyzw"[lane_]; }

  // A vectorized loop of extent 2/4: loads of global f32/f64 buffers that are contiguous
  // in v become one float2/float4 load each, a single contiguous store becomes one vector
  // store, the rest of the body is unrolled with v replaced by 0..width-1.
  bool try_vector_loop(const ir::ForNode* n) {
    auto* c = n->extent.as<ir::IntImmNode>();
    auto* lo = n->min.as<ir::IntImmNode>();
    if (!c || !lo || lo->value != 0 || (c->value != 2 && c->value != 4) || lane_var_) return false;
    const int width = static_cast<int>(c->value);
    const ir::VarNode* v = n->var.node();
    // Collect the loads that mention v; all must be contiguous global float loads.
    struct Loads : ir::IRVisitor {
      const ir::VarNode* v;
      std::vector<const ir::LoadNode*> loads;
      bool other_loop = false;
      void visit_Load(const ir::LoadNode* l) override {
        for (auto& i : l->indices)
          if (ir::uses_var(i, v)) {
            loads.push_back(l);
            break;
          }
        ir::IRVisitor::visit_Load(l);
      }
      void visit_For(const ir::ForNode*) override { other_loop = true; }
      void visit_CoIterate(const ir::CoIterateNode*) override { other_loop = true; }
      void visit_Block(const ir::BlockNode*) override { other_loop = true; }
    } loads;
    loads.v = v;
    loads.visit(n->body);
    if (loads.other_loop) return false;
    auto vector_type = [&](DType t) -> std::string {
      if (t == DType::f32) return width == 4 ? "float4" : "float2";
      if (t == DType::f64 && width == 2) return "double2";
      return "";
    };
    std::vector<std::pair<const ir::LoadNode*, ir::Expr>> vloads;
    for (auto* l : loads.loads) {
      const auto& b = *l->buffer;
      if (b.scope == ir::BufferScope::local) continue;  // register arrays: indexed per lane
      ir::Expr base;
      if (b.scope != ir::BufferScope::global || vector_type(b.dtype).empty() ||
          !contiguous(l->indices.back(), v, &base))
        return false;
      for (std::size_t k = 0; k + 1 < l->indices.size(); ++k)
        if (ir::uses_var(l->indices[k], v)) return false;
      vloads.push_back({l, base});
    }
    // The store: a single Store into a global buffer contiguous in v gets a vector store.
    const ir::StoreNode* vstore = nullptr;
    ir::Expr store_base;
    if (auto* st = n->body.as<ir::StoreNode>(); st && st->buffer->scope == ir::BufferScope::global) {
      if (vector_type(st->buffer->dtype).empty() || !contiguous(st->indices.back(), v, &store_base)) return false;
      for (std::size_t k = 0; k + 1 < st->indices.size(); ++k)
        if (ir::uses_var(st->indices[k], v)) return false;
      vstore = st;
    } else {
      // Every write must then be to a local register array indexed by v (or scalar).
      struct Writes : ir::IRVisitor {
        bool global = false;
        void visit_Store(const ir::StoreNode* s) override { global |= s->buffer->scope != ir::BufferScope::local; }
        void visit_Reduce(const ir::ReduceNode* s) override { global |= s->buffer->scope != ir::BufferScope::local; }
      } writes;
      writes.visit(n->body);
      if (writes.global) return false;
    }
    if (vloads.empty() && !vstore) return false;

    line() << "{ /* vector x" << width << " */\n";
    ++indent_;
    for (auto& [l, base] : vloads) {
      std::vector<ir::Expr> idx = l->indices;
      idx.back() = base;
      std::string t = vector_type(l->buffer->dtype);
      std::string tmp = fresh(l->buffer->name + "_v");
      std::string ptr = "reinterpret_cast<const " + t + "*>(&" + access(*l->buffer, idx) + ")";
      line() << "const " << t << " " << tmp << " = "
             << (read_only_.count(l->buffer.get()) ? "__ldg(" + ptr + ")" : "*" + ptr) << ";\n";
      vector_loads_[l] = tmp;
    }
    lane_var_ = v;
    if (vstore) {
      std::string t = vector_type(vstore->buffer->dtype);
      std::string tmp = fresh(vstore->buffer->name + "_v");
      line() << t << " " << tmp << ";\n";
      for (lane_ = 0; lane_ < width; ++lane_) line() << tmp << lane_field() << " = " << expr(vstore->value) << ";\n";
      std::vector<ir::Expr> idx = vstore->indices;
      idx.back() = store_base;
      line() << "*reinterpret_cast<" << t << "*>(&" << access(*vstore->buffer, idx) << ") = " << tmp << ";\n";
    } else {
      for (lane_ = 0; lane_ < width; ++lane_) dispatch(n->body);
    }
    lane_var_ = nullptr;
    lane_ = 0;
    for (auto& [l, base] : vloads) vector_loads_.erase(l);
    --indent_;
    line() << "}\n";
    return true;
  }

 public:
  // Replaces the guard placeholders once the block dimensions are known.
  static std::string resolve_guards(std::string text, const std::vector<std::tuple<std::string, std::string, int, std::int64_t>>& guards,
                                    const CudaLaunch& l) {
    for (auto& [ph, cond, d, ext] : guards) {
      std::string repl = ext < l.block[d] ? "if (" + cond + ") " : "";
      for (std::size_t p; (p = text.find(ph)) != std::string::npos;) text.replace(p, ph.size(), repl);
    }
    return text;
  }

 private:
  std::set<const ir::BufferNode*> read_only_;
  std::vector<std::pair<ir::Var, ir::Expr>> lets_;
  CudaLaunch launch_;
  std::array<bool, 3> seen_block_{}, seen_thread_{};
  std::vector<std::pair<const ir::ForNode*, int>> thread_loops_;
  std::vector<std::tuple<std::string, std::string, int, std::int64_t>> guards_;
  std::map<const ir::LoadNode*, std::string> vector_loads_;
  const ir::VarNode* lane_var_ = nullptr;
  int lane_ = 0;
};

}  // namespace detail

inline CudaSource emit_cuda(const ir::Function& f) {
  SPINDLE_INTERNAL_CHECK(f.stage == ir::Stage::flat, "emit_cuda", "expects stage III");
  return detail::CudaEmitter(f).run();
}

}  // namespace spindle::codegen

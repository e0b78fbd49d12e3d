// Helpers for the tests of the loop schedule primitives: hand-built loop nests, and running
// a stage-III function (emit_c + the system C compiler) on random data so that a scheduled
// function can be compared with the unscheduled one element by element.
// Kernels use the axes of pass_test_util.hpp: I (dense), J (sparse_variable<I>), K (dense).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <spindle/codegen/c_emitter.hpp>
#include <spindle/runtime/system_engine.hpp>
#include <spindle/schedule/atomic_writeback.hpp>
#include <spindle/schedule/bind.hpp>
#include <spindle/schedule/cache_read.hpp>
#include <spindle/schedule/cache_write.hpp>
#include <spindle/schedule/fuse.hpp>
#include <spindle/schedule/reorder.hpp>
#include <spindle/schedule/rfactor.hpp>
#include <spindle/schedule/split.hpp>

#include "unit/pass_test_util.hpp"

namespace sched_test {

namespace ir = spindle::ir;
namespace sch = spindle::schedule;
using spindle::DType;
using pass_test::body;

// --- hand-built nests ------------------------------------------------------------------

inline ir::Buffer buffer(const std::string& name, std::vector<ir::Expr> shape, DType t = DType::f32,
                         ir::BufferRole role = ir::BufferRole::input) {
  ir::BufferNode b;
  b.name = name;
  b.dtype = t;
  b.shape = std::move(shape);
  b.role = role;
  return ir::make_buffer(std::move(b));
}

inline ir::Stmt loop(const ir::Var& v, ir::Expr lo, ir::Expr ext, ir::Stmt body,
                     ir::IterKind ik = ir::IterKind::spatial, const std::string& axis = "",
                     ir::ForKind k = ir::ForKind::serial) {
  return ir::for_loop(v, std::move(lo), std::move(ext), k, ik, axis.empty() ? v.name() : axis, std::move(body));
}

inline ir::Expr c64(std::int64_t v) { return ir::int_imm(v); }

inline std::string str(const ir::Stmt& s) { return ir::to_string(s); }

// --- running stage-III functions -------------------------------------------------------

struct Sizes {
  std::int64_t I = 0, J = 0, K = 0;
  int max_row_nnz = 5;  // rows of J get 0..max_row_nnz nonzeros (some rows are empty)
};

// Arguments of one call: every buffer as raw bytes, the scalars in Function::scalars order.
struct Call {
  std::vector<std::vector<unsigned char>> buffers;
  std::vector<long long> scalars;
};

inline std::int64_t eval(const ir::Expr& e, const std::map<const ir::ExprNode*, std::int64_t>& env) {
  if (auto* c = e.as<ir::IntImmNode>()) return c->value;
  if (auto* v = e.as<ir::VarNode>()) return env.at(v);
  if (auto* c = e.as<ir::CastNode>()) return eval(c->value, env);
  if (auto* b = e.as<ir::BinaryNode>()) {
    std::int64_t x = eval(b->a, env), y = eval(b->b, env);
    switch (b->op) {
      case ir::BinOp::add: return x + y;
      case ir::BinOp::sub: return x - y;
      case ir::BinOp::mul: return x * y;
      case ir::BinOp::div: return x / y;
      default: break;
    }
  }
  throw spindle::InternalError("sched_test::eval: unsupported shape expression " + ir::to_string(e));
}

template <class T>
void put(std::vector<unsigned char>& bytes, std::size_t k, T v) {
  std::memcpy(bytes.data() + k * sizeof(T), &v, sizeof(T));
}

inline void put_value(std::vector<unsigned char>& bytes, DType t, std::size_t k, double v) {
  switch (t) {
    case DType::f32: put<float>(bytes, k, static_cast<float>(v)); break;
    case DType::f64: put<double>(bytes, k, v); break;
    case DType::i32: put<std::int32_t>(bytes, k, static_cast<std::int32_t>(v)); break;
    case DType::i64: put<std::int64_t>(bytes, k, static_cast<std::int64_t>(v)); break;
    default: throw spindle::InternalError("sched_test: unsupported buffer dtype");
  }
}

inline double get_value(const std::vector<unsigned char>& bytes, DType t, std::size_t k) {
  auto get = [&](auto x) {
    std::memcpy(&x, bytes.data() + k * sizeof(x), sizeof(x));
    return static_cast<double>(x);
  };
  switch (t) {
    case DType::f32: return get(float{});
    case DType::f64: return get(double{});
    case DType::i32: return get(std::int32_t{});
    case DType::i64: return get(std::int64_t{});
    default: throw spindle::InternalError("sched_test: unsupported buffer dtype");
  }
}

// Random arguments for f: a random CSR structure for J (sorted, some empty rows), values
// in [-1, 1] for every value buffer (outputs too, so that elements a kernel does not write
// compare equal).
inline Call make_call(const ir::Function& f, const Sizes& s, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::int64_t> indptr{0}, indices;
  for (std::int64_t r = 0; r < s.I; ++r) {
    std::vector<std::int64_t> cols;
    int want = s.J > 0 ? static_cast<int>(rng() % (s.max_row_nnz + 1)) : 0;
    for (int q = 0; q < want; ++q) cols.push_back(static_cast<std::int64_t>(rng() % s.J));
    std::sort(cols.begin(), cols.end());
    cols.erase(std::unique(cols.begin(), cols.end()), cols.end());
    indices.insert(indices.end(), cols.begin(), cols.end());
    indptr.push_back(static_cast<std::int64_t>(indices.size()));
  }
  std::map<std::string, std::int64_t> len{{"I", s.I}, {"J", s.J}, {"K", s.K}};
  std::map<const ir::ExprNode*, std::int64_t> env;
  Call call;
  for (auto& sc : f.scalars) {
    std::int64_t v = 0;
    switch (sc.origin.kind) {
      case ir::ParamOrigin::length: v = len.at(sc.origin.axis->name); break;
      case ir::ParamOrigin::nnz: v = static_cast<std::int64_t>(indices.size()); break;
      default: throw spindle::InternalError("sched_test: unsupported scalar " + sc.var.name());
    }
    env[sc.var.get()] = v;
    call.scalars.push_back(v);
  }
  std::uniform_real_distribution<double> value(-1.0, 1.0);
  for (auto& fb : f.buffers) {
    const ir::BufferNode& b = *fb.buffer;
    std::int64_t n = 1;
    for (auto& e : b.shape) n *= eval(e, env);
    std::vector<unsigned char> bytes(static_cast<std::size_t>(std::max<std::int64_t>(n, 1)) * spindle::dtype_bytes(b.dtype));
    for (std::int64_t k = 0; k < n; ++k) {
      double v = fb.origin.kind == ir::ParamOrigin::indptr    ? static_cast<double>(indptr.at(k))
                 : fb.origin.kind == ir::ParamOrigin::indices ? static_cast<double>(indices.at(k))
                                                              : value(rng);
      put_value(bytes, b.dtype, static_cast<std::size_t>(k), v);
    }
    call.buffers.push_back(std::move(bytes));
  }
  return call;
}

// f compiled with emit_c + the system C compiler.
class Compiled {
 public:
  explicit Compiled(const ir::Function& f) : fn_(f) {
    auto src = spindle::codegen::emit_c(f);
    auto engine = spindle::runtime::make_system_engine(spindle::Options{});
    spindle::runtime::CompileRequest req{src.source, src.symbol, f.name};
    module_ = engine->load(engine->compile(req), req);
  }

  // Runs on a copy of `call` and returns every buffer afterwards, as doubles.
  std::vector<std::vector<double>> run(Call call) const {
    std::vector<void*> ptrs;
    for (auto& b : call.buffers) ptrs.push_back(b.data());
    std::vector<std::int64_t> scalars(call.scalars.begin(), call.scalars.end());
    int rc = reinterpret_cast<spindle::codegen::KernelEntry>(module_->entry())(ptrs.data(), scalars.data(), nullptr);
    if (rc != 0) throw spindle::RuntimeError("sched_test: kernel returned " + std::to_string(rc));
    std::vector<std::vector<double>> out;
    for (std::size_t q = 0; q < call.buffers.size(); ++q) {
      DType t = fn_.buffers[q].buffer->dtype;
      std::size_t n = call.buffers[q].size() / spindle::dtype_bytes(t);
      std::vector<double> v(n);
      for (std::size_t k = 0; k < n; ++k) v[k] = get_value(call.buffers[q], t, k);
      out.push_back(std::move(v));
    }
    return out;
  }

 private:
  ir::Function fn_;
  std::shared_ptr<spindle::runtime::LoadedModule> module_;
};

// The largest |x - y| / (1 + |y|) over every element of every buffer (infinity when the
// sizes differ): 0 when the scheduled kernel computes exactly what the reference does.
inline double max_difference(const std::vector<std::vector<double>>& x, const std::vector<std::vector<double>>& y) {
  if (x.size() != y.size()) return INFINITY;
  double worst = 0;
  for (std::size_t q = 0; q < x.size(); ++q) {
    if (x[q].size() != y[q].size()) return INFINITY;
    for (std::size_t k = 0; k < x[q].size(); ++k) {
      double d = std::fabs(x[q][k] - y[q][k]) / (1.0 + std::fabs(y[q][k]));
      if (!(d <= worst)) worst = std::isnan(d) ? INFINITY : d;
    }
  }
  return worst;
}

// Runs `reference` and `scheduled` on the same random data for each size and returns the
// worst difference. Sizes include zero extents and extents that are not multiples of the
// schedule's factors.
inline double compare(const ir::Function& reference, const ir::Function& scheduled, const std::vector<Sizes>& sizes) {
  ir::verify(scheduled, "schedule test");
  Compiled ref(reference), sch(scheduled);
  double worst = 0;
  std::uint32_t seed = 1;
  for (auto& s : sizes) {
    Call call = make_call(reference, s, seed++);
    worst = std::max(worst, max_difference(sch.run(call), ref.run(call)));
  }
  return worst;
}

inline std::vector<Sizes> standard_sizes() {
  return {{0, 0, 0}, {1, 1, 1}, {7, 9, 5}, {8, 6, 8}, {13, 11, 0}, {5, 0, 3}, {0, 4, 6}, {17, 23, 13}};
}

// --- kernels ---------------------------------------------------------------------------

inline ir::Function spmm() {
  using namespace pass_test;
  auto f = sp::define_kernel("spmm", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>, K> b, sp::out<float, I, K> c,
                                        sp::iter<I> i, sp::iter<J> j, sp::iter<K> k) { c(i, k) += a(i, j) * b(j, k); });
  return stage3(f);
}

// SpMM into an inout output: no init, the nest is i, j, k with one loop over k.
inline ir::Function spmm_acc() {
  using namespace pass_test;
  auto f = sp::define_kernel("spmm_acc", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>, K> b,
                                            sp::inout<float, I, K> c, sp::iter<I> i, sp::iter<J> j,
                                            sp::iter<K> k) { c(i, k) += a(i, j) * b(j, k); });
  return stage3(f);
}

inline ir::Function sddmm() {
  using namespace pass_test;
  auto f = sp::define_kernel("sddmm", [](sp::in<float, I, J> a, sp::in<float, I, K> x, sp::in<float, sp::dense<J>, K> y,
                                         sp::out<float, I, J> c, sp::iter<I> i, sp::iter<J> j,
                                         sp::iter<K> k) { c(i, j) += a(i, j) * x(i, k) * y(j, k); });
  return stage3(f);
}

// Column sums of a dense I x K matrix: the reduction loop i is outside the spatial loop k.
inline ir::Function colsum() {
  using namespace pass_test;
  auto f = sp::define_kernel("colsum", [](sp::in<float, I, K> x, sp::out<float, K> y, sp::iter<I> i,
                                          sp::iter<K> k) { y(k) += x(i, k); });
  return stage3(f);
}

}  // namespace sched_test

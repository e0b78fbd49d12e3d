// spindle-kernel-fuzz: differential testing of random kernels. Each generated stage-I
// program (tests/support/random_kernel.hpp) is
//   1. completed and checked by the front end (infer_iteration_kinds): a UserError is a
//      rejection (counted), any other exception a bug;
//   2. run by the reference interpreter (tests/support/reference_interpreter.hpp);
//   3. compiled and run on every engine — in-process Clang + ORC, the system C compiler,
//      and the generated CUDA in the CPU emulator (on the GPU when one is present) — and its
//      out/inout arguments compared with the interpreter's (bit-exact for exact kernels,
//      relative 1e-3 (f32) / 1e-9 (f64) otherwise).
// A disagreement prints the seed, the engine, the first differing element and the kernel.
// A kernel that assembles a sparse output (docs/language.md §4.6) runs on the CPU engines as a
// runtime::AssembledKernel whose arrays a test AssemblyTarget keeps: the pattern must be the
// interpreter's exactly (rows sorted by column; every other kernel's CPU runs take rows as
// gathered, spindle::unsorted, each row then ordered by the check), the values as above
// (within the interpreter's error bound of each entry plus the relative tolerance when not
// exact); on "cuda" the same
// through cuda::assemble_on, the GPU steps of AssembledCudaKernel, in the emulator.
//
//   spindle-kernel-fuzz [--seed S] [--count N (0 = until --seconds)] [--seconds T]
//                       [--engines orc,system,cuda] [--verbose] [--print SEED] [--first N] [--no-large]
//                       [--large-every N] [--no-schedules] [--kind all|assembled|scattered|merge]
// --kind keeps only the kernels that assemble a sparse output, write it at scattered rows, or
// co-iterate (a focused campaign: the others are skipped and not counted).
// Every compared kernel whose sparse fibers can be put out of order runs again with them
// unsorted (check_unsorted): an engine agrees with the interpreter or refuses the call with
// the binder's "not sorted" FormatError. Every third seed's unsorted fibers also repeat a
// coordinate (each stored element is visited once: docs/language.md §7).
// Every compared kernel with an indirect write runs again with one stored value of an index
// buffer outside the extent it indexes (check_bad_indices): the interpreter and every engine
// must refuse the call, the engines with a FormatError and no output touched.
// Every compared kernel (every N-th with --large-every N) runs again on inputs of thousands
// of rows, with 1 and 3 threads (check_large), unless --no-large. A failing kernel is shrunk
// (on the inputs it failed on); SPINDLE_FUZZ_EXPLAIN=1 also prints the shrunk kernel's explain().
// Every compared kernel that does not assemble also runs under a random user schedule
// (check_scheduled: sparse_reorder, sparse_fuse, split, reorder, fuse, parallel, vectorize, cache_write, unroll, the
// steps apply_user_schedule accepts) on the first CPU engine with 1 and 3 threads.
// Exit status: 0 when no disagreement, 1 otherwise.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <spindle/driver/pipeline.hpp>
#include <spindle/ir/affine_index.hpp>
#include <spindle/ir/indirect.hpp>
#include <spindle/runtime/bind_args.hpp>
#include <spindle/runtime/cuda/cuda.hpp>
#include <spindle/spindle.hpp>

#include "support/emulated_cuda_call.hpp"
#include "support/typed_bytes.hpp"
#include "support/random_kernel.hpp"
#include "support/reference_interpreter.hpp"

namespace sp = spindle;
using spindle::test::RandomKernel;

namespace {

struct Stats {
  long generated = 0, rejected = 0, skipped = 0, compared = 0, failures = 0, large = 0, indirect = 0, computed = 0,
       unsorted = 0, unsorted_large = 0, unsorted_refused = 0, bad_indices = 0, unsorted_repeated = 0, shared = 0, sparse_roots = 0, gap_fills = 0, row_tiles = 0, owned_tiles = 0, partitioned = 0, blocked = 0, gathered = 0, prefetched = 0, assembled = 0,
       assembled_generated = 0, assembled_rejected = 0, assembled_scattered = 0, assembled_nonempty = 0, by_coordinate = 0, merges = 0, conditional = 0,
       scheduled = 0, schedule_refused = 0, gpu_scheduled = 0, gpu_unlaunchable = 0, gpu_refused = 0;
  std::map<std::string, long> schedule_kept;      // kept random schedule steps by primitive
  std::map<std::string, long> gpu_schedule_kept;  // the same for the random GPU schedules
  std::map<std::string, long> gpu_refusals;       // why GPU candidates were refused (first line, --verbose)
  std::map<std::string, long> runs;
  std::map<std::string, std::string> first_reject;
  std::vector<std::pair<double, std::uint64_t>> times;  // seconds, kernel seed
};

spindle::test::NvrtcCheck nvrtc;

// The "cuda" engine: on the GPU when there is one, else in the CUDA emulator.
void run_cuda_emulated(const sp::ir::Function& stage1, std::vector<sp::runtime::CallArg> call) {
  spindle::test::run_cuda_build(stage1, call, &nvrtc);
}
// An engine's name in reports: "cuda" runs on the GPU ("gpu") or in the emulator ("cuda").
std::string label(const std::string& e) { return e == "cuda" ? spindle::test::cuda_engine_name() : e; }

std::vector<std::vector<double>> outputs(RandomKernel& k) {
  std::vector<std::vector<double>> out;
  for (auto& b : k.buffers) {
    std::vector<double> v;
    if (b.buffer->role != sp::ir::BufferRole::input)
      for (std::int64_t q = 0; q < b.count; ++q) v.push_back(k.value_at(b, q));
    out.push_back(std::move(v));
  }
  return out;
}

// Empty string when equal, else a description of the first difference.
// `exact`: the kernel's data are small integers and the interpreter saw no float result
// beyond the exactly representable ones, so any association gives the same bits.
std::string compare(const RandomKernel& k, bool exact, const std::vector<std::vector<double>>& ref,
                    const std::vector<std::vector<double>>& got) {
  for (std::size_t b = 0; b < ref.size(); ++b) {
    const bool f32 = k.buffers[b].buffer->dtype == sp::DType::f32;
    const double tol = exact ? 0 : (f32 ? 1e-3 : 1e-9);
    for (std::size_t q = 0; q < ref[b].size(); ++q) {
      double r = ref[b][q], g = got[b][q];
      bool same = close_enough(k, b, q, tol, r, g);
      if (!same) {
        std::ostringstream os;
        os << "buffer '" << k.buffers[b].buffer->name << "' element " << q << ": interpreter " << r << ", engine "
           << g;
        if (tol > 0) os << " (allowed difference " << allowed_difference(k, b, q, tol, r) << ")";
        return os.str();
      }
    }
  }
  return "";
}

// What the interpreter computed: the out/inout buffers' values and, for a kernel that
// assembles a sparse output, that output's entries.
struct Reference {
  std::vector<std::vector<double>> outputs;
  std::vector<spindle::test::Interpreter::AssembledEntry> assembled;
  bool exact = true;
};

// Runs the interpreter on k's current data (throws InterpreterError); `budget` 0: its default.
Reference reference(RandomKernel& k, const sp::ir::Function& raw, long long budget = 0) {
  auto args = k.args();
  auto interp = budget ? std::make_unique<spindle::test::Interpreter>(raw, args, budget)
                       : std::make_unique<spindle::test::Interpreter>(raw, args);
  interp->run();
  Reference r;
  r.exact = k.exact && !interp->float_rounded();
  r.outputs = outputs(k);
  spindle::test::record_error_bounds(k, *interp);
  if (k.assembled >= 0) r.assembled = interp->assembled(k.buffers[static_cast<std::size_t>(k.assembled)].buffer->name);
  return r;
}

// An AssemblyTarget that keeps the arrays of the assembled output (row offsets, column
// indices and values in the output's types), for the comparison. `take_unsorted`: it takes
// rows as gathered where the runtime would sort them next (spindle::unsorted), and compare()
// then orders each row's entries by column before checking them.
class KeptAssembly final : public sp::runtime::AssemblyTarget {
 public:
  KeptAssembly(sp::DType index, sp::DType value, bool take_unsorted = false)
      : index_(index), value_(value), take_unsorted_(take_unsorted) {}
  bool leave_rows_unsorted() override { return unsorted_ = take_unsorted_; }
  void allocate(std::int64_t nnz, const std::vector<std::int64_t>& row_ptr, void*& indices, void*& values) override {
    // (Called twice when scattered rows had duplicates: sized for every write, then for the
    // entries; the last call's arrays are the output.)
    if (committed) throw std::runtime_error("AssemblyTarget::allocate called after commit");
    allocated = true;
    nnz_ = nnz;
    row_ptr_ = row_ptr;
    // 0xff: an entry the kernel does not write reads as column -1 (and a NaN or -1 value).
    indices_.assign(static_cast<std::size_t>(std::max<std::int64_t>(nnz, 1) * sp::dtype_bytes(index_)), 0xff);
    values_.assign(static_cast<std::size_t>(std::max<std::int64_t>(nnz, 1) * sp::dtype_bytes(value_)), 0xff);
    indices = indices_.data();
    values = values_.data();
  }
  void commit() override { committed = true; }

  // "" when the kept arrays hold exactly the interpreter's entries (same (row, col) set in
  // row-major order, columns sorted in each row, values as `compare` wants them).
  std::string compare(const Reference& ref, std::int64_t rows, std::int64_t cols) const {
    std::ostringstream os;
    if (!allocated || !committed) return "the assembly target was not allocated and committed";
    if (static_cast<std::int64_t>(row_ptr_.size()) != rows + 1 || row_ptr_.front() != 0 || row_ptr_.back() != nnz_) {
      os << "row offsets: " << row_ptr_.size() << " of them for " << rows << " rows, ending at "
         << (row_ptr_.empty() ? -1 : row_ptr_.back()) << " for " << nnz_ << " entries";
      return os.str();
    }
    struct Entry {
      std::int64_t row, col, q;
    };
    std::vector<Entry> got;
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t lo = row_ptr_[static_cast<std::size_t>(r)], hi = row_ptr_[static_cast<std::size_t>(r) + 1];
      if (hi < lo) {
        os << "row offsets decrease at row " << r;
        return os.str();
      }
      const std::size_t first = got.size();
      for (std::int64_t q = lo; q < hi; ++q) got.push_back({r, index(q), q});
      if (unsorted_)  // rows left as gathered: their entries in column order, for the checks below
        std::sort(got.begin() + static_cast<std::ptrdiff_t>(first), got.end(),
                  [](const Entry& a, const Entry& b) { return a.col < b.col; });
      for (std::size_t e = first; e < got.size(); ++e) {
        const std::int64_t c = got[e].col;
        if (c < 0 || c >= cols || (e > first && c <= got[e - 1].col)) {
          os << "row " << r << ": column " << c << " at entry " << got[e].q
             << (c < 0 || c >= cols ? " is outside the columns"
                 : unsorted_        ? " repeats in the row (rows left unsorted)"
                                    : " is not above the one before (unsorted or duplicate)");
          return os.str();
        }
      }
    }
    const bool is_f = sp::is_float(value_);
    const double tol = ref.exact ? 0 : (value_ == sp::DType::f32 ? 1e-3 : 1e-9);
    for (std::size_t e = 0; e < std::max(got.size(), ref.assembled.size()); ++e) {
      if (e >= got.size() || e >= ref.assembled.size() || got[e].row != ref.assembled[e].row ||
          got[e].col != ref.assembled[e].col) {
        os << "pattern: the interpreter has " << ref.assembled.size() << " entries, the engine " << got.size()
           << "; first difference at entry " << e << ": interpreter ";
        if (e < ref.assembled.size()) os << "(" << ref.assembled[e].row << ", " << ref.assembled[e].col << ")";
        else os << "none";
        os << ", engine ";
        if (e < got.size()) os << "(" << got[e].row << ", " << got[e].col << ")";
        else os << "none";
        return os.str();
      }
      const auto& w = ref.assembled[e];
      bool same;
      double r = 0, g = 0;
      if (is_f) {
        r = w.f, g = value_f(got[e].q);
        same = (std::isnan(r) && std::isnan(g)) || r == g ||
               (tol > 0 && std::fabs(r - g) <= w.error_bound + tol * std::max(1.0, std::fabs(r)));
      } else {
        same = w.i == value_i(got[e].q);
        r = static_cast<double>(w.i), g = static_cast<double>(value_i(got[e].q));
      }
      if (!same) {
        os << "assembled entry (" << w.row << ", " << w.col << "): interpreter " << r << ", engine " << g;
        if (is_f) os << " (error bound " << w.error_bound << ")";
        return os.str();
      }
    }
    return "";
  }

  std::int64_t nnz() const { return nnz_; }
  bool allocated = false, committed = false;

 private:
  std::int64_t index(std::int64_t q) const { return spindle::test::load_int(indices_, index_, q); }
  double value_f(std::int64_t q) const { return spindle::test::load_float(values_, value_, q); }
  std::int64_t value_i(std::int64_t q) const { return spindle::test::load_int(values_, value_, q); }

  sp::DType index_, value_;
  bool take_unsorted_ = false, unsorted_ = false;
  std::int64_t nnz_ = 0;
  std::vector<std::int64_t> row_ptr_;
  std::vector<unsigned char> indices_, values_;
};

// Runs k (completed by the front end) on `engine` with fresh arguments and compares with the
// interpreter: "" when they agree, else the difference (or what the engine threw). An
// assembled kernel runs as an AssembledKernel on the CPU engines, and through
// cuda::assemble_on with the emulator on "cuda". `explain`: where to put the engine's explain() (CPU engines), if not null.
std::string run_engine(RandomKernel& k, const sp::ir::Function& completed, const std::string& engine,
                       std::map<std::string, std::unique_ptr<sp::runtime::Runtime>>& runtimes, const Reference& ref,
                       std::string* explain = nullptr) {
  try {
    auto args = k.args();
    if (k.assembled >= 0) {
      const spindle::test::BufferData& out = k.buffers[static_cast<std::size_t>(k.assembled)];
      // Every other kernel's CPU runs take their rows unsorted (spindle::unsorted).
      KeptAssembly target(out.buffer->axes[1]->index_dtype, out.buffer->dtype, engine != "cuda" && k.seed % 2 == 1);
      sp::runtime::AssemblyPlan plan(completed);
      const sp::StorageView& view = args.at(static_cast<std::size_t>(plan.output_arg())).view;
      if (engine == "cuda" && plan.scattered) {
        // Scattered rows are assembled on the CPU only: the CUDA build must refuse, saying so.
        try {
          spindle::test::run_assembled_cuda_build(completed, args, target, &nvrtc, nullptr, 1 << 20);
        } catch (const sp::UserError& e) {
          const std::string m = e.what();
          return m.find("written at scattered rows") != std::string::npos ? "" : "threw: " + m;
        }
        return "the CUDA build of a kernel whose rows are scattered did not refuse it";
      }
      if (engine == "cuda") {
        // The GPU steps (on the GPU when present, else in the emulator); a scratch budget of 1 to 5 columns' worth per worker
        // count makes rows share workers (and rebalance them) as a large matrix would.
        const std::int64_t budget = 20 * std::max<std::int64_t>(1, view.levels[1].length) *
                                    (1 + static_cast<std::int64_t>(k.seed % 5));
        spindle::test::run_assembled_cuda_build(completed, args, target, &nvrtc, nullptr, budget);
      } else {
        sp::runtime::AssembledKernel ak(completed, *runtimes.at(engine));
        if (explain) *explain = ak.explain();
        ak.call(args, target);
      }
      std::string what = target.compare(ref, view.levels[0].length, view.levels[1].length);
      if (what.empty()) what = compare(k, ref.exact, ref.outputs, outputs(k));  // nothing else may change
      return what;
    }
    if (engine == "cuda") {
      run_cuda_emulated(completed, args);
    } else {
      sp::runtime::CompiledKernel ck(completed, *runtimes.at(engine));
      if (explain) *explain = ck.explain();
      ck.call(args);
    }
    return compare(k, ref.exact, ref.outputs, outputs(k));
  } catch (const std::exception& ex) {
    return std::string("threw: ") + ex.what();
  }
}

// The front end's checks of a stage-I program, as KernelBuilder::finish makes them: the rules
// of assembled outputs on the buffers, then infer_iteration_kinds. Throws as they do.
sp::ir::Function front_end(const sp::ir::Function& raw) {
  sp::detail::check_assembled_outputs(raw.name, raw.buffers);
  sp::ir::Function completed = raw;
  completed.body = sp::detail::infer_iteration_kinds(raw.body, raw.name, raw.buffers, completed.scalars);
  return completed;
}

std::string describe(const RandomKernel& k, const sp::ir::Function* completed) {
  std::ostringstream os;
  os << "--- kernel (seed " << k.seed << (k.exact ? ", exact" : ", inexact") << ") as generated:\n"
     << sp::ir::to_string(k.function) << "\n";
  if (completed) os << "--- after the front end:\n" << sp::ir::to_string(*completed) << "\n";
  os << "--- data:\n";
  for (auto& a : k.axes) {
    auto& d = k.data.at(a.get());
    os << "  " << a->name << " (" << sp::ir::axis_kind_name(a->kind) << (a->parent ? " of " + a->parent->name : "")
       << (a->dense_of ? " = dense<" + a->dense_of->name + ">" : "")
       << (a->coordinates_of ? ", coordinates_of " + a->coordinates_of->name : "")
       << (a->merge != sp::ir::MergeOp::none ? std::string(", ") + sp::ir::merge_op_name(a->merge) + " of " +
                                                   a->merge_operands[0]->name + ", ..."
                                             : std::string())
       << (a->assembled ? ", assembled: the pattern below is ignored" : "") << "): length " << d.length
       << ", positions " << d.positions;
    if (!d.indptr.empty()) {
      os << ", indptr [";
      for (auto x : d.indptr) os << x << " ";
      os << "]";
    }
    if (!d.indices.empty()) {
      os << ", indices [";
      for (auto x : d.indices) os << x << " ";
      os << "]";
    }
    os << "\n";
  }
  for (auto& b : k.buffers) {
    os << "  " << b.buffer->name << " = [";
    for (auto x : b.initial) os << x << " ";
    os << "]\n";
  }
  for (std::size_t s = 0; s < k.scalar_values.size(); ++s) os << "  scalar " << s << " = " << k.scalar_values[s] << "\n";
  return os.str();
}

// One candidate simplification of a stage-I body, numbered: dropping the t-th statement of
// a sequence, or replacing the t-th expression by the constant 1 of its type (counted in
// one pre-order walk). `applied` is false when t is past the last candidate.
class ShrinkStep : public sp::ir::IRMutator {
 public:
  explicit ShrinkStep(int target) : target_(target) {}
  bool applied = false;

  using sp::ir::IRMutator::mutate;
  sp::ir::Expr mutate(const sp::ir::Expr& e) override {
    if (e.defined() && !applied && !e.as<sp::ir::IntImmNode>() && !e.as<sp::ir::FloatImmNode>() &&
        e.dtype() != sp::DType::boolean && hit())
      return sp::ir::make_const(e.dtype(), 1);
    return sp::ir::IRMutator::mutate(e);
  }

 protected:
  sp::ir::Stmt mutate_Seq(const sp::ir::SeqNode* n, const sp::ir::Stmt&) override {
    std::vector<sp::ir::Stmt> out;
    for (auto& c : n->stmts) {
      if (!applied && hit()) continue;  // drop it
      out.push_back(mutate(c));
    }
    return sp::ir::seq(std::move(out), n->loc);
  }

 private:
  bool hit() {
    if (count_++ != target_) return false;
    applied = true;
    return true;
  }
  int target_, count_ = 0;
};

// Whether the kernel writes at an indirect index (`computed` false) or at a computed index
// of iterators and constants (`computed` true) into a root slot (docs/language.md §4.1).
bool has_scattered_write(const sp::ir::Function& f, bool computed) {
  struct Scan : sp::ir::IRVisitor {
    bool computed = false, found = false;
    void visit_Reduce(const sp::ir::ReduceNode* n) override {
      for (std::size_t s = 0; s < n->indices.size(); ++s) {
        const sp::ir::Expr& e = n->indices[s];
        if (!computed) found = found || sp::ir::indirect_index_load(e) != nullptr;
        else if (!n->buffer->axes[s]->parent)
          found = found || sp::ir::is_computed_index(e, [](const sp::ir::VarNode*) { return true; });
      }
      sp::ir::IRVisitor::visit_Reduce(n);
    }
  } scan;
  scan.computed = computed;
  scan.visit(f.body);
  return scan.found;
}

// Whether the kernel has a conditional statement (spindle::when, docs/language.md §4.7).
bool has_conditional(const sp::ir::Function& f) {
  struct Scan : sp::ir::IRVisitor {
    bool found = false;
    void visit_IfThenElse(const sp::ir::IfThenElseNode*) override { found = true; }
  } scan;
  scan.visit(f.body);
  return scan.found;
}

// Whether the kernel iterates a root sparse axis (sparse_root: a sparse vector's nonzeros).
bool iterates_sparse_root(const sp::ir::Function& f) {
  struct Scan : sp::ir::IRVisitor {
    bool found = false;
    void visit_SparseIteration(const sp::ir::SparseIterationNode* n) override {
      for (auto& a : n->axes) found = found || (!a->parent && a->is_sparse());
      sp::ir::IRVisitor::visit_SparseIteration(n);
    }
  } scan;
  scan.visit(f.body);
  return scan.found;
}

// Whether an iteration co-iterates sparse fibers (union_of / intersection_of, docs/language.md §3.1).
bool iterates_merge(const sp::ir::Function& f) {
  struct Scan : sp::ir::IRVisitor {
    bool found = false;
    void visit_SparseIteration(const sp::ir::SparseIterationNode* n) override {
      for (auto& a : n->axes) found = found || a->merge != sp::ir::MergeOp::none;
      sp::ir::IRVisitor::visit_SparseIteration(n);
    }
  } scan;
  scan.visit(f.body);
  return scan.found;
}

// Whether an iterator of an axis declared coordinates_of<X> indexes a slot of another axis
// (X, dense<X>, ...: docs/language.md §1) in a read or a write.
bool indexes_by_shared_coordinates(const sp::ir::Function& f) {
  struct Scan : sp::ir::IRVisitor {
    bool found = false;
    std::map<const sp::ir::VarNode*, const sp::ir::AxisNode*> axis_of;
    void visit_SparseIteration(const sp::ir::SparseIterationNode* n) override {
      for (std::size_t k = 0; k < n->vars.size() && k < n->axes.size(); ++k) axis_of[n->vars[k].node()] = n->axes[k].get();
      sp::ir::IRVisitor::visit_SparseIteration(n);
    }
    void slots(const sp::ir::Buffer& b, const std::vector<sp::ir::Expr>& idx) {
      for (std::size_t s = 0; s < idx.size() && s < b->axes.size(); ++s)
        if (auto* v = idx[s].as<sp::ir::VarNode>())
          if (auto it = axis_of.find(v); it != axis_of.end())
            found = found || (it->second->coordinates_of && it->second != b->axes[s].get());
    }
    void visit_Load(const sp::ir::LoadNode* n) override {
      slots(n->buffer, n->indices);
      sp::ir::IRVisitor::visit_Load(n);
    }
    void visit_Reduce(const sp::ir::ReduceNode* n) override {
      slots(n->buffer, n->indices);
      sp::ir::IRVisitor::visit_Reduce(n);
    }
    void visit_Store(const sp::ir::StoreNode* n) override {
      slots(n->buffer, n->indices);
      sp::ir::IRVisitor::visit_Store(n);
    }
  } scan;
  scan.visit(f.body);
  return scan.found;
}

// Whether an iteration lists an axis whose parent, a root dense axis, no enclosing iteration
// (nor an earlier axis of its own) iterates: its fiber is the one at the coordinate of another
// iterator (docs/language.md §3).
bool iterates_fiber_by_coordinate(const sp::ir::Function& f) {
  struct Scan : sp::ir::IRVisitor {
    bool found = false;
    std::vector<const sp::ir::AxisNode*> bound;
    void visit_SparseIteration(const sp::ir::SparseIterationNode* n) override {
      const std::size_t depth = bound.size();
      for (auto& a : n->axes) {
        if (sp::ir::parent_by_coordinate(*a) && std::find(bound.begin(), bound.end(), a->parent.get()) == bound.end())
          found = true;
        bound.push_back(a.get());
      }
      sp::ir::IRVisitor::visit_SparseIteration(n);
      bound.resize(depth);
    }
  } scan;
  scan.visit(f.body);
  return scan.found;
}

// "" when the kernel `raw` agrees with the interpreter on `engine`, else why not; "rejected"
// or "skipped" when it cannot be compared.
std::string check(RandomKernel& k, const sp::ir::Function& raw, const std::string& engine,
                  std::map<std::string, std::unique_ptr<sp::runtime::Runtime>>& runtimes) {
  sp::ir::Function completed;
  try {
    completed = front_end(raw);
  } catch (const sp::UserError&) {
    return "rejected";
  } catch (const std::exception& e) {
    return std::string("front end threw: ") + e.what();
  }
  Reference ref;
  try {
    ref = reference(k, raw);
  } catch (const spindle::test::InterpreterError&) {
    return "skipped";
  }
  return run_engine(k, completed, engine, runtimes, ref);
}

// The explain() of `raw` (completed by the front end) on a CPU engine, when SPINDLE_FUZZ_EXPLAIN
// is set: printed after a shrunk kernel.
std::string explain_if_asked(const RandomKernel& k, const sp::ir::Function& raw, const std::string& engine,
                             std::map<std::string, std::unique_ptr<sp::runtime::Runtime>>& runtimes) {
  if (!std::getenv("SPINDLE_FUZZ_EXPLAIN") || engine == "cuda") return "";
  try {
    sp::ir::Function completed = front_end(raw);
    if (k.assembled >= 0) return sp::runtime::AssembledKernel(completed, *runtimes.at(engine)).explain();
    return sp::runtime::CompiledKernel(completed, *runtimes.at(engine)).explain();
  } catch (const std::exception& e) {
    return std::string("(explain threw: ") + e.what() + ")\n";
  }
}

// Greedy shrinking of a failing kernel: keep any single simplification that still fails.
sp::ir::Function shrink(RandomKernel& k, const std::string& engine,
                        std::map<std::string, std::unique_ptr<sp::runtime::Runtime>>& runtimes) {
  sp::ir::Function cur = k.function;
  for (int round = 0; round < 200; ++round) {
    bool progress = false;
    for (int t = 0;; ++t) {
      ShrinkStep step(t);
      sp::ir::Function cand = cur;
      cand.body = step.mutate(cur.body);
      if (!step.applied) break;
      std::string why = check(k, cand, engine, runtimes);
      if (!why.empty() && why != "rejected" && why != "skipped") {
        cur = cand;
        progress = true;
        break;
      }
    }
    if (!progress) break;
  }
  return cur;
}

// The buffers read as indirect write indices (docs/language.md §4.1): a root slot of a write
// indexed by the value of an integer `in` buffer, or that value cast to int64.
// The error path (docs/language.md §4.1, §7): one stored value of an indirect write's index
// buffer moved outside the extent it indexes (-1, or the extent itself). The interpreter must
// refuse the call ("call error", whether or not a write reaches the value: under a `when`,
// past a loop's end), and so must every engine: a FormatError naming the value, with every
// output as it was. A kernel that accepts it, or writes before refusing, is a failure.
void check_bad_indices(RandomKernel k, const sp::ir::Function& completed, std::uint64_t ks,
                       const std::vector<std::string>& engines,
                       std::map<std::string, std::unique_ptr<sp::runtime::Runtime>>& runtimes, Stats& st) {
  const std::set<const sp::ir::BufferNode*> used = spindle::test::indirect_index_buffers(k.function);
  std::vector<spindle::test::BufferData*> candidates;
  for (auto& b : k.buffers)
    if (b.write_target && b.count > 0 && used.count(b.buffer.get())) candidates.push_back(&b);
  if (candidates.empty()) return;
  std::mt19937_64 rng(ks * 13 + 7);
  spindle::test::BufferData& b = *candidates[rng() % candidates.size()];
  const std::size_t q = rng() % b.initial.size();
  b.initial[q] = rng() % 2 ? -1.0 : static_cast<double>(k.data.at(b.write_target).length);
  const std::string where = "buffer '" + b.buffer->name + "' position " + std::to_string(q) + " set to " +
                            std::to_string(static_cast<long long>(b.initial[q]));
  try {
    reference(k, k.function);
    ++st.failures;
    std::cout << "FAIL seed " << ks << " interpreter: accepted an indirect write index outside its extent (" << where
              << ")\n" << describe(k, &completed);
    return;
  } catch (const spindle::test::InterpreterError& e) {
    if (std::string(e.what()).find("call error") == std::string::npos) return;  // undefined on these inputs anyway
  }
  ++st.bad_indices;
  const bool scattered = k.assembled >= 0 && sp::runtime::AssemblyPlan(completed).scattered;
  Reference untouched;
  for (auto& d : k.buffers) untouched.outputs.push_back(d.buffer->role == sp::ir::BufferRole::input ? std::vector<double>{} : d.initial);
  for (auto& e : engines) {
    if (e == "cuda" && scattered) continue;  // refused for its scattered rows (run_engine checks that)
    const std::string what = run_engine(k, completed, e, runtimes, untouched);
    ++st.runs[label(e) + " bad index"];
    std::string fail;
    if (what.rfind("threw: ", 0) != 0)
      fail = what.empty() ? "accepted the call and wrote nothing" : "accepted the call: " + what;
    else if (what.find("is outside [0, ") == std::string::npos)
      fail = "did not name the bad value: " + what;
    else if (std::string d = compare(k, true, untouched.outputs, outputs(k)); !d.empty())
      fail = "wrote before refusing: " + d;
    if (fail.empty()) continue;
    ++st.failures;
    std::cout << "FAIL seed " << ks << " engine " << label(e) << " bad index (" << where << "): " << fail << "\n"
              << describe(k, &completed);
  }
}

// The same kernel with every sparse fiber's coordinates out of order (shuffle_fibers; the
// levels say unsorted, as an unsorted Csr does): each engine must either agree with the
// interpreter, which reads any order, or refuse the call with the binder's FormatError
// ("not sorted": the kernel searches or merges those coordinates). Found missing on
// 2026-11-28: a merge of an unsorted fiber visited a coordinate twice.
// `large`: k holds check_large's inputs (the interpreter gets its budget; no CUDA build of an
// assembling kernel, as there).
void check_unsorted(RandomKernel k, const sp::ir::Function& completed, std::uint64_t ks,
                    const std::vector<std::string>& engines,
                    std::map<std::string, std::unique_ptr<sp::runtime::Runtime>>& runtimes, Stats& st,
                    bool large = false) {
  const bool repeat = ks % 3 == 0;
  if (!spindle::test::shuffle_fibers(k, ks * 11 + 5, repeat)) return;
  Reference ref;
  try {
    ref = large ? reference(k, k.function, 2'000'000) : reference(k, k.function);
  } catch (const spindle::test::InterpreterError&) {
    return;  // undefined or over budget on these inputs
  }
  ++(large ? st.unsorted_large : st.unsorted);
  st.unsorted_repeated += repeat;
  for (auto& e : engines) {
    if (large && e == "cuda" && k.assembled >= 0) continue;
    std::string what = run_engine(k, completed, e, runtimes, ref);
    const std::string name = label(e) + (large ? " large unsorted" : " unsorted");
    ++st.runs[name];
    if (what.rfind("threw: ", 0) == 0 && what.find("has a fiber whose indices are not sorted") != std::string::npos) {
      ++st.unsorted_refused;
      continue;
    }
    if (what.empty()) continue;
    ++st.failures;
    std::cout << "FAIL seed " << ks << " engine " << name << ": " << what << "\n" << describe(k, &completed);
  }
}

// The stage-III loops of `completed` under the user schedule `s` (its sparse_reorder steps,
// its loop steps, then peel_split_tails), as a CompiledKernel on the CPU builds them; throws the UserError of a
// step that does not apply.
sp::ir::Function schedule_loops(const sp::ir::Function& completed, const sp::Schedule& s) {
  sp::driver::PipelineOptions o;
  o.context.kernel = completed.name;
  o.context.num_threads = 3;
  o.context.schedule = s;
  std::vector<sp::driver::PassRecord> log;
  sp::driver::PassRunner run(o, log);
  sp::driver::Lowered out;
  sp::ir::Function f = sp::driver::lower_unscheduled(completed, o, run, out);
  return sp::schedule::peel_split_tails(sp::schedule::apply_user_schedule(f, s, sp::schedule::ScheduleTarget::cpu));
}

// The names of `f`'s buffers that the kernel writes (`written`) or only reads.
std::vector<std::string> buffer_names(const sp::ir::Function& f, bool written) {
  std::vector<std::string> out;
  for (auto& fb : f.buffers)
    if ((fb.buffer->role != sp::ir::BufferRole::input) == written) out.push_back(fb.buffer->name);
  return out;
}

// A random user schedule for `completed` (docs/schedules.md), built one step at a time on
// the loops the steps so far leave: maybe a sparse_reorder of one iteration (its axes
// shuffled), maybe a sparse_fuse of a chain of its axes, then up to five of split (by 1, 2, 3, 4 or 8), reorder (a loop and one inside
// it, maybe with the loop directly inside that one), fuse, parallel, vectorize, cache_write (a written buffer) and unroll on random loops. A step that apply_user_schedule
// refuses (a UserError: the step does not fit, or it could change the result) is dropped
// and counted. `scheduled`: the loops under the schedule returned.
sp::Schedule random_schedule(const sp::ir::Function& completed, std::uint64_t seed, Stats& st,
                             sp::ir::Function& scheduled) {
  std::mt19937_64 rng(seed), band_rng(seed ^ 0x9b05688c2b3e6c1fULL);
  sp::Schedule s;
  auto accept = [&](const sp::Schedule& c) {
    try {
      scheduled = schedule_loops(completed, c);
    } catch (const sp::UserError&) {
      ++st.schedule_refused;
      return false;
    } catch (const std::exception& ex) {  // anything else is a bug: say which schedule hit it
      throw std::runtime_error(std::string(ex.what()) + " (under the candidate schedule " + c.to_string() + ")");
    }
    for (std::size_t q = s.steps().size(); q < c.steps().size(); ++q)  // the steps this one added
      ++st.schedule_kept[sp::Schedule::op_name(c.steps()[q].op)];
    s = c;
    return true;
  };
  struct Iterations : sp::ir::IRVisitor {
    std::vector<std::pair<std::string, std::vector<std::string>>> found;
    // Chains of adjacent axes, each the parent of the next (what sparse_fuse takes), per iteration.
    std::vector<std::pair<std::string, std::vector<std::string>>> chains;
    void visit_SparseIteration(const sp::ir::SparseIterationNode* n) override {
      std::vector<std::string> axes;
      for (auto& a : n->axes) axes.push_back(a->name);
      for (std::size_t k = 0; k + 1 < n->axes.size(); ++k) {
        std::vector<std::string> chain{n->axes[k]->name};
        for (std::size_t q = k + 1; q < n->axes.size() && n->axes[q]->parent == n->axes[q - 1]; ++q) {
          chain.push_back(n->axes[q]->name);
          chains.emplace_back(n->name, chain);
        }
      }
      if (axes.size() >= 2) found.emplace_back(n->name, std::move(axes));
      sp::ir::IRVisitor::visit_SparseIteration(n);
    }
  } its;
  its.visit(completed.body);
  scheduled = schedule_loops(completed, s);
  if (!its.found.empty() && rng() % 2) {
    auto [name, axes] = its.found[rng() % its.found.size()];
    std::shuffle(axes.begin(), axes.end(), rng);
    sp::Schedule c = s;
    c.sparse_reorder(name, axes);
    accept(c);
  }
  // A fused chain of the written order (refused when the reorder above split it, or when its
  // axes are of different kinds).
  if (!its.chains.empty() && rng() % 2) {
    const auto& [name, chain] = its.chains[rng() % its.chains.size()];
    sp::Schedule c = s;
    c.sparse_fuse(name, chain);
    accept(c);
  }
  const int wanted = 1 + static_cast<int>(rng() % 5);
  int kept = 0;
  for (int attempt = 0; attempt < 16 && kept < wanted; ++attempt) {
    auto loops = sp::schedule::detail::all_loops(scheduled.body);
    if (loops.empty()) break;
    const sp::ir::ForNode* l = loops[rng() % loops.size()];
    auto inner = sp::schedule::detail::all_loops(l->body);
    const std::string name = l->var.name();
    sp::Schedule c = s;
    switch (rng() % 8) {
      case 0: {
        static const int factors[] = {1, 2, 3, 4, 8};
        c.split(name, factors[rng() % 5]);
        break;
      }
      case 1: {
        if (inner.empty()) continue;
        const sp::ir::ForNode* moved = inner[rng() % inner.size()];
        std::vector<std::string> band{moved->var.name(), name};
        // Half the time also the loop directly inside the moved one (after a split: k_o, j,
        // k_i), so that a split init moves into the band keeping its own inner loop
        // (schedule/reorder.hpp). Decided by a generator of its own: the other draws of a seed
        // stay as they were.
        if (band_rng() % 2)
          if (auto* below = moved->body.as<sp::ir::ForNode>()) band.push_back(below->var.name());
        c.reorder(band);
        break;
      }
      case 2:
        if (inner.empty()) continue;
        c.fuse(name, inner.front()->var.name());
        break;
      case 3: c.parallel(name); break;
      case 4: c.vectorize(name); break;
      case 5: {  // a written buffer accumulated in a local for one iteration of the loop
        const std::vector<std::string> written = buffer_names(completed, true);
        if (written.empty()) continue;
        c.cache_write(name, written[rng() % written.size()]);
        break;
      }
      case 6: {  // partial sums in registers (refused unless the loop sums into one element)
        std::vector<const sp::ir::ForNode*> sums;  // a reduction loop, so that it is often kept
        for (auto* r : loops)
          if (r->iter_kind == sp::ir::IterKind::reduction) sums.push_back(r);
        if (sums.empty()) continue;
        const std::string sum = sums[rng() % sums.size()]->var.name();
        static const int lanes[] = {2, 3, 4, 8};
        c.rfactor(sum, lanes[rng() % 4]);
        if (rng() % 2) {
          if (rng() % 2) c.vectorize(sum + "_lane");
          else c.unroll(sum + "_lane");
        }
        break;
      }
      default: c.unroll(name); break;
    }
    if (accept(c)) ++kept;
  }
  return s;
}

// A random schedule of one kernel, on a CPU engine (check_scheduled).
struct ScheduledRun {
  sp::Schedule schedule;  // empty: none
  sp::ir::Function loops;  // the scheduled stage III, printed on a failure
  std::string engine;
};

// k under `run`'s schedule with 1 and 3 pool threads on its current inputs, against `ref`;
// false (and counted, printed) on a disagreement.
bool run_scheduled(RandomKernel& k, const sp::ir::Function& completed, const ScheduledRun& run,
                   std::map<std::string, std::unique_ptr<sp::runtime::Runtime>>& runtimes, const Reference& ref,
                   const std::string& inputs, std::uint64_t ks, Stats& st) {
  std::unique_ptr<sp::runtime::CompiledKernel> ck;
  for (int threads : {1, 3}) {
    const std::string name = run.engine + " scheduled" + inputs + " " + std::to_string(threads) + "t";
    ++st.runs[name];
    std::string what;
    try {
      if (!ck) ck = std::make_unique<sp::runtime::CompiledKernel>(completed, *runtimes.at(run.engine), run.schedule);
      runtimes.at(run.engine)->pool().set_num_threads(threads);
      ck->call(k.args());
      what = compare(k, ref.exact, ref.outputs, outputs(k));
    } catch (const std::exception& ex) {
      what = std::string("threw: ") + ex.what();
    }
    if (what.empty()) continue;
    ++st.failures;
    std::cout << "FAIL seed " << ks << " engine " << name << " under the schedule " << run.schedule.to_string()
              << ": " << what << "\n" << describe(k, &completed) << "--- the scheduled loops:\n"
              << sp::ir::to_string(run.loops) << "\n";
    return false;
  }
  return true;
}

// k (completed, not assembling) under a random user schedule (random_schedule) on the first
// CPU engine, with 1 and 3 pool threads, on the inputs `ref` was computed on (check_large
// runs the returned schedule on the large inputs too): a schedule may re-associate
// reductions and nothing else (docs/language.md §4.3), so it agrees with the interpreter as
// the default schedule does. Returns the schedule when it agreed, else an empty one.
ScheduledRun check_scheduled(RandomKernel& k, const sp::ir::Function& completed, std::uint64_t ks,
                             const std::vector<std::string>& engines,
                             std::map<std::string, std::unique_ptr<sp::runtime::Runtime>>& runtimes,
                             const Reference& ref, Stats& st) {
  ScheduledRun run;
  if (k.assembled >= 0) return run;  // an assembling kernel takes no user schedule (kernel.hpp)
  auto e = std::find_if(engines.begin(), engines.end(), [](const std::string& x) { return x != "cuda"; });
  if (e == engines.end()) return run;
  run.engine = *e;
  try {
    run.schedule = random_schedule(completed, ks * 13 + 3, st, run.loops);
  } catch (const std::exception& ex) {
    ++st.failures;
    std::cout << "FAIL seed " << ks << ": building a random schedule threw: " << ex.what() << "\n"
              << describe(k, &completed);
    return {};
  }
  if (run.schedule.empty()) return run;
  ++st.scheduled;
  if (!run_scheduled(k, completed, run, runtimes, ref, "", ks, st)) return {};
  return run;
}

// The loops of `completed` lowered for CUDA under the user schedule `s` (as
// CompiledCudaKernel lowers them) after s's steps and the GPU launch check; throws the
// UserError of a step that does not apply (an empty schedule: the unscheduled loops in written order).
sp::ir::Function gpu_loops(const sp::ir::Function& completed, const sp::Schedule& s) {
  sp::driver::PipelineOptions o;
  o.context.kernel = completed.name;
  o.context.schedule = s;
  o.context.keep_loop_order = true;  // as under any schedule with loop steps
  auto prepared = sp::driver::lower_for_cuda(completed, o);
  if (!s.has_loop_steps()) return prepared.unscheduled;
  return sp::schedule::apply_user_schedule(prepared.unscheduled, s, sp::schedule::ScheduleTarget::gpu);
}

// The names of the outermost loops of the launches of `f` (each top-level loop nest is one
// launch); empty when a top-level statement is not a loop (no GPU schedule can launch it).
struct LaunchLoop {
  std::string name;
  bool reduction = false;  // its iterations update the same elements: bound only when atomic
};
std::vector<LaunchLoop> launch_loops(const sp::ir::Function& f) {
  std::vector<LaunchLoop> names;
  bool ok = true;
  std::function<void(const sp::ir::Stmt&)> walk = [&](const sp::ir::Stmt& st) {
    if (!st.defined()) return;
    if (auto* b = st.as<sp::ir::BlockNode>(); b && b->allocs.empty()) return walk(b->body);
    if (auto* q = st.as<sp::ir::SeqNode>()) {
      for (auto& c : q->stmts) walk(c);
      return;
    }
    sp::ir::Stmt root = st;
    while (auto* l = root.as<sp::ir::LetStmtNode>()) root = l->body;
    if (auto* top = root.as<sp::ir::ForNode>()) {
      const bool reduction = top->iter_kind == sp::ir::IterKind::reduction;
      auto same = [&](const LaunchLoop& l) { return l.name == top->var.name(); };
      if (auto it = std::find_if(names.begin(), names.end(), same); it != names.end()) it->reduction |= reduction;
      else names.push_back({top->var.name(), reduction});
    } else {
      ok = false;
    }
  };
  walk(f.body);
  return ok ? names : std::vector<LaunchLoop>{};
}

// A random GPU schedule for `completed` (docs/schedules.md, target GPU): every launch's
// outermost loop bound to blockIdx.x — split first with its inner part bound to threadIdx.x,
// or made atomic when it reduces — then up to four of split (the inner part bound to a
// threadIdx), bind to threadIdx, unroll, vectorize, atomic, rfactor (warp lanes), cache_write
// and cache_read (a tile of an input staged in shared memory by a thread loop), each kept
// when apply_user_schedule accepts it. Empty when no launch binding is accepted.
sp::Schedule random_gpu_schedule(const sp::ir::Function& completed, std::uint64_t seed, Stats& st,
                                 sp::ir::Function& scheduled) {
  std::mt19937_64 rng(seed);
  const sp::ir::Function written = gpu_loops(completed, sp::Schedule());
  const std::vector<LaunchLoop> launches = launch_loops(written);
  sp::Schedule s;
  auto fits = [&](const sp::Schedule& c) {
    try {
      scheduled = gpu_loops(completed, c);
      return true;
    } catch (const sp::UserError& e) {
      ++st.gpu_refused;
      std::string m = e.what();
      m = m.substr(0, m.find('\n'));
      if (auto at = m.find("): "); at != std::string::npos) m = m.substr(at + 3);  // after the step
      ++st.gpu_refusals[m.substr(0, 110)];
      return false;
    } catch (const std::exception& ex) {  // anything else is a bug: say which schedule hit it
      throw std::runtime_error(std::string(ex.what()) + " (under the candidate GPU schedule " + c.to_string() + ")");
    }
  };
  // The launches: each nest bound whole to blocks or split into blocks and threads, made
  // atomic when its outer loop reduces (half the time also when it does not: refused); the
  // first accepted draw wins.
  bool launched = false;
  for (int attempt = 0; attempt < 6 && !launched && !launches.empty(); ++attempt) {
    sp::Schedule c;
    for (const auto& launch : launches) {
      const std::string& l = launch.name;
      const int how = static_cast<int>(rng() % 2) + (launch.reduction || (attempt == 0 && rng() % 4 == 0) ? 2 : 0);
      if (how >= 2) c.atomic(l);
      if (how % 2) {
        static const int factors[] = {1, 3, 32, 64};
        c.split(l, factors[rng() % 4]).bind(l + "_o", "blockIdx.x").bind(l + "_i", "threadIdx.x");
      } else {
        c.bind(l, "blockIdx.x");
      }
    }
    launched = fits(c);
    if (launched) s = c;
  }
  if (!launched) {
    ++st.gpu_unlaunchable;
    return {};
  }
  for (auto& step : s.steps()) ++st.gpu_schedule_kept[sp::Schedule::op_name(step.op)];
  const int wanted = static_cast<int>(rng() % 5);
  int kept = 0;
  static const char* const threads[] = {"threadIdx.x", "threadIdx.y", "threadIdx.z"};
  for (int attempt = 0; attempt < 12 && kept < wanted; ++attempt) {
    auto loops = sp::schedule::detail::all_loops(scheduled.body);
    std::vector<const sp::ir::ForNode*> free, bound_threads, sums;
    for (auto* l : loops) {
      if (l->for_kind == sp::ir::ForKind::serial) free.push_back(l);
      if (l->for_kind >= sp::ir::ForKind::gpu_thread_x && l->for_kind <= sp::ir::ForKind::gpu_thread_z)
        bound_threads.push_back(l);
      if (l->for_kind == sp::ir::ForKind::serial && l->iter_kind == sp::ir::IterKind::reduction) sums.push_back(l);
    }
    if (free.empty()) break;
    const std::string name = free[rng() % free.size()]->var.name();
    sp::Schedule c = s;
    switch (rng() % 8) {
      case 0: {
        static const int factors[] = {2, 4, 32};
        c.split(name, factors[rng() % 3]).bind(name + "_i", threads[rng() % 3]);
        break;
      }
      case 1: c.bind(name, threads[rng() % 3]); break;
      case 2: c.unroll(name); break;
      case 3: c.vectorize(name); break;
      case 4: c.atomic(name).bind(name, threads[rng() % 3]); break;
      case 5: {
        if (sums.empty()) continue;
        static const int lanes[] = {2, 4, 8, 32};
        c.rfactor(sums[rng() % sums.size()]->var.name(), lanes[rng() % 4]);
        break;
      }
      case 6: {
        const std::vector<std::string> out = buffer_names(completed, true);
        if (out.empty()) continue;
        c.cache_write(name, out[rng() % out.size()]);
        break;
      }
      default: {
        const std::vector<std::string> in = buffer_names(completed, false);
        if (in.empty() || bound_threads.empty()) continue;
        static const std::int64_t tiles[] = {1, 4, 32};
        c.cache_read(name, {in[rng() % in.size()]}, bound_threads[rng() % bound_threads.size()]->var.name(),
                     tiles[rng() % 3]);
        break;
      }
    }
    if (!fits(c)) continue;
    for (std::size_t q = s.steps().size(); q < c.steps().size(); ++q)
      ++st.gpu_schedule_kept[sp::Schedule::op_name(c.steps()[q].op)];
    s = c;
    ++kept;
  }
  return s;  // `scheduled` holds s's loops: fits() sets it only when a candidate is accepted
}

// k (completed, not assembling) under a random GPU schedule (random_gpu_schedule), through
// NVRTC and in the CUDA emulator (on the GPU when there is one), against the interpreter's
// `ref` on k's current inputs; false (and counted, printed) on a disagreement.
bool check_gpu_scheduled(RandomKernel& k, const sp::ir::Function& completed, std::uint64_t ks, const Reference& ref,
                         Stats& st) {
  if (k.assembled >= 0) return true;
  sp::ir::Function loops;
  sp::Schedule schedule;
  std::string what;
  try {
    schedule = random_gpu_schedule(completed, ks * 17 + 5, st, loops);
    if (schedule.empty()) return true;
    ++st.gpu_scheduled;
    ++st.runs[label("cuda") + " scheduled"];
    spindle::test::run_cuda_build(completed, k.args(), &nvrtc, nullptr, &schedule);
    what = compare(k, ref.exact, ref.outputs, outputs(k));
  } catch (const std::exception& ex) {
    what = std::string("threw: ") + ex.what();
  }
  if (what.empty()) return true;
  ++st.failures;
  std::cout << "FAIL seed " << ks << " engine " << label("cuda") << " under the GPU schedule " << schedule.to_string()
            << ": " << what << "\n" << describe(k, &completed) << "--- the scheduled loops:\n"
            << sp::ir::to_string(loops) << "\n";
  return false;
}

// Gives k inputs of thousands of rows (make_large_data), scaled down until no buffer holds
// more than 4M values and the interpreter needs at most 2M steps, and the interpreter's result on them; false when it is undefined
// there or over budget even at the smallest scale.
bool large_reference(RandomKernel& k, std::uint64_t ks, Reference& ref) {
  for (double scale : {1.0, 0.5, 0.25, 0.1, 0.03}) {
    if (!spindle::test::make_large_data(k, ks * 7 + 1, scale)) continue;  // a buffer too big at this scale
    try {
      ref = reference(k, k.function, 2'000'000);
      return true;
    } catch (const spindle::test::InterpreterError& e) {
      if (std::string(e.what()).find("budget") == std::string::npos) return false;  // undefined on these inputs
    }
  }
  return false;
}

// The same kernel on inputs of thousands of rows (make_large_data), on the CPU engines with
// 1 and 3 pool threads and in the CUDA emulator: parallel loops really split, so lost
// updates and other races show. Inputs are scaled down until the interpreter needs at most
// 2M steps (statements plus iteration points, see reference_interpreter.hpp).
void check_large(RandomKernel k, const sp::ir::Function& completed, std::uint64_t ks, const std::vector<std::string>& engines,
                 std::map<std::string, std::unique_ptr<sp::runtime::Runtime>>& runtimes, Stats& st,
                 const ScheduledRun& scheduled) {
  Reference ref;
  if (!large_reference(k, ks, ref)) return;
  ++st.large;
  bool shrunk = false;
  for (auto& e : engines)
    for (int threads : e == "cuda" ? std::vector<int>{1} : std::vector<int>{1, 3}) {
      if (e == "cuda" && k.assembled >= 0) continue;  // no CUDA build (checked on the small inputs)
      if (e != "cuda") runtimes.at(e)->pool().set_num_threads(threads);
      std::string what = run_engine(k, completed, e, runtimes, ref);
      const std::string name = e == "cuda" ? label(e) + " large" : e + " large " + std::to_string(threads) + "t";
      ++st.runs[name];
      if (!what.empty()) {
        ++st.failures;
        std::cout << "FAIL seed " << ks << " engine " << name << ": " << what << "\n" << describe(k, &completed);
        if (!shrunk) {  // once per kernel, on these inputs and this thread count
          shrunk = true;
          sp::ir::Function small = shrink(k, e, runtimes);
          std::cout << "--- shrunk (on the large inputs above) to (still fails: " << check(k, small, e, runtimes)
                    << "):\n" << sp::ir::to_string(small) << "\n" << explain_if_asked(k, small, e, runtimes);
        }
      }
    }
  if (!scheduled.schedule.empty()) run_scheduled(k, completed, scheduled, runtimes, ref, " large", ks, st);
  // Merges see fibers of several entries only here (the small inputs' are mostly 0-2 long).
  if (iterates_merge(completed)) check_unsorted(k, completed, ks + 1, engines, runtimes, st, /*large=*/true);
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t seed = 1;
  long count = 500;
  double seconds = 0;
  bool verbose = false, large = true, schedules = true;
  long large_every = 1;
  long print = -1;
  std::string kind = "all";
  long first = 0;  // index of the first kernel of the batch (to rerun one: --first N --count 1)
  std::vector<std::string> engines{"orc", "system", "cuda"};
  for (int a = 1; a < argc; ++a) {
    std::string s = argv[a];
    auto next = [&]() -> std::string {
      if (a + 1 >= argc) {
        std::fprintf(stderr, "missing value after %s\n", s.c_str());
        std::exit(2);
      }
      return argv[++a];
    };
    if (s == "--seed") seed = std::stoull(next());
    else if (s == "--count") count = std::stol(next());
    else if (s == "--seconds") seconds = std::stod(next());
    else if (s == "--verbose") verbose = true;
    else if (s == "--no-large") large = false;
    else if (s == "--no-schedules") schedules = false;
    else if (s == "--large-every") large_every = std::max(1L, std::stol(next()));
    else if (s == "--print") print = std::stol(next());
    else if (s == "--first") first = std::stol(next());
    else if (s == "--kind") kind = next();
    else if (s == "--engines") {
      engines.clear();
      std::stringstream ss(next());
      for (std::string e; std::getline(ss, e, ',');) engines.push_back(e);
    } else {
      std::fprintf(stderr, "usage: spindle-kernel-fuzz [--seed S] [--count N] [--seconds T] [--engines orc,system,cuda] [--verbose] [--print SEED] [--first N] [--no-large] [--large-every N] [--no-schedules] [--kind all|assembled|scattered|merge]\n");
      return 2;
    }
  }
  if (kind != "all" && kind != "assembled" && kind != "scattered" && kind != "merge") {
    std::fprintf(stderr, "--kind: all, assembled, scattered or merge, not '%s'\n", kind.c_str());
    return 2;
  }
  if (print >= 0) {
    RandomKernel k = spindle::test::generate_kernel(static_cast<std::uint64_t>(print));
    std::cout << describe(k, nullptr);
    return 0;
  }
#ifndef SPINDLE_WITH_ORC
  for (auto it = engines.begin(); it != engines.end();)
    it = *it == "orc" ? engines.erase(it) : it + 1;
#endif

  std::map<std::string, std::unique_ptr<sp::runtime::Runtime>> runtimes;
  for (auto& e : engines) {
    if (e == "cuda") continue;
    sp::Options o = sp::Options::from_env();
    o.engine = e;
    o.disk_cache = false;
    runtimes[e] = std::make_unique<sp::runtime::Runtime>(o);
  }

  Stats st;
  auto start = std::chrono::steady_clock::now();
  for (long n = first; count == 0 || n < first + count; ++n) {
    if (seconds > 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > seconds) break;
    const std::uint64_t ks = seed * 1000003ull + static_cast<std::uint64_t>(n);
    // Each kernel's wall time (generation to the last engine), for the slowest-kernels line.
    struct Timed {
      std::vector<std::pair<double, std::uint64_t>>& into;
      std::uint64_t seed;
      std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
      ~Timed() { into.emplace_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), seed); }
    } timed{st.times, ks};
    RandomKernel k = spindle::test::generate_kernel(ks);
    if ((kind == "assembled" && k.assembled < 0) ||
        (kind == "scattered" && (k.assembled < 0 || !sp::lower::rows_scattered(k.function))) ||
        (kind == "merge" && !iterates_merge(k.function)))
      continue;
    ++st.generated;
    if (k.assembled >= 0) ++st.assembled_generated;
    if (verbose) std::cout << "seed " << ks << "..." << std::endl;
    // The same seed makes the same kernel whatever the heap looks like (a generator that
    // orders anything by address would make a failing seed impossible to replay): a second
    // generation, while the first one's nodes still hold their addresses, prints the same.
    if (sp::ir::to_string(k.function) != sp::ir::to_string(spindle::test::generate_kernel(ks).function)) {
      ++st.failures;
      std::cout << "FAIL seed " << ks << ": the generator made a different kernel from the same seed\n";
      continue;
    }
    sp::ir::Function completed;
    try {
      completed = front_end(k.function);
    } catch (const sp::UserError& e) {
      ++st.rejected;
      if (k.assembled >= 0) ++st.assembled_rejected;
      std::string m = e.what();
      std::string key = m.substr(m.find(':') + 1, 40);
      st.first_reject.emplace(key, m);
      if (verbose) std::cout << "seed " << ks << ": rejected: " << m << "\n";
      continue;
    } catch (const std::exception& e) {
      ++st.failures;
      std::cout << "FAIL seed " << ks << ": front end threw a non-UserError: " << e.what() << "\n" << describe(k, nullptr);
      continue;
    }
    Reference ref;
    try {
      ref = reference(k, k.function);
    } catch (const spindle::test::InterpreterError& e) {
      std::string m = e.what();
      if (m.find("budget") != std::string::npos || m.find("undefined:") != std::string::npos) {
        ++st.skipped;
        continue;
      }
      ++st.failures;
      std::cout << "FAIL seed " << ks << ": interpreter: " << m << "\n" << describe(k, &completed);
      continue;
    }
    ++st.compared;
    if (has_scattered_write(completed, false)) ++st.indirect;
    if (has_scattered_write(completed, true)) ++st.computed;
    if (indexes_by_shared_coordinates(completed)) ++st.shared;
    if (iterates_sparse_root(completed)) ++st.sparse_roots;
    // An out buffer written at a sparse root's coordinates: per-element init + gap fill (§5).
    if (sp::ir::to_string(completed).find(", gaps of ") != std::string::npos) ++st.gap_fills;
    if (k.assembled >= 0) ++st.assembled;
    if (k.assembled >= 0 && sp::lower::rows_scattered(completed)) ++st.assembled_scattered;
    if (k.gathered_dot) ++st.gathered;
    if (k.assembled >= 0 && !ref.assembled.empty()) ++st.assembled_nonempty;
    if (iterates_fiber_by_coordinate(completed)) ++st.by_coordinate;
    if (iterates_merge(completed)) ++st.merges;
    if (has_conditional(completed)) ++st.conditional;
    bool row_tiles_counted = false;
    for (auto& e : engines) {
      std::string text;
      std::string what = run_engine(k, completed, e, runtimes, ref, e == "cuda" || row_tiles_counted ? nullptr : &text);
      // The CPU schedule's two-dimensional register tiles (register_tile: "x_rows" loops).
      if (e != "cuda" && !row_tiles_counted) {
        if (text.find("_rows in [") != std::string::npos) ++st.row_tiles;
        // A long reduction read one block of rows at a time (block_long_reductions).
        if (text.find("_block_rows") != std::string::npos) ++st.blocked;
        // Gathered rows prefetched ahead (prefetch_gathers: runs on the large inputs, whose
        // rows reach the version's length and have fibers longer than the distance).
        if (text.find("prefetch ") != std::string::npos) ++st.prefetched;
        // Scatters partitioned by ownership with register tiles or local sums inside the
        // tests (schedule_cpu_default, ownership_kept).
        if (text.find("spindle_block") != std::string::npos) ++st.partitioned;
        if (text.find("spindle_block") != std::string::npos &&
            (text.find("_register_tile") != std::string::npos || text.find("_accumulate") != std::string::npos))
          ++st.owned_tiles;
        row_tiles_counted = true;
      }
      ++st.runs[e == "cuda" && k.assembled >= 0 ? label(e) + " assembled" : label(e)];
      if (!what.empty()) {
        ++st.failures;
        std::cout << "FAIL seed " << ks << " engine " << label(e) << ": " << what << "\n" << describe(k, &completed);
        sp::ir::Function small = shrink(k, e, runtimes);
        std::cout << "--- shrunk to (still fails: " << check(k, small, e, runtimes) << "):\n"
                  << sp::ir::to_string(small) << "\n" << explain_if_asked(k, small, e, runtimes);
      } else if (verbose) {
        std::cout << "seed " << ks << " " << label(e) << ": ok\n";
      }
    }
    check_unsorted(k, completed, ks, engines, runtimes, st);
    check_bad_indices(k, completed, ks, engines, runtimes, st);
    ScheduledRun scheduled;
    if (schedules) scheduled = check_scheduled(k, completed, ks, engines, runtimes, ref, st);
    if (schedules && std::find(engines.begin(), engines.end(), "cuda") != engines.end())
      check_gpu_scheduled(k, completed, ks, ref, st);
    if (large && n % large_every == 0) check_large(k, completed, ks, engines, runtimes, st, scheduled);
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "spindle-kernel-fuzz: seed " << seed << ": " << st.generated << " kernels generated, " << st.rejected
            << " rejected at definition (UserError), " << st.skipped << " skipped, " << st.compared
            << " compared with the interpreter (" << st.large << " also on large inputs with 1 and 3 threads; "
            << st.indirect << " with indirect writes, " << st.computed << " with computed write indices, " << st.shared << " indexing another axis's slot by a coordinates_of iterator, " << st.sparse_roots << " iterating a root sparse axis (" << st.gap_fills << " filling only the coordinates a root does not store), "
            << st.assembled << " assembled outputs (" << st.assembled_nonempty << " non-empty, "
            << st.assembled_scattered << " at scattered rows; of " << st.assembled_generated
            << " generated, " << st.assembled_rejected << " rejected), " << st.by_coordinate << " fibers by coordinate, " << st.merges
            << " co-iterating (union_of / intersection_of), " << st.conditional << " with conditional writes, " << st.row_tiles
            << " run with two-dimensional register tiles, " << st.partitioned
            << " scattering one block per thread (ownership), " << st.owned_tiles
            << " of them with tiles or local sums inside the ownership tests), " << st.blocked
            << " reading a long reduction block by block, " << st.gathered << " starting with a gathered dot, " << st.prefetched << " prefetching gathered rows); " << st.unsorted
            << " also with unsorted fibers (" << st.unsorted_repeated << " repeating a coordinate), " << st.unsorted_large << " co-iterating ones on large unsorted inputs ("
            << st.unsorted_refused << " engine runs refused them: not sorted); " << st.bad_indices
            << " with an indirect write index outside its extent (every engine refused);";
  std::cout << " " << st.scheduled << " also under a random user schedule (steps kept:";
  for (auto& [op, n] : st.schedule_kept) std::cout << " " << op << " " << n;
  std::cout << "; " << st.schedule_refused << " steps refused); " << st.gpu_scheduled
            << " under a random GPU schedule (steps kept:";
  for (auto& [op, n] : st.gpu_schedule_kept) std::cout << " " << op << " " << n;
  std::cout << "; " << st.gpu_refused << " candidates refused, " << st.gpu_unlaunchable
            << " kernels with no accepted launch binding);";
  for (auto& [e, n] : st.runs) std::cout << " " << e << " " << n << " runs;";
  std::cout << " " << nvrtc.compiled << " CUDA modules compiled to sm_80 cubins by NVRTC; " << st.failures
            << " disagreements; " << secs << " s\n";
  // Where the time went (CI sizes its batches by it): the five slowest kernels.
  std::sort(st.times.rbegin(), st.times.rend());
  std::cout << "spindle-kernel-fuzz: slowest kernels:";
  for (std::size_t i = 0; i < st.times.size() && i < 5; ++i)
    std::cout << " " << st.times[i].second << " (" << static_cast<int>(st.times[i].first * 1000) << " ms)";
  std::cout << "\n";
  if (verbose) {
    for (auto& [k, m] : st.first_reject) std::cout << "  rejection kind: " << m << "\n";
    std::vector<std::pair<long, std::string>> why;
    for (auto& [m, n] : st.gpu_refusals) why.emplace_back(n, m);
    std::sort(why.rbegin(), why.rend());
    for (std::size_t q = 0; q < why.size() && q < 12; ++q)
      std::cout << "  GPU schedule refused " << why[q].first << "x: " << why[q].second << "\n";
  }
  return st.failures ? 1 : 0;
}

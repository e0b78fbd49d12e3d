// The harness of a batch of generated C++ kernels (spindle-frontend-fuzz): the registry the
// generated translation units fill (frontend_fuzz_registry.hpp) and main(). It is built
// once as a static library and linked into every batch program, which also links the
// installed Spindle package.
//
// For each registered kernel (seed, shrink steps):
//   1. the model is regenerated (tests/support/random_frontend_kernel.hpp) and its expected
//      stage-I IR built from it, independently of the front end;
//   2. the kernel is defined through the public API (the generated define()): a UserError is
//      a rejection, any other exception a failure;
//   3. for each input size (small, edge, large) the reference interpreter runs the expected
//      IR (and, as a cross-check of the front end alone, the IR the front end recorded);
//   4. the kernel is called through its public call operator on every engine — ORC and the
//      system compiler each with 1 and several pool threads, the CUDA emulator (its source
//      also compiled by NVRTC) — and its out/inout arguments compared with the interpreter's
//      (bit-exact for exact kernels, else relative 1e-3 / 1e-9); inputs must be unchanged.
//      An assembled output (docs/language.md §4.6) is the call's Csr: its pattern must be the
//      interpreter's exactly, its values as above (or within the interpreter's error bound);
//      on the CUDA engine the GPU steps (cuda::assemble_on) build it, through the emulator.
//   5. a kernel with an indirect write runs once more with one index value moved outside the
//      axis it indexes (check_bad_index): the interpreter must say "call error", every engine
//      raise a FormatError naming the value, with every argument as it was.
// One line per kernel on stdout:
//   FEFUZZ <seed> <steps or -> <ok|rejected|skipped|fail> <engine or -> <message>
//
//   batch [--only SEED[:STEPS]] [--engines orc,system,cuda] [--threads 1,3] [--sizes small,edge,large]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "differential/frontend_fuzz_registry.hpp"
#include "spindle/lower/split_assembly.hpp"
#include "support/emulated_cuda_call.hpp"
#include "support/typed_bytes.hpp"
#include "support/random_frontend_kernel.hpp"
#include "support/reference_interpreter.hpp"

namespace spindle::fefuzz {

namespace {

struct Entry {
  std::uint64_t seed;
  std::string steps;
  DefineFn define;
};

std::vector<Entry>& registry() {
  static std::vector<Entry> entries;
  return entries;
}

}  // namespace

Registration::Registration(std::uint64_t seed, const char* steps, DefineFn define) {
  registry().push_back({seed, steps, define});
}

}  // namespace spindle::fefuzz

namespace {

namespace fe = spindle::test::fe;
using spindle::test::RandomKernel;

std::vector<int> parse_steps(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');)
    if (!x.empty()) out.push_back(std::stoi(x));
  return out;
}

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  if (s.size() > 600) s = s.substr(0, 600) + "...";
  return s;
}

std::vector<std::vector<double>> values(RandomKernel& k) {
  std::vector<std::vector<double>> out;
  for (auto& b : k.buffers) {
    std::vector<double> v;
    for (std::int64_t q = 0; q < b.count; ++q) v.push_back(k.value_at(b, q));
    out.push_back(std::move(v));
  }
  return out;
}

// "" when `got` matches `ref` on the written buffers and the inputs are unchanged.
std::string compare(const RandomKernel& k, bool exact, const std::vector<std::vector<double>>& ref,
                    const std::vector<std::vector<double>>& got) {
  for (std::size_t b = 0; b < ref.size(); ++b) {
    const auto& buf = k.buffers[b];
    const bool input = buf.buffer->role == spindle::ir::BufferRole::input;
    const bool f32 = buf.buffer->dtype == spindle::DType::f32;
    const double tol = exact || input ? 0 : (f32 ? 1e-3 : 1e-9);
    for (std::size_t q = 0; q < ref[b].size(); ++q) {
      double r = input ? buf.initial[q] : ref[b][q], g = got[b][q];
      if (input && buf.buffer->dtype == spindle::DType::f32) r = static_cast<float>(r);
      bool same = close_enough(k, b, q, tol, r, g);
      if (!same) {
        std::ostringstream os;
        os << (input ? "input" : "buffer") << " '" << buf.buffer->name << "' element " << q << " of " << ref[b].size()
           << ": " << (input ? "was " : "interpreter ") << r << ", engine " << g;
        if (tol > 0) os << " (allowed difference " << allowed_difference(k, b, q, tol, r) << ")";
        return os.str();
      }
    }
  }
  return "";
}

using Assembled = std::vector<spindle::test::Interpreter::AssembledEntry>;

// The arrays of an assembled output that the CUDA steps built, kept as bytes of the output's
// index and value types and read back as entries.
class ErasedCsrTarget final : public spindle::runtime::AssemblyTarget {
 public:
  ErasedCsrTarget(spindle::DType index, spindle::DType value) : index_(index), value_(value) {}
  void allocate(std::int64_t nnz, const std::vector<std::int64_t>& row_ptr, void*& indices, void*& values) override {
    row_ptr_ = row_ptr;
    indices_.assign(static_cast<std::size_t>(nnz * spindle::dtype_bytes(index_)), 0);
    values_.assign(static_cast<std::size_t>(nnz * spindle::dtype_bytes(value_)), 0);
    indices = indices_.data();
    values = values_.data();
  }
  void commit() override { committed_ = true; }
  // "" when committed and every row is sorted and free of duplicates.
  std::string read(std::vector<spindle::fefuzz::CsrEntry>& out) const {
    if (!committed_) return "the call did not commit the output";
    out.clear();
    for (std::size_t r = 0; r + 1 < row_ptr_.size(); ++r)
      for (std::int64_t q = row_ptr_[r]; q < row_ptr_[r + 1]; ++q) {
        const std::int64_t col = spindle::test::load_int(indices_, index_, q);
        if (q > row_ptr_[r] && !(spindle::test::load_int(indices_, index_, q - 1) < col))
          return "row " + std::to_string(r) + " is not sorted or has a duplicate";
        const double v = spindle::is_float(value_) ? spindle::test::load_float(values_, value_, q)
                                                   : static_cast<double>(spindle::test::load_int(values_, value_, q));
        out.push_back({static_cast<std::int64_t>(r), col, v});
      }
    return "";
  }

 private:
  spindle::DType index_, value_;
  std::vector<std::int64_t> row_ptr_;
  std::vector<unsigned char> indices_, values_;
  bool committed_ = false;
};

// "" when the assembled output `got` (the call's Csr) has exactly the interpreter's pattern
// and its values: bit-exact for exact kernels, else within the interpreter's error bound or
// the usual relative tolerance (docs/language.md §4.6).
std::string compare_assembled(const Assembled& want, const std::vector<spindle::fefuzz::CsrEntry>& got, spindle::DType t,
                              bool exact) {
  const bool fl = spindle::is_float(t);
  const double tol = exact ? 0 : (t == spindle::DType::f32 ? 1e-3 : 1e-9);
  std::ostringstream os;
  for (std::size_t q = 0; q < std::max(want.size(), got.size()); ++q) {
    if (q >= want.size() || q >= got.size() || want[q].row != got[q].row || want[q].col != got[q].col) {
      os << "assembled output: " << got.size() << " entries, the interpreter " << want.size() << "; first difference at entry "
         << q << ": interpreter ";
      if (q < want.size()) os << "(" << want[q].row << ", " << want[q].col << ")";
      else os << "none";
      os << ", engine ";
      if (q < got.size()) os << "(" << got[q].row << ", " << got[q].col << ")";
      else os << "none";
      return os.str();
    }
    double r = fl ? want[q].f : static_cast<double>(want[q].i), g = got[q].value;
    if (t == spindle::DType::f32) r = static_cast<float>(r);
    if ((std::isnan(r) && std::isnan(g)) || r == g) continue;
    if (tol > 0 && std::fabs(r - g) <= std::max(tol * std::max(1.0, std::fabs(r)), want[q].error_bound)) continue;
    os << "assembled output entry (" << want[q].row << ", " << want[q].col << "): interpreter " << r << ", engine " << g;
    return os.str();
  }
  return "";
}

struct Options {
  std::string only;  // SEED[:STEPS]
  std::vector<std::string> engines{"orc", "system", "cuda"};
  std::vector<int> threads{1, 3};
  std::vector<fe::Size> sizes{fe::Size::small, fe::Size::edge, fe::Size::large};
};

struct Result {
  std::string status = "ok", engine = "-", message;
};

class Runner {
 public:
  explicit Runner(const Options& o) : o_(o) {
#ifndef SPINDLE_WITH_ORC
    o_.engines.erase(std::remove(o_.engines.begin(), o_.engines.end(), "orc"), o_.engines.end());
#endif
    for (auto& e : o_.engines) {
      if (e == "cuda") continue;
      spindle::Options opt = spindle::Options::from_env();
      opt.engine = e;
      opt.disk_cache = false;
      runtimes_[e] = std::make_unique<spindle::runtime::Runtime>(opt);
    }
    nvrtc_.ptx_only = false;
  }

  Result run(const spindle::fefuzz::Entry& entry) {
    Result res;
    fe::Kernel model;
    fe::IrBuilder::Result ir;
    try {
      model = fe::regenerate(entry.seed, parse_steps(entry.steps));
      ir = fe::IrBuilder(model).build();
    } catch (const std::exception& e) {
      return {"fail", "-", std::string("the harness could not rebuild the model: ") + e.what()};
    }
    spindle::fefuzz::Defined def;
    try {
      def = entry.define();
    } catch (const spindle::UserError& e) {
      return {"rejected", "-", e.what()};
    } catch (const std::exception& e) {
      return {"fail", "definition", std::string("defining the kernel threw a non-UserError: ") + e.what()};
    }
    // A write the generator indexed by a non-iterator (docs/language.md §4.1) must be rejected.
    if (fe::has_bad_write(model.body)) return {"fail", "definition", "accepted a write indexed by a non-iterator (rule 4.1)"};
    bool compared = false, bad_index_checked = false;
    long assembled_entries = 0;  // entries of the assembled output compared, over the sizes
    std::string over_budget;  // sizes skipped because the interpreter's budget ran out
    time_.clear();            // an earlier kernel that failed or was skipped left its times
    spindle::test::EmulatorCache emulators;  // this kernel's CUDA modules, compiled once
    for (fe::Size size : o_.sizes) {
      const std::uint64_t data_seed = entry.seed * 31 + static_cast<std::uint64_t>(size);
      RandomKernel data;
      std::vector<std::vector<double>> ref;
      Assembled ref_assembled;
      bool exact = model.exact;
      std::string why;
      auto ti = std::chrono::steady_clock::now();
      // Large inputs are scaled down until the interpreter needs at most 3M steps (statements
      // executed plus iteration points visited, so that an effect-free nest over large extents
      // is scaled down too); a size over the budget even at the smallest scale is skipped.
      for (double scale : {1.0, 0.5, 0.25, 0.1, 0.03}) {
        data = fe::make_data(model, ir, size, data_seed, scale);
        why = interpret(ir.function, data, ref, exact, size == fe::Size::large ? 3'000'000 : 20'000'000, &ref_assembled);
        if (why != "budget" || size != fe::Size::large) break;
      }
      time_["interp"] += ms_since(ti);
      if (why == "budget") over_budget += std::string(over_budget.empty() ? "" : ",") + fe::size_name(size);
      if (why == "undefined" || why == "budget") continue;
      if (!why.empty()) return {"fail", "interpreter", std::string(fe::size_name(size)) + " inputs: " + why};
      // The front end alone: the IR it recorded must compute the same.
      {
        std::vector<std::vector<double>> fe_ref;
        bool fe_exact = exact;
        Assembled fe_assembled;
        // The reference run's error bounds stay: interpret() records those of the IR it runs,
        // matched by buffer name, and the recorded IR's buffers carry the front end's names (the
        // kernel's sp::names or its defaults), not the model's, so they read 0 and the engines were held to the 1e-3 floor alone
        // (spindle-frontend-fuzz seeds 91000273000090 and 91000273000423: long float sums into
        // one element, 0.1-0.4 % apart in their last digits, flagged).
        const std::vector<std::vector<double>> bounds = data.error_bounds;
        std::string fe_why = interpret(def.stage1, data, fe_ref, fe_exact, 6'000'000, &fe_assembled);
        data.error_bounds = bounds;
        if (fe_why.empty()) {
          std::string d = compare(data, exact && fe_exact, ref, fe_ref);
          if (d.empty() && data.assembled >= 0) {
            std::vector<spindle::fefuzz::CsrEntry> as;
            for (auto& w : fe_assembled)
              as.push_back({w.row, w.col, spindle::is_float(model.T) ? w.f : static_cast<double>(w.i)});
            d = compare_assembled(ref_assembled, as, model.T, exact && fe_exact);
          }
          if (!d.empty()) return {"fail", "front-end-ir", std::string(fe::size_name(size)) + " inputs: " + d};
        } else if (fe_why != "undefined" && fe_why != "budget") {
          return {"fail", "front-end-ir", std::string(fe::size_name(size)) + " inputs: interpreting the recorded IR: " + fe_why};
        }
      }
      compared = true;
      if (data.assembled >= 0) {
        ++assembled_compared_;
        assembled_entries += static_cast<long>(ref_assembled.size());
      }
      std::string d = run_engines(def, data, ref, ref_assembled, model, exact, o_.threads, emulators, false);
      if (!d.empty()) return {"fail", d.substr(0, d.find('\t')), std::string(fe::size_name(size)) + " inputs: " + d.substr(d.find('\t') + 1)};
      // Once per kernel: on the first compared size whose inputs give the check something to
      // do (an index buffer with a value to move, a defined reference), else the next size.
      if (!bad_index_checked) {
        const long before = bad_index_checks_;
        d = check_bad_index(def, data, data_seed, emulators);
        if (!d.empty())
          return {"fail", d.substr(0, d.find('\t')), std::string(fe::size_name(size)) + " inputs, " + d.substr(d.find('\t') + 1)};
        bad_index_checked = bad_index_checks_ > before;
      }
      // The same inputs with every sparse fiber out of order (the levels say unsorted, as an
      // unsorted Csr's do): each engine agrees with the interpreter, which reads any order,
      // or refuses the call with the binder's "not sorted" FormatError (a kernel that
      // searches or merges those coordinates). Small and edge inputs, one thread count; the
      // edge inputs' fibers also repeat a coordinate (docs/language.md §7).
      if (size != fe::Size::large &&
          spindle::test::shuffle_fibers(data, data_seed * 13 + 7, /*repeat=*/size == fe::Size::edge)) {
        std::vector<std::vector<double>> uref;
        Assembled uref_assembled;
        bool uexact = model.exact;
        const std::string uwhy = interpret(ir.function, data, uref, uexact, 20'000'000, &uref_assembled);
        if (uwhy.empty()) {
          ++unsorted_compared_;
          d = run_engines(def, data, uref, uref_assembled, model, uexact, {o_.threads.back()}, emulators, true);
          if (!d.empty())
            return {"fail", d.substr(0, d.find('\t')),
                    std::string(fe::size_name(size)) + " inputs, fibers unsorted: " + d.substr(d.find('\t') + 1)};
        } else if (uwhy != "undefined" && uwhy != "budget") {
          return {"fail", "interpreter", std::string(fe::size_name(size)) + " inputs, fibers unsorted: " + uwhy};
        }
      }
    }
    if (!compared) return {"skipped", "-", "every input size was undefined or over the interpreter's budget"};
    for (auto& [k, v] : time_) res.message += k + "=" + std::to_string(static_cast<long>(v)) + "ms ";
    if (!over_budget.empty()) res.message += "skipped over the interpreter's budget: " + over_budget;
    if (fe::assembled_buffer(model) >= 0) res.message += " assembled entries compared: " + std::to_string(assembled_entries);
    time_.clear();
    return res;
  }

  // Runs the kernel on every engine (CPU engines at each of `threads`) with data's arguments
  // and compares with the interpreter's `ref`: "" when all agree, else "ENGINE\tWHAT".
  // `unsorted_ok`: a refusal by the binder's "not sorted" FormatError counts as agreement.
  std::string run_engines(const spindle::fefuzz::Defined& def, RandomKernel& data,
                          const std::vector<std::vector<double>>& ref, const Assembled& ref_assembled,
                          const fe::Kernel& model, bool exact, const std::vector<int>& thread_counts,
                          spindle::test::EmulatorCache& emulators, bool unsorted_ok) {
      int engine_index = 0;
      for (const std::string& e : o_.engines) {
        const std::vector<int> threads = e == "cuda" ? std::vector<int>{1} : thread_counts;
        ++engine_index;
        int thread_index = 0;
        for (int t : threads) {
          ++thread_index;
          std::string name = e == "cuda" ? spindle::test::cuda_engine_name() : e + std::to_string(t);
          std::string d;
          auto te = std::chrono::steady_clock::now();
          try {
            auto args = data.args();
            if (e == "cuda" && data.assembled >= 0 && spindle::lower::rows_scattered(def.stage1)) {
              // Scattered rows are assembled on the CPU only (§4.6): the CUDA build must refuse, saying so.
              const spindle::test::BufferData& out = data.buffers[static_cast<std::size_t>(data.assembled)];
              ErasedCsrTarget target(out.buffer->axes[1]->index_dtype, out.buffer->dtype);
              try {
                spindle::test::run_assembled_cuda_build(def.stage1, args, target, &nvrtc_, &emulators, 20 * 64);
                d = "the CUDA build of a kernel whose rows are scattered did not refuse it";
              } catch (const spindle::UserError& ex) {
                if (std::string(ex.what()).find("written at scattered rows") == std::string::npos) d = std::string("threw: ") + ex.what();
              }
              time_[name] += ms_since(te);
              ++runs_[unsorted_ok ? name + "-unsorted" : name];
              if (!d.empty()) return name + "\t" + d;
              continue;
            } else if (e == "cuda" && data.assembled >= 0) {
              // The GPU steps of an assembling kernel (the GPU when present, else the
              // emulator, with a scratch budget that makes rows share workers).
              const spindle::test::BufferData& out = data.buffers[static_cast<std::size_t>(data.assembled)];
              ErasedCsrTarget target(out.buffer->axes[1]->index_dtype, out.buffer->dtype);
              spindle::test::run_assembled_cuda_build(def.stage1, args, target, &nvrtc_, &emulators, 20 * 64);
              std::vector<spindle::fefuzz::CsrEntry> got;
              d = target.read(got);
              if (!d.empty()) d = "assembled output: " + d;
              else d = compare_assembled(ref_assembled, got, model.T, exact);
            } else if (e == "cuda") {
              spindle::test::run_cuda_build(def.stage1, args, &nvrtc_, &emulators);  // the GPU when present
            } else {
              auto& rt = *runtimes_.at(e);
              rt.pool().set_num_threads(t);
              spindle::fefuzz::Call call;
              call.args = args;
              // Rows left as the numeric phase gathers them (spindle::unsorted, §4.6), read back
              // ordered by column: every other CPU run of an assembled kernel (orc at 1 thread,
              // system at 3, with the default engines and thread counts).
              call.unsorted_rows = data.assembled >= 0 && (engine_index + thread_index) % 2 == 0;
              if (call.unsorted_rows) ++unsorted_rows_runs_;
              def.call(rt, call);
              if (data.assembled >= 0) {
                std::vector<spindle::fefuzz::CsrEntry> got;
                d = call.assembled ? call.assembled(got) : "the call passed no Csr for the assembled output";
                if (!d.empty()) d = "assembled output: " + d;
                else d = compare_assembled(ref_assembled, got, model.T, exact);
              }
            }
            if (d.empty()) d = compare(data, exact, ref, values(data));
          } catch (const spindle::FormatError& ex) {
            const std::string m = ex.what();
            if (unsorted_ok && m.find("has a fiber whose indices are not sorted") != std::string::npos) {
              ++unsorted_refused_;
              d.clear();
            } else {
              d = "threw: " + m;
            }
          } catch (const std::exception& ex) {
            d = std::string("threw: ") + ex.what();
          }
          time_[name] += ms_since(te);
          ++runs_[unsorted_ok ? name + "-unsorted" : name];
          if (!d.empty() && e != "cuda" && std::getenv("SPINDLE_FEFUZZ_EXPLAIN")) {
            // What the engine ran, for whoever replays a failure (--only SEED).
            try {
              std::cerr << spindle::runtime::CompiledKernel(def.stage1, *runtimes_.at(e)).explain() << "\n";
            } catch (const std::exception& ex) {
              std::cerr << "explain() threw: " << ex.what() << "\n";
            }
            for (auto& a : data.axes) {
              const auto& ad = data.data.at(a.get());
              std::cerr << "axis " << a->name << ": length " << ad.length << ", nnz_per_row " << ad.nnz_per_row
                        << ", positions " << ad.positions << ", indptr";
              for (auto v : ad.indptr) std::cerr << " " << v;
              std::cerr << ", indices";
              for (auto v : ad.indices) std::cerr << " " << v;
              std::cerr << "\n";
            }
            for (auto& b : data.buffers) {
              std::cerr << "buffer " << b.buffer->name << " (" << b.count << "):";
              for (double v : b.initial) std::cerr << " " << v;
              std::cerr << "\n";
            }
          }
          if (!d.empty()) return name + "\t" + d;
        }
      }
      return "";
  }

  // The error path of indirect writes (docs/language.md §4.1, §7): one stored value of an
  // index buffer that a write's index reads (BufferData::write_target, the axis it indexes) is
  // moved outside that axis (-1, or its extent). The interpreter must say "call error"; every
  // engine (the CPU ones at one thread count, the CUDA build) must raise a FormatError naming
  // the value, with every argument as it was. "" when all refuse so (or the kernel has no
  // such buffer), else "ENGINE\tWHAT".
  std::string check_bad_index(const spindle::fefuzz::Defined& def, RandomKernel data, std::uint64_t seed,
                              spindle::test::EmulatorCache& emulators) {
    const std::set<const spindle::ir::BufferNode*> used = spindle::test::indirect_index_buffers(data.function);
    std::vector<spindle::test::BufferData*> candidates;
    for (auto& b : data.buffers)
      if (b.write_target && b.count > 0 && used.count(b.buffer.get())) candidates.push_back(&b);
    if (candidates.empty() || data.assembled >= 0) return "";
    std::mt19937_64 rng(seed * 13 + 7);
    spindle::test::BufferData& b = *candidates[rng() % candidates.size()];
    const std::size_t q = rng() % b.initial.size();
    b.initial[q] = rng() % 2 ? -1.0 : static_cast<double>(data.data.at(b.write_target).length);
    const std::string where = "index buffer '" + b.buffer->name + "' position " + std::to_string(q) + " set to " +
                              std::to_string(static_cast<long long>(b.initial[q])) + ": ";
    std::vector<std::vector<double>> ref;
    bool exact = true;
    const std::string why = interpret(data.function, data, ref, exact);
    if (why == "undefined" || why == "budget") return "";
    if (why.find("call error") == std::string::npos)
      return "interpreter\t" + where + (why.empty() ? "the interpreter accepted the call" : "the interpreter: " + why);
    ++bad_index_checks_;
    std::vector<std::vector<double>> untouched;
    for (auto& x : data.buffers) untouched.push_back(x.initial);
    for (const std::string& e : o_.engines) {
      const std::string name = e == "cuda" ? spindle::test::cuda_engine_name() : e + std::to_string(o_.threads.front());
      std::string d;
      try {
        auto args = data.args();
        if (e == "cuda") {
          spindle::test::run_cuda_build(def.stage1, args, &nvrtc_, &emulators);
        } else {
          auto& rt = *runtimes_.at(e);
          rt.pool().set_num_threads(o_.threads.front());
          spindle::fefuzz::Call call;
          call.args = args;
          def.call(rt, call);
        }
        d = "accepted the call";
      } catch (const spindle::FormatError& ex) {
        const std::string m = ex.what();
        if (m.find("is outside [0, ") == std::string::npos) d = "did not name the bad value: " + m;
        else if (std::string c = compare(data, true, untouched, values(data)); !c.empty()) d = "wrote before refusing: " + c;
      } catch (const std::exception& ex) {
        d = std::string("threw a non-FormatError: ") + ex.what();
      }
      ++runs_[name + "-bad-index"];
      if (!d.empty()) return name + "\t" + where + d;
    }
    return "";
  }

  static double ms_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
  }

  const std::map<std::string, long>& runs() const { return runs_; }
  long assembled_compared() const { return assembled_compared_; }
  long unsorted_compared() const { return unsorted_compared_; }
  long unsorted_refused() const { return unsorted_refused_; }
  long unsorted_rows_runs() const { return unsorted_rows_runs_; }
  long cubins() const { return nvrtc_.compiled; }
  long bad_index_checks() const { return bad_index_checks_; }

 private:
  // Runs f on fresh copies of data's arguments; "" on success (ref holds every buffer's
  // values after the call), "undefined" / "budget" when the program has no defined result
  // or is too long, else the interpreter's complaint.
  static std::string interpret(const spindle::ir::Function& f, RandomKernel& data, std::vector<std::vector<double>>& ref,
                               bool& exact, long long max_steps = 20'000'000, Assembled* assembled = nullptr) {
    try {
      spindle::test::Interpreter interp(f, data.args(), max_steps);
      interp.run();
      exact = exact && !interp.float_rounded();
      ref = values(data);
      spindle::test::record_error_bounds(data, interp);
      if (assembled && data.assembled >= 0)
        for (auto& fb : f.buffers)
          if (spindle::ir::is_assembled(*fb.buffer)) *assembled = interp.assembled(fb.buffer->name);
      return "";
    } catch (const spindle::test::InterpreterError& e) {
      std::string m = e.what();
      if (m.find("budget") != std::string::npos) return "budget";
      if (m.find("undefined:") != std::string::npos) return "undefined";
      return m;
    }
  }

  Options o_;
  std::map<std::string, std::unique_ptr<spindle::runtime::Runtime>> runtimes_;
  std::map<std::string, long> runs_;
  long assembled_compared_ = 0;  // sizes of assembled kernels compared
  long unsorted_compared_ = 0;   // sizes also run with unsorted fibers
  long unsorted_refused_ = 0;    // engine runs that refused them (binder: not sorted)
  long unsorted_rows_runs_ = 0;  // CPU runs of assembled kernels called with spindle::unsorted
  long bad_index_checks_ = 0;    // kernels whose indirect writes' error path was checked
  std::map<std::string, double> time_;
  spindle::test::NvrtcCheck nvrtc_;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');)
    if (!x.empty()) out.push_back(x);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int a = 1; a < argc; ++a) {
    std::string s = argv[a];
    auto next = [&]() -> std::string {
      if (a + 1 >= argc) {
        std::fprintf(stderr, "missing value after %s\n", s.c_str());
        std::exit(2);
      }
      return argv[++a];
    };
    if (s == "--only") o.only = next();
    else if (s == "--engines") o.engines = split(next());
    else if (s == "--threads") {
      o.threads.clear();
      for (auto& t : split(next())) o.threads.push_back(std::stoi(t));
    } else if (s == "--sizes") {
      o.sizes.clear();
      for (auto& z : split(next())) o.sizes.push_back(z == "small" ? fe::Size::small : z == "edge" ? fe::Size::edge : fe::Size::large);
    } else {
      std::fprintf(stderr, "usage: batch [--only SEED[:STEPS]] [--engines orc,system,cuda] [--threads 1,3] [--sizes small,edge,large]\n");
      return 2;
    }
  }
  auto entries = spindle::fefuzz::registry();
  std::sort(entries.begin(), entries.end(), [](const auto& x, const auto& y) {
    return x.seed != y.seed ? x.seed < y.seed : x.steps < y.steps;
  });
  Runner runner(o);
  int failures = 0;
  for (const auto& e : entries) {
    const std::string id = std::to_string(e.seed) + (e.steps.empty() ? "" : ":" + e.steps);
    if (!o.only.empty() && o.only != id && o.only != std::to_string(e.seed)) continue;
    auto t0 = std::chrono::steady_clock::now();
    Result r = runner.run(e);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    failures += r.status == "fail";
    std::cout << "FEFUZZ " << e.seed << " " << (e.steps.empty() ? "-" : e.steps) << " " << r.status << " " << r.engine
              << " " << static_cast<long>(ms) << "ms " << one_line(r.message) << std::endl;
  }
  std::cout << "FEFUZZ-RUNS";
  for (auto& [e, n] : runner.runs()) std::cout << " " << e << "=" << n;
  std::cout << " unsorted-refused=" << runner.unsorted_refused() << " unsorted-rows=" << runner.unsorted_rows_runs() << " cubins=" << runner.cubins()
            << " bad-index-checks=" << runner.bad_index_checks() << std::endl;
  return failures ? 1 : 0;
}

// spindle::kernel: a C++ lambda in, a callable kernel out.
//
//   auto spmm = spindle::kernel("spmm",
//       [](spindle::in<float, I, J> a, spindle::in<float, spindle::dense<J>, K> b,
//          spindle::out<float, I, K> c, spindle::iter<I> i, spindle::iter<J> j,
//          spindle::iter<K> k) { c(i, k) += a(i, j) * b(j, k); });
//   spmm(A, X, Y);
//
// The body is recorded into stage-I IR when the kernel is defined. The first call (or
// compile()) lowers, schedules and compiles it through the runtime's kernel cache; later
// calls only check and bind their arguments. Shapes are symbolic, so one compiled kernel
// serves every input. Kernel objects are cheap to copy and share their compiled code.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <new>
#include <source_location>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "spindle/format/csr.hpp"
#include "spindle/format/dcsr.hpp"
#include "spindle/format/storage_of.hpp"
#include "spindle/frontend/define.hpp"
#include "spindle/runtime/assembled_kernel.hpp"
#include "spindle/runtime/compiled_kernel.hpp"
#include "spindle/runtime/cuda/assembled_cuda_kernel.hpp"
#include "spindle/runtime/cuda/compiled_cuda_kernel.hpp"

namespace spindle {

namespace cuda {
template <class T, class Index>
class DeviceCsr;  // runtime/cuda/device_csr.hpp: include it to pass one
template <class T, class Index>
class DeviceCsrAssembly;
}  // namespace cuda

// An assembled output whose rows may keep the order the numeric phase gathered them in (the
// order their columns were first written: SpGEMM's rows of more than 32 entries, as MKL's
// mkl_sparse_spmm and GraphBLAS's "jumbled" matrices leave them). The row sort is skipped and
// the result is marked unsorted (Csr::sorted() false): kernels that only walk its fibers
// (SpMM, SpMV, SDDMM) take it as it is; one that co-iterates or searches it raises a
// FormatError, and Csr::canonical() sorts a copy. Rows assembled in order anyway (a merge, a
// transpose) come out sorted and marked so. Call with `kernel(a, b, spindle::unsorted(c))`.
template <class T, class Index>
struct UnsortedRows {
  using value_type = T;
  Csr<T, Index>& csr;
};
template <class T, class Index>
UnsortedRows<T, Index> unsorted(Csr<T, Index>& c) {
  return {c};
}

namespace detail {

// A build of a kernel made once, on first use, by whichever thread gets there first; later
// reads take no lock.
template <class K>
class BuiltOnce {
 public:
  template <class Make>
  const K& get(std::mutex& mutex, Make&& make) {
    if (const K* ready = ready_.load(std::memory_order_acquire)) return *ready;
    std::lock_guard<std::mutex> lock(mutex);
    if (!built_) {
      built_ = make();
      ready_.store(built_.get(), std::memory_order_release);
    }
    return *built_;
  }

 private:
  std::shared_ptr<const K> built_;
  std::atomic<const K*> ready_{nullptr};
};

struct KernelState {
  ir::Function stage1;
  runtime::Runtime* runtime = nullptr;
  cuda::CudaRuntime* cuda_runtime = nullptr;
  Schedule schedule;       // the CPU build's (with_schedule); empty: the default schedule
  Schedule cuda_schedule;  // the GPU build's (with_cuda_schedule)
  std::mutex mutex;
  BuiltOnce<runtime::CompiledKernel> compiled;
  // A kernel that assembles a sparse output: its two phases (runtime/assembled_kernel.hpp).
  BuiltOnce<runtime::AssembledKernel> assembled;
  // The GPU side, built on the first call with device arguments.
  BuiltOnce<cuda::CompiledCudaKernel> cuda_compiled;
  BuiltOnce<cuda::AssembledCudaKernel> cuda_assembled;
};

// The element type an argument holds, when its type says so (value_type or Eigen's
// Scalar); void when unknown, then the check happens at call time.
template <class T>
struct arg_element {
  using type = void;
};
template <class T>
  requires requires { typename T::value_type; }
struct arg_element<T> {
  using type = typename T::value_type;
};
template <class T>
  requires(requires { typename T::Scalar; } && !requires { typename T::value_type; })
struct arg_element<T> {
  using type = typename T::Scalar;
};

template <class P, class A>
constexpr bool argument_fits() {
  using Arg = std::remove_cvref_t<A>;
  if constexpr (is_scalar_param<P>::value) {
    return std::is_arithmetic_v<Arg>;
  } else {
    using E = std::remove_const_t<typename arg_element<Arg>::type>;
    return std::is_void_v<E> || std::is_same_v<E, typename P::value_type>;
  }
}

template <class... Ps>
struct call_params;  // the lambda parameters that are call arguments (no iterators)
template <>
struct call_params<> {
  using type = std::tuple<>;
};
template <class P, class... Ps>
struct call_params<P, Ps...> {
  using rest = typename call_params<Ps...>::type;
  using type = std::conditional_t<is_iter<P>::value, rest,
                                  decltype(std::tuple_cat(std::declval<std::tuple<P>>(), std::declval<rest>()))>;
};

// The call parameter that is an assembled output (out<T, P, C> with C = assembled<P, X>).
template <class P>
struct is_assembled_param : std::false_type {};
template <class T, class... A>
struct is_assembled_param<out<T, A...>> : std::bool_constant<(AssembledAxis<A> || ...)> {};

template <class Tuple, std::size_t K = 0>
constexpr int assembled_param_index() {
  if constexpr (K == std::tuple_size_v<Tuple>)
    return -1;
  else if constexpr (is_assembled_param<std::tuple_element_t<K, Tuple>>::value)
    return static_cast<int>(K);
  else
    return assembled_param_index<Tuple, K + 1>();
}

template <class P>
struct last_axis;
template <class T, class... A>
struct last_axis<out<T, A...>> {
  using type = std::tuple_element_t<sizeof...(A) - 1, std::tuple<A...>>;
};

// An empty array about to hold n entries of at least 8 MiB: its memory reserved (mapped, not
// yet touched) and advised to the kernel as transparent huge pages, so that resize() faults in
// 2 MiB pages, not 4 KiB ones (ogbn-arxiv's SpGEMM output: 68 MB, 17 k faults per call).
template <class Vector>
void reserve_in_huge_pages(Vector& v, std::size_t n) {
  const std::size_t bytes = n * sizeof(typename Vector::value_type);
  if (!v.empty() || bytes < (std::size_t{8} << 20)) return;
  v.reserve(n);
  runtime::advise_huge_pages(v.data(), bytes);
}

// Sizes an assembled output's arrays; memory that cannot be had is a ResourceError naming the
// output's entries and bytes (the caller's output is untouched).
template <class... Vectors>
void allocate_assembled(std::string_view what, std::int64_t nnz, Vectors&... arrays) {
  try {
    (reserve_in_huge_pages(arrays, static_cast<std::size_t>(nnz)), ...);
    (arrays.resize(static_cast<std::size_t>(nnz)), ...);
  } catch (const std::bad_alloc&) {
    const double bytes = static_cast<double>(nnz) * static_cast<double>((sizeof(typename Vectors::value_type) + ...));
    throw ResourceError(message("the assembled ", what, " has ", nnz, " entries; cannot allocate their ",
                                bytes / 1e9, " GB"));
  }
}

// Keeps the first nnz entries of arrays sized for an upper bound (AssemblyTarget::shrink); a
// bound that overshot by more than a quarter gives its memory back (a copy of the entries).
template <class... Vectors>
void shrink_assembled(std::int64_t nnz, Vectors&... arrays) {
  const auto n = static_cast<std::size_t>(nnz);
  ((arrays.resize(n), arrays.capacity() - n > n / 4 ? arrays.shrink_to_fit() : void()), ...);
}

// Receives an assembled output's arrays and hands them to the caller's Csr when the call
// succeeded (the Csr is untouched before). `take_unsorted`: the caller passed
// spindle::unsorted(csr), so rows gathered from the workspace keep their order.
template <class T, class Index>
class CsrAssembly final : public runtime::AssemblyTarget {
 public:
  explicit CsrAssembly(Csr<T, Index>& out, bool take_unsorted = false) : out_(out), take_unsorted_(take_unsorted) {}
  void allocate(std::int64_t nnz, const std::vector<std::int64_t>& row_ptr, void*& indices, void*& values) override {
    indptr_.resize(row_ptr.size());
    for (std::size_t r = 0; r < row_ptr.size(); ++r) indptr_[r] = static_cast<Index>(row_ptr[r]);
    allocate_assembled("Csr", nnz, indices_, values_);
    indices = indices_.data();
    values = values_.data();
  }
  bool shrink(std::int64_t nnz, const std::vector<std::int64_t>& row_ptr) override {
    for (std::size_t r = 0; r < row_ptr.size(); ++r) indptr_[r] = static_cast<Index>(row_ptr[r]);
    shrink_assembled(nnz, indices_, values_);
    return true;
  }
  bool leave_rows_unsorted() override { return unsorted_ = take_unsorted_; }
  void commit() override {
    out_ = Csr<T, Index>::from_assembly(AssemblyToken{}, out_.rows(), out_.cols(), std::move(indptr_),
                                        std::move(indices_), std::move(values_), out_.name(), !unsorted_);
  }

 private:
  Csr<T, Index>& out_;
  bool take_unsorted_ = false, unsorted_ = false;
  std::vector<Index> indptr_, indices_;
  std::vector<T> values_;
};

// The same for a Dcsr output: the assembled CSR with its empty rows dropped (only the rows
// that got entries are stored). The Dcsr constructor validates what it is given.
template <class T, class Index>
class DcsrAssembly final : public runtime::AssemblyTarget {
 public:
  explicit DcsrAssembly(Dcsr<T, Index>& out) : out_(out) {}
  void allocate(std::int64_t nnz, const std::vector<std::int64_t>& row_ptr, void*& indices, void*& values) override {
    row_ptr_ = row_ptr;
    allocate_assembled("Dcsr", nnz, indices_, values_);
    indices = indices_.data();
    values = values_.data();
  }
  bool shrink(std::int64_t nnz, const std::vector<std::int64_t>& row_ptr) override {
    row_ptr_ = row_ptr;
    shrink_assembled(nnz, indices_, values_);
    return true;
  }
  void commit() override {
    std::vector<Index> ids, ptr{0};
    for (std::size_t r = 0; r + 1 < row_ptr_.size(); ++r)
      if (row_ptr_[r + 1] > row_ptr_[r]) {
        ids.push_back(static_cast<Index>(r));
        ptr.push_back(static_cast<Index>(row_ptr_[r + 1]));
      }
    out_ = Dcsr<T, Index>(out_.rows(), out_.cols(), std::move(ids), std::move(ptr), std::move(indices_),
                          std::move(values_), out_.name());
  }

 private:
  Dcsr<T, Index>& out_;
  std::vector<std::int64_t> row_ptr_;
  std::vector<Index> indices_;
  std::vector<T> values_;
};

template <class A>
struct is_unsorted_rows : std::false_type {};
template <class T, class Index>
struct is_unsorted_rows<UnsortedRows<T, Index>> : std::true_type {};

template <class A>
runtime::CallArg make_call_arg(A&& a) {
  runtime::CallArg c;
  using Arg = std::remove_cvref_t<A>;
  if constexpr (is_unsorted_rows<Arg>::value) {
    c.view = storage_of(a.csr);
  } else if constexpr (std::is_arithmetic_v<Arg>) {
    c.is_scalar = true;
    c.scalar_dtype = std::is_floating_point_v<Arg> ? DType::f64 : DType::i64;
    c.scalar = static_cast<double>(a);
    c.scalar_int = static_cast<std::int64_t>(a);
  } else {
    c.view = storage_of(std::forward<A>(a));
  }
  return c;
}

}  // namespace detail

template <class... Params>
class Kernel {
  using CallParams = typename detail::call_params<Params...>::type;

 public:
  static constexpr std::size_t arity = std::tuple_size_v<CallParams>;

  explicit Kernel(ir::Function stage1) : state_(std::make_shared<detail::KernelState>()) {
    state_->stage1 = std::move(stage1);
  }

  // The call argument that is an assembled output (docs/language.md §4.6), or -1.
  static constexpr int assembled_arg = detail::assembled_param_index<CallParams>();

  template <class... Args>
  void operator()(Args&&... args) const {
    static_assert(sizeof...(Args) == arity,
                  "spindle: wrong number of kernel arguments (one per in/out/inout/param parameter of the "
                  "kernel lambda, in order)");
    check_types<0, Args...>();
    std::vector<runtime::CallArg> call_args;
    call_args.reserve(arity);
    (call_args.push_back(detail::make_call_arg(std::forward<Args>(args))), ...);
    if constexpr (assembled_arg >= 0) {
      using P = std::tuple_element_t<assembled_arg, CallParams>;
      using T = typename P::value_type;
      using Index = typename detail::last_axis<P>::type::index_type;
      using Arg = std::tuple_element_t<assembled_arg, std::tuple<Args...>>;
      constexpr bool unsorted = std::is_same_v<std::remove_cvref_t<Arg>, UnsortedRows<T, Index>>;
      static_assert(std::is_same_v<Arg, Csr<T, Index>&> || std::is_same_v<Arg, Dcsr<T, Index>&> ||
                        std::is_same_v<Arg, cuda::DeviceCsr<T, Index>&> || unsorted,
                    "spindle: the assembled output of a kernel (out<T, P, C> with C = assembled<P, X, Index>) "
                    "takes a non-const Csr<T, Index>& or Dcsr<T, Index>& (or DeviceCsr<T, Index>& on the GPU) "
                    "of the output's shape, or spindle::unsorted(csr); the call replaces its pattern");
      auto& c = std::get<assembled_arg>(std::forward_as_tuple(args...));
      if constexpr (unsorted) {
        detail::CsrAssembly<T, Index> target(c.csr, /*take_unsorted=*/true);
        compile_assembled().call(call_args, target);
      } else if constexpr (std::is_same_v<Arg, Csr<T, Index>&>) {
        detail::CsrAssembly<T, Index> target(c);
        compile_assembled().call(call_args, target);
      } else if constexpr (std::is_same_v<Arg, Dcsr<T, Index>&>) {
        detail::DcsrAssembly<T, Index> target(c);
        compile_assembled().call(call_args, target);
      } else {
        const cuda::AssembledCudaKernel& k = compile_assembled_cuda();
        cuda::DeviceCsrAssembly<T, Index> target(c, k.context());
        k.call(call_args, target);
      }
      return;
    }
    // Device arguments (DeviceTensor, DeviceCsr) run the CUDA build of the same definition.
    bool device = false;
    for (auto& a : call_args) device = device || (!a.is_scalar && a.view.on_device);
    if (device)
      compile_cuda().call(call_args);
    else
      compile().call(call_args);
  }

  // Lowers for the GPU now (a call with device arguments does this on first use); schedule
  // variants compile on the first call that needs them. Needs no GPU.
  const cuda::CompiledCudaKernel& compile_cuda() const {
    return state_->cuda_compiled.get(state_->mutex, [&] {
      return std::make_shared<const cuda::CompiledCudaKernel>(state_->stage1, cuda_runtime(), state_->cuda_schedule);
    });
  }

  // A kernel that assembles a sparse output: both phases, lowered and compiled now.
  const runtime::AssembledKernel& compile_assembled() const {
    static_assert(assembled_arg >= 0, "spindle: compile_assembled(): this kernel has no assembled output");
    return state_->assembled.get(state_->mutex, [&] {
      return std::make_shared<const runtime::AssembledKernel>(state_->stage1, cpu_runtime());
    });
  }

  // The same for the GPU (a call with a DeviceCsr output does this on first use): both
  // phases lowered for CUDA; their modules compile on first use. Needs no GPU.
  const cuda::AssembledCudaKernel& compile_assembled_cuda() const {
    static_assert(assembled_arg >= 0, "spindle: compile_assembled_cuda(): this kernel has no assembled output");
    return state_->cuda_assembled.get(state_->mutex, [&] {
      return std::make_shared<const cuda::AssembledCudaKernel>(state_->stage1, cuda_runtime());
    });
  }

  // Lowers and compiles now (a call does this on first use) and returns the result.
  const runtime::CompiledKernel& compile() const {
    return state_->compiled.get(state_->mutex, [&] {
      return std::make_shared<const runtime::CompiledKernel>(state_->stage1, cpu_runtime(), state_->schedule);
    });
  }

  const ir::Function& ir() const { return state_->stage1; }
  const std::string& name() const { return state_->stage1.name; }
  std::string explain() const {
    if constexpr (assembled_arg >= 0)
      return compile_assembled().explain();
    else
      return compile().explain();
  }

  // The same definition compiled and run with another runtime (cache, pool, engine).
  Kernel with_runtime(runtime::Runtime& rt) const {
    Kernel k = copy();
    k.state_->runtime = &rt;
    return k;
  }
  // The same definition with another CUDA runtime (device, cache, fixed architecture).
  Kernel with_cuda_runtime(cuda::CudaRuntime& rt) const {
    Kernel k = copy();
    k.state_->cuda_runtime = &rt;
    return k;
  }
  // The same definition under a user's schedule on the CPU (schedule/user_schedule.hpp,
  // docs/schedules.md): its sparse_reorder steps set iteration orders, its loop steps replace
  // the default CPU schedule. An empty schedule restores the default. A step that does not fit
  // the kernel raises UserError when the kernel is compiled (first call or compile()).
  Kernel with_schedule(Schedule s) const {
    check_schedulable(s);
    Kernel k = copy();
    k.state_->schedule = std::move(s);
    return k;
  }
  // The same for the GPU build (calls with device arguments): loop steps replace the default
  // GPU schedules, and must bind every launch's outer loop to blockIdx.
  Kernel with_cuda_schedule(Schedule s) const {
    check_schedulable(s);
    Kernel k = copy();
    k.state_->cuda_schedule = std::move(s);
    return k;
  }
  const Schedule& schedule() const { return state_->schedule; }
  const Schedule& cuda_schedule() const { return state_->cuda_schedule; }

 private:
  Kernel copy() const {
    Kernel k(state_->stage1);
    k.state_->runtime = state_->runtime;
    k.state_->cuda_runtime = state_->cuda_runtime;
    k.state_->schedule = state_->schedule;
    k.state_->cuda_schedule = state_->cuda_schedule;
    return k;
  }
  void check_schedulable(const Schedule& s) const {
    SPINDLE_CHECK(assembled_arg < 0 || s.empty(), UserError, "kernel '", name(),
                  "' assembles a sparse output (two phases, lower/split_assembly.hpp), which takes no user schedule "
                  "yet; hint: its default schedule runs the rows in parallel already");
  }

  runtime::Runtime& cpu_runtime() const {
    return state_->runtime ? *state_->runtime : runtime::default_runtime();
  }
  cuda::CudaRuntime& cuda_runtime() const {
    return state_->cuda_runtime ? *state_->cuda_runtime : cuda::default_runtime();
  }

  template <std::size_t K, class A, class... Rest>
  static constexpr void check_types() {
    using P = std::tuple_element_t<K, CallParams>;
    static_assert(detail::argument_fits<P, A>(),
                  "spindle: a kernel argument's element type differs from the buffer's declared type "
                  "(or a scalar parameter got a non-arithmetic argument)");
    if constexpr (sizeof...(Rest) > 0) check_types<K + 1, Rest...>();
  }
  template <std::size_t K>
  static constexpr void check_types() {}

  std::shared_ptr<detail::KernelState> state_;
};

namespace detail {
template <class Tuple>
struct kernel_type;
template <class... Ps>
struct kernel_type<std::tuple<Ps...>> {
  using type = Kernel<Ps...>;
};
}  // namespace detail

// Defines a kernel from a lambda (see the top of this file).
template <class F>
auto kernel(std::string name, F&& f, std::source_location loc = std::source_location::current()) {
  using K = typename detail::kernel_type<typename detail::lambda_signature<F>::params>::type;
  return K(define_kernel(std::move(name), std::forward<F>(f), loc));
}

// The same, with names for the call arguments (used in errors, explain() and the code):
//   auto spmm = spindle::kernel("spmm", spindle::names{"A", "X", "Y"}, [](...) { ... });
template <class F>
auto kernel(std::string name, names arg_names, F&& f, std::source_location loc = std::source_location::current()) {
  using K = typename detail::kernel_type<typename detail::lambda_signature<F>::params>::type;
  return K(define_kernel(std::move(name), std::forward<F>(f), loc, std::move(arg_names.list)));
}

}  // namespace spindle

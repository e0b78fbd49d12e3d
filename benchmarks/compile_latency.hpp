// Compile-latency measurements of spindle-bench, once per operator:
//
//   ir_build        define_kernel (spindle::ops::<op><T>(): the lambda recorded as stage-I IR)
//   lower_codegen   driver::lower_to_c: every pass plus C emission
//   engine_create   creating the JIT engine of a fresh Runtime (ORC: Clang + LLJIT setup)
//   cold_jit        KernelCache lookup with an empty memory cache and an empty temporary
//                   disk-cache directory: engine compile + load (+ writing the disk entry);
//                   split into the compile and load parts from CacheStats. The first cold
//                   compile of the process is reported apart from the median of later ones
//                   (each with a fresh Runtime and a fresh empty directory).
//   memory_hit      KernelCache::get for an already-loaded request
//   kernel_compile  Kernel::compile() on an already-compiled kernel (an atomic load)
//   redefine        a full re-definition of the same kernel: IR build + lowering + codegen
//                   + memory-cache hit (ops::<op><T>().with_runtime(rt).compile())
//   disk_hit        in a fresh process (this executable re-run with --disk-hit-child): a
//                   new Runtime on the same cache directory, its engine creation and get()
//                   of the request, which must be a disk hit. The child prints one line;
//                   the parent also reports the child's whole wall time (exec + loading).
// Medians over several repetitions unless noted; all in microseconds.
#pragma once

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <spindle/driver/pipeline.hpp>
#include <spindle/runtime/kernel_cache.hpp>
#include <spindle/runtime/runtime.hpp>
#include <spindle/spindle.hpp>

#include "timing.hpp"

extern char** environ;

namespace bench {

struct CompileLatency {
  std::string op, engine;
  double ir_build_us = 0, lower_codegen_us = 0, engine_create_us = 0;
  double cold_first_us = 0, cold_median_us = 0, cold_compile_us = 0, cold_load_us = 0;
  double memory_hit_us = 0, kernel_compile_us = 0, redefine_us = 0;
  double disk_hit_us = 0, disk_engine_us = 0, disk_get_us = 0, disk_process_wall_us = 0;
  std::string disk_event;
  bool ok = true;
  std::string error;
};

// Whether the figures below exist for an operator: spgemm, spadd and spmul assemble a sparse output
// (runtime::AssembledKernel, a symbolic and a numeric phase); they have no single compile
// request, so they are left out here (their first compile in the process is reported, per
// phase, with the kernels of the run).
// hyb_spmm (a kernel per bucket width), tuned_spmm (its candidates compile while it tunes) and
// scheduled_spmm (the schedule of the command line), fused_sddmm (a schedule too) and rgcn_spmm
// (a zeroing kernel and a part kernel) have no single ready-made kernel either:
// the kernel line of the run reports their compile.
inline bool compile_latency_measurable(const std::string& op) {
  return !sparse_result_op(op) && op != "hyb_spmm" && op != "tuned_spmm" && op != "scheduled_spmm" &&
         op != "tuned_spmv" && op != "fused_sddmm" && op != "rgcn_spmm";
}

// f(kernel) with the ready-made kernel of an operator.
template <class T, class F>
decltype(auto) with_op_kernel(const std::string& op, F&& f) {
  if (op == "spmm") return f(spindle::ops::spmm<T>());
  if (op == "spmv") return f(spindle::ops::spmv<T>());
  if (op == "ell_spmm") return f(spindle::ops::ell_spmm<T>());
  if (op == "bsr_spmm") return f(spindle::ops::bsr_spmm_kernel<T, 4, 4>());  // compile latency: 4x4 blocks
  if (op == "dbsr_spmm") return f(spindle::ops::dbsr_spmm_kernel<T, 4, 4>());
  if (op == "sr_bcrs_spmm") return f(spindle::ops::sr_bcrs_spmm_kernel<T, 4, 1>());
  return f(spindle::ops::sddmm<T>());
}

inline spindle::runtime::CompileRequest compile_request(const spindle::ir::Function& stage1,
                                                        const spindle::Options& options) {
  spindle::driver::PipelineOptions o;  // as runtime::CompiledKernel sets them
  o.context.kernel = stage1.name;
  o.context.num_threads = options.num_threads;
  auto lowered = spindle::driver::lower_to_c(stage1, o);
  return {lowered.source.source, lowered.source.symbol, stage1.name};
}

inline std::string make_temp_dir() {
  std::string t = (std::filesystem::temp_directory_path() / "spindle-bench-cache-XXXXXX").string();
  if (!::mkdtemp(t.data())) throw std::runtime_error("mkdtemp failed for " + t);
  return t;
}

// Median of per-call averages over `batches` batches of `n` calls.
template <class F>
double per_call_micros(F&& f, int batches = 7, int n = 1000) {
  Samples s;
  for (int b = 0; b < batches; ++b)
    s.seconds.push_back(time_call([&] {
      for (int k = 0; k < n; ++k) f();
    }) / n);
  return s.median() * 1e6;
}

template <class F>
double median_micros(F&& f, int reps) {
  Samples s;
  for (int r = 0; r < reps; ++r) s.seconds.push_back(time_call(f));
  return s.median() * 1e6;
}

// The --disk-hit-child side: prints "spindle-bench-disk-hit TOTAL ENGINE GET EVENT".
template <class T>
int disk_hit_child(const std::string& dir, const std::string& op) {
  spindle::Options o = spindle::Options::from_env();
  o.cache_dir = dir;
  o.disk_cache = true;
  auto req = with_op_kernel<T>(op, [&](auto k) { return compile_request(k.ir(), o); });
  spindle::Timer total;
  spindle::runtime::Runtime rt(o);
  spindle::Timer te;
  rt.engine();
  const double engine_us = te.micros();
  auto r = rt.cache().lookup(req);
  const double total_us = total.micros();
  std::string event = spindle::runtime::to_string(r.event);
  for (char& c : event) c = c == ' ' ? '_' : c;
  std::printf("spindle-bench-disk-hit %.3f %.3f %.3f %s\n", total_us, engine_us, r.seconds * 1e6, event.c_str());
  return r.event == spindle::runtime::CacheEvent::disk_hit ? 0 : 3;
}

// Runs this executable with args and returns its stdout (throws on failure to start).
inline std::string run_self(const std::vector<std::string>& args, int* status) {
  std::array<char, 4096> exe{};
  ssize_t len = ::readlink("/proc/self/exe", exe.data(), exe.size() - 1);
  if (len <= 0) throw std::runtime_error("cannot resolve /proc/self/exe");
  std::vector<std::string> all{std::string(exe.data(), static_cast<std::size_t>(len))};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  std::string out;
  if (rc == 0) {
    char buf[512];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  if (rc != 0) throw std::runtime_error("posix_spawn failed");
  ::waitpid(pid, status, 0);
  return out;
}

template <class T>
CompileLatency measure_compile_latency(const std::string& op) {
  CompileLatency c;
  c.op = op;
  std::vector<std::string> dirs;
  try {
    constexpr int kReps = 21, kColdReps = 3;
    spindle::Options base = spindle::Options::from_env();
    base.disk_cache = true;
    c.ir_build_us = median_micros([&] { with_op_kernel<T>(op, [](auto k) { return k.ir().name.size(); }); }, kReps);
    auto stage1 = with_op_kernel<T>(op, [](auto k) { return k.ir(); });
    spindle::runtime::CompileRequest req;
    c.lower_codegen_us = median_micros([&] { req = compile_request(stage1, base); }, kReps);

    Samples cold;
    std::unique_ptr<spindle::runtime::Runtime> rt;
    for (int r = 0; r < kColdReps; ++r) {
      spindle::Options o = base;
      dirs.push_back(make_temp_dir());
      o.cache_dir = dirs.back();
      rt = std::make_unique<spindle::runtime::Runtime>(o);
      spindle::Timer te;
      rt->engine();
      if (r == 0) c.engine_create_us = te.micros();
      auto res = rt->cache().lookup(req);
      if (res.event != spindle::runtime::CacheEvent::compiled)
        throw std::runtime_error(std::string("cold lookup was a ") + spindle::runtime::to_string(res.event));
      if (r == 0) {
        c.cold_first_us = res.seconds * 1e6;
        auto st = rt->cache().stats();
        c.cold_compile_us = st.compile_seconds * 1e6;
        c.cold_load_us = st.load_seconds * 1e6;
      } else {
        cold.seconds.push_back(res.seconds);
      }
    }
    c.cold_median_us = cold.median() * 1e6;
    c.engine = rt->engine().name();

    c.memory_hit_us = per_call_micros([&] { rt->cache().get(req); });
    with_op_kernel<T>(op, [&](auto k) {
      auto mine = k.with_runtime(*rt);
      mine.compile();
      c.kernel_compile_us = per_call_micros([&] { mine.compile(); });
      return 0;
    });
    c.redefine_us = median_micros(
        [&] { with_op_kernel<T>(op, [&](auto k) { return k.with_runtime(*rt).compile().num_args(); }); }, kReps);

    int status = 0;
    spindle::Timer wall;
    std::string out = run_self({"--disk-hit-child", dirs.back(), op, sizeof(T) == 4 ? "f32" : "f64"}, &status);
    c.disk_process_wall_us = wall.micros();
    std::istringstream in(out.substr(std::min(out.find("spindle-bench-disk-hit"), out.size())));
    std::string tag;
    in >> tag >> c.disk_hit_us >> c.disk_engine_us >> c.disk_get_us >> c.disk_event;
    if (tag != "spindle-bench-disk-hit" || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      throw std::runtime_error("disk-hit child failed (event '" + c.disk_event + "', output: " + out + ")");
  } catch (const std::exception& e) {
    c.ok = false;
    c.error = e.what();
  }
  for (auto& d : dirs) {
    std::error_code ec;
    std::filesystem::remove_all(d, ec);
  }
  return c;
}

}  // namespace bench

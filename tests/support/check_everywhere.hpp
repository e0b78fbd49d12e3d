// Runs one kernel call on every CPU engine (1 and 2 threads), the reference interpreter and
// the CUDA build (NVRTC + the emulator here, the GPU where there is one), checking the
// same expectation after each: the net for kernels written as users write them.
#pragma once

#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include "spindle/spindle.hpp"
#include "support/emulated_cuda_call.hpp"
#include "support/engines.hpp"
#include "support/reference_interpreter.hpp"

namespace spindle::test {

// Runs `call(runtime)` on every engine with 1 and 2 threads, `check()` after each.
inline void on_every_engine(const std::function<void(runtime::Runtime&)>& call, const std::function<void()>& check) {
  for (const auto& e : cpu_engines())
    for (int threads : {1, 2}) {
      INFO("engine " << e << ", " << threads << " thread(s)");
      call(engine_runtime(e, threads));
      check();
    }
}

// Every engine at 1 and 2 threads, the reference interpreter and the CUDA build compute
// `expect` for the same call; `reset` restores the outputs before each run.
template <class Kernel>
void check_everywhere(const Kernel& k, const std::function<std::vector<runtime::CallArg>()>& args,
                      const std::function<void()>& reset, const std::function<void()>& expect) {
  on_every_engine(
      [&](runtime::Runtime& rt) {
        reset();
        k.with_runtime(rt).compile().call(args());
      },
      expect);
  {
    INFO("the reference interpreter");
    reset();
    Interpreter(k.ir(), args()).run();
    expect();
  }
  static NvrtcCheck nvrtc;
  INFO("the CUDA build");
  reset();
  run_cuda_build(k.ir(), args(), &nvrtc);
  expect();
}

}  // namespace spindle::test

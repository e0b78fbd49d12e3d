// The CPU engines of this build and a runtime per (engine, thread count) with private
// caches (no disk cache), for tests that run one kernel on every engine.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "spindle/spindle.hpp"

namespace spindle::test {

inline runtime::Runtime& engine_runtime(const std::string& engine, int threads) {
  static std::map<std::pair<std::string, int>, std::unique_ptr<runtime::Runtime>> all;
  auto& rt = all[{engine, threads}];
  if (!rt) {
    Options o = Options::from_env();
    o.engine = engine;
    o.disk_cache = false;
    o.num_threads = threads;
    rt = std::make_unique<runtime::Runtime>(o);
  }
  return *rt;
}

inline std::vector<std::string> cpu_engines() {
#ifdef SPINDLE_WITH_ORC
  return {"orc", "system"};
#else
  return {"system"};
#endif
}

}  // namespace spindle::test

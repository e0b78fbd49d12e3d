// Run-time options of Spindle. Environment variables are read once, here, into an
// Options value that a Runtime owns; nothing else in the library reads the environment.
//
//   SPINDLE_CACHE_DIR      disk-cache directory (default: $XDG_CACHE_HOME/spindle or
//                          ~/.cache/spindle)
//   SPINDLE_DISK_CACHE     0 disables the disk cache
//   SPINDLE_ENGINE         "orc" (in-process Clang + LLVM ORC) or "system" (system C
//                          compiler + dlopen); default: orc when built with LLVM
//   SPINDLE_CC             compiler for the system engine (default: cc)
//   SPINDLE_NUM_THREADS    threads of the runtime pool (default: hardware concurrency)
//   SPINDLE_DEBUG          1 logs each pass and its time to stderr
//   SPINDLE_DUMP_DIR       directory where the IR after each pass and the generated
//                          source are written
#pragma once

#include <cstdlib>
#include <string>
#include <thread>

namespace spindle {

struct Options {
  std::string cache_dir;
  bool disk_cache = true;
  std::string engine;  // "" = default
  std::string system_cc = "cc";
  int num_threads = 0;  // 0 = hardware concurrency
  bool debug = false;
  std::string dump_dir;

  static Options from_env() {
    Options o;
    auto get = [](const char* name) -> std::string {
      const char* v = std::getenv(name);
      return v ? std::string(v) : std::string();
    };
    o.cache_dir = get("SPINDLE_CACHE_DIR");
    if (o.cache_dir.empty()) {
      std::string xdg = get("XDG_CACHE_HOME");
      std::string home = get("HOME");
      if (!xdg.empty())
        o.cache_dir = xdg + "/spindle";
      else if (!home.empty())
        o.cache_dir = home + "/.cache/spindle";
      else
        o.cache_dir = "/tmp/spindle-cache";
    }
    std::string dc = get("SPINDLE_DISK_CACHE");
    o.disk_cache = !(dc == "0" || dc == "off" || dc == "false");
    o.engine = get("SPINDLE_ENGINE");
    if (std::string cc = get("SPINDLE_CC"); !cc.empty()) o.system_cc = cc;
    if (std::string t = get("SPINDLE_NUM_THREADS"); !t.empty()) o.num_threads = std::atoi(t.c_str());
    if (o.num_threads <= 0) o.num_threads = static_cast<int>(std::thread::hardware_concurrency());
    if (o.num_threads <= 0) o.num_threads = 1;
    std::string dbg = get("SPINDLE_DEBUG");
    o.debug = !dbg.empty() && dbg != "0";
    o.dump_dir = get("SPINDLE_DUMP_DIR");
    return o;
  }
};

}  // namespace spindle

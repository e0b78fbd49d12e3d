// spindle-frontend-fuzz: differential testing of kernels written the way users write them.
// Random kernels (tests/support/random_frontend_kernel.hpp) are printed as C++ source
// through the public API, several per translation unit, compiled in batches against the
// *installed* package (a CMake project that calls find_package(spindle)), and each batch
// program (frontend_fuzz_harness.cpp) compares every kernel, on every engine, with 1 and
// several threads, on small, edge-case and large inputs, with the reference interpreter.
// A kernel that disagrees, crashes, or does not compile is reported with its C++ source,
// shrunk to a minimal kernel that still fails the same way.
//
//   spindle-frontend-fuzz [--seed S] [--count N | --seconds T] [--batch B] [--jobs J]
//                         [--work DIR] [--prefix PREFIX | --install-from BUILD_DIR]
//                         [--engines orc,system,cuda] [--threads 1,3] [--sizes small,edge,large]
//                         [--kind all|assembled|scattered|merge|indirect|when-loop] [--no-shrink] [--print SEED] [--verbose]
// Kernel n of a run has seed S * 1000003 + n. Exit status 0 when nothing failed. --kind keeps
// only the kernels that assemble a sparse output, only those writing it at scattered rows, or
// only those that co-iterate (union_of / intersection_of), only those with an indirect
// write, or only those with a for_each under sp::when (a focused campaign: the others are skipped, --count counts the kept ones).
#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/random_frontend_kernel.hpp"

namespace fs = std::filesystem;
namespace fe = spindle::test::fe;

namespace {

struct Config {
  std::uint64_t seed = 1;
  long count = 40;
  double seconds = 0;
  int batch = 40, jobs = 2;
  fs::path work = fs::temp_directory_path() / "spindle-frontend-fuzz";
  std::string prefix, install_from = SPINDLE_FEFUZZ_BUILD_DIR;
  std::string engines = "orc,system,cuda", threads = "1,3", sizes = "small,edge,large";
  bool shrink = true, verbose = false;
  double shrink_seconds = 900;
  std::string kind = "all";
};

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs a shell command; returns its exit status and combined output.
int run(const std::string& cmd, std::string* output = nullptr) {
  std::string full = cmd + " 2>&1";
  FILE* p = ::popen(full.c_str(), "r");
  if (!p) return -1;
  std::string out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = ::pclose(p);
  if (output) *output = out;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

struct Outcome {
  std::string status, engine, message;
  long ms = 0;
};

class Fuzzer {
 public:
  explicit Fuzzer(Config c) : c_(std::move(c)) {}

  int main() {
    fs::create_directories(c_.work);
    // Two campaigns in one work directory overwrite each other's batch program ("Text file
    // busy", or a batch that exits 0 with its results missing): reported as kernel failures.
    // The first holds a lock on the directory for its lifetime; the second stops here.
    const std::string lock = (c_.work / "lock").string();
    const int lock_fd = ::open(lock.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (lock_fd < 0 || ::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
      std::fprintf(stderr, "spindle-frontend-fuzz: the work directory %s is in use by another campaign (lock %s); "
                   "pass --work DIR to run a second one\n", c_.work.c_str(), lock.c_str());
      return 2;
    }
    if (c_.prefix.empty()) install();
    configure();
    auto start = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
    std::uint64_t q = 0;  // the next kernel's number
    for (long n = 0; c_.count == 0 || n < c_.count; n += c_.batch) {
      if (c_.seconds > 0 && elapsed() > c_.seconds) break;
      std::vector<fe::Kernel> kernels;
      const long want = c_.count == 0 ? c_.batch : std::min<long>(c_.batch, c_.count - n);
      while (static_cast<long>(kernels.size()) < want) {
        fe::Kernel k = fe::generate(c_.seed * 1000003ull + q++);
        if (keep(k)) kernels.push_back(std::move(k));
      }
      batch(kernels);
      std::cout << "spindle-frontend-fuzz: " << generated_ << " kernels, " << compared_ << " compared (" << assembled_compared_
              << " assembled), " << rejected_
                << " rejected, " << failures_ << " failures, " << static_cast<long>(elapsed()) << " s" << std::endl;
    }
    std::cout << "spindle-frontend-fuzz: seed " << c_.seed << ": " << generated_ << " C++ kernels generated, "
              << compiled_ << " compiled in " << batches_ << " batches (" << compile_seconds_ << " s of C++ compilation), "
              << rejected_ << " rejected at definition (UserError), " << skipped_ << " skipped, " << compared_
              << " compared with the interpreter (" << sparse_roots_ << " iterating a root sparse axis, " << merges_
              << " co-iterating (union_of / intersection_of), " << fused_ << " with fused axes (iter<fuse<...>>), "
              << conditional_ << " with conditional writes (sp::when; " << conditional_loops_
              << " around a for_each), " << indirect_
              << " with indirect writes (y(idx(e)) op= ...), "
              << assembled_compared_
              << " assembling a sparse output (" << scattered_compared_ << " at scattered rows) of " << assembled_generated_
              << " generated, " << assembled_rejected_ << " rejected);";
    for (auto& [e, k] : runs_) std::cout << " " << e << " " << k << " runs;";
    std::cout << " " << cubins_ << " CUDA modules compiled by NVRTC; " << failures_ << " failures; " << elapsed()
              << " s\n";
    if (c_.verbose || failures_)
      for (auto& [k, m] : rejections_) std::cout << "  rejection kind (" << m.second << "x): " << m.first << "\n";
    return failures_ ? 1 : 0;
  }

 private:
  void install() {
    c_.prefix = (c_.work / "prefix").string();
    std::string out;
    if (run(quote(SPINDLE_FEFUZZ_CMAKE) + " --install " + quote(c_.install_from) + " --prefix " + quote(c_.prefix), &out) != 0) {
      std::cerr << "spindle-frontend-fuzz: installing " << c_.install_from << " failed:\n" << out;
      std::exit(2);
    }
  }

  fs::path project() const { return c_.work / "batch"; }

  // The harness library and the registry header are copied into the work directory, so
  // that rebuilding the project during a long campaign does not change them under it.
  void configure() {
    fs::create_directories(project());
    const fs::path harness = c_.work / "harness";
    fs::create_directories(harness / "differential");
    fs::copy_file(SPINDLE_FEFUZZ_HARNESS, harness / "libharness.a", fs::copy_options::overwrite_existing);
    fs::copy_file(fs::path(SPINDLE_FEFUZZ_TESTS_DIR) / "differential" / "frontend_fuzz_registry.hpp",
                  harness / "differential" / "frontend_fuzz_registry.hpp", fs::copy_options::overwrite_existing);
    std::ofstream cm(project() / "CMakeLists.txt");
    cm << "cmake_minimum_required(VERSION 3.25)\n"
          "project(spindle_frontend_fuzz_batch LANGUAGES CXX)\n"
          "find_package(spindle REQUIRED)\n"
          "file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/kernels_*.cpp)\n"
          "add_executable(batch ${sources})\n"
          "target_include_directories(batch PRIVATE \""
       << harness.string() << "\")\ntarget_link_libraries(batch PRIVATE \"" << (harness / "libharness.a").string()
       << "\" spindle::spindle)\n";
    cm.close();
    write_sources({});
    std::string launcher = SPINDLE_FEFUZZ_LAUNCHER;
    if (!launcher.empty() && !fs::exists(launcher)) launcher.clear();  // a copy of the build on another machine
    std::string cmd = quote(SPINDLE_FEFUZZ_CMAKE) + " -S " + quote(project().string()) + " -B " +
                      quote((project() / "build").string()) + " -DCMAKE_PREFIX_PATH=" + quote(c_.prefix) +
                      " -DCMAKE_BUILD_TYPE= -DCMAKE_CXX_COMPILER=" + quote(SPINDLE_FEFUZZ_CXX) +
                      " -DCMAKE_CXX_FLAGS=" + quote(std::string("-O0 -g0 ") + SPINDLE_FEFUZZ_CXX_FLAGS) +
                      (launcher.empty() ? "" : " -DCMAKE_CXX_COMPILER_LAUNCHER=" + quote(launcher));
    std::string out;
    if (run(cmd, &out) != 0) {
      std::cerr << "spindle-frontend-fuzz: configuring the batch project against " << c_.prefix << " failed:\n" << out;
      std::exit(2);
    }
  }

  // Writes the kernels into c_.jobs translation units; returns, per file, the first line of
  // each kernel (to map compiler errors to kernels).
  std::vector<std::vector<std::pair<int, std::size_t>>> write_sources(const std::vector<fe::Kernel>& ks) {
    for (auto& e : fs::directory_iterator(project()))
      if (e.path().filename().string().rfind("kernels_", 0) == 0) fs::remove(e.path());
    const int files = std::max(1, std::min<int>(c_.jobs, static_cast<int>(ks.size())));
    std::vector<std::vector<std::pair<int, std::size_t>>> starts(static_cast<std::size_t>(files));
    std::vector<std::string> text(static_cast<std::size_t>(files),
                                  "// generated by spindle-frontend-fuzz\n#include \"differential/frontend_fuzz_registry.hpp\"\n");
    for (std::size_t q = 0; q < ks.size(); ++q) {
      std::string& t = text[q % static_cast<std::size_t>(files)];
      int line = 1 + static_cast<int>(std::count(t.begin(), t.end(), '\n'));
      starts[q % static_cast<std::size_t>(files)].push_back({line, q});
      t += fe::cpp_source(ks[q]);
    }
    for (int f = 0; f < files; ++f) std::ofstream(project() / ("kernels_" + std::to_string(f) + ".cpp")) << text[static_cast<std::size_t>(f)];
    return starts;
  }

  bool build(std::string& out) {
    auto t0 = std::chrono::steady_clock::now();
    int rc = run(quote(SPINDLE_FEFUZZ_CMAKE) + " --build " + quote((project() / "build").string()) + " -j" +
                     std::to_string(c_.jobs),
                 &out);
    compile_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return rc == 0;
  }

  std::map<std::string, Outcome> execute(const std::string& only = "") {
    // A kernel that hangs must not hang the campaign: a batch gets 20 minutes, one kernel 5.
    std::string cmd = std::string(only.empty() ? "timeout 1200 " : "timeout 300 ") +
                      quote((project() / "build" / "batch").string()) + " --engines " + c_.engines + " --threads " +
                      c_.threads + " --sizes " + c_.sizes + (only.empty() ? "" : " --only " + only);
    std::string out;
    last_rc_ = run(cmd, &out);
    last_output_ = out;
    std::map<std::string, Outcome> res;
    std::istringstream is(out);
    for (std::string line; std::getline(is, line);) {
      if (line.rfind("FEFUZZ-RUNS", 0) == 0) {
        std::istringstream ls(line.substr(11));
        for (std::string kv; ls >> kv;) {
          auto eq = kv.find('=');
          if (eq == std::string::npos) continue;
          long v = std::stol(kv.substr(eq + 1));
          if (kv.substr(0, eq) == "cubins") last_cubins_ = v;
          else last_runs_[kv.substr(0, eq)] = v;
        }
        continue;
      }
      if (line.rfind("FEFUZZ ", 0) != 0) continue;
      std::istringstream ls(line.substr(7));
      std::string seed, steps, ms;
      Outcome o;
      ls >> seed >> steps >> o.status >> o.engine >> ms;
      o.ms = std::atol(ms.c_str());
      std::getline(ls, o.message);
      if (!o.message.empty() && o.message[0] == ' ') o.message.erase(0, 1);
      res[seed + (steps == "-" ? "" : ":" + steps)] = o;
    }
    return res;
  }

  bool keep(const fe::Kernel& k) const {
    if (c_.kind == "scattered") return fe::writes_scattered_rows(k);
    if (c_.kind == "assembled") return fe::assembled_buffer(k) >= 0;
    if (c_.kind == "merge") return fe::iterates_merge(k);
    if (c_.kind == "indirect") return fe::writes_indirect(k);
    if (c_.kind == "when-loop") return fe::has_when_around_loop(k);
    return true;
  }

  static std::string id(const fe::Kernel& k) {
    return std::to_string(k.seed) + (k.steps.empty() ? "" : ":" + fe::CppPrinter::steps_text(k.steps));
  }

  void batch(std::vector<fe::Kernel> ks) {
    generated_ += static_cast<long>(ks.size());
    for (auto& k : ks) assembled_generated_ += fe::assembled_buffer(k) >= 0;
    ++batches_;
    // Compile; kernels that do not compile are failures (valid C++ against the public API).
    for (int attempt = 0; !ks.empty(); ++attempt) {
      auto starts = write_sources(ks);
      std::string out;
      if (build(out)) break;
      std::set<std::size_t> bad;
      for (std::size_t f = 0; f < starts.size(); ++f) {
        const std::string file = "kernels_" + std::to_string(f) + ".cpp:";
        for (std::size_t p = out.find(file); p != std::string::npos; p = out.find(file, p + 1)) {
          // Every kernel the compiler's diagnostics point into (errors and their
          // "required from here" notes) is to blame.
          int line = std::atoi(out.c_str() + p + file.size());
          std::size_t culprit = starts[f].front().second;
          for (auto& [l, q] : starts[f])
            if (l <= line) culprit = q;
          bad.insert(culprit);
        }
      }
      if (bad.empty() || attempt > 3) {
        std::cout << "FAIL batch of " << ks.size() << " kernels (first seed " << ks.front().seed
                  << ") does not build, and no kernel is to blame:\n" << out.substr(0, 6000) << "\n";
        ++failures_;
        return;
      }
      std::vector<fe::Kernel> rest;
      for (std::size_t q = 0; q < ks.size(); ++q) {
        if (!bad.count(q)) {
          rest.push_back(ks[q]);
          continue;
        }
        ++failures_;
        std::cout << "FAIL seed " << ks[q].seed << ": the generated C++ kernel does not compile:\n"
                  << fe::cpp_source(ks[q]) << "--- compiler output (excerpt):\n" << excerpt(out) << "\n";
      }
      ks = rest;
    }
    if (ks.empty()) return;
    compiled_ += static_cast<long>(ks.size());
    auto results = execute();
    merge_runs();
    for (auto& k : ks) {
      auto it = results.find(id(k));
      Outcome o;
      if (it == results.end()) {
        // The program died before this kernel's line: rerun it alone.
        auto alone = execute(id(k));
        merge_runs();
        auto a = alone.find(id(k));
        if (a == alone.end()) {
          o = {"fail", "-", "the batch program died (exit status " + std::to_string(last_rc_) + "): " +
                                excerpt(last_output_)};
        } else {
          o = a->second;
        }
      } else {
        o = it->second;
      }
      account(k, o);
    }
  }

  void merge_runs() {
    for (auto& [e, n] : last_runs_) runs_[e] += n;
    cubins_ += last_cubins_;
    last_runs_.clear();
    last_cubins_ = 0;
  }

  static std::string excerpt(const std::string& s) {
    if (s.size() <= 4000) return s;
    return s.substr(0, 2000) + "\n[...]\n" + s.substr(s.size() - 2000);
  }

  void account(const fe::Kernel& k, const Outcome& o) {
    if (o.status == "ok") {
      ++compared_;
      if (fe::iterates_sparse_root(k)) ++sparse_roots_;
      if (fe::iterates_merge(k)) ++merges_;
      if (fe::fuses_axes(k)) ++fused_;
      if (fe::has_when(k)) ++conditional_;
      if (fe::has_when_around_loop(k)) ++conditional_loops_;
      if (fe::writes_indirect(k)) ++indirect_;
      if (fe::assembled_buffer(k) >= 0) ++assembled_compared_;
      if (fe::writes_scattered_rows(k)) ++scattered_compared_;
      if (c_.verbose) std::cout << "seed " << k.seed << ": ok (" << o.ms << " ms: " << o.message << ")\n";
      return;
    }
    if (o.status == "rejected") {
      ++rejected_;
      if (fe::assembled_buffer(k) >= 0) ++assembled_rejected_;
      std::string key = o.message;
      auto colon = key.find("': ");
      key = colon == std::string::npos ? key.substr(0, 50) : key.substr(colon + 3, 45);
      auto& r = rejections_[key];
      if (r.first.empty()) r.first = o.message;
      ++r.second;
      if (c_.verbose) std::cout << "seed " << k.seed << ": rejected: " << o.message << "\n";
      return;
    }
    if (o.status == "skipped") {
      ++skipped_;
      return;
    }
    ++failures_;
    std::cout << "FAIL seed " << k.seed << " engine " << o.engine << ": " << o.message << "\n"
              << fe::cpp_source(k) << "\n";
    if (c_.shrink) shrink(k, o);
  }

  // Greedy: keep any shrink step after which the kernel still fails on the same engine.
  void shrink(fe::Kernel k, const Outcome& failing) {
    auto t0 = std::chrono::steady_clock::now();
    auto same_failure = [&](const Outcome& o) {
      return o.status == "fail" && (o.engine == failing.engine || o.engine.substr(0, 3) == failing.engine.substr(0, 3));
    };
    int trials = 0;
    for (bool progress = true; progress;) {
      progress = false;
      for (int t = 0;; ++t) {
        if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > c_.shrink_seconds) break;
        fe::Kernel cand = k;
        if (!fe::shrink(cand, t)) break;
        if (!fe::well_formed(cand)) continue;
        ++trials;
        write_sources({cand});
        std::string out;
        if (!build(out)) continue;
        auto res = execute(id(cand));
        auto it = res.find(id(cand));
        if (it != res.end() && same_failure(it->second)) {
          k = cand;
          progress = true;
          break;
        }
      }
    }
    write_sources({k});
    std::string out;
    std::string why = "?";
    if (build(out)) {
      auto res = execute(id(k));
      if (auto it = res.find(id(k)); it != res.end()) why = it->second.engine + ": " + it->second.message;
    }
    std::cout << "--- shrunk in " << trials << " trials to (still fails: " << why << "):\n" << fe::cpp_source(k) << "\n";
  }

  Config c_;
  long generated_ = 0, compiled_ = 0, batches_ = 0, rejected_ = 0, skipped_ = 0, compared_ = 0, failures_ = 0,
       cubins_ = 0, last_cubins_ = 0, sparse_roots_ = 0, merges_ = 0, fused_ = 0, conditional_ = 0, conditional_loops_ = 0, indirect_ = 0, assembled_generated_ = 0, assembled_compared_ = 0,
       assembled_rejected_ = 0, scattered_compared_ = 0;
  int last_rc_ = 0;
  std::string last_output_;
  double compile_seconds_ = 0;
  std::map<std::string, long> runs_, last_runs_;
  std::map<std::string, std::pair<std::string, long>> rejections_;
};

}  // namespace

int main(int argc, char** argv) {
  Config c;
  long print = -1;
  for (int a = 1; a < argc; ++a) {
    std::string s = argv[a];
    auto next = [&]() -> std::string {
      if (a + 1 >= argc) {
        std::fprintf(stderr, "missing value after %s\n", s.c_str());
        std::exit(2);
      }
      return argv[++a];
    };
    if (s == "--seed") c.seed = std::stoull(next());
    else if (s == "--count") c.count = std::stol(next());
    else if (s == "--seconds") c.seconds = std::stod(next()), c.count = 0;
    else if (s == "--batch") c.batch = std::max(1, std::stoi(next()));
    else if (s == "--jobs") c.jobs = std::max(1, std::stoi(next()));
    else if (s == "--work") c.work = next();
    else if (s == "--prefix") c.prefix = next();
    else if (s == "--install-from") c.install_from = next();
    else if (s == "--engines") c.engines = next();
    else if (s == "--threads") c.threads = next();
    else if (s == "--sizes") c.sizes = next();
    else if (s == "--no-shrink") c.shrink = false;
    else if (s == "--shrink-seconds") c.shrink_seconds = std::stod(next());
    else if (s == "--verbose") c.verbose = true;
    else if (s == "--print") print = std::stol(next());
    else if (s == "--kind") c.kind = next();
    else {
      std::fprintf(stderr,
                   "usage: spindle-frontend-fuzz [--seed S] [--count N | --seconds T] [--batch B] [--jobs J] [--work DIR]\n"
                   "       [--prefix PREFIX | --install-from BUILD_DIR] [--engines orc,system,cuda] [--threads 1,3]\n"
                   "       [--sizes small,edge,large] [--kind all|assembled|scattered|merge|indirect|when-loop] [--no-shrink] [--shrink-seconds T]\n"
                   "       [--print SEED] [--verbose]\n");
      return 2;
    }
  }
  if (c.kind != "all" && c.kind != "assembled" && c.kind != "scattered" && c.kind != "merge" && c.kind != "indirect" &&
      c.kind != "when-loop") {
    std::fprintf(stderr, "--kind: all, assembled, scattered, merge, indirect or when-loop, not '%s'\n", c.kind.c_str());
    return 2;
  }
  if (print >= 0) {
    std::cout << fe::cpp_source(fe::generate(static_cast<std::uint64_t>(print)));
    return 0;
  }
  if (c.count == 0 && c.seconds <= 0) c.count = 40;
  return Fuzzer(c).main();
}

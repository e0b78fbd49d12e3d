// Helpers for per-pass tests: define a kernel from a lambda (stage I) and print a
// statement or function body after a pass.
#pragma once

#include <spindle/driver/pipeline.hpp>
#include <spindle/frontend/define.hpp>
#include <spindle/ir/printer.hpp>

namespace sp = spindle;

namespace pass_test {

struct I : sp::dense_fixed {};
struct J : sp::sparse_variable<I> {};
struct K : sp::dense_fixed {};
struct E : sp::sparse_fixed<I, 4> {};  // ELL: 4 entries per row
struct Bt : sp::dense_fixed {};
struct R : sp::dense_variable<Bt> {};
struct L : sp::sparse_variable<J> {};
struct BI : sp::dense_fixed {};
struct BJ : sp::dense_fixed {};

inline sp::lower::LowerContext ctx(const sp::ir::Function& f) {
  sp::lower::LowerContext c;
  c.kernel = f.name;
  return c;
}

// The printed body of a function: drop the header lines (func, scalars, axes).
inline std::string body(const sp::ir::Function& f) {
  std::string text = sp::ir::to_string(f), out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    std::string line = text.substr(pos, end - pos);
    pos = end == std::string::npos ? text.size() : end + 1;
    if (line.rfind("# ", 0) == 0 || line.rfind("func ", 0) == 0 || line.rfind("  scalars:", 0) == 0 ||
        line.rfind("  axis ", 0) == 0)
      continue;
    out += line + "\n";
  }
  return out;
}

inline sp::ir::Function stage2(const sp::ir::Function& f) { return sp::lower::lower_sparse_iter(f, ctx(f)); }
inline sp::ir::Function stage3(const sp::ir::Function& f) {
  auto s2 = sp::lower::simplify(stage2(f), ctx(f));
  return sp::lower::simplify(sp::lower::lower_sparse_buffer(s2, ctx(f)), ctx(f));
}

}  // namespace pass_test

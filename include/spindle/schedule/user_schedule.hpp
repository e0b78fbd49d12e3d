// spindle::Schedule: a schedule a user writes for a kernel, as a list of steps. It is data
// (names and numbers, no IR): the pipeline applies it (schedule/apply_user_schedule.hpp and
// schedule/sparse_reorder.hpp), explain() prints it, and it is part of the generated source,
// so two schedules never share a kernel-cache entry.
//
//   spindle::Schedule s;
//   s.split("k", 32).vectorize("k_i").parallel("i");
//   auto tuned = spmm.with_schedule(s);      // same definition, this schedule
//
// Stage I (coordinate space, before lowering):
//   sparse_reorder(iteration, axes)  the loop order of one sparse iteration, by axis names
//                                    (replaces order_iterations' choice for it)
//   sparse_fuse(iteration, axes)     a chain of adjacent axes (each the parent of the next)
//                                    as one loop over the last axis's positions, named
//                                    <i>_<j> after the iterators (schedule/sparse_fuse.hpp);
//                                    the iteration keeps its written order
// Loops (stage III, the lowered loops, named after their iterators: i, j, k; split makes
// k_o / k_i, fuse makes <outer>_<inner>_f):
//   split(loop, factor)   reorder({loops})   fuse(outer, inner)
//   parallel(loop)        vectorize(loop)    unroll(loop)        cache_write(loop, buffer)
//   rfactor(loop, lanes)  (CPU: `lanes` partial sums in registers, loops <loop>_o,
//                          <loop>_lane, <loop>_t; GPU: the lanes of a warp, <loop>_lane)
// GPU only (a kernel called with device arguments):
//   bind(loop, "blockIdx.x" | ... | "threadIdx.z")
//   cache_read(loop, {buffers}, thread_loop, tile)   atomic(loop)
// A schedule with loop steps replaces the default schedule of that target: nothing runs in
// parallel or vectorised unless the schedule says so. A name that names several sibling
// loops (SpMM's init loop over k and its reduction loop over k) applies split, parallel,
// vectorize, unroll and bind to each of them. Every step is checked where it is applied; one that
// does not fit raises UserError naming the step and the loop.
#pragma once

#include <cctype>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "spindle/support/error.hpp"

namespace spindle {

class Schedule {
 public:
  enum class Op : std::uint8_t {
    sparse_reorder,
    sparse_fuse,
    split,
    reorder,
    fuse,
    parallel,
    vectorize,
    unroll,
    cache_write,
    bind,
    rfactor,
    cache_read,
    atomic
  };

  struct Step {
    Op op;
    std::vector<std::string> names;  // loops, axes, buffers; see each builder
    std::int64_t number = 0;         // split factor, rfactor lanes, cache_read tile
    std::string target;              // sparse_reorder, sparse_fuse: iteration; bind: GPU index; cache_read: thread loop
  };

  Schedule& sparse_reorder(std::string iteration, std::vector<std::string> axes) {
    SPINDLE_CHECK(!axes.empty(), UserError, "Schedule::sparse_reorder(\"", iteration,
                  "\"): no axes given; hint: list every axis of the iteration, outermost first");
    return add({Op::sparse_reorder, std::move(axes), 0, std::move(iteration)});
  }
  Schedule& sparse_fuse(std::string iteration, std::vector<std::string> axes) {
    SPINDLE_CHECK(axes.size() >= 2, UserError, "Schedule::sparse_fuse(\"", iteration,
                  "\"): name at least two axes; hint: a chain of adjacent axes of the iteration, each the parent "
                  "of the next, outermost first (sparse_fuse(\"sddmm\", {\"I\", \"J\"}))");
    return add({Op::sparse_fuse, std::move(axes), 0, std::move(iteration)});
  }
  Schedule& split(std::string loop, std::int64_t factor) {
    SPINDLE_CHECK(factor >= 1, UserError, "Schedule::split(\"", loop, "\", ", factor,
                  "): the factor must be at least 1; hint: it is the extent of the new inner loop");
    return add({Op::split, {std::move(loop)}, factor, {}});
  }
  Schedule& reorder(std::vector<std::string> loops) {
    SPINDLE_CHECK(loops.size() >= 2, UserError,
                  "Schedule::reorder: name at least two loops of a perfectly nested band, outermost first");
    return add({Op::reorder, std::move(loops), 0, {}});
  }
  Schedule& fuse(std::string outer, std::string inner) {
    return add({Op::fuse, {std::move(outer), std::move(inner)}, 0, {}});
  }
  Schedule& parallel(std::string loop) { return add({Op::parallel, {std::move(loop)}, 0, {}}); }
  Schedule& vectorize(std::string loop) { return add({Op::vectorize, {std::move(loop)}, 0, {}}); }
  Schedule& unroll(std::string loop) { return add({Op::unroll, {std::move(loop)}, 0, {}}); }
  Schedule& cache_write(std::string loop, std::string buffer) {
    return add({Op::cache_write, {std::move(loop), std::move(buffer)}, 0, {}});
  }
  Schedule& bind(std::string loop, std::string gpu_index) {
    static const char* const kinds[] = {"blockIdx.x",  "blockIdx.y",  "blockIdx.z",
                                        "threadIdx.x", "threadIdx.y", "threadIdx.z"};
    bool known = false;
    for (const char* k : kinds) known = known || gpu_index == k;
    SPINDLE_CHECK(known, UserError, "Schedule::bind(\"", loop, "\", \"", gpu_index,
                  "\"): unknown GPU index; hint: one of blockIdx.x/y/z, threadIdx.x/y/z (parallel(loop) for the CPU)");
    return add({Op::bind, {std::move(loop)}, 0, std::move(gpu_index)});
  }
  Schedule& rfactor(std::string loop, int lanes) {
    return add({Op::rfactor, {std::move(loop)}, lanes, {}});
  }
  Schedule& cache_read(std::string loop, std::vector<std::string> buffers, std::string thread_loop,
                       std::int64_t tile) {
    std::vector<std::string> names{std::move(loop)};
    for (auto& b : buffers) names.push_back(std::move(b));
    SPINDLE_CHECK(names.size() >= 2, UserError, "Schedule::cache_read(\"", names[0],
                  "\"): no buffers given; hint: name the buffers whose reads are staged");
    return add({Op::cache_read, std::move(names), tile, std::move(thread_loop)});
  }
  Schedule& atomic(std::string loop) { return add({Op::atomic, {std::move(loop)}, 0, {}}); }

  const std::vector<Step>& steps() const { return steps_; }
  bool empty() const { return steps_.empty(); }
  // Stage-I steps act on sparse iterations before lowering; the others on the lowered loops.
  static bool is_stage1(Op op) { return op == Op::sparse_reorder || op == Op::sparse_fuse; }
  // Steps on the lowered loops (anything but the stage-I steps): they replace the default schedule.
  bool has_loop_steps() const {
    for (auto& s : steps_)
      if (!is_stage1(s.op)) return true;
    return false;
  }
  // Whether some step fuses sparse axes (order_iterations then keeps the written orders).
  bool has_sparse_fuse() const {
    for (auto& s : steps_)
      if (s.op == Op::sparse_fuse) return true;
    return false;
  }

  static const char* op_name(Op op) {
    switch (op) {
      case Op::sparse_reorder: return "sparse_reorder";
      case Op::sparse_fuse: return "sparse_fuse";
      case Op::split: return "split";
      case Op::reorder: return "reorder";
      case Op::fuse: return "fuse";
      case Op::parallel: return "parallel";
      case Op::vectorize: return "vectorize";
      case Op::unroll: return "unroll";
      case Op::cache_write: return "cache_write";
      case Op::bind: return "bind";
      case Op::rfactor: return "rfactor";
      case Op::cache_read: return "cache_read";
      case Op::atomic: return "atomic";
    }
    return "?";
  }

  // One step as the builder call that makes it: split("k", 32).
  static std::string describe(const Step& s) {
    auto quoted = [](const std::string& n) { return "\"" + n + "\""; };
    auto list = [&](std::size_t from) {
      std::string out = "{";
      for (std::size_t k = from; k < s.names.size(); ++k) out += (k > from ? ", " : "") + quoted(s.names[k]);
      return out + "}";
    };
    std::string a;
    switch (s.op) {
      case Op::sparse_reorder:
      case Op::sparse_fuse: a = quoted(s.target) + ", " + list(0); break;
      case Op::split: a = quoted(s.names[0]) + ", " + std::to_string(s.number); break;
      case Op::reorder: a = list(0); break;
      case Op::fuse:
      case Op::cache_write: a = quoted(s.names[0]) + ", " + quoted(s.names[1]); break;
      case Op::bind: a = quoted(s.names[0]) + ", " + quoted(s.target); break;
      case Op::rfactor: a = quoted(s.names[0]) + ", " + std::to_string(s.number); break;
      case Op::cache_read:
        a = quoted(s.names[0]) + ", " + list(1) + ", " + quoted(s.target) + ", " + std::to_string(s.number);
        break;
      default: a = quoted(s.names[0]); break;
    }
    return std::string(op_name(s.op)) + "(" + a + ")";
  }

  // The whole schedule as a chain of builder calls, or "" when empty.
  std::string to_string() const {
    std::string out;
    for (auto& s : steps_) out += (out.empty() ? "" : ".") + describe(s);
    return out;
  }

  friend bool operator==(const Schedule& a, const Schedule& b) { return a.to_string() == b.to_string(); }

  // The schedule that to_string() printed, or one typed on a command line with or without
  // quotes: split("k", 8).vectorize("k_i") or split(k, 8).vectorize(k_i). Lists in braces
  // (sparse_reorder(spmm, {I, K, J}), reorder({k, j})). A malformed text is a UserError
  // naming the column; each step is then checked as its builder checks it.
  static Schedule parse(const std::string& text);

 private:
  Schedule& add(Step s) {
    for (auto& n : s.names)
      SPINDLE_CHECK(!n.empty(), UserError, "Schedule::", op_name(s.op), ": an empty name; hint: loops are named "
                    "after their iterators (i, j, k), axes and buffers as the kernel declares them");
    steps_.push_back(std::move(s));
    return *this;
  }

  std::vector<Step> steps_;
};

namespace schedule_parse_detail {

struct Arg {
  bool is_list = false;
  std::vector<std::string> items;  // one item unless a list
};

class Parser {
 public:
  explicit Parser(const std::string& t) : t_(t) {}

  Schedule run() {
    Schedule s;
    skip();
    if (p_ == t_.size()) return s;
    for (;;) {
      std::size_t at = p_;
      std::string op = word("a step name (split, reorder, ...)");
      expect('(');
      std::vector<Arg> args;
      skip();
      if (peek() != ')') {
        for (;;) {
          args.push_back(arg());
          if (peek() == ',') {
            ++p_;
            continue;
          }
          break;
        }
      }
      expect(')');
      apply(s, op, args, at);
      skip();
      if (p_ == t_.size()) return s;
      expect('.');
    }
  }

 private:
  [[noreturn]] void fail(std::size_t at, const std::string& what) const {
    throw UserError(message("Schedule::parse: ", what, " at column ", at + 1, " of '", t_,
                            "'; hint: steps as the builder calls print them, joined by '.': split(\"k\", 8)."
                            "vectorize(\"k_i\").parallel(\"i\") (quotes optional)"));
  }
  void skip() {
    while (p_ < t_.size() && (t_[p_] == ' ' || t_[p_] == '\t' || t_[p_] == '\n')) ++p_;
  }
  char peek() {
    skip();
    return p_ < t_.size() ? t_[p_] : '\0';
  }
  void expect(char c) {
    if (peek() != c) fail(p_, std::string("expected '") + c + "'");
    ++p_;
  }
  static bool name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
  }
  std::string word(const char* what) {
    skip();
    std::size_t b = p_;
    while (p_ < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[p_])) || t_[p_] == '_')) ++p_;
    if (b == p_) fail(b, std::string("expected ") + what);
    return t_.substr(b, p_ - b);
  }
  std::string item() {
    skip();
    std::size_t b = p_;
    if (peek() == '"') {
      ++p_;
      while (p_ < t_.size() && t_[p_] != '"') ++p_;
      if (p_ == t_.size()) fail(b, "unterminated string");
      return t_.substr(b + 1, p_++ - b - 1);
    }
    if (p_ < t_.size() && t_[p_] == '-') ++p_;
    while (p_ < t_.size() && name_char(t_[p_])) ++p_;
    if (b == p_) fail(b, "expected a name or a number");
    return t_.substr(b, p_ - b);
  }
  Arg arg() {
    Arg a;
    if (peek() == '{') {
      ++p_;
      a.is_list = true;
      if (peek() != '}') {
        for (;;) {
          a.items.push_back(item());
          if (peek() == ',') {
            ++p_;
            continue;
          }
          break;
        }
      }
      expect('}');
      return a;
    }
    a.items.push_back(item());
    return a;
  }
  std::int64_t number(const Arg& a, std::size_t at) const {
    const std::string& v = a.items[0];
    std::size_t used = 0;
    long long x = 0;
    try {
      x = std::stoll(v, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (a.is_list || used == 0 || used != v.size()) fail(at, "expected an integer, got '" + v + "'");
    return x;
  }
  void apply(Schedule& s, const std::string& op, const std::vector<Arg>& args, std::size_t at) const {
    auto arity = [&](std::size_t n) {
      if (args.size() != n)
        fail(at, op + " takes " + std::to_string(n) + " argument" + (n == 1 ? "" : "s") + ", got " +
                     std::to_string(args.size()));
    };
    auto name = [&](std::size_t k) {
      if (args[k].is_list) fail(at, op + ": argument " + std::to_string(k + 1) + " is a name, not a list");
      return args[k].items[0];
    };
    auto list = [&](std::size_t k) {
      if (!args[k].is_list) fail(at, op + ": argument " + std::to_string(k + 1) + " is a list in braces");
      return args[k].items;
    };
    if (op == "sparse_reorder") arity(2), s.sparse_reorder(name(0), list(1));
    else if (op == "sparse_fuse") arity(2), s.sparse_fuse(name(0), list(1));
    else if (op == "split") arity(2), s.split(name(0), number(args[1], at));
    else if (op == "reorder") arity(1), s.reorder(list(0));
    else if (op == "fuse") arity(2), s.fuse(name(0), name(1));
    else if (op == "parallel") arity(1), s.parallel(name(0));
    else if (op == "vectorize") arity(1), s.vectorize(name(0));
    else if (op == "unroll") arity(1), s.unroll(name(0));
    else if (op == "cache_write") arity(2), s.cache_write(name(0), name(1));
    else if (op == "bind") arity(2), s.bind(name(0), name(1));
    else if (op == "rfactor") arity(2), s.rfactor(name(0), static_cast<int>(number(args[1], at)));
    else if (op == "cache_read") arity(4), s.cache_read(name(0), list(1), name(2), number(args[3], at));
    else if (op == "atomic") arity(1), s.atomic(name(0));
    else
      fail(at, "unknown step '" + op + "' (sparse_reorder, sparse_fuse, split, reorder, fuse, parallel, vectorize, unroll, "
               "cache_write, bind, rfactor, cache_read, atomic)");
  }

  const std::string& t_;
  std::size_t p_ = 0;
};

}  // namespace schedule_parse_detail

inline Schedule Schedule::parse(const std::string& text) { return schedule_parse_detail::Parser(text).run(); }

}  // namespace spindle

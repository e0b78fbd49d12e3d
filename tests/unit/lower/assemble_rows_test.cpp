// split_assembly + assemble_rows: the two phases of a kernel that assembles a sparse output
// (docs/language.md §4.6, docs/passes/assemble_rows.md), printed at stage III.
#include <algorithm>
#include <random>
#include <set>

#include <catch2/catch.hpp>

#include <spindle/lower/assemble_scattered.hpp>
#include <spindle/lower/flatten_position_loops.hpp>
#include <spindle/lower/split_assembly.hpp>
#include <spindle/runtime/assembly_steps.hpp>
#include <spindle/runtime/sort_rows.hpp>

#include "unit/pass_test_util.hpp"

using namespace pass_test;

namespace {
struct J2 : sp::sparse_variable<I>, sp::coordinates_of<J> {};
struct Jc : sp::assembled<I, J> {};

// The phase's stage-III function after assemble_rows, or assemble_scattered when the rows are
// scattered (and the simplify that follows it).
sp::ir::Function phase(const sp::ir::Function& f, sp::lower::AssemblyContext::Phase p, bool sorted_fiber_rows = false,
                       bool bounded_rows = false, bool restore_workspace = false) {
  sp::lower::AssemblyPhase ph = sp::lower::split_assembly(f, p);
  ph.context.sorted_fiber_rows = sorted_fiber_rows;
  ph.context.bounded_rows = bounded_rows;
  ph.context.restore_workspace = restore_workspace;
  sp::lower::LowerContext c = ctx(ph.function);
  c.assembly = ph.context;
  c.keep_loop_order = true;
  auto s3 = sp::lower::hoist_loop_invariants(stage3(ph.function), c);
  return sp::lower::simplify(
      ph.context.scattered ? sp::lower::assemble_scattered(s3, c) : sp::lower::assemble_rows(s3, c), c);
}
}  // namespace

TEST_CASE("split_assembly: the output argument leaves the call, the phase's scratch arrays join it",
          "[lower][assembly]") {
  // A scaled copy of a's pattern (`=`), with a scalar argument before the output.
  auto f = sp::define_kernel(
      "copy2", [](sp::in<float, I, J> a, sp::param<float> s, sp::out<float, I, Jc> c, sp::iter<I> i,
                  sp::iter<J> j) { c(i, j) = a(i, j) * s; },
      std::source_location::current(), {"a", "s", "c"});
  auto sym = sp::lower::split_assembly(f, sp::lower::AssemblyContext::symbolic);
  CHECK(sym.output_arg == 2);
  CHECK(sym.user_args == 2);
  std::vector<std::string> names;
  for (auto& b : sym.function.buffers) names.push_back(b.buffer->name + ":" + std::to_string(b.origin.arg));
  CHECK(names == std::vector<std::string>{"a:0", "spindle_block_rows:2", "c_columns:3", "c_rows:4", "c:-1"});
  auto num = sp::lower::split_assembly(f, sp::lower::AssemblyContext::numeric);
  names.clear();
  for (auto& b : num.function.buffers) names.push_back(b.buffer->name + ":" + std::to_string(b.origin.arg));
  CHECK(names == std::vector<std::string>{"a:0", "spindle_block_rows:2", "c_columns:3", "c_rows:4",
                                          "spindle_workspace:5", "spindle_touched:6", "spindle_row_ptr:7",
                                          "c_indices:8", "c_values:9", "c:-1"});
  // The scalar parameter keeps its place before the output.
  bool scalar_at_1 = false;
  for (auto& s : num.function.scalars) scalar_at_1 = scalar_at_1 || (s.origin.kind == sp::ir::ParamOrigin::scalar && s.origin.arg == 1);
  CHECK(scalar_at_1);
}

TEST_CASE("assemble_rows: row blocks in parallel, a column marker per block, workspace and gather in the numeric phase",
          "[lower][assembly]") {
  auto add = sp::define_kernel("add", [](sp::in<float, I, J> a, sp::in<float, I, J2> b, sp::out<float, I, Jc> c,
                                          sp::iter<I> i) {
    sp::for_each<J>([&](sp::iter<J> j) { c(i, j) += a(i, j); });
    sp::for_each<J2>([&](sp::iter<J2> j) { c(i, j) += b(i, j); });
  });
  CHECK(body(phase(add, sp::lower::AssemblyContext::symbolic)) == R"(  block add:
    for spindle_block in [0, spindle_blocks_len) parallel:  # axis spindle_blocks
      for i in [spindle_block_rows[spindle_block], spindle_block_rows[spindle_block] + spindle_block_rows[spindle_block + 1] - spindle_block_rows[spindle_block]):  # axis I
        block spindle_row:
          alloc spindle_count: local i64[]
          spindle_count = 0
          block add1:
            for j in [0, J_indptr[i + 1] - J_indptr[i]):  # axis J
              let spindle_col: i64 = i64(J_indices[J_indptr[i] + j])
              let spindle_fresh: bool = c_columns[spindle_block, spindle_col] != i32(i)
              c_columns[spindle_block, spindle_col] = i32(i)
              spindle_count = spindle_count + i64(spindle_fresh)
          block add2:
            for j2 in [0, J2_indptr[i + 1] - J2_indptr[i]):  # axis J2
              let spindle_col: i64 = i64(J2_indices[J2_indptr[i] + j2])
              let spindle_fresh: bool = c_columns[spindle_block, spindle_col] != i32(i)
              c_columns[spindle_block, spindle_col] = i32(i)
              spindle_count = spindle_count + i64(spindle_fresh)
          c_rows[i] = spindle_count
)");
  CHECK(body(phase(add, sp::lower::AssemblyContext::numeric)) == R"(  block add:
    for spindle_block in [0, spindle_blocks_len) parallel:  # axis spindle_blocks
      for i in [spindle_block_rows[spindle_block], spindle_block_rows[spindle_block] + spindle_block_rows[spindle_block + 1] - spindle_block_rows[spindle_block]):  # axis I
        block spindle_row:
          alloc spindle_count: local i64[]
          spindle_count = 0
          block add1:
            for j in [0, J_indptr[i + 1] - J_indptr[i]):  # axis J
              let spindle_col: i64 = i64(J_indices[J_indptr[i] + j])
              let spindle_fresh: bool = c_columns[spindle_block, spindle_col] != i32(i)
              c_columns[spindle_block, spindle_col] = i32(i)
              spindle_workspace[spindle_block, spindle_col] = select(spindle_fresh, 0.0f, spindle_workspace[spindle_block, spindle_col])
              if spindle_count < J_len:
                spindle_touched[spindle_block, spindle_count] = i32(spindle_col)
              spindle_count = spindle_count + i64(spindle_fresh)
              spindle_workspace[spindle_block, spindle_col] += a[J_indptr[i] + j]
          block add2:
            for j2 in [0, J2_indptr[i + 1] - J2_indptr[i]):  # axis J2
              let spindle_col: i64 = i64(J2_indices[J2_indptr[i] + j2])
              let spindle_fresh: bool = c_columns[spindle_block, spindle_col] != i32(i)
              c_columns[spindle_block, spindle_col] = i32(i)
              spindle_workspace[spindle_block, spindle_col] = select(spindle_fresh, 0.0f, spindle_workspace[spindle_block, spindle_col])
              if spindle_count < J_len:
                spindle_touched[spindle_block, spindle_count] = i32(spindle_col)
              spindle_count = spindle_count + i64(spindle_fresh)
              spindle_workspace[spindle_block, spindle_col] += b[J2_indptr[i] + j2]
          c_rows[i] = spindle_count
          let spindle_base: i64 = spindle_row_ptr[i]
          if spindle_count <= 32 && spindle_count <= spindle_row_ptr[i + 1] - spindle_base:
            block spindle_ranked:
              alloc spindle_rank: local i32[]
              for spindle_q in [0, spindle_count):  # axis spindle_place
                let spindle_key: i32 = spindle_touched[spindle_block, spindle_q]
                spindle_rank = 0
                for spindle_p in [0, spindle_count) reduction:  # axis spindle_rank
                  spindle_rank = spindle_rank + i32(spindle_touched[spindle_block, spindle_p] < spindle_key)
                let spindle_to: i64 = spindle_base + i64(spindle_rank)
                c_indices[spindle_to] = spindle_key
                c_values[spindle_to] = spindle_workspace[spindle_block, i64(spindle_key)]
          else:
            for spindle_q in [0, min(spindle_count, spindle_row_ptr[i + 1] - spindle_base)):  # axis spindle_gather
              let spindle_col: i64 = i64(spindle_touched[spindle_block, spindle_q])
              c_indices[spindle_base + spindle_q] = i32(spindle_col)
              c_values[spindle_base + spindle_q] = spindle_workspace[spindle_block, spindle_col]
)");
}

TEST_CASE("assemble_rows: with restore_workspace, each block fills its workspace row with the identity, the write "
          "has no restart and the epilogue restores every slot it copies out",
          "[lower][assembly]") {
  auto add = sp::define_kernel("add", [](sp::in<float, I, J> a, sp::in<float, I, J2> b, sp::out<float, I, Jc> c,
                                          sp::iter<I> i) {
    sp::for_each<J>([&](sp::iter<J> j) { c(i, j) += a(i, j); });
    sp::for_each<J2>([&](sp::iter<J2> j) { c(i, j) += b(i, j); });
  });
  const auto numeric = sp::lower::AssemblyContext::numeric;
  CHECK(body(phase(add, numeric, false, false, true)) == R"(  block add:
    for spindle_block in [0, spindle_blocks_len) parallel:  # axis spindle_blocks
      for spindle_x in [0, J_len):  # axis spindle_fill
        spindle_workspace[spindle_block, spindle_x] = 0.0f
      for i in [spindle_block_rows[spindle_block], spindle_block_rows[spindle_block] + spindle_block_rows[spindle_block + 1] - spindle_block_rows[spindle_block]):  # axis I
        block spindle_row:
          alloc spindle_count: local i64[]
          spindle_count = 0
          block add1:
            for j in [0, J_indptr[i + 1] - J_indptr[i]):  # axis J
              let spindle_col: i64 = i64(J_indices[J_indptr[i] + j])
              let spindle_fresh: bool = c_columns[spindle_block, spindle_col] != i32(i)
              c_columns[spindle_block, spindle_col] = i32(i)
              if spindle_count < J_len:
                spindle_touched[spindle_block, spindle_count] = i32(spindle_col)
              spindle_count = spindle_count + i64(spindle_fresh)
              spindle_workspace[spindle_block, spindle_col] += a[J_indptr[i] + j]
          block add2:
            for j2 in [0, J2_indptr[i + 1] - J2_indptr[i]):  # axis J2
              let spindle_col: i64 = i64(J2_indices[J2_indptr[i] + j2])
              let spindle_fresh: bool = c_columns[spindle_block, spindle_col] != i32(i)
              c_columns[spindle_block, spindle_col] = i32(i)
              if spindle_count < J_len:
                spindle_touched[spindle_block, spindle_count] = i32(spindle_col)
              spindle_count = spindle_count + i64(spindle_fresh)
              spindle_workspace[spindle_block, spindle_col] += b[J2_indptr[i] + j2]
          c_rows[i] = spindle_count
          let spindle_base: i64 = spindle_row_ptr[i]
          if spindle_count <= 32 && spindle_count <= spindle_row_ptr[i + 1] - spindle_base:
            block spindle_ranked:
              alloc spindle_rank: local i32[]
              for spindle_q in [0, spindle_count):  # axis spindle_place
                let spindle_key: i32 = spindle_touched[spindle_block, spindle_q]
                spindle_rank = 0
                for spindle_p in [0, spindle_count) reduction:  # axis spindle_rank
                  spindle_rank = spindle_rank + i32(spindle_touched[spindle_block, spindle_p] < spindle_key)
                let spindle_to: i64 = spindle_base + i64(spindle_rank)
                c_indices[spindle_to] = spindle_key
                c_values[spindle_to] = spindle_workspace[spindle_block, i64(spindle_key)]
                spindle_workspace[spindle_block, i64(spindle_key)] = 0.0f
          else:
            for spindle_q in [0, min(spindle_count, spindle_row_ptr[i + 1] - spindle_base)):  # axis spindle_gather
              let spindle_col: i64 = i64(spindle_touched[spindle_block, spindle_q])
              c_indices[spindle_base + spindle_q] = i32(spindle_col)
              c_values[spindle_base + spindle_q] = spindle_workspace[spindle_block, spindle_col]
              spindle_workspace[spindle_block, spindle_col] = 0.0f
)");
  // The symbolic phase has no workspace: unchanged.
  const auto symbolic = sp::lower::AssemblyContext::symbolic;
  CHECK(body(phase(add, symbolic, false, false, true)) == body(phase(add, symbolic)));

  // The identity is the operator's: max= starts from -inf.
  auto biggest = sp::define_kernel("biggest", [](sp::in<float, I, J> a, sp::in<float, I, J2> b,
                                                 sp::out<float, I, Jc> c, sp::iter<I> i) {
    sp::for_each<J>([&](sp::iter<J> j) { c(i, j).max_with(a(i, j)); });
    sp::for_each<J2>([&](sp::iter<J2> j) { c(i, j).max_with(b(i, j)); });
  });
  const std::string big = body(phase(biggest, numeric, false, false, true));
  CHECK(big.find("spindle_workspace[spindle_block, spindle_x] = -inf") != std::string::npos);
  CHECK(big.find("select(spindle_fresh") == std::string::npos);

  // Assignments alone need no identity (each new column's first write overwrites its slot):
  // nothing is filled or restored. (Two operators on one `out` buffer are rejected at
  // definition: its initial value would be ambiguous.)
  auto copy = sp::define_kernel("copy", [](sp::in<float, I, J> a, sp::out<float, I, Jc> c, sp::iter<I> i) {
    sp::for_each<J>([&](sp::iter<J> j) { c(i, j) = a(i, j); });
  });
  CHECK(body(phase(copy, numeric, false, false, true)) == body(phase(copy, numeric)));
  CHECK(body(phase(copy, numeric)).find("spindle_fill") == std::string::npos);
}

TEST_CASE("assemble_rows: an output written once per merged coordinate is counted, then appended in place",
          "[lower][assembly][coiteration]") {
  using U = sp::union_of<J, J2>;
  auto add = sp::define_kernel("uadd", [](sp::in<float, I, J> a, sp::in<float, I, J2> b, sp::out<float, I, Jc> c,
                                           sp::iter<I> i, sp::iter<U> j) { c(i, j) += a(i, j) + b(i, j); });
  // No scratch array is touched, so the block loop runs over the bounds (the runtime passes
  // the marker, workspace and list with no rows).
  const auto sym = phase(add, sp::lower::AssemblyContext::symbolic);
  CHECK(body(sym) == R"(  block uadd:
    for spindle_block in [0, spindle_blocks_plus_one_len + -1) parallel:  # axis spindle_blocks
      for i in [spindle_block_rows[spindle_block], spindle_block_rows[spindle_block] + spindle_block_rows[spindle_block + 1] - spindle_block_rows[spindle_block]):  # axis I
        block spindle_row:
          alloc spindle_count: local i64[]
          spindle_count = 0
          union j_or_j2 of [J_pos in [0, J_indptr[i + 1] - J_indptr[i]) key i64(J_indices[J_indptr[i] + J_pos]) present J_has, J2_pos in [0, J2_indptr[i + 1] - J2_indptr[i]) key i64(J2_indices[J2_indptr[i] + J2_pos]) present J2_has]:  # axis J_or_J2
            spindle_count = spindle_count + 1
          c_rows[i] = spindle_count
)");
  const auto num = phase(add, sp::lower::AssemblyContext::numeric);
  CHECK(body(num) == R"(  block uadd:
    for spindle_block in [0, spindle_blocks_plus_one_len + -1) parallel:  # axis spindle_blocks
      for i in [spindle_block_rows[spindle_block], spindle_block_rows[spindle_block] + spindle_block_rows[spindle_block + 1] - spindle_block_rows[spindle_block]):  # axis I
        block spindle_row:
          alloc spindle_count: local i64[]
          spindle_count = 0
          union j_or_j2 of [J_pos in [0, J_indptr[i + 1] - J_indptr[i]) key i64(J_indices[J_indptr[i] + J_pos]) present J_has, J2_pos in [0, J2_indptr[i + 1] - J2_indptr[i]) key i64(J2_indices[J2_indptr[i] + J2_pos]) present J2_has]:  # axis J_or_J2
            let spindle_at: i64 = spindle_row_ptr[i] + spindle_count
            if spindle_count < spindle_row_ptr[i + 1] - spindle_row_ptr[i]:
              c_indices[spindle_at] = i32(j_or_j2)
              c_values[spindle_at] = 0.0f
              c_values[spindle_at] += select(J_has, a[J_indptr[i] + J_pos], 0.0f) + select(J2_has, b[J2_indptr[i] + J2_pos], 0.0f)
            spindle_count = spindle_count + 1
          c_rows[i] = spindle_count
)");
  sp::lower::AssemblyContext numeric = sp::lower::split_assembly(add, sp::lower::AssemblyContext::numeric).context;
  sp::lower::AssemblyContext symbolic = sp::lower::split_assembly(add, sp::lower::AssemblyContext::symbolic).context;
  CHECK(sp::lower::rows_appended(num, numeric));
  CHECK_FALSE(sp::lower::uses_assembly_scratch(sym, symbolic));
  CHECK_FALSE(sp::lower::uses_assembly_scratch(num, numeric));
  // Two writes per row (the workspace path) are not appended.
  auto two = sp::define_kernel("add2", [](sp::in<float, I, J> a, sp::in<float, I, J2> b, sp::out<float, I, Jc> c,
                                           sp::iter<I> i) {
    sp::for_each<J>([&](sp::iter<J> j) { c(i, j) += a(i, j); });
    sp::for_each<J2>([&](sp::iter<J2> j) { c(i, j) += b(i, j); });
  });
  CHECK_FALSE(sp::lower::rows_appended(phase(two, sp::lower::AssemblyContext::numeric), numeric));
  CHECK(sp::lower::uses_assembly_scratch(phase(two, sp::lower::AssemblyContext::symbolic), symbolic));
}

TEST_CASE("assemble_rows: with bounded_rows, the symbolic phase adds the merged fibers' lengths (a union) or their "
          "least (an intersection) instead of merging, and the numeric phase appends a block's rows one after another",
          "[lower][assembly][coiteration]") {
  using U = sp::union_of<J, J2>;
  using X = sp::intersection_of<J, J2>;
  auto add = sp::define_kernel("uadd", [](sp::in<float, I, J> a, sp::in<float, I, J2> b, sp::out<float, I, Jc> c,
                                           sp::iter<I> i, sp::iter<U> j) {
    sp::when(a(i, j) + b(i, j) != 0.0f, [&] { c(i, j) = a(i, j) + b(i, j); });
  });
  const auto sym = phase(add, sp::lower::AssemblyContext::symbolic, false, true);
  CHECK(body(sym) == R"(  block uadd:
    for spindle_block in [0, spindle_blocks_plus_one_len + -1) parallel:  # axis spindle_blocks
      for i in [spindle_block_rows[spindle_block], spindle_block_rows[spindle_block] + spindle_block_rows[spindle_block + 1] - spindle_block_rows[spindle_block]):  # axis I
        block spindle_row:
          alloc spindle_count: local i64[]
          spindle_count = 0
          block spindle_merge_bound:
            spindle_count = spindle_count + (J_indptr[i + 1] - J_indptr[i] + (J2_indptr[i + 1] - J2_indptr[i]))
          c_rows[i] = spindle_count
)");
  CHECK(sp::lower::counts_bound_merges(sym));
  CHECK_FALSE(sp::lower::counts_bound_merges(phase(add, sp::lower::AssemblyContext::symbolic)));
  const auto num = phase(add, sp::lower::AssemblyContext::numeric, false, true);
  const std::string printed = body(num);
  INFO(printed);
  CHECK(printed.find(R"(    for spindle_block in [0, spindle_blocks_plus_one_len + -1) parallel:  # axis spindle_blocks
      block spindle_block_rows:
        alloc spindle_cursor: local i64[]
        spindle_cursor = spindle_row_ptr[spindle_block_rows[spindle_block]]
        for i in )") != std::string::npos);
  CHECK(printed.find("let spindle_at: i64 = spindle_cursor + spindle_count") != std::string::npos);
  CHECK(printed.find(R"(            c_rows[i] = spindle_count
            spindle_cursor = spindle_cursor + min(spindle_count, spindle_row_ptr[i + 1] - spindle_row_ptr[i]))") !=
        std::string::npos);
  auto mul = sp::define_kernel("imul", [](sp::in<float, I, J> a, sp::in<float, I, J2> b, sp::out<float, I, Jc> c,
                                           sp::iter<I> i, sp::iter<X> j) { c(i, j) += a(i, j) * b(i, j); });
  CHECK(body(phase(mul, sp::lower::AssemblyContext::symbolic, false, true)).find(
            "spindle_count = spindle_count + min(J_indptr[i + 1] - J_indptr[i], J2_indptr[i + 1] - J2_indptr[i])") !=
        std::string::npos);
  // Not a merge's write (a copy of a's pattern, appended by the dense loop or marked): counted exactly.
  auto two = sp::define_kernel("add2", [](sp::in<float, I, J> a, sp::in<float, I, J2> b, sp::out<float, I, Jc> c,
                                           sp::iter<I> i) {
    sp::for_each<J>([&](sp::iter<J> j) { c(i, j) += a(i, j); });
    sp::for_each<J2>([&](sp::iter<J2> j) { c(i, j) += b(i, j); });
  });
  CHECK_FALSE(sp::lower::counts_bound_merges(phase(two, sp::lower::AssemblyContext::symbolic, false, true)));
  CHECK(body(phase(two, sp::lower::AssemblyContext::numeric, false, true)).find("spindle_cursor") == std::string::npos);
}

namespace {
// Targets of pack_bounded_rows: one that shrinks its arrays in place, one that cannot (the
// runtime then allocates anew and copies).
struct PackTarget {
  bool can_shrink = true;
  int allocations = 0;
  std::vector<std::int32_t> idx;
  std::vector<float> val;
  std::vector<std::int64_t> row_ptr;
  void allocate(std::int64_t nnz, const std::vector<std::int64_t>& ptr, void*& i, void*& v) {
    ++allocations;
    idx.assign(static_cast<std::size_t>(nnz), -7);
    val.assign(static_cast<std::size_t>(nnz), -7.0f);
    row_ptr = ptr;
    i = idx.data();
    v = val.data();
  }
  bool shrink(std::int64_t nnz, const std::vector<std::int64_t>& ptr) {
    if (!can_shrink) return false;
    idx.resize(static_cast<std::size_t>(nnz));
    val.resize(static_cast<std::size_t>(nnz));
    row_ptr = ptr;
    return true;
  }
};
}  // namespace

TEST_CASE("pack_bounded_rows: each row's count within its bound, the blocks' entries moved together, the target "
          "shrunk or filled anew",
          "[runtime][assembly][coiteration]") {
  using U = sp::union_of<J, J2>;
  auto add = sp::define_kernel("uadd", [](sp::in<float, I, J> a, sp::in<float, I, J2> b, sp::out<float, I, Jc> c,
                                           sp::iter<I> i, sp::iter<U> j) { c(i, j) = a(i, j) + b(i, j); });
  const sp::runtime::AssemblyPlan plan(add);
  // Rows bounded by 3, 0, 2, 4, 1 (slots [0,3) [3,3) [3,5) [5,9) [9,10)); blocks of rows {0, 1}
  // and {2, 3, 4}; the rows hold 2, 0, 2, 1, 1 entries, each block's one after another from
  // its first row's slot (column 10 r + q, value r + q / 10).
  const std::vector<std::int64_t> bound{3, 0, 2, 4, 1}, counts{2, 0, 2, 1, 1}, blocks{0, 2, 5};
  const std::vector<std::int64_t> row_ptr = plan.row_offsets(bound);
  for (bool can_shrink : {true, false}) {
    INFO("target shrinks in place: " << can_shrink);
    PackTarget t;
    t.can_shrink = can_shrink;
    void *i = nullptr, *v = nullptr;
    t.allocate(row_ptr.back(), row_ptr, i, v);
    for (std::size_t b = 0; b + 1 < blocks.size(); ++b)
      for (std::int64_t r = blocks[b], at = row_ptr[static_cast<std::size_t>(blocks[b])]; r < blocks[b + 1]; ++r)
        for (std::int64_t q = 0; q < counts[static_cast<std::size_t>(r)]; ++q, ++at) {
          t.idx[static_cast<std::size_t>(at)] = static_cast<std::int32_t>(10 * r + q);
          t.val[static_cast<std::size_t>(at)] = static_cast<float>(r) + static_cast<float>(q) / 10;
        }
    sp::runtime::pack_bounded_rows(plan, blocks, row_ptr, bound, counts, i, v, t);
    CHECK(t.allocations == (can_shrink ? 1 : 2));
    CHECK(t.row_ptr == std::vector<std::int64_t>{0, 2, 2, 4, 5, 6});
    CHECK(t.idx == std::vector<std::int32_t>{0, 1, 20, 21, 30, 40});
    CHECK(t.val == std::vector<float>{0.0f, 0.1f, 2.0f, 2.1f, 3.0f, 4.0f});
  }
  // Exact counts: nothing moves, the target keeps its arrays.
  PackTarget exact;
  void *i = nullptr, *v = nullptr;
  exact.allocate(row_ptr.back(), row_ptr, i, v);
  sp::runtime::pack_bounded_rows(plan, blocks, row_ptr, bound, bound, i, v, exact);
  CHECK(exact.row_ptr == row_ptr);
  CHECK(exact.idx.size() == 10);
  // A row over its bound: an InternalError naming the row, and the target left as it was.
  std::vector<std::int64_t> over = counts;
  over[1] = 1;
  CHECK_THROWS_AS(sp::runtime::pack_bounded_rows(plan, blocks, row_ptr, bound, over, i, v, exact),
                  sp::InternalError);
  CHECK_THROWS_WITH(sp::runtime::pack_bounded_rows(plan, blocks, row_ptr, bound, over, i, v, exact),
                    Catch::Contains("wrote 1 entries in row 1, more than the 0 its symbolic phase bounded"));
  CHECK(exact.row_ptr == row_ptr);
}

namespace {

// Rows as the workspace path gathers them: distinct columns, a concatenation of ascending runs
// (each input fiber adds one), each row drawn with its own length, column range and run count.
template <class I, class V>
void check_sort_rows(std::int64_t cols, std::uint64_t seed, int threads, std::int64_t sorted_up_to) {
  std::mt19937_64 rng(seed);
  // Lengths that reach every path: 0, 1, short (insertion), dense ranges (bitmap), sparse
  // ranges (radix with one or several passes), and rows already in order.
  const std::vector<std::int64_t> lengths{0, 1, 2, 5, 31, 32, 33, 40, 64, 100, 257, 1000, 3000};
  std::vector<std::int64_t> row_ptr{0};
  std::vector<I> idx;
  std::vector<V> val;
  std::vector<std::vector<std::pair<I, V>>> want;
  for (int rep = 0; rep < 6; ++rep)
    for (std::int64_t n0 : lengths) {
      const std::int64_t n = std::min<std::int64_t>(n0, cols);
      // The columns: n distinct ones from a window of the columns (dense or sparse).
      const std::int64_t window = std::min<std::int64_t>(cols, rep % 2 ? n * (1 + static_cast<std::int64_t>(rng() % 4)) : cols);
      const std::int64_t start = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(cols - window + 1));
      std::set<std::int64_t> chosen;
      while (static_cast<std::int64_t>(chosen.size()) < n) chosen.insert(start + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(window)));
      std::vector<std::pair<I, V>> row;
      for (std::int64_t c : chosen) row.push_back({static_cast<I>(c), static_cast<V>(static_cast<std::int64_t>(rng() % 1000) - 500)});
      want.push_back(row);
      // Runs: shuffle, then sort each of k pieces (k = 1: a row in order).
      std::shuffle(row.begin(), row.end(), rng);
      const std::int64_t k = rep == 5 ? 1 : 1 + static_cast<std::int64_t>(rng() % 8);
      for (std::int64_t piece = 0; piece < k; ++piece)
        std::sort(row.begin() + n * piece / k, row.begin() + n * (piece + 1) / k,
                  [](const auto& a, const auto& b) { return a.first < b.first; });
      if (n <= sorted_up_to) std::sort(row.begin(), row.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      for (const auto& [c, v] : row) idx.push_back(c), val.push_back(v);
      row_ptr.push_back(static_cast<std::int64_t>(idx.size()));
    }
  sp::runtime::ThreadPool pool(threads);
  sp::runtime::sort_rows(pool, static_cast<std::int64_t>(want.size()), row_ptr.data(), idx.data(), val.data(),
                         sorted_up_to);
  for (std::size_t r = 0; r < want.size(); ++r) {
    INFO("row " << r << " of " << want[r].size() << " entries");
    std::vector<std::pair<I, V>> got;
    for (std::int64_t q = row_ptr[r]; q < row_ptr[r + 1]; ++q) got.push_back({idx[static_cast<std::size_t>(q)], val[static_cast<std::size_t>(q)]});
    REQUIRE(got == want[r]);
  }
}

}  // namespace

TEST_CASE("sort_rows: rows of ascending runs sorted by column with their values, by insertion, bitmap and radix "
          "passes, any column range and index type, rows the kernel ranked left alone",
          "[runtime][assembly]") {
  for (int threads : {1, 3}) {
    INFO("threads " << threads);
    check_sort_rows<std::int32_t, float>(5000, 1, threads, 0);
    check_sort_rows<std::int32_t, float>(200000, 2, threads, 32);
    check_sort_rows<std::int32_t, double>(40, 3, threads, 0);  // every row dense in a narrow range
    check_sort_rows<std::int64_t, std::int64_t>(std::int64_t{1} << 40, 4, threads, 0);  // columns past 32 bits
    check_sort_rows<std::int64_t, std::int32_t>(70000, 5, threads, 32);
  }
  // Rows up to sorted_up_to are not touched, even out of order (the kernel's promise).
  sp::runtime::ThreadPool pool(1);
  std::vector<std::int64_t> row_ptr{0, 3, 6};
  std::vector<std::int32_t> idx{2, 0, 1, 5, 3, 4};
  std::vector<float> val{2, 0, 1, 5, 3, 4};
  sp::runtime::sort_rows(pool, 2, row_ptr.data(), idx.data(), val.data(), 3);
  CHECK(idx == std::vector<std::int32_t>{2, 0, 1, 5, 3, 4});
  sp::runtime::sort_rows(pool, 2, row_ptr.data(), idx.data(), val.data(), 2);
  CHECK(idx == std::vector<std::int32_t>{0, 1, 2, 3, 4, 5});
  CHECK(val == std::vector<float>{0, 1, 2, 3, 4, 5});
}

TEST_CASE("assemble_rows: an output written at a dense column loop's variable (dense -> CSR under a when) is "
          "appended, one written at a sparse fiber's coordinates is not",
          "[lower][assembly][when]") {
  struct K : sp::dense_fixed {};
  struct Ck : sp::assembled<I, K> {};
  auto to_csr = sp::define_kernel("to_csr", [](sp::in<float, I, K> d, sp::out<float, I, Ck> c, sp::iter<I> i,
                                               sp::iter<K> k) { sp::when(d(i, k) != 0, [&] { c(i, k) = d(i, k); }); });
  const auto sym = phase(to_csr, sp::lower::AssemblyContext::symbolic);
  CHECK(body(sym) == R"(  block to_csr:
    for spindle_block in [0, spindle_blocks_plus_one_len + -1) parallel:  # axis spindle_blocks
      for i in [spindle_block_rows[spindle_block], spindle_block_rows[spindle_block] + spindle_block_rows[spindle_block + 1] - spindle_block_rows[spindle_block]):  # axis I
        block spindle_row:
          alloc spindle_count: local i64[]
          spindle_count = 0
          for k in [0, K_len):  # axis K
            spindle_count = spindle_count + i64(a[i, k] != 0.0f)
          b_rows[i] = spindle_count
)");
  const auto num = phase(to_csr, sp::lower::AssemblyContext::numeric);
  CHECK(body(num) == R"(  block to_csr:
    for spindle_block in [0, spindle_blocks_plus_one_len + -1) parallel:  # axis spindle_blocks
      for i in [spindle_block_rows[spindle_block], spindle_block_rows[spindle_block] + spindle_block_rows[spindle_block + 1] - spindle_block_rows[spindle_block]):  # axis I
        block spindle_row:
          alloc spindle_count: local i64[]
          spindle_count = 0
          for k in [0, K_len):  # axis K
            let spindle_at: i64 = spindle_row_ptr[i] + spindle_count
            if spindle_count < spindle_row_ptr[i + 1] - spindle_row_ptr[i]:
              b_indices[spindle_at] = i32(k)
              b_values[spindle_at] = a[i, k]
            spindle_count = spindle_count + i64(a[i, k] != 0.0f)
          b_rows[i] = spindle_count
)");
  // The test is not a branch (the slot at the count is written whatever it gave, the count
  // grows by its 0 or 1) only where the column and the value may be read when it fails: here
  // they read what the test reads. A value that divides integers, or reads an element the
  // test does not, keeps the branch in the numeric phase (the count stays branch-free).
  struct Ci : sp::assembled<I, K> {};
  auto divide = sp::define_kernel("divide", [](sp::in<std::int32_t, I, K> d, sp::in<std::int32_t, I, K> e,
                                               sp::out<std::int32_t, I, Ci> c, sp::iter<I> i, sp::iter<K> k) {
    sp::when(e(i, k) != 0, [&] { c(i, k) = d(i, k) / e(i, k); });
  });
  auto other = sp::define_kernel("other", [](sp::in<float, I, K> d, sp::in<float, K> w, sp::out<float, I, Ck> c,
                                             sp::iter<I> i, sp::iter<K> k) {
    sp::when(d(i, k) != 0, [&] { c(i, k) = w(k); });
  });
  for (const auto* f : {&divide, &other}) {
    const std::string n = body(phase(*f, sp::lower::AssemblyContext::numeric));
    CHECK_THAT(n, Catch::Contains("spindle_count = spindle_count + 1"));
    CHECK_THAT(body(phase(*f, sp::lower::AssemblyContext::symbolic)), Catch::Contains("spindle_count + i64("));
  }
  sp::lower::AssemblyContext numeric = sp::lower::split_assembly(to_csr, sp::lower::AssemblyContext::numeric).context;
  CHECK(sp::lower::rows_appended(num, numeric));
  // A sparse fiber's coordinates ascend only where the caller's fibers are sorted: the
  // marker and workspace path, whatever the input.
  auto copy = sp::define_kernel("copy_pattern", [](sp::in<float, I, J> a, sp::out<float, I, Jc> c, sp::iter<I> i,
                                                   sp::iter<J> j) { c(i, j) = a(i, j); });
  CHECK_FALSE(sp::lower::rows_appended(phase(copy, sp::lower::AssemblyContext::numeric), numeric));
  CHECK_FALSE(sp::lower::appends_when_selected(phase(copy, sp::lower::AssemblyContext::numeric), numeric));
}

TEST_CASE("assemble_rows: with sorted_fiber_rows, an output written at one input fiber's coordinates gets the append "
          "path and the marker path, selected by scratch arrays with no blocks",
          "[lower][assembly][when]") {
  auto copy = sp::define_kernel("copy_pattern", [](sp::in<float, I, J> a, sp::out<float, I, Jc> c, sp::iter<I> i,
                                                   sp::iter<J> j) { c(i, j) = a(i, j); });
  const auto sym = phase(copy, sp::lower::AssemblyContext::symbolic, true);
  CHECK(body(sym) == R"(  block copy_pattern:
    for spindle_block in [0, spindle_blocks_plus_one_len + -1) parallel:  # axis spindle_blocks
      if spindle_blocks_len == 0:
        for i in [spindle_block_rows[spindle_block], spindle_block_rows[spindle_block] + spindle_block_rows[spindle_block + 1] - spindle_block_rows[spindle_block]):  # axis I
          block spindle_row:
            alloc spindle_count: local i64[]
            spindle_count = 0
            for j in [0, J_indptr[i + 1] - J_indptr[i]):  # axis J
              spindle_count = spindle_count + 1
            b_rows[i] = spindle_count
      else:
        for i in [spindle_block_rows[spindle_block], spindle_block_rows[spindle_block] + spindle_block_rows[spindle_block + 1] - spindle_block_rows[spindle_block]):  # axis I
          block spindle_row:
            alloc spindle_count: local i64[]
            spindle_count = 0
            for j in [0, J_indptr[i + 1] - J_indptr[i]):  # axis J
              let spindle_col: i64 = i64(J_indices[J_indptr[i] + j])
              let spindle_fresh: bool = b_columns[spindle_block, spindle_col] != i32(i)
              b_columns[spindle_block, spindle_col] = i32(i)
              spindle_count = spindle_count + i64(spindle_fresh)
            b_rows[i] = spindle_count
)");
  sp::lower::AssemblyPhase ph = sp::lower::split_assembly(copy, sp::lower::AssemblyContext::numeric);
  const auto num = phase(copy, sp::lower::AssemblyContext::numeric, true);
  CHECK(sp::lower::appends_when_selected(num, ph.context));
  CHECK_FALSE(sp::lower::rows_appended(num, ph.context));  // the marker path reads the scratch arrays
  // The append path writes in place, the marker path through the workspace.
  const std::string text = body(num);
  CHECK_THAT(text, Catch::Contains("b_indices[spindle_at] = i32(i64(J_indices[J_indptr[i] + j]))"));
  CHECK_THAT(text, Catch::Contains("spindle_workspace[spindle_block, spindle_col] = a[J_indptr[i] + j]"));
  // A write under a second loop (the product's k loop) has no append path.
  struct K : sp::dense_fixed {};
  auto twice = sp::define_kernel("row_sums_into_pattern", [](sp::in<float, I, J> a, sp::in<float, I, K> x,
                                                              sp::out<float, I, Jc> c, sp::iter<I> i, sp::iter<J> j) {
    sp::for_each<K>([&](sp::iter<K> k) { c(i, j) += a(i, j) * x(i, k); });
  });
  sp::lower::AssemblyPhase tp = sp::lower::split_assembly(twice, sp::lower::AssemblyContext::numeric);
  CHECK_FALSE(sp::lower::appends_when_selected(phase(twice, sp::lower::AssemblyContext::numeric, true), tp.context));
}

TEST_CASE("assemble_scattered: rows written elsewhere than at the first iterator are counted, then collected in "
          "their segments, blocks of the outermost loop in parallel",
          "[lower][assembly]") {
  struct Ct : sp::assembled<sp::dense<J>, I> {};
  auto tr = sp::define_kernel("tr", [](sp::in<float, I, J> a, sp::out<float, sp::dense<J>, Ct> c, sp::iter<I> i,
                                       sp::iter<J> j) { c(j, i) = a(i, j); });
  auto copy = sp::define_kernel("copy", [](sp::in<float, I, J> a, sp::out<float, I, Jc> c, sp::iter<I> i,
                                           sp::iter<J> j) { c(i, j) = a(i, j); });
  CHECK(sp::lower::rows_scattered(tr));
  CHECK_FALSE(sp::lower::rows_scattered(copy));
  CHECK(body(phase(tr, sp::lower::AssemblyContext::symbolic)) == R"(  block tr:
    for spindle_block in [0, spindle_count_blocks_len) parallel:  # axis spindle_blocks
      let spindle_lo: i64 = I_len * spindle_block / spindle_count_blocks_len
      let spindle_hi: i64 = I_len * (spindle_block + 1) / spindle_count_blocks_len
      for i in [spindle_lo, spindle_lo + spindle_hi - spindle_lo):  # axis I
        for j in [0, J_indptr[i + 1] - J_indptr[i]):  # axis J
          let spindle_row: i64 = i64(J_indices[J_indptr[i] + j])
          b_rows[spindle_block, spindle_row] += 1
)");
  CHECK(body(phase(tr, sp::lower::AssemblyContext::numeric)) == R"(  block spindle_segments_ascend:
    block tr:
      for spindle_block in [0, spindle_count_blocks_len) parallel:  # axis spindle_blocks
        let spindle_lo: i64 = I_len * spindle_block / spindle_count_blocks_len
        let spindle_hi: i64 = I_len * (spindle_block + 1) / spindle_count_blocks_len
        for i in [spindle_lo, spindle_lo + spindle_hi - spindle_lo):  # axis I
          for j in [0, J_indptr[i + 1] - J_indptr[i]):  # axis J
            let spindle_row: i64 = i64(J_indices[J_indptr[i] + j])
            let spindle_at: i64 = b_rows[spindle_block, spindle_row]
            if spindle_at < spindle_nnz_len:
              b_indices[spindle_at] = i32(i)
              b_values[spindle_at] = a[J_indptr[i] + j]
            b_rows[spindle_block, spindle_row] = spindle_at + 1
)");
}

TEST_CASE("assemble_scattered: a numeric phase that writes each row once per blocked iteration, at that iterator's "
          "column, is marked as filling its segments in ascending order, and other shapes are not",
          "[lower][assembly]") {
  using Ctx = sp::lower::AssemblyContext;
  struct Ct : sp::assembled<sp::dense<J>, I> {};
  struct Lt : sp::assembled<sp::dense<L>, I> {};
  struct Ci : sp::assembled<sp::dense<J>, J> {};
  auto ascends = [](const sp::ir::Function& f) {
    return sp::lower::segments_ascend_when_sorted(phase(f, Ctx::numeric));
  };
  // CSR -> CSC, also under a when: the fiber's coordinates, each once per row i, at column i.
  auto tr = sp::define_kernel("tr", [](sp::in<float, I, J> a, sp::out<float, sp::dense<J>, Ct> c, sp::iter<I> i,
                                       sp::iter<J> j) { c(j, i) = a(i, j); });
  auto positive = sp::define_kernel("positive", [](sp::in<float, I, J> a, sp::out<float, sp::dense<J>, Ct> c,
                                                   sp::iter<I> i, sp::iter<J> j) {
    sp::when(a(i, j) > 0.0f, [&] { c(j, i) = a(i, j); });
  });
  auto sum_tr = sp::define_kernel("sum_tr", [](sp::in<float, I, J> a, sp::out<float, sp::dense<J>, Ct> c,
                                               sp::iter<I> i, sp::iter<J> j) { c(j, i) += a(i, j) * 2.0f; });
  CHECK(ascends(tr));
  CHECK(ascends(positive));
  CHECK(ascends(sum_tr));
  CHECK_FALSE(sp::lower::segments_ascend_when_sorted(phase(tr, Ctx::symbolic)));  // only the numeric phase fills
  // The mark wraps the phase; the loops are those of the unmarked numeric phase.
  CHECK(body(phase(tr, Ctx::numeric)).rfind("  block spindle_segments_ascend:\n    block tr:\n", 0) == 0);
  // A 3-level tensor: row k of c can come from two fibers j of one i (two loops inside i).
  auto tr3 = sp::define_kernel("tr3", [](sp::in<float, I, J, L> a, sp::out<float, sp::dense<L>, Lt> c,
                                         sp::iter<I> i, sp::iter<J> j, sp::iter<L> l) { c(l, i) += a(i, j, l); });
  CHECK_FALSE(ascends(tr3));
  // The column is not the blocked iterator: a row's columns come in the order of the fiber.
  auto by_col = sp::define_kernel("by_col", [](sp::in<float, I, J> a, sp::out<float, sp::dense<J>, Ci> c,
                                               sp::iter<I> i, sp::iter<J> j) { c(j, j) += a(i, j); });
  CHECK_FALSE(ascends(by_col));
}

TEST_CASE("flatten_position_loops: a loop over fibers whose body reads only the positions becomes one loop over the "
          "positions, and a body that reads the row keeps its nest",
          "[lower][assembly]") {
  struct Ct : sp::assembled<sp::dense<J>, I> {};
  auto tr = sp::define_kernel("tr", [](sp::in<float, I, J> a, sp::out<float, sp::dense<J>, Ct> c, sp::iter<I> i,
                                       sp::iter<J> j) { c(j, i) = a(i, j); });
  auto flat = [&](sp::lower::AssemblyContext::Phase p) {
    const auto f = phase(tr, p);
    return sp::lower::simplify(sp::lower::flatten_position_loops(f, ctx(f)), ctx(f));
  };
  // The symbolic phase counts each position's row: the rows' loop goes, the blocks stay
  // blocks of rows (the numeric phase's counts must agree with them).
  CHECK(body(flat(sp::lower::AssemblyContext::symbolic)) == R"(  block tr:
    for spindle_block in [0, spindle_count_blocks_len) parallel:  # axis spindle_blocks
      let spindle_lo: i64 = I_len * spindle_block / spindle_count_blocks_len
      let spindle_hi: i64 = I_len * (spindle_block + 1) / spindle_count_blocks_len
      let spindle_pos_lo: i64 = i64(J_indptr[spindle_lo])
      let spindle_pos_hi: i64 = i64(J_indptr[spindle_lo + (spindle_hi - spindle_lo)])
      for spindle_pos in [spindle_pos_lo, spindle_pos_lo + spindle_pos_hi - spindle_pos_lo):  # axis J
        let spindle_row: i64 = i64(J_indices[spindle_pos])
        b_rows[spindle_block, spindle_row] += 1
)");
  // The numeric phase stores i: unchanged.
  CHECK(body(flat(sp::lower::AssemblyContext::numeric)) == body(phase(tr, sp::lower::AssemblyContext::numeric)));
  // A row-first kernel over an assembled output reads i (its row): unchanged; an SpMV-like
  // loop nest outside any assembly reads i too.
  auto copy = sp::define_kernel("copy", [](sp::in<float, I, J> a, sp::out<float, I, Jc> c, sp::iter<I> i,
                                           sp::iter<J> j) { c(i, j) = a(i, j); });
  const auto cs = phase(copy, sp::lower::AssemblyContext::symbolic);
  CHECK(body(sp::lower::flatten_position_loops(cs, ctx(cs))) == body(cs));
  // Column sums (h(j) += a(i, j): the column and the value are read at the position, the row
  // never) flatten too.
  auto colsum = sp::define_kernel("colsum", [](sp::in<float, I, J> a, sp::out<float, sp::dense<J>> h, sp::iter<I> i,
                                               sp::iter<J> j) { h(j) += a(i, j); });
  const auto t3 = sp::lower::hoist_loop_invariants(stage3(colsum), ctx(colsum));
  const std::string flat_sums = body(sp::lower::flatten_position_loops(t3, ctx(t3)));
  CHECK(flat_sums.find("for spindle_pos in") != std::string::npos);
  CHECK(flat_sums.find("for i in") == std::string::npos);
}

// Golden tests: the printed IR of every stage and the generated C of each operator of
// spindle/ops.hpp, compared with tests/golden/data/<op>.txt. After an intended change,
// regenerate with SPINDLE_UPDATE_GOLDEN=1 and review the diff.
#include <catch2/catch.hpp>

#include <spindle/driver/pipeline.hpp>
#include <spindle/spindle.hpp>

#include "golden/golden_support.hpp"

namespace {

namespace ops = spindle::ops;

std::string lowered_text(const spindle::ir::Function& stage1, const spindle::Schedule& schedule = {}) {
  spindle::driver::PipelineOptions o;
  o.context.kernel = stage1.name;
  o.context.schedule = schedule;
  auto r = spindle::driver::lower_to_c(stage1, o);
  return spindle::ir::to_string(r.stage1) + spindle::ir::to_string(r.stage2) + spindle::ir::to_string(r.stage3) +
         "# generated C (" + r.source.symbol + ")\n" + r.source.source;
}

}  // namespace

TEST_CASE("golden: every stage of each operator", "[golden]") {
  golden::check_golden("spmv", lowered_text(ops::spmv<float>().ir()));
  golden::check_golden("spmv_i64", lowered_text(ops::spmv<double, ops::J64>().ir()));
  golden::check_golden("spmm", lowered_text(ops::spmm<float>().ir()));
  golden::check_golden("spmm_dense_j", lowered_text(ops::spmm_dense_j<float>().ir()));
  golden::check_golden("sddmm", lowered_text(ops::sddmm<float>().ir()));
  golden::check_golden("row_sum", lowered_text(ops::row_sum<float>().ir()));
  golden::check_golden("scale", lowered_text(ops::scale<float>().ir()));
  golden::check_golden("softmax", lowered_text(ops::softmax<float>().ir()));
  golden::check_golden("ragged_matmul", lowered_text(ops::ragged_matmul<float>().ir()));
  golden::check_golden("csf_reduce", lowered_text(ops::csf_reduce<double>().ir()));
  golden::check_golden("bsr_spmm_4x4", lowered_text(ops::bsr_spmm_kernel<float, 4, 4>().ir()));
  golden::check_golden("ell_spmm", lowered_text(ops::ell_spmm<float>().ir()));
  golden::check_golden("coo_spmm", lowered_text(ops::coo_spmm<float>().ir()));
  golden::check_golden("segment_sum", lowered_text(ops::segment_sum<double, std::int64_t>().ir()));
  // A fused chain (schedule/sparse_fuse.hpp): one loop over the nonzeros, rows by segment search.
  golden::check_golden("sddmm_fused",
                       lowered_text(ops::sddmm<float>().ir(), spindle::Schedule().sparse_fuse("sddmm", {"I", "J"})));
  golden::check_golden("csf_reduce_fused",
                       lowered_text(ops::csf_reduce<double>().ir(), spindle::Schedule().sparse_fuse("csf_reduce", {"J", "L"})));
}

namespace {
struct WI : spindle::dense_fixed {};
struct WJ : spindle::sparse_variable<WI> {};
}  // namespace

TEST_CASE("golden: conditional statements (spindle::when) through every stage", "[golden]") {
  // Positive entries summed, the others' maximum magnitude (an else branch with a local).
  auto k = spindle::kernel("when_split_rows", spindle::names{"A", "pos", "neg"},
                           [](spindle::in<float, WI, WJ> a, spindle::out<float, WI> pos, spindle::out<float, WI> neg,
                              spindle::iter<WI> i, spindle::iter<WJ> j) {
                             spindle::when(
                                 a(i, j) > 0, [&] { pos(i) += a(i, j); },
                                 [&] {
                                   spindle::local<float> m(0.0f - a(i, j));
                                   neg(i).max_with(m);
                                 });
                           });
  golden::check_golden("when_split_rows", lowered_text(k.ir()));
}

TEST_CASE("golden: lowering is deterministic", "[golden]") {
  // Two definitions of the same kernel lower to identical text and the same symbol.
  CHECK(lowered_text(ops::spmm<float>().ir()) == lowered_text(ops::spmm<float>().ir()));
  CHECK(lowered_text(ops::softmax<double>().ir()) == lowered_text(ops::softmax<double>().ir()));
}

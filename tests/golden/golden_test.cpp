// Golden tests: the printed IR of every stage and the generated C of each operator of
// spindle/ops.hpp, compared with tests/golden/data/<op>.txt. After an intended change,
// regenerate with SPINDLE_UPDATE_GOLDEN=1 and review the diff.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <spindle/driver/pipeline.hpp>
#include <spindle/spindle.hpp>

namespace {

namespace ops = spindle::ops;

std::string lowered_text(const spindle::ir::Function& stage1) {
  spindle::driver::PipelineOptions o;
  o.context.kernel = stage1.name;
  auto r = spindle::driver::lower_to_c(stage1, o);
  return spindle::ir::to_string(r.stage1) + spindle::ir::to_string(r.stage2) + spindle::ir::to_string(r.stage3) +
         "# generated C (" + r.source.symbol + ")\n" + r.source.source;
}

// The first line where two texts differ, for a readable failure.
std::string first_difference(const std::string& a, const std::string& b) {
  std::istringstream x(a), y(b);
  std::string la, lb;
  for (int line = 1;; ++line) {
    bool ga = static_cast<bool>(std::getline(x, la)), gb = static_cast<bool>(std::getline(y, lb));
    if (!ga && !gb) return "identical";
    if (la != lb || ga != gb)
      return "line " + std::to_string(line) + ":\n  expected: " + (gb ? lb : "<end>") + "\n  actual:   " + (ga ? la : "<end>");
  }
}

void check_golden(const std::string& name, const std::string& actual) {
  std::string path = std::string(SPINDLE_TEST_SOURCE_DIR) + "/golden/data/" + name + ".txt";
  const char* update = std::getenv("SPINDLE_UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    std::ofstream(path) << actual;
    WARN("updated " << path);
    return;
  }
  std::ifstream in(path);
  INFO("golden file " << path << " (regenerate with SPINDLE_UPDATE_GOLDEN=1)");
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  std::string expected = ss.str();
  INFO(first_difference(actual, expected));
  CHECK(actual == expected);
}

}  // namespace

TEST_CASE("golden: every stage of each operator", "[golden]") {
  check_golden("spmv", lowered_text(ops::spmv<float>().ir()));
  check_golden("spmv_i64", lowered_text(ops::spmv<double, ops::J64>().ir()));
  check_golden("spmm", lowered_text(ops::spmm<float>().ir()));
  check_golden("spmm_dense_j", lowered_text(ops::spmm_dense_j<float>().ir()));
  check_golden("sddmm", lowered_text(ops::sddmm<float>().ir()));
  check_golden("row_sum", lowered_text(ops::row_sum<float>().ir()));
  check_golden("scale", lowered_text(ops::scale<float>().ir()));
  check_golden("softmax", lowered_text(ops::softmax<float>().ir()));
  check_golden("ragged_matmul", lowered_text(ops::ragged_matmul<float>().ir()));
  check_golden("csf_reduce", lowered_text(ops::csf_reduce<double>().ir()));
}

TEST_CASE("golden: lowering is deterministic", "[golden]") {
  // Two definitions of the same kernel lower to identical text and the same symbol.
  CHECK(lowered_text(ops::spmm<float>().ir()) == lowered_text(ops::spmm<float>().ir()));
  CHECK(lowered_text(ops::softmax<double>().ir()) == lowered_text(ops::softmax<double>().ir()));
}

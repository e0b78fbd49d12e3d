// simplify: constant folding and identities; floating point is folded only exactly.
#include <catch2/catch.hpp>

#include <spindle/ir/printer.hpp>
#include <spindle/lower/simplify.hpp>

namespace ir = spindle::ir;
using spindle::lower::simplify;

TEST_CASE("simplify: integer folding and identities", "[lower][simplify]") {
  ir::Var x("x", spindle::DType::i64), y("y", spindle::DType::i64);
  auto c = [](std::int64_t v) { return ir::int_imm(v); };
  CHECK(ir::to_string(simplify(c(2) + c(3) * c(4))) == "14");
  CHECK(ir::to_string(simplify(x + c(0))) == "x");
  CHECK(ir::to_string(simplify(c(0) + x)) == "x");
  CHECK(ir::to_string(simplify(x * c(1))) == "x");
  CHECK(ir::to_string(simplify(x * c(0))) == "0");
  CHECK(ir::to_string(simplify((x + c(1)) + c(2))) == "x + 3");
  CHECK(ir::to_string(simplify((x + c(5)) - c(5))) == "x");
  CHECK(ir::to_string(simplify(x - x)) == "0");
  CHECK(ir::to_string(simplify((x + y) - x)) == "y");
  CHECK(ir::to_string(simplify(c(3) + x)) == "x + 3");
  CHECK(ir::to_string(simplify(c(7) / c(2))) == "3");
  CHECK(ir::to_string(simplify(c(7) / c(0))) == "7 / 0");  // not folded: the program decides
  CHECK(ir::to_string(simplify(ir::min(c(3), c(9)))) == "3");
  CHECK(ir::to_string(simplify(c(1) < c(2) && x < y)) == "x < y");
}

TEST_CASE("simplify: floating point keeps what the user wrote", "[lower][simplify]") {
  ir::Var a("a", spindle::DType::f32);
  auto f = [](double v) { return ir::float_imm(v); };
  CHECK(ir::to_string(simplify(a * f(1.0))) == "a");
  CHECK(ir::to_string(simplify(a + f(0.0))) == "a");
  CHECK(ir::to_string(simplify(a * f(0.0))) == "a * 0.0f");  // NaN * 0 is NaN: not folded
  CHECK(ir::to_string(simplify(ir::cast(spindle::DType::f32, ir::int_imm(2)))) == "2.0f");
}

TEST_CASE("simplify: constant conditions and empty loops", "[lower][simplify]") {
  ir::Var x("x", spindle::DType::i64);
  ir::BufferNode bn;
  bn.name = "t";
  bn.scope = ir::BufferScope::local;
  auto t = ir::make_buffer(bn);
  auto s = ir::seq({ir::if_then_else(ir::bool_imm(false), ir::store(t, {}, ir::float_imm(1.0))),
                    ir::for_loop(x, ir::int_imm(0), ir::int_imm(0), ir::ForKind::serial, ir::IterKind::spatial, "I",
                                 ir::store(t, {}, ir::float_imm(2.0))),
                    ir::store(t, {}, ir::select(ir::bool_imm(true), ir::float_imm(3.0), ir::float_imm(4.0)))});
  CHECK(ir::to_string(simplify(s)) == "t = 3.0f\n");
}

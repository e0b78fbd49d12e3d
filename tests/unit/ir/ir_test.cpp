// The runtime IR: construction checks, printing, structural equality, verification.
#include <catch2/catch.hpp>

#include <spindle/ir/equal.hpp>
#include <spindle/ir/printer.hpp>
#include <spindle/ir/verify.hpp>

namespace ir = spindle::ir;
using spindle::DType;

TEST_CASE("ir: dtypes of expressions", "[ir]") {
  ir::Var i("i", DType::i64), n("n", DType::i32);
  ir::Var x("x", DType::f32), y("y", DType::f64);
  CHECK((i + n).dtype() == DType::i64);  // integers widen
  CHECK((i < n).dtype() == DType::boolean);
  CHECK(ir::cast(DType::f32, i).dtype() == DType::f32);
  CHECK_THROWS_AS(x + y, spindle::UserError);  // floats never mix silently
  CHECK_THROWS_WITH(x + y, Catch::Contains("mixed element types") && Catch::Contains("f32 and f64"));
  CHECK_THROWS_AS(ir::call(ir::Intrinsic::exp, {i}), spindle::UserError);
  CHECK(ir::reduce_identity(ir::ReduceOp::max, DType::f32).as<ir::FloatImmNode>()->value == -__builtin_inf());
  CHECK(ir::reduce_identity(ir::ReduceOp::min, DType::i32).as<ir::IntImmNode>()->value == INT32_MAX);
}

TEST_CASE("ir: printer precedence and forms", "[ir]") {
  ir::Var a("a", DType::i64), b("b", DType::i64), c("c", DType::i64);
  CHECK(ir::to_string((a + b) * c) == "(a + b) * c");
  CHECK(ir::to_string(a + b * c) == "a + b * c");
  CHECK(ir::to_string(a - (b - c)) == "a - (b - c)");
  CHECK(ir::to_string(ir::max(a, b)) == "max(a, b)");
  CHECK(ir::to_string(ir::float_imm(0.1, DType::f32)) == "0.1f");
  CHECK(ir::to_string(ir::float_imm(2.0, DType::f64)) == "2.0");
  CHECK(ir::to_string(ir::select(a < b, a, b)) == "select(a < b, a, b)");
}

TEST_CASE("ir: structural equality", "[ir]") {
  ir::Var a("a", DType::i64), a2("a", DType::i64);
  CHECK(ir::equal(a + 1, a + 1));
  CHECK_FALSE(ir::equal(a + 1, a2 + 1));  // variables by identity, not by name
  CHECK_FALSE(ir::equal(a + 1, a + 2));
  CHECK_FALSE(ir::equal(a + 1, a - 1));
}

TEST_CASE("ir: seq flattens and drops empty statements", "[ir]") {
  ir::BufferNode bn;
  bn.name = "t";
  bn.scope = ir::BufferScope::local;
  auto t = ir::make_buffer(bn);
  auto s1 = ir::store(t, {}, ir::float_imm(1));
  CHECK(ir::seq({ir::Stmt(), s1}).same_as(s1));
  CHECK_FALSE(ir::seq({}).defined());
  auto s = ir::seq({ir::seq({s1, s1}), s1});
  REQUIRE(s.as<ir::SeqNode>());
  CHECK(s.as<ir::SeqNode>()->stmts.size() == 3);
}

TEST_CASE("ir: verify reports unbound variables and wrong arity with the pass name", "[ir]") {
  ir::Var n("n", DType::i64), i("i", DType::i64), stray("stray", DType::i64);
  ir::BufferNode bn;
  bn.name = "y";
  bn.shape = {n};
  bn.role = ir::BufferRole::output;
  auto y = ir::make_buffer(bn);
  ir::Function f;
  f.name = "k";
  f.stage = ir::Stage::flat;
  f.buffers = {{y, {}}};
  f.scalars = {{n, {}}};
  f.body = ir::for_loop(i, ir::int_imm(0), n, ir::ForKind::serial, ir::IterKind::spatial, "I",
                        ir::store(y, {i}, ir::float_imm(1)));
  CHECK_NOTHROW(ir::verify(f, "test"));
  f.body = ir::for_loop(i, ir::int_imm(0), n, ir::ForKind::serial, ir::IterKind::spatial, "I",
                        ir::store(y, {stray}, ir::float_imm(1)));
  CHECK_THROWS_AS(ir::verify(f, "some_pass"), spindle::InternalError);
  CHECK_THROWS_WITH(ir::verify(f, "some_pass"), Catch::Contains("after pass some_pass") &&
                                                    Catch::Contains("'stray' is used unbound"));
  f.body = ir::store(y, {}, ir::float_imm(1));
  CHECK_THROWS_WITH(ir::verify(f, "p"), Catch::Contains("buffer 'y' of rank 1 accessed with 0 indices"));
}

// codegen/identifiers.hpp: every name the emitters print is a legal, unreserved C and CUDA
// identifier (issue 15 §2), and the printer keeps them unique within a unit.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "spindle/codegen/c_emitter.hpp"
#include "spindle/codegen/identifiers.hpp"
#include "spindle/ir/ops.hpp"

namespace cg = spindle::codegen;

namespace {
bool legal(const std::string& n) {
  if (n.empty() || !(std::isalpha(static_cast<unsigned char>(n[0])))) return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return n.find("__") == std::string::npos && !cg::is_reserved_identifier(n);
}
}  // namespace

TEST_CASE("legal_identifier: keywords, reserved names and generated names are renamed", "[codegen][names]") {
  for (const char* n : {"if", "for", "int", "float", "auto", "restrict", "_Bool", "__global__", "threadIdx",
                        "blockIdx", "float4", "main", "rt", "buffers", "scalars", "spindle_rt", "SPINDLE_UNROLL",
                        "Spindle", "and", "class", "new", "this", "template", "bool", "true", "nullptr", "expf",
                        "atomicAdd", "linux", "unix", "_X", "__x", "a__b", "x__", "9lives", "", "a b", "x*/y",
                        "\xc3\x84", "if_", "std", "min", "max"}) {
    const std::string out = cg::legal_identifier(n);
    INFO("'" << n << "' -> '" << out << "'");
    CHECK(legal(out));
  }
  // Names that are fine stay as they are.
  for (const char* n : {"i", "J", "I_len", "J_indptr", "a1", "row_max", "x_2"}) CHECK(cg::legal_identifier(n) == n);
  CHECK(cg::legal_identifier("if") == "if_");
  CHECK(cg::legal_identifier("spindle_rt") == "u_spindle_rt");
  CHECK(cg::symbol_part("for */ while") == "for_while");
  CHECK(cg::symbol_part("__kernel__") == "kernel");
  CHECK(cg::symbol_part("") == "kernel");
  CHECK(cg::comment_text("a */ b /* c\n") == "a *_ b /_ c?");
}

TEST_CASE("the C emitter gives IR objects that share a name distinct legal identifiers", "[codegen][names]") {
  using namespace spindle;
  // Two variables named "if" and one named "if_", a buffer named "rt", a scalar named "float".
  ir::Var a("if", DType::i64), b("if", DType::i64), c("if_", DType::i64), s("float", DType::i64);
  ir::BufferNode bn;
  bn.name = "rt";
  bn.dtype = DType::i64;
  bn.shape = {ir::int_imm(4)};
  bn.role = ir::BufferRole::output;
  ir::Buffer buf = ir::make_buffer(std::move(bn));
  ir::Function f;
  f.name = "while";
  f.stage = ir::Stage::flat;
  f.buffers.push_back({buf, {ir::ParamOrigin::values, 0, nullptr}});
  f.scalars.push_back({s, {ir::ParamOrigin::scalar, 1, nullptr}});
  ir::Stmt body = ir::let_stmt(a, ir::int_imm(1),
                               ir::let_stmt(b, ir::int_imm(2),
                                            ir::let_stmt(c, ir::int_imm(3),
                                                         ir::store(buf, {ir::int_imm(0)}, a + b * c + s))));
  f.body = body;
  const std::string src = cg::emit_c(f).source;
  INFO(src);
  CHECK(src.find("const long long if_ = 1;") != std::string::npos);
  CHECK(src.find("const long long if_1 = 2;") != std::string::npos);  // never "if__1"
  CHECK(src.find("const long long if_2 = 3;") != std::string::npos);
  CHECK(src.find("long long* __restrict rt_") != std::string::npos);
  CHECK(src.find("const long long float_") != std::string::npos);
}

// The JSON reader (support/json.hpp) and the in-process tree ensemble (gnn/tree_ensemble.hpp)
// that evaluates the cost models' XGBoost trees: values and escapes read right, malformed or
// hostile text is a FormatError naming the byte, a hand-written two-tree model predicts what
// XGBoost's rules give (including missing features), a model the reader does not understand
// is refused, and a booster trained by XGBoost predicts the same in process as through
// XGBoost's own C API.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "spindle/gnn/cost_model.hpp"
#include "spindle/gnn/tree_ensemble.hpp"
#include "spindle/support/json.hpp"

namespace gnn = spindle::gnn;
namespace json = spindle::json;

TEST_CASE("json: values, escapes and nesting are read", "[gnn][json]") {
  const json::Value v = json::parse(
      R"( {"a": [1, -2.5e3, 0.125, true, false, null], "s": "x\"\\\/\n\u00e9\ud83d\ude00", "o": {"k": {}} , "e": []} )",
      "t");
  REQUIRE(v.is(json::Value::Kind::object));
  const auto& a = v.at("a", "t").items();
  REQUIRE(a.size() == 6);
  CHECK(a[0].number() == 1);
  CHECK(a[1].number() == -2500);
  CHECK(a[2].number() == 0.125);
  CHECK(a[3].boolean());
  CHECK_FALSE(a[4].boolean());
  CHECK(a[5].is(json::Value::Kind::null));
  CHECK(v.at("s", "t").string() == "x\"\\/\n\xc3\xa9\xf0\x9f\x98\x80");
  CHECK(v.at("o", "t").at("k", "t").members().empty());
  CHECK(v.at("e", "t").items().empty());
  CHECK(v.find("missing") == nullptr);
  CHECK_THROWS_WITH(v.at("missing", "the file"), Catch::Contains("the file") && Catch::Contains("\"missing\""));
}

TEST_CASE("json: malformed and hostile text is a FormatError naming the byte", "[gnn][json]") {
  auto error_of = [](const std::string& text) {
    try {
      (void)json::parse(text, "f.json");
    } catch (const spindle::FormatError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(error_of("") == "f.json: malformed JSON at byte 0: unexpected end");
  CHECK(error_of("{\"a\": 1") == "f.json: malformed JSON at byte 7: unexpected end");
  CHECK(error_of("[1, 2] x") == "f.json: malformed JSON at byte 7: text after the JSON value");
  CHECK(error_of("[1,]") == "f.json: malformed JSON at byte 3: expected a value");
  CHECK(error_of("{1: 2}") == "f.json: malformed JSON at byte 1: expected a member name");
  CHECK(error_of("[01x]").find("expected ']'") != std::string::npos);
  CHECK(error_of("[1.]") == "f.json: malformed JSON at byte 3: expected digits after '.'");
  CHECK(error_of("[1e+]") == "f.json: malformed JSON at byte 4: expected an exponent");
  CHECK(error_of("\"abc") == "f.json: malformed JSON at byte 4: a string is not closed");
  CHECK(error_of("\"a\\qb\"").find("an unknown escape") != std::string::npos);
  CHECK(error_of("\"\\u12zz\"").find("four hex digits") != std::string::npos);
  CHECK(error_of("\"\\u12\"").find("cut short") != std::string::npos);
  CHECK(error_of("\"\\ud83d\"").find("high surrogate") != std::string::npos);
  CHECK(error_of("\"\\ude00\"").find("low surrogate") != std::string::npos);
  CHECK(error_of(std::string("\"a\x01\"")).find("control character") != std::string::npos);
  CHECK(error_of("[tru]").find("unknown literal") != std::string::npos);
  // Deep nesting is refused before it can exhaust the stack.
  CHECK(error_of(std::string(100000, '[')).find("nested deeper than 128 levels") != std::string::npos);
  CHECK_NOTHROW(json::parse(std::string(100, '[') + std::string(100, ']'), "f.json"));
}

namespace {

// Two trees over 3 features, as XGBoost 1.7 writes them (base_score as a string). Tree 0
// splits on feature 1 at 0.5 (missing goes left), then on feature 0 at -1; tree 1 is a
// stump on feature 2 at 2 (missing goes right).
std::string two_trees(const std::string& tree0_left = "[1, 3, -1, -1, -1]",
                      const std::string& tree0_indices = "[1, 0, 0, 0, 0]",
                      const std::string& split_type = "[0, 0, 0, 0, 0]",
                      const std::string& base_score = "\"5E-1\"") {
  return R"({"learner": {"learner_model_param": {"base_score": )" + base_score +
         R"(, "num_class": "0", "num_feature": "3", "num_target": "1"},
    "gradient_booster": {"name": "gbtree", "model": {"trees": [
      {"left_children": )" + tree0_left + R"(, "right_children": [2, 4, -1, -1, -1],
       "split_indices": )" + tree0_indices + R"(, "split_conditions": [0.5, -1.0, 10.0, 20.0, 30.0],
       "default_left": [1, 0, 0, 0, 0], "split_type": )" + split_type + R"(},
      {"left_children": [1, -1, -1], "right_children": [2, -1, -1], "split_indices": [2, 0, 0],
       "split_conditions": [2.0, 0.25, -0.75], "default_left": [0, 0, 0], "split_type": [0, 0, 0]}
    ]}}}, "version": [1, 7, 4]})";
}

}  // namespace

TEST_CASE("tree ensemble: a hand-written model predicts by XGBoost's rules", "[gnn]") {
  const auto t = gnn::TreeEnsemble::from_xgboost_json(two_trees(), "m");
  CHECK(t.trees() == 2);
  CHECK(t.features() == 3);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // x1 < 0.5 -> node 1; x0 < -1 -> leaf 3 (20), else leaf 4 (30); x1 >= 0.5 -> leaf 2 (10).
  // Tree 1: x2 < 2 -> 0.25, else (and missing) -0.75. Plus base_score 0.5.
  CHECK(t.predict({-2.f, 0.f, 1.f}) == 0.5f + 20.f + 0.25f);
  CHECK(t.predict({-1.f, 0.f, 1.f}) == 0.5f + 30.f + 0.25f);  // -1 < -1 is false: right
  CHECK(t.predict({5.f, 0.5f, 2.f}) == 0.5f + 10.f - 0.75f);  // equal to the threshold: right
  CHECK(t.predict({-2.f, nan, nan}) == 0.5f + 20.f - 0.75f);  // missing: default child
  CHECK(t.predict({nan, 7.f, 0.f}) == 0.5f + 10.f + 0.25f);
  CHECK_THROWS_AS(t.predict(std::vector<float>{1.f, 2.f}), spindle::ShapeError);
  // Newer XGBoost writes base_score as "[5E-1]"; a plain number reads too.
  CHECK(gnn::TreeEnsemble::from_xgboost_json(two_trees("[1, 3, -1, -1, -1]", "[1, 0, 0, 0, 0]", "[0, 0, 0, 0, 0]",
                                                       "\"[5E-1]\""),
                                             "m")
            .predict({-2.f, 0.f, 1.f}) == 20.75f);
  CHECK(gnn::TreeEnsemble::from_xgboost_json(
            two_trees("[1, 3, -1, -1, -1]", "[1, 0, 0, 0, 0]", "[0, 0, 0, 0, 0]", "1.5"), "m")
            .predict({-2.f, 0.f, 1.f}) == 21.75f);
}

TEST_CASE("tree ensemble: a model it does not understand is a FormatError", "[gnn]") {
  auto error_of = [](const std::string& text) {
    try {
      (void)gnn::TreeEnsemble::from_xgboost_json(text, "m");
    } catch (const spindle::FormatError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // A child before its node (a cycle could follow), a child past the end, one child only.
  CHECK(error_of(two_trees("[1, 0, -1, -1, -1]")).find("tree 0: node 1 has the child 0") != std::string::npos);
  CHECK(error_of(two_trees("[1, 9, -1, -1, -1]")).find("node 1 has the child 9") != std::string::npos);
  CHECK(error_of(two_trees("[1, -1, -1, -1, -1]")).find("node 1 has one child") != std::string::npos);
  CHECK(error_of(two_trees("[1, 3, -1, -1]")).find("\"right_children\" must be an array of 4 entries") !=
        std::string::npos);
  CHECK(error_of(two_trees("[1, 3, -1, -1, -1]", "[1, 3, 0, 0, 0]")).find("splits on feature 3 of 3") !=
        std::string::npos);
  CHECK(error_of(two_trees("[1, 3, -1, -1, -1]", "[1, 0, 0, 0, 0]", "[0, 1, 0, 0, 0]"))
            .find("node 1 is a categorical split") != std::string::npos);
  CHECK(error_of(two_trees("[1, 3, -1, -1, -1]", "[1, 0, 0, 0, 0]", "[0, 0, 0, 0, 0]", "\"abc\""))
            .find("base_score = 'abc' is not a number") != std::string::npos);
  CHECK(error_of("{\"learner\": {}}").find("expected a member \"learner_model_param\"") != std::string::npos);
  CHECK(error_of(two_trees().substr(0, 200)).find("malformed JSON") != std::string::npos);
  std::string multi = two_trees();
  multi.replace(multi.find("\"num_target\": \"1\""), 17, "\"num_target\": \"2\"");
  CHECK(error_of(multi).find("only single-target regression") != std::string::npos);
  // A cost-model file whose trees read a different number of features names its line.
  std::string model = two_trees();
  model = "spindle-gnn-cost-model 1\nxgboost gemm " + std::to_string(model.size()) + "\n" + model + "\n";
  CHECK_THROWS_WITH(gnn::CostModel::parse(model, "cm.txt"),
                    Catch::Contains("cm.txt:2") && Catch::Contains("reads 3 features, the tree models have 10"));
}

TEST_CASE("tree ensemble: XGBoost's trained boosters predict the same in process", "[gnn]") {
  if (!gnn::xgboost::available()) {
    WARN("XGBoost not available, the in-process trees are not compared with it: "
         << gnn::xgboost::unavailable_reason());
    return;
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-3.f, 3.f);
  const std::size_t rows = 400, cols = 10;
  std::vector<float> x(rows * cols), y(rows);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) x[r * cols + c] = u(rng);
    y[r] = std::sin(x[r * cols]) * 3 + x[r * cols + 1] * x[r * cols + 2] + (x[r * cols + 5] > 1 ? 4.f : 0.f);
  }
  for (int depth : {2, 6}) {
    const auto booster = gnn::xgboost::Booster::train(x, rows, cols, y, 60, depth, 0.3);
    const auto trees = gnn::TreeEnsemble::from_xgboost_json(booster.save(), "trained");
    REQUIRE(trees.trees() == 60);
    // Fresh points, some features missing, some exactly on the training values.
    std::vector<float> q(rows * cols);
    for (std::size_t i = 0; i < q.size(); ++i)
      q[i] = i % 17 == 0 ? std::numeric_limits<float>::quiet_NaN() : (i % 5 == 0 ? x[i] : u(rng));
    const std::vector<float> want = booster.predict(q, rows, cols);
    for (std::size_t r = 0; r < rows; ++r) {
      const float got = trees.predict(q.data() + r * cols);
      INFO("depth " << depth << " row " << r);
      CHECK(got == Approx(want[r]).epsilon(1e-5).margin(1e-5));
    }
  }
}

// The GNN cost models' tree regressors, evaluated in process: an XGBoost model (its JSON
// form, as `xgboost::Booster::save` writes it and the cost-model file stores it) is read once
// into flat node arrays, and a prediction walks each tree from its root — about a
// microsecond for 100 trees of depth 4, against tens of microseconds for a call through
// XGBoost's C API (a DMatrix built and freed per prediction), which the layers' selection
// paid for every distinct primitive input. XGBoost is then needed to train, not to predict:
// a model file with trees selects the same compositions on a machine without libxgboost.
//
// The semantics are XGBoost's for a `gbtree` booster with numerical splits and one target:
// at a split node, a missing (NaN) feature goes to the default child, otherwise the feature
// goes left when it is < the split condition (float comparison); a leaf's value is its
// `split_conditions` entry; the prediction is base_score plus the leaf values of every tree,
// summed in float in tree order. Anything else (categorical splits, several targets or
// classes, a node whose child does not come after it, a feature index out of range)
// raises FormatError naming `where`: nothing the reader does not understand is guessed.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "spindle/support/error.hpp"
#include "spindle/support/json.hpp"

namespace spindle::gnn {

class TreeEnsemble {
 public:
  static TreeEnsemble from_xgboost_json(std::string_view text, const std::string& where) {
    const json::Value doc = json::parse(text, where);
    const json::Value& learner = doc.at("learner", where);
    const json::Value& param = learner.at("learner_model_param", where);
    TreeEnsemble t;
    t.base_score_ = static_cast<float>(number_in(param.at("base_score", where), where + ": base_score"));
    t.features_ = static_cast<int>(number_in(param.at("num_feature", where), where + ": num_feature"));
    SPINDLE_CHECK(t.features_ > 0 && t.features_ <= 4096, FormatError, where, ": num_feature ", t.features_,
                  " is out of range");
    for (const char* one : {"num_class", "num_target"})
      if (const json::Value* v = param.find(one)) {
        const double n = number_in(*v, where + ": " + one);
        SPINDLE_CHECK(n <= 1, FormatError, where, ": ", one, " = ", n, ": only single-target regression is read");
      }
    const json::Value& booster = learner.at("gradient_booster", where);
    const json::Value* name = booster.find("name");
    SPINDLE_CHECK(name && name->is(json::Value::Kind::string) && name->string() == "gbtree", FormatError, where,
                  ": only a 'gbtree' booster is read");
    const json::Value& trees = booster.at("model", where).at("trees", where);
    SPINDLE_CHECK(trees.is(json::Value::Kind::array), FormatError, where, ": \"trees\" is not an array");
    for (std::size_t k = 0; k < trees.items().size(); ++k)
      t.add_tree(trees.items()[k], where + ": tree " + std::to_string(k));
    return t;
  }

  int features() const { return features_; }
  std::size_t trees() const { return roots_.size(); }

  // x holds features() values (NaN: missing).
  float predict(const float* x) const {
    float sum = 0;
    for (const std::int32_t root : roots_) {
      std::int32_t i = root;
      while (nodes_[static_cast<std::size_t>(i)].left >= 0) {
        const Node& n = nodes_[static_cast<std::size_t>(i)];
        const float f = x[n.feature];
        i = std::isnan(f) ? (n.default_left ? n.left : n.right) : (f < n.value ? n.left : n.right);
      }
      sum += nodes_[static_cast<std::size_t>(i)].value;
    }
    return base_score_ + sum;
  }
  float predict(const std::vector<float>& x) const {
    SPINDLE_CHECK(x.size() == static_cast<std::size_t>(features_), ShapeError, "tree model: ", x.size(),
                  " features given, the model reads ", features_);
    return predict(x.data());
  }

 private:
  // Split: left/right are node indices (absolute, into nodes_), value the threshold. Leaf:
  // left = right = -1, value the leaf's output.
  struct Node {
    std::int32_t left = -1, right = -1, feature = 0;
    float value = 0;
    bool default_left = false;
  };

  // XGBoost writes base_score as a string ("5E-1"), newer versions as "[5E-1]".
  static double number_in(const json::Value& v, const std::string& where) {
    if (v.is(json::Value::Kind::number)) return v.number();
    SPINDLE_CHECK(v.is(json::Value::Kind::string), FormatError, where, " is neither a number nor a string");
    std::string s = v.string();
    if (s.size() >= 2 && s.front() == '[' && s.back() == ']') s = s.substr(1, s.size() - 2);
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    SPINDLE_CHECK(!s.empty() && end == s.c_str() + s.size() && std::isfinite(d), FormatError, where, " = '",
                  v.string(), "' is not a number");
    return d;
  }

  static const std::vector<json::Value>& array_of(const json::Value& tree, const char* key, std::size_t n,
                                                  const std::string& where) {
    const json::Value& a = tree.at(key, where);
    SPINDLE_CHECK(a.is(json::Value::Kind::array) && a.items().size() == n, FormatError, where, ": \"", key,
                  "\" must be an array of ", n, " entries (one per node)");
    for (const json::Value& v : a.items())
      SPINDLE_CHECK(v.is(json::Value::Kind::number) && std::isfinite(v.number()), FormatError, where, ": \"", key,
                    "\" holds a value that is not a finite number");
    return a.items();
  }

  void add_tree(const json::Value& tree, const std::string& where) {
    const json::Value& left = tree.at("left_children", where);
    SPINDLE_CHECK(left.is(json::Value::Kind::array) && !left.items().empty() && left.items().size() < (1u << 24),
                  FormatError, where, ": \"left_children\" must be a non-empty array");
    const std::size_t n = left.items().size();
    const auto& l = array_of(tree, "left_children", n, where);
    const auto& r = array_of(tree, "right_children", n, where);
    const auto& feature = array_of(tree, "split_indices", n, where);
    const auto& cond = array_of(tree, "split_conditions", n, where);
    const auto& dflt = array_of(tree, "default_left", n, where);
    if (tree.find("split_type") != nullptr) {
      const auto& st = array_of(tree, "split_type", n, where);
      for (std::size_t i = 0; i < n; ++i)
        SPINDLE_CHECK(st[i].number() == 0, FormatError, where, ": node ", i, " is a categorical split (not read)");
    }
    const auto base = static_cast<std::int64_t>(nodes_.size());
    SPINDLE_CHECK(base + static_cast<std::int64_t>(n) < (std::int64_t{1} << 30), FormatError, where,
                  ": the model has too many nodes");
    for (std::size_t i = 0; i < n; ++i) {
      const double li = l[i].number(), ri = r[i].number(), fi = feature[i].number();
      Node node;
      node.value = static_cast<float>(cond[i].number());
      if (li == -1 || ri == -1) {
        SPINDLE_CHECK(li == -1 && ri == -1, FormatError, where, ": node ", i, " has one child");
      } else {
        // Children come after their node: every walk ends at a leaf.
        for (double c : {li, ri})
          SPINDLE_CHECK(c == std::floor(c) && c > static_cast<double>(i) && c < static_cast<double>(n), FormatError,
                        where, ": node ", i, " has the child ", c, " (children follow their node, below ", n, ")");
        SPINDLE_CHECK(fi == std::floor(fi) && fi >= 0 && fi < features_, FormatError, where, ": node ", i,
                      " splits on feature ", fi, " of ", features_);
        node.left = static_cast<std::int32_t>(base + static_cast<std::int64_t>(li));
        node.right = static_cast<std::int32_t>(base + static_cast<std::int64_t>(ri));
        node.feature = static_cast<std::int32_t>(fi);
        node.default_left = dflt[i].number() != 0;
      }
      nodes_.push_back(node);
    }
    roots_.push_back(static_cast<std::int32_t>(base));
  }

  std::vector<Node> nodes_;
  std::vector<std::int32_t> roots_;
  float base_score_ = 0;
  int features_ = 0;
};

}  // namespace spindle::gnn

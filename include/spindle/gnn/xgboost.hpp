// Training the GNN cost models' gradient-boosted regression trees, through the XGBoost C API
// (Debian libxgboost-dev / libxgboost0) loaded with dlopen: nothing of XGBoost is needed to
// build Spindle or a program that uses it. Only training needs it: the cost models predict
// with the saved JSON trees in process (tree_ensemble.hpp), so a model file with trees
// selects the same way where XGBoost is missing.
//
//   if (gnn::xgboost::available()) {
//     auto b = gnn::xgboost::Booster::train(rows, cols, features, targets, rounds);
//     std::vector<float> p = b.predict(rows, cols, features);  // XGBoost's own prediction
//     std::string json = b.save();            // TreeEnsemble::from_xgboost_json(json, ...)
//   }
//
// SPINDLE_XGBOOST_LIBRARY names the library to load (default: libxgboost.so.0, then
// libxgboost.so). Errors from XGBoost raise RuntimeError with its message.
#pragma once

#include <dlfcn.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "spindle/support/error.hpp"

namespace spindle::gnn::xgboost {

namespace detail {

using ulong_t = std::uint64_t;
using Handle = void*;

// The functions of xgboost/c_api.h that the cost models use (declared here, not included).
struct Api {
  const char* (*get_last_error)() = nullptr;
  int (*dmatrix_create_from_mat)(const float*, ulong_t, ulong_t, float, Handle*) = nullptr;
  int (*dmatrix_set_float_info)(Handle, const char*, const float*, ulong_t) = nullptr;
  int (*dmatrix_free)(Handle) = nullptr;
  int (*booster_create)(const Handle*, ulong_t, Handle*) = nullptr;
  int (*booster_free)(Handle) = nullptr;
  int (*booster_set_param)(Handle, const char*, const char*) = nullptr;
  int (*booster_update_one_iter)(Handle, int, Handle) = nullptr;
  int (*booster_predict)(Handle, Handle, int, unsigned, int, ulong_t*, const float**) = nullptr;
  int (*booster_save_model_to_buffer)(Handle, const char*, ulong_t*, const char**) = nullptr;
  std::string error;  // why it did not load
};

inline const Api& api() {
  static const Api a = [] {
    Api r;
    std::vector<std::string> names;
    if (const char* p = std::getenv("SPINDLE_XGBOOST_LIBRARY"); p && *p) names.push_back(p);
    names.insert(names.end(), {"libxgboost.so.0", "libxgboost.so"});
    void* h = nullptr;
    for (const auto& n : names)
      if ((h = ::dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL))) break;
    if (!h) {
      const char* e = ::dlerror();
      r.error = std::string("cannot load libxgboost (tried ") + names.front() + "...): " + (e ? e : "?");
      return r;
    }
    auto get = [&](auto& fn, const char* sym) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(h, sym));
      if (!fn && r.error.empty()) r.error = std::string("libxgboost has no ") + sym;
    };
    get(r.get_last_error, "XGBGetLastError");
    get(r.dmatrix_create_from_mat, "XGDMatrixCreateFromMat");
    get(r.dmatrix_set_float_info, "XGDMatrixSetFloatInfo");
    get(r.dmatrix_free, "XGDMatrixFree");
    get(r.booster_create, "XGBoosterCreate");
    get(r.booster_free, "XGBoosterFree");
    get(r.booster_set_param, "XGBoosterSetParam");
    get(r.booster_update_one_iter, "XGBoosterUpdateOneIter");
    get(r.booster_predict, "XGBoosterPredict");
    get(r.booster_save_model_to_buffer, "XGBoosterSaveModelToBuffer");
    return r;
  }();
  return a;
}

inline void check(int rc, const char* what) {
  SPINDLE_CHECK(rc == 0, RuntimeError, "XGBoost ", what, " failed: ",
                api().get_last_error ? api().get_last_error() : "?");
}

// A dense float matrix as an XGBoost DMatrix, freed on scope exit.
class Matrix {
 public:
  Matrix(const std::vector<float>& x, std::size_t rows, std::size_t cols) {
    SPINDLE_CHECK(x.size() == rows * cols, ShapeError, "xgboost: ", x.size(), " values for ", rows, " x ", cols);
    check(api().dmatrix_create_from_mat(x.data(), rows, cols, NAN, &h_), "XGDMatrixCreateFromMat");
  }
  ~Matrix() {
    if (h_) api().dmatrix_free(h_);
  }
  Matrix(const Matrix&) = delete;
  Matrix& operator=(const Matrix&) = delete;
  Handle get() const { return h_; }

 private:
  Handle h_ = nullptr;
};

}  // namespace detail

inline bool available() { return detail::api().error.empty(); }
inline const std::string& unavailable_reason() { return detail::api().error; }

class Booster {
 public:
  // Squared-error regression of `y` on the rows of `x` (row-major rows x cols).
  static Booster train(const std::vector<float>& x, std::size_t rows, std::size_t cols, const std::vector<float>& y,
                       int rounds = 200, int max_depth = 6, double eta = 0.1) {
    require();
    detail::Matrix m(x, rows, cols);
    SPINDLE_CHECK(y.size() == rows, ShapeError, "xgboost: ", y.size(), " targets for ", rows, " rows");
    detail::check(detail::api().dmatrix_set_float_info(m.get(), "label", y.data(), y.size()), "set label");
    Booster b;
    detail::Handle dm = m.get();
    detail::check(detail::api().booster_create(&dm, 1, &b.h_->h), "XGBoosterCreate");
    const std::string depth = std::to_string(max_depth), lr = std::to_string(eta);
    for (auto [k, v] : {std::pair<const char*, const char*>{"objective", "reg:squarederror"},
                        {"max_depth", depth.c_str()},
                        {"eta", lr.c_str()},
                        {"subsample", "0.9"},
                        {"min_child_weight", "2"},
                        {"nthread", "1"},
                        {"seed", "1"},
                        {"verbosity", "0"}})
      detail::check(detail::api().booster_set_param(b.h_->h, k, v), "XGBoosterSetParam");
    for (int i = 0; i < rounds; ++i)
      detail::check(detail::api().booster_update_one_iter(b.h_->h, i, m.get()), "XGBoosterUpdateOneIter");
    return b;
  }

  std::string save() const {
    detail::ulong_t n = 0;
    const char* p = nullptr;
    detail::check(detail::api().booster_save_model_to_buffer(h_->h, "{\"format\": \"json\"}", &n, &p),
                  "XGBoosterSaveModelToBuffer");
    return std::string(p, n);
  }

  std::vector<float> predict(const std::vector<float>& x, std::size_t rows, std::size_t cols) const {
    detail::Matrix m(x, rows, cols);
    detail::ulong_t n = 0;
    const float* out = nullptr;
    std::lock_guard<std::mutex> lock(h_->mutex);  // a booster predicts on one thread at a time
    detail::check(detail::api().booster_predict(h_->h, m.get(), 0, 0, 0, &n, &out), "XGBoosterPredict");
    SPINDLE_CHECK(n == rows, RuntimeError, "XGBoost returned ", n, " predictions for ", rows, " rows");
    return std::vector<float>(out, out + n);
  }

 private:
  static void require() {
    SPINDLE_CHECK(available(), UnavailableError, "XGBoost is not available: ", unavailable_reason(),
                  " (install libxgboost0, or set SPINDLE_XGBOOST_LIBRARY)");
  }
  struct Owned {
    detail::Handle h = nullptr;
    std::mutex mutex;
    ~Owned() {
      if (h) detail::api().booster_free(h);
    }
  };
  std::shared_ptr<Owned> h_ = std::make_shared<Owned>();
};

}  // namespace spindle::gnn::xgboost

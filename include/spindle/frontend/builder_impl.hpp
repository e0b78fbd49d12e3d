// Definitions of KernelBuilder's non-template members (builder.hpp): inline in header-only
// mode, compiled once in libspindle_runtime (impl/spindle.cpp) under
// SPINDLE_SEPARATE_COMPILATION.
#pragma once

#include <cctype>
#include <set>
#include <string>

#include "spindle/frontend/builder.hpp"
#include "spindle/frontend/iteration_inference_decl.hpp"

namespace spindle::detail {

SPINDLE_DECL KernelBuilder::~KernelBuilder() = default;

SPINDLE_DECL ir::Buffer KernelBuilder::add_buffer(DType t, std::vector<ir::Axis> axes, ir::BufferRole role, int arg) {
  ir::BufferNode b;
  b.name = fresh(param_name(arg));
  b.dtype = t;
  b.axes = std::move(axes);
  b.role = role;
  check_buffer_axes(b);
  ir::Buffer buf = ir::make_buffer(std::move(b));
  func_.buffers.push_back({buf, {ir::ParamOrigin::values, arg, nullptr}});
  return buf;
}

SPINDLE_DECL void KernelBuilder::set_names(std::vector<std::string> names, std::size_t call_args) {
  if (names.empty()) return;
  SPINDLE_CHECK(names.size() == call_args, UserError, "kernel '", func_.name, "': ", names.size(),
                " names given for ", call_args, " call arguments (one per in/out/inout/param parameter, in order)");
  std::set<std::string> seen;
  for (std::size_t k = 0; k < names.size(); ++k) {
    const std::string& n = names[k];
    bool ident = !n.empty() && n.size() <= 64 && (std::isalpha(static_cast<unsigned char>(n[0])) || n[0] == '_');
    for (char c : n) ident = ident && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
    SPINDLE_CHECK(ident, UserError, "kernel '", func_.name, "': argument ", k, " name '", n,
                  "' is not an identifier (letters, digits and _, not starting with a digit, at most 64)");
    SPINDLE_CHECK(seen.insert(n).second, UserError, "kernel '", func_.name, "': argument name '", n,
                  "' is given twice");
  }
  names_given_ = std::move(names);
}

SPINDLE_DECL ir::Var KernelBuilder::iterator_var(const ir::Axis& a) {
  std::string base = a->name;
  for (char& c : base) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ir::Var(fresh(base), DType::i64);
}

SPINDLE_DECL ir::Buffer KernelBuilder::new_local(DType t, std::string name) {
  ir::Buffer buf = ir::local_buffer(fresh(name.empty() ? std::string("t") : name), t);
  frames_.back().allocs.push_back(buf);
  return buf;
}

SPINDLE_DECL ir::Stmt KernelBuilder::make_iteration(std::string name, std::vector<ir::Axis> axes,
                                                  std::vector<ir::Var> vars, Frame body, ir::SourceLoc loc,
                                                  std::vector<bool> fused) {
  ir::Stmt b = ir::seq(std::move(body.stmts), loc);
  if (!body.allocs.empty()) b = ir::block(name + "_locals", std::move(body.allocs), b, loc);
  std::vector<ir::IterKind> kinds(axes.size(), ir::IterKind::spatial);
  return ir::Stmt(std::make_shared<ir::SparseIterationNode>(std::move(name), std::move(axes),
                                                            std::move(vars), std::move(kinds),
                                                            ir::Stmt(), std::move(b), loc, std::move(fused)));
}

SPINDLE_DECL ir::Function KernelBuilder::finish(ir::Stmt body) {
  check_assembled_outputs(func_.name, func_.buffers);
  func_.body = infer_iteration_kinds(std::move(body), func_.name, func_.buffers, func_.scalars);
  func_.axes = axes_in_order_;
  func_.scalars.insert(func_.scalars.end(), user_scalars_.begin(), user_scalars_.end());
  return std::move(func_);
}

SPINDLE_DECL std::string KernelBuilder::unique_axis_name(const std::string& base) {
  std::string n = base;
  for (int k = 2; axis_names_.count(n); ++k) n = base + "_" + std::to_string(k);
  axis_names_.insert(n);
  names_[n] = 1;  // iterator names never collide with axis names
  return n;
}

SPINDLE_DECL void KernelBuilder::check_buffer_axes(const ir::BufferNode& b) const {
  for (std::size_t s = 0; s < b.axes.size(); ++s) {
    const auto& a = b.axes[s];
    if (!a->parent) continue;
    SPINDLE_CHECK(s > 0 && b.axes[s - 1] == a->parent, UserError, "kernel '", func_.name,
                  "': buffer '", b.name, "' lists axis ", a->name, " at position ", s,
                  " without its parent ", a->parent->name,
                  " immediately before it; hint: declare the buffer over [..., ", a->parent->name,
                  ", ", a->name, ", ...]");
  }
}

}  // namespace spindle::detail

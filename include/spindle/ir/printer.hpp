// Text form of the IR at every stage; golden tests pin it, SPINDLE_DUMP_DIR writes it.
#pragma once

#include <charconv>
#include <cmath>
#include <sstream>
#include <string>

#include "spindle/ir/function.hpp"
#include "spindle/ir/functor.hpp"

namespace spindle::ir {

inline std::string format_float(double v, DType t) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::isnan(v)) return "nan";
  char buf[64];
  auto r = t == DType::f32 ? std::to_chars(buf, buf + sizeof buf, static_cast<float>(v))
                           : std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

inline int binop_precedence(BinOp op) {
  switch (op) {
    case BinOp::mul: case BinOp::div: case BinOp::mod: return 5;
    case BinOp::add: case BinOp::sub: return 4;
    case BinOp::lt: case BinOp::le: case BinOp::gt: case BinOp::ge: return 3;
    case BinOp::eq: case BinOp::ne: return 2;
    case BinOp::land: return 1;
    case BinOp::lor: return 0;
    case BinOp::min: case BinOp::max: return 9;  // printed as calls
  }
  return 0;
}

inline const char* binop_symbol(BinOp op) {
  switch (op) {
    case BinOp::add: return "+";
    case BinOp::sub: return "-";
    case BinOp::mul: return "*";
    case BinOp::div: return "/";
    case BinOp::mod: return "%";
    case BinOp::min: return "min";
    case BinOp::max: return "max";
    case BinOp::eq: return "==";
    case BinOp::ne: return "!=";
    case BinOp::lt: return "<";
    case BinOp::le: return "<=";
    case BinOp::gt: return ">";
    case BinOp::ge: return ">=";
    case BinOp::land: return "&&";
    case BinOp::lor: return "||";
  }
  return "?";
}

inline const char* intrinsic_name(Intrinsic f) {
  switch (f) {
    case Intrinsic::exp: return "exp";
    case Intrinsic::log: return "log";
    case Intrinsic::sqrt: return "sqrt";
    case Intrinsic::abs: return "abs";
    case Intrinsic::tanh: return "tanh";
    case Intrinsic::pow: return "pow";
    case Intrinsic::warp_sum: return "warp_sum";
  }
  return "?";
}

class IRPrinter {
 public:
  std::string expr(const Expr& e, int parent_prec = -1) {
    if (!e.defined()) return "<undef>";
    if (auto* n = e.as<IntImmNode>())
      return n->dtype == DType::boolean ? (n->value ? "true" : "false") : std::to_string(n->value);
    if (auto* n = e.as<FloatImmNode>()) return format_float(n->value, n->dtype) + (n->dtype == DType::f32 ? "f" : "");
    if (auto* n = e.as<VarNode>()) return n->name;
    if (auto* n = e.as<BinaryNode>()) {
      if (n->op == BinOp::min || n->op == BinOp::max)
        return std::string(binop_symbol(n->op)) + "(" + expr(n->a) + ", " + expr(n->b) + ")";
      int p = binop_precedence(n->op);
      std::string s = expr(n->a, p) + " " + binop_symbol(n->op) + " " + expr(n->b, p + 1);
      return p < parent_prec ? "(" + s + ")" : s;
    }
    if (auto* n = e.as<UnaryNode>()) {
      std::string a = expr(n->a, 10);
      if (!a.empty() && (a[0] == '-' || a[0] == '!')) a = "(" + a + ")";  // -(-t), never --t
      return (n->op == UnOp::neg ? "-" : "!") + a;
    }
    if (auto* n = e.as<SelectNode>())
      return "select(" + expr(n->cond) + ", " + expr(n->t) + ", " + expr(n->f) + ")";
    if (auto* n = e.as<CastNode>()) return std::string(dtype_name(n->dtype)) + "(" + expr(n->value) + ")";
    if (auto* n = e.as<CallNode>()) return std::string(intrinsic_name(n->fn)) + "(" + list(n->args) + ")";
    if (auto* n = e.as<LoadNode>()) return n->buffer->name + bracket(n->indices);
    if (auto* n = e.as<FindPosNode>()) {
      if (n->mode == FindMode::segment)
        return "segment(" + n->indices->name + ", " + expr(n->begin) + ", " + expr(n->end) + ", " +
               expr(n->value) + ")";
      if (n->begin.defined())
        return "find(" + n->indices->name + ", " + expr(n->begin) + ", " + expr(n->end) + ", " +
               expr(n->value) + ")";
      return "find(" + n->indices->name + "[" + list(n->prefix) + "], " + expr(n->value) + ")";
    }
    return "<?>";
  }

  std::string list(const std::vector<Expr>& es) {
    std::string s;
    for (size_t i = 0; i < es.size(); ++i) s += (i ? ", " : "") + expr(es[i]);
    return s;
  }

  void stmt(const Stmt& s, int indent) {
    if (!s.defined()) return;
    std::string pad(indent * 2, ' ');
    if (auto* n = s.as<StoreNode>()) {
      os_ << pad << n->buffer->name << bracket(n->indices) << " = " << expr(n->value) << "\n";
    } else if (auto* n = s.as<ReduceNode>()) {
      os_ << pad << (n->atomic ? "atomic " : "") << n->buffer->name << bracket(n->indices) << " "
          << reduce_op_name(n->op) << " " << expr(n->value) << "\n";
    } else if (auto* n = s.as<LetStmtNode>()) {
      os_ << pad << "let " << n->var.name() << ": " << dtype_name(n->var.dtype()) << " = "
          << expr(n->value) << "\n";
      stmt(n->body, indent);
    } else if (auto* n = s.as<IfThenElseNode>()) {
      os_ << pad << "if " << expr(n->cond) << ":\n";
      stmt(n->then_case, indent + 1);
      if (n->else_case.defined()) {
        os_ << pad << "else:\n";
        stmt(n->else_case, indent + 1);
      }
    } else if (auto* n = s.as<ForNode>()) {
      os_ << pad << "for " << n->var.name() << " in [" << expr(n->min) << ", ";
      if (auto* z = n->min.as<IntImmNode>(); z && z->value == 0)
        os_ << expr(n->extent);
      else
        os_ << expr(n->min) << " + " << expr(n->extent, 4);
      os_ << ")";
      if (n->for_kind != ForKind::serial) os_ << " " << for_kind_name(n->for_kind);
      os_ << (n->iter_kind == IterKind::reduction ? " reduction" : "") << ":";
      if (!n->axis.empty()) os_ << "  # axis " << n->axis;
      os_ << "\n";
      stmt(n->body, indent + 1);
    } else if (auto* n = s.as<CoIterateNode>()) {
      os_ << pad << merge_op_name(n->op) << " " << n->var.name() << " of [";
      for (size_t q = 0; q < n->operands.size(); ++q) {
        auto& o = n->operands[q];
        os_ << (q ? ", " : "") << o.pos.name() << " in [0, " << expr(o.extent) << ") key " << expr(o.key)
            << " present " << o.present.name();
      }
      os_ << "]" << (n->iter_kind == IterKind::reduction ? " reduction" : "") << ":";
      if (!n->axis.empty()) os_ << "  # axis " << n->axis;
      os_ << "\n";
      stmt(n->body, indent + 1);
    } else if (auto* n = s.as<SeqNode>()) {
      for (auto& c : n->stmts) stmt(c, indent);
    } else if (auto* n = s.as<BlockNode>()) {
      os_ << pad << "block " << n->name << ":\n";
      for (auto& a : n->allocs)
        os_ << pad << "  alloc " << a->name << ": " << (a->scope == BufferScope::shared ? "shared " : "local ")
            << dtype_name(a->dtype) << shape_of(*a) << "\n";
      stmt(n->body, indent + 1);
    } else if (auto* n = s.as<BarrierNode>()) {
      os_ << pad << (n->scope == BarrierScope::warp ? "sync_warp\n" : "sync_threads\n");
    } else if (auto* n = s.as<PrefetchNode>()) {
      os_ << pad << "prefetch " << n->buffer->name << "[";
      for (size_t i = 0; i < n->indices.size(); ++i) os_ << (i ? ", " : "") << expr(n->indices[i]);
      os_ << "]\n";
    } else if (auto* n = s.as<SparseIterationNode>()) {
      os_ << pad << "sp_iter " << n->name << "([";
      for (size_t i = 0; i < n->axes.size(); ++i) {
        const bool opens = n->fused_with_next(i) && (i == 0 || !n->fused_with_next(i - 1));
        const bool closes = i > 0 && n->fused_with_next(i - 1) && !n->fused_with_next(i);
        os_ << (i ? ", " : "") << (opens ? "fuse(" : "") << n->axes[i]->name << (closes ? ")" : "");
      }
      os_ << "], \"";
      for (auto k : n->kinds) os_ << (k == IterKind::spatial ? 'S' : 'R');
      os_ << '"';
      if (n->gaps_of) os_ << ", gaps of " << n->gaps_of->name;
      os_ << ") as [";
      for (size_t i = 0; i < n->vars.size(); ++i) os_ << (i ? ", " : "") << n->vars[i].name();
      os_ << "]:\n";
      if (n->init.defined()) {
        os_ << pad << "  init:\n";
        stmt(n->init, indent + 2);
      }
      stmt(n->body, indent + 1);
    }
  }

  std::string shape_of(const BufferNode& b) {
    std::string s = "[";
    if (!b.axes.empty()) {
      for (size_t i = 0; i < b.axes.size(); ++i) s += (i ? ", " : "") + b.axes[i]->name;
    } else {
      s += list(b.shape);
    }
    s += "]";
    if (b.extra_storage) s += "+" + std::to_string(b.extra_storage);
    return s;
  }

  std::string axis_decl(const AxisNode& a) {
    std::string s = a.name + " = " + axis_kind_name(a.kind) + "(";
    if (a.parent) s += "parent=" + a.parent->name + ", ";
    s += "length=" + expr(a.length);
    if (a.nnz.defined()) s += ", nnz=" + expr(a.nnz);
    if (a.nnz_per_row.defined()) s += ", nnz_per_row=" + expr(a.nnz_per_row);
    if (a.is_sparse() || a.is_variable()) s += std::string(", ") + dtype_name(a.index_dtype);
    if (a.dense_of) s += ", dense view of " + a.dense_of->name;
    if (a.coordinates_of) s += ", coordinates of " + a.coordinates_of->name;
    if (a.merge != MergeOp::none) {
      s += std::string(", ") + merge_op_name(a.merge) + " of ";
      for (size_t q = 0; q < a.merge_operands.size(); ++q) s += (q ? ", " : "") + a.merge_operands[q]->name;
    }
    return s + ")";
  }

  std::string function(const Function& f) {
    os_.str("");
    os_ << "# stage " << stage_name(f.stage) << "\n";
    os_ << "func " << f.name << "(";
    for (size_t i = 0; i < f.buffers.size(); ++i) {
      auto& b = *f.buffers[i].buffer;
      os_ << (i ? ", " : "") << b.name << ": " << buffer_role_name(b.role) << " " << dtype_name(b.dtype)
          << shape_of(b);
    }
    os_ << ")\n";
    if (!f.scalars.empty()) {
      os_ << "  scalars:";
      for (auto& s : f.scalars) os_ << " " << s.var.name();
      os_ << "\n";
    }
    if (f.stage != Stage::flat) {
      for (auto& a : f.axes) os_ << "  axis " << axis_decl(*a) << "\n";
    }
    stmt(f.body, 1);
    return os_.str();
  }

  std::string statement(const Stmt& s) {
    os_.str("");
    stmt(s, 0);
    return os_.str();
  }

 private:
  std::string bracket(const std::vector<Expr>& idx) { return idx.empty() ? "" : "[" + list(idx) + "]"; }
  std::ostringstream os_;
};

inline std::string to_string(const Function& f) { return IRPrinter().function(f); }
inline std::string to_string(const Stmt& s) { return IRPrinter().statement(s); }
inline std::string to_string(const Expr& e) { return IRPrinter().expr(e); }

}  // namespace spindle::ir

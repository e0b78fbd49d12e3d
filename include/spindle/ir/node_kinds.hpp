// The list of IR node kinds. Visitors, mutators and the strict visitor are generated from
// these X-macros, so adding a node means: the struct in expr.hpp/stmt.hpp, one line here,
// and a case in each backend/printer (the strict visitor makes a missing case a compile
// error).
#pragma once

#define SPINDLE_EXPR_NODES(X) \
  X(IntImm)                   \
  X(FloatImm)                 \
  X(Var)                      \
  X(Binary)                   \
  X(Unary)                    \
  X(Select)                   \
  X(Cast)                     \
  X(Call)                     \
  X(Load)                     \
  X(FindPos)

#define SPINDLE_STMT_NODES(X) \
  X(Store)                    \
  X(Reduce)                   \
  X(LetStmt)                  \
  X(IfThenElse)               \
  X(For)                      \
  X(CoIterate)                \
  X(Seq)                      \
  X(Block)                    \
  X(Barrier)                  \
  X(Prefetch)                 \
  X(SparseIteration)

namespace spindle::ir {

enum class ExprKind {
#define SPINDLE_X(name) name,
  SPINDLE_EXPR_NODES(SPINDLE_X)
#undef SPINDLE_X
};

enum class StmtKind {
#define SPINDLE_X(name) name,
  SPINDLE_STMT_NODES(SPINDLE_X)
#undef SPINDLE_X
};

}  // namespace spindle::ir

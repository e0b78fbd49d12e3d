// Indirect write indices (docs/language.md §4.1): a write slot over a root axis may be
// indexed by a value read from an integer `in` buffer — `c(idx(e), k) += x(e, k)`, a
// scatter-add — optionally cast to i64. The front end accepts such a write only as a
// reduction whose index buffer is read at stored elements (by the iterators of its own
// axes); the call-time binder checks every stored value of the index buffer against the
// written axis's extent before the kernel runs, so no update is dropped and none lands
// outside the buffer.
#pragma once

#include "spindle/ir/axis.hpp"
#include "spindle/ir/expr.hpp"

namespace spindle::ir {

// The load of an indirect write index `idx(...)` or `cast<i64>(idx(...))`, or null.
// (Narrowing casts are not indirect indices: they would change a validated value.)
inline const LoadNode* indirect_index_load(const Expr& e) {
  if (!e.defined()) return nullptr;
  Expr inner = e;
  if (const CastNode* c = e.as<CastNode>()) {
    if (c->dtype != DType::i64) return nullptr;
    inner = c->value;
  }
  const LoadNode* l = inner.as<LoadNode>();
  if (!l || !is_int(l->buffer->dtype) || l->buffer->role != BufferRole::input) return nullptr;
  return l;
}

}  // namespace spindle::ir

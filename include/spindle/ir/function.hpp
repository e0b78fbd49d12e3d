// A kernel function at one stage of the compiler, and where each of its parameters comes
// from at call time. The parameter lists are the flat ABI of the generated code: buffer
// parameters in `buffers` order, scalar parameters in `scalars` order.
#pragma once

#include <string>
#include <vector>

#include "spindle/ir/stmt.hpp"

namespace spindle::ir {

enum class Stage : int { coordinate = 1, position = 2, flat = 3 };

inline const char* stage_name(Stage s) {
  switch (s) {
    case Stage::coordinate: return "I (coordinate space)";
    case Stage::position: return "II (position space)";
    case Stage::flat: return "III (flat loops)";
  }
  return "?";
}

// Where the runtime finds the value of a parameter when the kernel is called.
struct ParamOrigin {
  enum Kind : std::uint8_t {
    values,       // the values of user argument `arg`
    indptr,       // indptr array of `axis` (from the argument that binds the axis)
    indices,      // indices array of `axis`
    length,       // extent of `axis`
    nnz,          // number of positions of variable `axis`
    nnz_per_row,  // positions per parent position of sparse_fixed `axis`
    scalar,       // user scalar argument `arg`
    threads,      // the thread count of the call (CPU schedules that split work by thread)
    sorted        // 1 when the coordinates of sparse root `axis` are strictly ascending, else 0
  };
  Kind kind = values;
  int arg = -1;
  Axis axis;
};

struct FuncBuffer {
  Buffer buffer;
  ParamOrigin origin;
};

struct FuncScalar {
  Var var;
  ParamOrigin origin;
};

struct Function {
  std::string name;
  Stage stage = Stage::coordinate;
  std::vector<Axis> axes;          // every axis the kernel declares, parents first
  std::vector<FuncBuffer> buffers;
  std::vector<FuncScalar> scalars;
  Stmt body;
  SourceLoc loc;
};

}  // namespace spindle::ir

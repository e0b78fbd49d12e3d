// GNN layers with input-aware composition selection (GRANII, seed 004): the matrix IR, the
// enumeration of re-associations, input-oblivious pruning and the layer expressions.
// Not part of spindle.hpp: include it when you use it.
#pragma once

#include "spindle/gnn/associate.hpp"
#include "spindle/gnn/layers.hpp"
#include "spindle/gnn/matrix_ir.hpp"
#include "spindle/gnn/prune.hpp"
#include "spindle/gnn/rewrite.hpp"

// GNN layers with input-aware composition selection (GRANII, seed 004; docs/gnn.md): the
// matrix IR, the enumeration of re-associations, input-oblivious pruning, the layer
// expressions, per-primitive cost models with selection, and layers that run the chosen
// composition with Spindle kernels. Not part of spindle.hpp: include it when you use it.
#pragma once

#include "spindle/gnn/associate.hpp"
#include "spindle/gnn/backward.hpp"
#include "spindle/gnn/cost_model.hpp"
#include "spindle/gnn/execute.hpp"
#include "spindle/gnn/layer.hpp"
#include "spindle/gnn/layers.hpp"
#include "spindle/gnn/matrix_ir.hpp"
#include "spindle/gnn/prune.hpp"
#include "spindle/gnn/rewrite.hpp"

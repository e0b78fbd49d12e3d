// spindle::tune: choose a kernel's storage format and schedule for an input by a cost model and
// measurement, and remember the choice (docs/tuning.md). Opt-in, like einsum.hpp:
//   #include <spindle/tune.hpp>
//
//   auto plan = spindle::tune::tune_spmm(A, 128, {.record_file = "tuning.jsonl"});
//   plan(X, Y);
#pragma once

#include "spindle/tune/fingerprint.hpp"
#include "spindle/tune/record.hpp"
#include "spindle/tune/spmm.hpp"
#include "spindle/tune/spmv.hpp"

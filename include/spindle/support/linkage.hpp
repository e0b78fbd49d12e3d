// Linkage of Spindle's heavy non-template functions (the compiler pipeline behind a kernel
// call). Header-only by default: they are `inline` and defined in every TU that uses them.
// With SPINDLE_SEPARATE_COMPILATION (set by the CMake target spindle::spindle) user TUs see
// only declarations and one TU, spindle/impl/spindle.cpp, holds the definitions, so a user
// file that defines kernels compiles in seconds.
#pragma once

#ifdef SPINDLE_SEPARATE_COMPILATION
#define SPINDLE_DECL
#else
#define SPINDLE_DECL inline
#endif

# Runs one compile-fail case: compiles SOURCE with -fsyntax-only and passes iff the
# compilation FAILS and its output contains the substring given on the file's first line:
#   // expect: <substring>
# Usage: cmake -DCXX=<compiler> -DSOURCE=<file.cpp> -DINCLUDES=<dir;dir> -P check_compile_fail.cmake
cmake_minimum_required(VERSION 3.25)
foreach(var CXX SOURCE INCLUDES)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_compile_fail: -D${var}=... is required")
  endif()
endforeach()

file(STRINGS "${SOURCE}" first_line LIMIT_COUNT 1)
if(NOT first_line MATCHES "^// expect: (.+)$")
  message(FATAL_ERROR "${SOURCE}: the first line must be '// expect: <substring>', found '${first_line}'")
endif()
set(expected "${CMAKE_MATCH_1}")

set(include_flags)
foreach(dir IN LISTS INCLUDES)
  list(APPEND include_flags "-I${dir}")
endforeach()

# As a TU of a project linking spindle::spindle sees the headers (support/linkage.hpp): the
# pipeline's definitions are declarations only, so each case parses in a third of the time;
# the front end's checks (the templates that reject these cases) are the same either way.
execute_process(
  COMMAND "${CXX}" -std=c++20 -fsyntax-only -DSPINDLE_SEPARATE_COMPILATION=1 ${include_flags} "${SOURCE}"
  RESULT_VARIABLE result
  OUTPUT_VARIABLE out
  ERROR_VARIABLE out)

if(result EQUAL 0)
  message(FATAL_ERROR "${SOURCE}: compiled, but it must fail with '${expected}'")
endif()
string(FIND "${out}" "${expected}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${SOURCE}: failed to compile as expected, but the output does not contain "
                      "'${expected}'. Compiler output:\n${out}")
endif()
message(STATUS "${SOURCE}: fails to compile with '${expected}' (ok)")

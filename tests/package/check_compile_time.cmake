# cmake -P script: time the compilation of one user translation unit that includes
# spindle.hpp and defines SpMM; fail if it exceeds BUDGET_SECONDS.
string(TIMESTAMP start "%s%f")
# As a consumer of the CMake target compiles it: with the separate-compilation switch.
execute_process(COMMAND ${CXX_COMPILER} -std=c++20 -O2 -DSPINDLE_SEPARATE_COMPILATION=1 -I${INCLUDE_DIR} -c ${SOURCE} -o /dev/null
                RESULT_VARIABLE rc ERROR_VARIABLE err)
string(TIMESTAMP stop "%s%f")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "compiling ${SOURCE} failed:\n${err}")
endif()
math(EXPR micros "${stop} - ${start}")
math(EXPR millis "${micros} / 1000")
message(STATUS "user TU with spindle.hpp + SpMM compiled in ${millis} ms (budget ${BUDGET_SECONDS} s)")
if(millis GREATER ${BUDGET_SECONDS}000)
  message(FATAL_ERROR "compile time ${millis} ms exceeds the budget of ${BUDGET_SECONDS} s")
endif()

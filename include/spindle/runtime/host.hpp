// Facts about the host CPU that schedules need (the compiler flags themselves come from the
// engine): the widest SIMD register the C compiler will use.
#pragma once

namespace spindle::runtime {

inline int host_vector_bits() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return 512;
  if (__builtin_cpu_supports("avx2") || __builtin_cpu_supports("avx")) return 256;
  return 128;
#elif defined(__aarch64__)
  return 128;
#else
  return 128;
#endif
}

}  // namespace spindle::runtime

// Facts about the host CPU that schedules need (the compiler flags themselves come from the
// engine): the widest SIMD register the C compiler will use, and the size of a core's L2
// cache (the blocks of block_long_reductions).
#pragma once

#include <cstdint>
#if defined(__linux__)
#include <unistd.h>
#endif

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

// A core's L2 cache in bytes (512 KiB when the system does not say), kept within
// [64 KiB, 16 MiB].
inline std::int64_t host_l2_bytes() {
  std::int64_t b = 0;
#if defined(__linux__) && defined(_SC_LEVEL2_CACHE_SIZE)
  b = static_cast<std::int64_t>(sysconf(_SC_LEVEL2_CACHE_SIZE));
#endif
  if (b <= 0) b = 512 * 1024;
  return b < 64 * 1024 ? 64 * 1024 : (b > 16 * 1024 * 1024 ? 16 * 1024 * 1024 : b);
}

}  // namespace spindle::runtime

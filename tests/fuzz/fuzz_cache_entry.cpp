// libFuzzer target: bytes -> the kernel-cache entry reader (runtime/kernel_cache.hpp).
//
// The disk cache holds machine code that is loaded and run, so its entry reader must reject
// every malformed file with a CacheError and accept only intact entries. The public reader
// takes a path, so each input is written to a scratch file and read with
// spindle::runtime::read_entry(path, key).
//
// Input layout: byte 0 = mode, the rest = the entry file.
//   mode bit 0: expect the key stored in the header (else a fixed key, so wrong keys are
//               exercised too)
//   mode bit 1: recompute the header's checksum over the bytes after the header, so that the
//               fuzzer reaches the paths behind the checksum (size fields, success)
//   mode bit 2: also round-trip the bytes after the header as a payload through write_entry
//               and read_entry (must come back unchanged)
// Only spindle::Error may escape; an accepted entry must be exactly header + payload with
// the header's key, size and checksum.
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "fuzz_support.hpp"
#include "spindle/runtime/kernel_cache.hpp"

namespace {

namespace rt = spindle::runtime;
using spindle_fuzz::expect_only_spindle_errors;

constexpr std::size_t kHeader = sizeof(rt::CacheEntryHeader);

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t mode = data[0];
  std::vector<std::uint8_t> file(data + 1, data + size);
  spindle::Digest key{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  rt::CacheEntryHeader h{};
  const bool has_header = file.size() >= kHeader;
  if (has_header) std::memcpy(&h, file.data(), kHeader);
  if ((mode & 1) && has_header) key = spindle::Digest{h.key_a, h.key_b};
  if ((mode & 2) && has_header) {
    const std::span<const std::uint8_t> rest(file.data() + kHeader, file.size() - kHeader);
    const spindle::Digest sum = rt::entry_checksum(spindle::Digest{h.key_a, h.key_b}, rest);
    h.checksum_a = sum.a;
    h.checksum_b = sum.b;
    std::memcpy(file.data(), &h, kHeader);
  }
  const std::string& path = spindle_fuzz::scratch_path();
  spindle_fuzz::write_scratch(
      path, std::string_view(reinterpret_cast<const char*>(file.data()), file.size()));
  expect_only_spindle_errors("read_entry", [&] {
    const std::vector<std::uint8_t> payload = rt::read_entry(path, key);
    // Accepted: the file must be a complete, consistent entry for this key.
    SPINDLE_FUZZ_ASSERT(has_header);
    SPINDLE_FUZZ_ASSERT(std::memcmp(h.magic, rt::kCacheMagic, sizeof h.magic) == 0);
    SPINDLE_FUZZ_ASSERT(h.version == rt::kCacheFormatVersion);
    SPINDLE_FUZZ_ASSERT(h.key_a == key.a && h.key_b == key.b);
    SPINDLE_FUZZ_ASSERT(h.payload_size == payload.size());
    SPINDLE_FUZZ_ASSERT(payload.size() == file.size() - kHeader);
    SPINDLE_FUZZ_ASSERT(std::memcmp(payload.data(), file.data() + kHeader, payload.size()) == 0);
    const spindle::Digest sum = rt::entry_checksum(key, payload);
    SPINDLE_FUZZ_ASSERT(sum.a == h.checksum_a && sum.b == h.checksum_b);
  });
  if ((mode & 4) && has_header) {
    const std::span<const std::uint8_t> payload(file.data() + kHeader, file.size() - kHeader);
    expect_only_spindle_errors("write_entry/read_entry", [&] {
      rt::write_entry(path, key, payload);
      const std::vector<std::uint8_t> back = rt::read_entry(path, key);
      SPINDLE_FUZZ_ASSERT(back.size() == payload.size());
      SPINDLE_FUZZ_ASSERT(std::equal(back.begin(), back.end(), payload.begin()));
    });
  }
  return 0;
}

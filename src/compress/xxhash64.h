// XXH64 (Yann Collet's xxHash, 64-bit variant, as specified in xxhash's doc/xxhash_spec.md) and
// the tree checksum of a decoded weight group built on it (docs/compression.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace ferry {
class ThreadPool;
}

namespace ferry::compress {

// The reference XXH64 of `bytes` with `seed`: the value `xxhsum -H64` and python's
// xxhash.xxh64 give.
uint64_t xxh64(const void* data, size_t bytes, uint64_t seed = 0);

// Bytes per leaf of group_checksum.
inline constexpr size_t kChecksumBlock = size_t{1} << 20;

// The checksum a compressed group carries of its decoded bytes: XXH64 (seed 0) of each 1 MiB
// block (the last one shorter; none for 0 bytes), then XXH64 of those 64-bit values as
// little-endian bytes with seed = the byte count. The leaves are independent, so threads (and
// later a GPU) hash a large group in parallel; the same value whatever `pool` holds.
uint64_t group_checksum(std::span<const uint8_t> bytes, ThreadPool* pool = nullptr);

}  // namespace ferry::compress

// Compressed groups made at session open from a raw checkpoint (issue 24, docs/compression.md):
// each group's layout assembled on the host from the tier's mapping, exactly as a copy into a
// slot would lay it out, and encoded with its BF16 ranges. The development path until
// compressed checkpoints (`ferry pack --compress`) are read: it costs an encode of every group
// (~0.1-0.2 GB/s per two cores) and holds every group's compressed bytes in host memory.
#pragma once

#include "compress/group_codec.h"
#include "core/status.h"
#include "host/compressed_groups.h"
#include "host/host_tier.h"
#include "model/weights.h"

namespace ferry {

class ThreadPool;

// Every group of `weights` encoded (options.pool is replaced by `pool`: segments on its threads;
// null: this thread). The bytes are read from `tier`'s mapping with guarded reads, so a file that
// changes under the encoder is an io error naming it; a tensor the tier cannot place is its
// error; each error names the group. With `page_locked`, the compressed bytes end in one buffer
// of its allocate_host (page-locked on CUDA, so that staged copies run at the link's speed and
// asynchronously), each group at a multiple of 256 bytes, moved there group by group (the peak
// is the total plus the largest group); the CompressedGroups then must not outlive that backend.
Result<CompressedGroups> encode_groups(const ModelWeights& weights, const HostTier& tier,
                                       ThreadPool* pool, compress::EncodeOptions options = {},
                                       Backend* page_locked = nullptr);

}  // namespace ferry

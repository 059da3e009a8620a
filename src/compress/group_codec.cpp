#include "compress/group_codec.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <optional>

#include "compress/xxhash64.h"
#include "core/thread_pool.h"

namespace ferry::compress {
namespace {

static_assert(std::endian::native == std::endian::little, "the decoder writes BF16 little-endian");

// Little-endian fields, whatever the host.
inline void put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
inline void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline void put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline uint16_t get16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | static_cast<uint32_t>(p[1]) << 8);
}
inline uint32_t get32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}
inline uint64_t get64(const uint8_t* p) {
  return static_cast<uint64_t>(get32(p)) | static_cast<uint64_t>(get32(p + 4)) << 32;
}

Error format_error(const std::string& what) {
  return make_error(ErrorCode::format, "compressed group: " + what);
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string describe(size_t index, const SegmentInfo& s) {
  return "segment " + std::to_string(index) + " (" + segment_kind_name(s.kind) + ", output " +
         hex(s.out_offset) + "+" + std::to_string(s.out_bytes()) + ")";
}

// Counts -> frequencies summing to kProbScale, every present symbol at least 1. Rounded
// proportionally, then corrected one step at a time where a step costs the fewest coded bits.
std::array<uint16_t, kSymbols> normalize(const std::array<uint64_t, kSymbols>& counts) {
  std::array<uint16_t, kSymbols> f{};
  uint64_t total = 0;
  for (uint64_t c : counts) total += c;
  if (total == 0) {
    f[0] = static_cast<uint16_t>(kProbScale);  // a table for no symbols still sums right
    return f;
  }
  std::array<uint32_t, kSymbols> g{};
  int64_t sum = 0;
  for (uint32_t s = 0; s < kSymbols; ++s) {
    if (counts[s] == 0) continue;
    const double share = static_cast<double>(counts[s]) * kProbScale / static_cast<double>(total);
    g[s] = std::max<uint32_t>(1, static_cast<uint32_t>(std::llround(share)));
    sum += g[s];
  }
  while (sum != kProbScale) {
    int best = -1;
    double best_cost = std::numeric_limits<double>::infinity();
    for (uint32_t s = 0; s < kSymbols; ++s) {
      if (counts[s] == 0) continue;
      const double c = static_cast<double>(counts[s]);
      double cost;  // coded bits added by the step
      if (sum > static_cast<int64_t>(kProbScale)) {
        if (g[s] <= 1) continue;
        cost = c * std::log2(static_cast<double>(g[s]) / (g[s] - 1));
      } else {
        cost = -c * std::log2(static_cast<double>(g[s] + 1) / g[s]);
      }
      if (cost < best_cost) {
        best_cost = cost;
        best = static_cast<int>(s);
      }
    }
    if (sum > static_cast<int64_t>(kProbScale)) {
      --g[best];
      --sum;
    } else {
      ++g[best];
      ++sum;
    }
  }
  for (uint32_t s = 0; s < kSymbols; ++s) f[s] = static_cast<uint16_t>(g[s]);
  return f;
}

// The decode table (group_format.h: table_entry) of frequencies summing to kProbScale.
std::vector<uint32_t> decode_table(const std::array<uint16_t, kSymbols>& freqs) {
  std::vector<uint32_t> t(kProbScale);
  uint32_t cum = 0;
  for (uint32_t s = 0; s < kSymbols; ++s) {
    for (uint32_t k = 0; k < freqs[s]; ++k) t[cum + k] = table_entry(s, freqs[s], k);
    cum += freqs[s];
  }
  return t;
}

struct EncodeTable {
  std::array<uint32_t, kSymbols> freq{};
  std::array<uint32_t, kSymbols> cum{};
};

// The element of a segment that lane `lane` decodes at step j of chunk c (group_format.h).
inline uint32_t element_of(uint32_t c, uint32_t j, uint32_t lane) {
  return c * kChunk + lane * kPerLane + j;
}

// rANS-codes n exponents: 32 initial states then the words, in decode order. Steps run in the
// exact reverse of the decoder's (chunk, j, lane) order, so the words come out reversed.
std::vector<uint8_t> rans_encode(const uint8_t* exps, uint32_t n, const EncodeTable& t) {
  uint32_t x[kLanes];
  for (uint32_t& s : x) s = kStateLow;
  std::vector<uint16_t> words;
  words.reserve(n / 2 + 16);
  const uint32_t chunks = (n + kChunk - 1) / kChunk;
  for (uint32_t c = chunks; c-- > 0;) {
    for (uint32_t j = kPerLane; j-- > 0;) {
      for (uint32_t lane = kLanes; lane-- > 0;) {
        const uint32_t i = element_of(c, j, lane);
        if (i >= n) continue;
        const uint32_t f = t.freq[exps[i]];
        uint32_t s = x[lane];
        if (static_cast<uint64_t>(s) >= (static_cast<uint64_t>(f) << (32 - kProbBits))) {
          words.push_back(static_cast<uint16_t>(s & 0xffffu));
          s >>= 16;
        }
        x[lane] = ((s / f) << kProbBits) + (s % f) + t.cum[exps[i]];
      }
    }
  }
  std::reverse(words.begin(), words.end());
  std::vector<uint8_t> out(kStateBytes + 2 * words.size());
  for (uint32_t l = 0; l < kLanes; ++l) put32(out.data() + 4 * l, x[l]);
  for (size_t w = 0; w < words.size(); ++w) put16(out.data() + kStateBytes + 2 * w, words[w]);
  return out;
}

// Decodes one rANS segment straight into its BF16 output (2 * n bytes at out). `in` holds
// in_length exponent bytes; `sm` the n sign+mantissa bytes. Returns what is wrong, if anything.
std::optional<std::string> rans_decode(const uint8_t* in, uint32_t in_length, const uint8_t* sm,
                                       uint32_t n, const uint32_t* table, uint8_t* out) {
  uint32_t x[kLanes];
  for (uint32_t l = 0; l < kLanes; ++l) {
    x[l] = get32(in + 4 * l);
    if (x[l] < kStateLow) {
      return "lane " + std::to_string(l) + " starts at state " + hex(x[l]) + ", below 2^16";
    }
  }
  const uint32_t nw = (in_length - kStateBytes) / 2;
  // Reads are clamped to the stream's last word (a stream of none reads a zero) and every
  // renormalization counted, so a lying stream never reads past its end and shows as pos > nw.
  static constexpr uint8_t kNoWords[2] = {0, 0};
  const uint8_t* words = nw > 0 ? in + kStateBytes : kNoWords;
  const uint32_t last = nw > 0 ? nw - 1 : 0;
  uint32_t pos = 0;
  // A chunk's outputs go to a local uint16_t buffer first: stores through `out` (bytes) could
  // alias the states and would keep them out of registers.
  uint16_t chunk[kChunk];
  auto step = [&x, &pos, &chunk, words, last, table](uint32_t lane, uint32_t r, uint8_t sm_byte) {
    const uint32_t s = x[lane];
    const uint32_t e = table[s & (kProbScale - 1)];
    chunk[r] = bf16_join(static_cast<uint8_t>(e), sm_byte);
    const uint32_t y = rans_step(s, e);
    // Branch-free (a renormalization is a coin flip of p ~ 0.16: a branch mispredicts often).
    const uint32_t need = static_cast<uint32_t>((uint64_t{y} - kStateLow) >> 63);  // y < 2^16
    const uint32_t at = pos < last ? pos : last;
    const uint32_t w = get16(words + 2 * at);
    x[lane] = (y << (16 * need)) | (w & (0u - need));
    pos += need;
  };
  const uint32_t full = n / kChunk;
  for (uint32_t c = 0; c < full && pos <= nw; ++c) {
    const uint8_t* smc = sm + c * kChunk;
    for (uint32_t j = 0; j < kPerLane; ++j) {
      for (uint32_t lane = 0; lane < kLanes; ++lane) {
        const uint32_t r = lane * kPerLane + j;
        step(lane, r, smc[r]);
      }
    }
    std::memcpy(out + 2 * c * kChunk, chunk, sizeof chunk);
  }
  const uint32_t rest = n - full * kChunk;
  if (pos <= nw && rest > 0) {
    const uint8_t* smc = sm + full * kChunk;
    for (uint32_t j = 0; j < kPerLane; ++j) {
      for (uint32_t lane = 0; lane < kLanes; ++lane) {
        const uint32_t r = lane * kPerLane + j;
        if (r < rest) step(lane, r, smc[r]);
      }
    }
    std::memcpy(out + 2 * full * kChunk, chunk, 2 * rest);
  }
  if (pos > nw) return std::string("the rANS stream ends early (") + std::to_string(nw) + " words)";
  if (pos != nw) {
    return std::to_string(nw - pos) + " of " + std::to_string(nw) + " rANS words left unread";
  }
  for (uint32_t l = 0; l < kLanes; ++l) {
    if (x[l] != kStateLow) {
      return "lane " + std::to_string(l) + " ends at state " + hex(x[l]) + ", not 2^16";
    }
  }
  return std::nullopt;
}

std::optional<std::string> decode_segment(const SegmentInfo& s, const uint8_t* payload,
                                          const uint32_t* table, uint8_t* out) {
  const uint8_t* in = payload + s.in_offset;
  uint8_t* o = out + s.out_offset;
  switch (s.kind) {
    case SegmentKind::copy:
      std::memcpy(o, in, s.count);
      return std::nullopt;
    case SegmentKind::split: {
      const uint8_t* sm = in + align16(s.in_length);
      for (uint32_t i = 0; i < s.count; ++i) {
        const uint16_t v = bf16_join(in[i], sm[i]);
        o[2 * i] = static_cast<uint8_t>(v);
        o[2 * i + 1] = static_cast<uint8_t>(v >> 8);
      }
      return std::nullopt;
    }
    case SegmentKind::rans:
      return rans_decode(in, s.in_length, in + align16(s.in_length), s.count, table, o);
  }
  return "unknown kind";
}

// A segment as the encoder plans it.
struct Planned {
  bool bf16 = false;
  uint64_t out_offset = 0;
  uint32_t count = 0;  // bytes (copy) or elements
};

Status check_ranges(uint64_t size, std::span<const Bf16Range> bf16) {
  uint64_t end = 0;
  for (size_t k = 0; k < bf16.size(); ++k) {
    const Bf16Range& r = bf16[k];
    const std::string name = "BF16 range " + std::to_string(k) + " (" + hex(r.offset) + "+" +
                             std::to_string(r.bytes) + ")";
    if (r.bytes % 2 != 0) return make_error(ErrorCode::invalid_argument, name + ": odd length");
    if (r.offset > size || r.bytes > size - r.offset) {
      return make_error(ErrorCode::invalid_argument,
                        name + ": outside the group of " + std::to_string(size) + " bytes");
    }
    if (r.offset < end) {
      return make_error(ErrorCode::invalid_argument,
                        name + ": not after the previous range (unsorted or overlapping)");
    }
    end = r.offset + r.bytes;
  }
  return Status();
}

std::vector<uint8_t> stored_group(std::span<const uint8_t> bytes, uint64_t checksum) {
  std::vector<uint8_t> out(kHeaderBytes + bytes.size());
  std::memcpy(out.data(), kMagic, 4);
  put16(out.data() + kHeaderVersion, kVersion);
  put16(out.data() + kHeaderMode, kModeStored);
  put64(out.data() + kHeaderDecodedSize, bytes.size());
  put64(out.data() + kHeaderChecksum, checksum);
  put64(out.data() + kHeaderPayloadOffset, kHeaderBytes);
  put64(out.data() + kHeaderPayloadSize, bytes.size());
  if (!bytes.empty()) std::memcpy(out.data() + kHeaderBytes, bytes.data(), bytes.size());
  return out;
}

}  // namespace

const char* segment_kind_name(SegmentKind kind) {
  switch (kind) {
    case SegmentKind::copy:
      return "copy";
    case SegmentKind::rans:
      return "rans";
    case SegmentKind::split:
      return "split";
  }
  return "?";
}

Result<std::vector<uint8_t>> encode_group(std::span<const uint8_t> bytes,
                                          std::span<const Bf16Range> bf16, const EncodeOptions& o) {
  if (o.segment_elements < kChunk || o.segment_elements > kMaxSegmentElements ||
      o.segment_elements % kChunk != 0) {
    return make_error(ErrorCode::invalid_argument,
                      "segment_elements " + std::to_string(o.segment_elements) +
                          ": must be a multiple of 256 in [256, 8192]");
  }
  if (o.copy_bytes < 1 || o.copy_bytes > kMaxCopyBytes) {
    return make_error(ErrorCode::invalid_argument,
                      "copy_bytes " + std::to_string(o.copy_bytes) + ": must be in [1, 65536]");
  }
  FERRY_RETURN_IF_ERROR(check_ranges(bytes.size(), bf16));
  const uint64_t checksum = group_checksum(bytes, o.pool);

  // The segments in output order: gaps cut into copies, ranges into BF16 segments.
  std::vector<Planned> plan;
  auto add_copy = [&](uint64_t from, uint64_t to) {
    for (uint64_t at = from; at < to; at += o.copy_bytes) {
      plan.push_back({false, at, static_cast<uint32_t>(std::min<uint64_t>(o.copy_bytes, to - at))});
    }
  };
  uint64_t at = 0;
  uint64_t elements = 0;
  for (const Bf16Range& r : bf16) {
    add_copy(at, r.offset);
    const uint64_t n = r.bytes / 2;
    for (uint64_t e = 0; e < n; e += o.segment_elements) {
      plan.push_back({true, r.offset + 2 * e,
                      static_cast<uint32_t>(std::min<uint64_t>(o.segment_elements, n - e))});
    }
    elements += n;
    at = r.offset + r.bytes;
  }
  add_copy(at, bytes.size());
  if (elements == 0 || plan.size() > std::numeric_limits<uint32_t>::max()) {
    return stored_group(bytes, checksum);
  }

  // The group's exponent histogram and its table.
  std::array<uint64_t, kSymbols> counts{};
  std::mutex counts_mutex;
  parallel_for(o.pool, static_cast<int64_t>(plan.size()), 64, [&](int64_t a, int64_t b) {
    std::array<uint64_t, kSymbols> local{};
    for (int64_t k = a; k < b; ++k) {
      const Planned& p = plan[static_cast<size_t>(k)];
      if (!p.bf16) continue;
      const uint8_t* src = bytes.data() + p.out_offset;
      for (uint32_t i = 0; i < p.count; ++i)
        ++local[(src[2 * i + 1] << 1 | src[2 * i] >> 7) & 0xff];
    }
    std::lock_guard<std::mutex> lock(counts_mutex);
    for (uint32_t s = 0; s < kSymbols; ++s) counts[s] += local[s];
  });
  const std::array<uint16_t, kSymbols> freqs = normalize(counts);
  EncodeTable table;
  for (uint32_t s = 0, cum = 0; s < kSymbols; ++s) {
    table.freq[s] = freqs[s];
    table.cum[s] = cum;
    cum += freqs[s];
  }

  // Each BF16 segment: its exponent part (rANS, or raw where rANS does not beat raw) and its
  // sign+mantissa bytes.
  struct Encoded {
    SegmentKind kind = SegmentKind::copy;
    std::vector<uint8_t> exponent_part;  // rans: states + words; split: the exponents
    std::vector<uint8_t> sign_mantissa;
  };
  std::vector<Encoded> enc(plan.size());
  parallel_for(o.pool, static_cast<int64_t>(plan.size()), 16, [&](int64_t a, int64_t b) {
    std::vector<uint8_t> exps;
    for (int64_t k = a; k < b; ++k) {
      const Planned& p = plan[static_cast<size_t>(k)];
      Encoded& e = enc[static_cast<size_t>(k)];
      if (!p.bf16) continue;
      const uint8_t* src = bytes.data() + p.out_offset;
      exps.resize(p.count);
      e.sign_mantissa.resize(p.count);
      for (uint32_t i = 0; i < p.count; ++i) {
        const uint16_t v = static_cast<uint16_t>(src[2 * i] | src[2 * i + 1] << 8);
        exps[i] = bf16_exponent(v);
        e.sign_mantissa[i] = bf16_sign_mantissa(v);
      }
      e.exponent_part = rans_encode(exps.data(), p.count, table);
      if (e.exponent_part.size() < p.count && e.exponent_part.size() <= kMaxCodedBytes) {
        e.kind = SegmentKind::rans;
      } else {
        e.kind = SegmentKind::split;
        e.exponent_part = exps;
      }
    }
  });

  // Offsets, then the decision, then the bytes.
  const uint64_t index_offset = kHeaderBytes + kTableBytes;
  const uint64_t payload_offset = align16(index_offset + uint64_t{kEntryBytes} * plan.size());
  std::vector<SegmentInfo> segs(plan.size());
  uint64_t payload_size = 0;
  for (size_t k = 0; k < plan.size(); ++k) {
    SegmentInfo& s = segs[k];
    s.kind = plan[k].bf16 ? enc[k].kind : SegmentKind::copy;
    s.out_offset = plan[k].out_offset;
    s.count = plan[k].count;
    s.in_length = plan[k].bf16 ? static_cast<uint32_t>(enc[k].exponent_part.size()) : s.count;
    s.in_offset = payload_size;
    payload_size = align16(payload_size + s.in_bytes());
  }
  const uint64_t coded_size = payload_offset + payload_size;
  if (static_cast<double>(coded_size) > o.max_ratio * static_cast<double>(bytes.size())) {
    return stored_group(bytes, checksum);
  }
  std::vector<uint8_t> out(coded_size, 0);
  uint8_t* h = out.data();
  std::memcpy(h, kMagic, 4);
  put16(h + kHeaderVersion, kVersion);
  put16(h + kHeaderMode, kModeCoded);
  put64(h + kHeaderDecodedSize, bytes.size());
  put64(h + kHeaderChecksum, checksum);
  put32(h + kHeaderSegmentCount, static_cast<uint32_t>(plan.size()));
  put32(h + kHeaderProbBits, kProbBits);
  put64(h + kHeaderIndexOffset, index_offset);
  put64(h + kHeaderPayloadOffset, payload_offset);
  put64(h + kHeaderPayloadSize, payload_size);
  for (uint32_t s = 0; s < kSymbols; ++s) put16(h + kHeaderBytes + 2 * s, freqs[s]);
  uint8_t* payload = out.data() + payload_offset;
  parallel_for(o.pool, static_cast<int64_t>(plan.size()), 64, [&](int64_t a, int64_t b) {
    for (int64_t k = a; k < b; ++k) {
      const SegmentInfo& s = segs[static_cast<size_t>(k)];
      uint8_t* e = out.data() + index_offset + uint64_t{kEntryBytes} * static_cast<uint64_t>(k);
      put64(e + kEntryOutOffset, s.out_offset);
      put64(e + kEntryInOffset, s.in_offset);
      put32(e + kEntryInLength, s.in_length);
      put32(e + kEntryCount, s.count);
      put16(e + kEntryKind, static_cast<uint16_t>(s.kind));
      if (s.kind == SegmentKind::copy) {
        std::memcpy(payload + s.in_offset, bytes.data() + s.out_offset, s.count);
      } else {
        const Encoded& x = enc[static_cast<size_t>(k)];
        std::memcpy(payload + s.in_offset, x.exponent_part.data(), x.exponent_part.size());
        std::memcpy(payload + s.in_offset + align16(s.in_length), x.sign_mantissa.data(),
                    x.sign_mantissa.size());
      }
    }
  });
  return out;
}

Result<uint64_t> decoded_size(std::span<const uint8_t> c) {
  if (c.size() < kHeaderBytes) {
    return format_error("truncated: " + std::to_string(c.size()) + " bytes, the header needs " +
                        std::to_string(kHeaderBytes));
  }
  if (std::memcmp(c.data(), kMagic, 4) != 0) return format_error("bad magic (not FRYZ)");
  const uint16_t version = get16(c.data() + kHeaderVersion);
  if (version != kVersion) {
    return format_error("version " + std::to_string(version) + ", this ferry reads " +
                        std::to_string(kVersion));
  }
  const uint16_t mode = get16(c.data() + kHeaderMode);
  if (mode != kModeStored && mode != kModeCoded) {
    return format_error("unknown mode " + std::to_string(mode));
  }
  return get64(c.data() + kHeaderDecodedSize);
}

Result<GroupLayout> read_group_layout(std::span<const uint8_t> c) {
  FERRY_ASSIGN_OR_RETURN(const uint64_t decoded, decoded_size(c));
  const uint8_t* h = c.data();
  GroupLayout g;
  g.coded = get16(h + kHeaderMode) == kModeCoded;
  g.compressed_size = c.size();
  g.decoded_size = decoded;
  g.checksum = get64(h + kHeaderChecksum);
  g.payload_offset = get64(h + kHeaderPayloadOffset);
  g.payload_size = get64(h + kHeaderPayloadSize);
  const uint32_t count = get32(h + kHeaderSegmentCount);
  const uint32_t prob_bits = get32(h + kHeaderProbBits);
  const uint64_t index_offset = get64(h + kHeaderIndexOffset);
  if (get64(h + kHeaderReserved) != 0) return format_error("reserved header bytes not zero");
  const uint64_t size = c.size();
  if (!g.coded) {
    if (count != 0 || prob_bits != 0 || index_offset != 0) {
      return format_error("a stored group with a segment count, table bits or index");
    }
    if (g.payload_offset != kHeaderBytes) {
      return format_error("stored payload at " + std::to_string(g.payload_offset) + ", not 64");
    }
    if (g.payload_size != decoded || g.payload_size != size - kHeaderBytes) {
      return format_error("stored group of " + std::to_string(decoded) + " bytes (payload " +
                          std::to_string(g.payload_size) + ") in " + std::to_string(size) +
                          " bytes: truncated or lying");
    }
    return g;
  }
  if (prob_bits != kProbBits) {
    return format_error("table precision " + std::to_string(prob_bits) + " bits, not 12");
  }
  if (index_offset != kHeaderBytes + kTableBytes) {
    return format_error("index at " + std::to_string(index_offset) + ", not 576");
  }
  if (size < index_offset) {
    return format_error("truncated: " + std::to_string(size) +
                        " bytes, the header and table need 576");
  }
  uint32_t sum = 0;
  for (uint32_t s = 0; s < kSymbols; ++s) {
    g.freqs[s] = get16(h + kHeaderBytes + 2 * s);
    sum += g.freqs[s];
  }
  if (sum != kProbScale) {
    return format_error("frequency table sums to " + std::to_string(sum) + ", not 4096");
  }
  if (count == 0) return format_error("a coded group with no segments");
  if (count > (size - index_offset) / kEntryBytes) {
    return format_error("index of " + std::to_string(count) + " segments overruns the " +
                        std::to_string(size) + " bytes (truncated or lying)");
  }
  const uint64_t want_payload = align16(index_offset + uint64_t{kEntryBytes} * count);
  if (g.payload_offset != want_payload) {
    return format_error("payload at " + std::to_string(g.payload_offset) + ", the index ends at " +
                        std::to_string(want_payload));
  }
  if (g.payload_offset > size || g.payload_size != size - g.payload_offset) {
    return format_error("payload of " + std::to_string(g.payload_size) + " bytes at " +
                        std::to_string(g.payload_offset) + " in " + std::to_string(size) +
                        " bytes: truncated or lying");
  }
  g.segments.resize(count);
  uint64_t end = 0;
  for (uint32_t k = 0; k < count; ++k) {
    const uint8_t* e = h + index_offset + uint64_t{kEntryBytes} * k;
    SegmentInfo& s = g.segments[k];
    const uint16_t kind = get16(e + kEntryKind);
    const std::string name = "segment " + std::to_string(k);
    if (kind != kKindCopy && kind != kKindRans && kind != kKindSplit) {
      return format_error(name + ": unknown kind " + std::to_string(kind));
    }
    if (get16(e + kEntryReserved) != 0 || get32(e + kEntryReserved + 2) != 0) {
      return format_error(name + ": reserved bytes not zero");
    }
    s.kind = static_cast<SegmentKind>(kind);
    s.out_offset = get64(e + kEntryOutOffset);
    s.in_offset = get64(e + kEntryInOffset);
    s.in_length = get32(e + kEntryInLength);
    s.count = get32(e + kEntryCount);
    const std::string what = describe(k, s);
    if (s.count == 0) return format_error(what + ": empty");
    if (s.kind == SegmentKind::copy) {
      if (s.count > kMaxCopyBytes) return format_error(what + ": more than 65536 bytes");
      if (s.in_length != s.count) {
        return format_error(what + ": copies " + std::to_string(s.count) + " bytes from " +
                            std::to_string(s.in_length));
      }
    } else {
      if (s.count > kMaxSegmentElements) return format_error(what + ": more than 8192 elements");
      if (s.kind == SegmentKind::split && s.in_length != s.count) {
        return format_error(what + ": " + std::to_string(s.in_length) + " exponent bytes for " +
                            std::to_string(s.count) + " elements");
      }
      if (s.kind == SegmentKind::rans &&
          (s.in_length < kStateBytes || (s.in_length - kStateBytes) % 2 != 0 ||
           s.in_length > kMaxCodedBytes)) {
        return format_error(what + ": rANS part of " + std::to_string(s.in_length) +
                            " bytes (needs 128 + 2 * words, at most 8192)");
      }
    }
    if (s.in_offset % 16 != 0) return format_error(what + ": input offset not 16-byte aligned");
    if (s.in_offset > g.payload_size || s.in_bytes() > g.payload_size - s.in_offset) {
      return format_error(what + ": reads " + std::to_string(s.in_bytes()) + " bytes at " +
                          hex(s.in_offset) + ", past the payload's " +
                          std::to_string(g.payload_size));
    }
    if (s.out_offset != end) {
      return format_error(what + ": starts at " + hex(s.out_offset) +
                          ", the previous segment ends at " + hex(end));
    }
    if (s.out_bytes() > decoded - end) {
      return format_error(what + ": ends past the decoded size " + std::to_string(decoded));
    }
    end += s.out_bytes();
    switch (s.kind) {
      case SegmentKind::copy:
        g.copy_bytes += s.count;
        break;
      case SegmentKind::rans:
        g.rans_elements += s.count;
        break;
      case SegmentKind::split:
        g.split_elements += s.count;
        break;
    }
  }
  if (end != decoded) {
    return format_error("segments cover " + std::to_string(end) + " of " + std::to_string(decoded) +
                        " bytes");
  }
  return g;
}

Status decode_group(std::span<const uint8_t> compressed, std::span<uint8_t> out,
                    const DecodeOptions& options) {
  FERRY_ASSIGN_OR_RETURN(const GroupLayout layout, read_group_layout(compressed));
  return decode_group(layout, compressed, out, options);
}

Status decode_group(const GroupLayout& g, std::span<const uint8_t> compressed,
                    std::span<uint8_t> out, const DecodeOptions& options) {
  if (out.size() != g.decoded_size) {
    return make_error(ErrorCode::invalid_argument,
                      "compressed group: output of " + std::to_string(out.size()) +
                          " bytes for a group of " + std::to_string(g.decoded_size));
  }
  if (compressed.size() != g.compressed_size) {
    return make_error(ErrorCode::invalid_argument,
                      "compressed group: layout read from another buffer");
  }
  const uint8_t* payload = compressed.data() + g.payload_offset;
  if (!g.coded) {
    if (!out.empty()) std::memcpy(out.data(), payload, out.size());
  } else {
    const std::vector<uint32_t> table = decode_table(g.freqs);
    std::atomic<size_t> first_bad{g.segments.size()};
    std::mutex mu;
    std::string why;
    parallel_for(options.pool, static_cast<int64_t>(g.segments.size()), 8,
                 [&](int64_t a, int64_t b) {
                   for (int64_t k = a; k < b; ++k) {
                     const size_t i = static_cast<size_t>(k);
                     if (i > first_bad.load(std::memory_order_relaxed)) return;
                     auto bad = decode_segment(g.segments[i], payload, table.data(), out.data());
                     if (!bad) continue;
                     std::lock_guard<std::mutex> lock(mu);
                     if (i < first_bad.load()) {  // the lowest failing segment is the one named
                       first_bad = i;
                       why = describe(i, g.segments[i]) + ": " + *bad;
                     }
                     return;
                   }
                 });
    if (first_bad.load() != g.segments.size()) return format_error(why);
  }
  if (options.verify_checksum) {
    const uint64_t got = group_checksum(out, options.pool);
    if (got != g.checksum) {
      return format_error("checksum of the decoded bytes is " + hex(got) + ", the group says " +
                          hex(g.checksum));
    }
  }
  return Status();
}

}  // namespace ferry::compress

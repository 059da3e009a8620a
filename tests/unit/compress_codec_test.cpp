// The group codec (compress/group_codec.h, docs/compression.md): byte-identical round trips on
// BF16 data of odd sizes and layouts, incompressible data stored whole, the ratio on normal
// and uniform synthetic weights, and hostile input refused with an error naming what is wrong.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "compress/group_codec.h"
#include "compress/xxhash64.h"
#include "core/thread_pool.h"
#include "model/synth.h"

namespace ferry::compress {
namespace {

// n BF16 values of a normal (or uniform) synthetic tensor with std 1/sqrt(fan_in).
std::vector<uint8_t> synth_bf16(size_t n, SynthDistribution dist, uint64_t seed = 1,
                                float std = 0.03125f) {
  WeightSpec s;
  s.dtype = DType::bf16;
  s.shape = {static_cast<int64_t>(n)};
  std::vector<uint8_t> out(2 * n);
  synth_fill(seed, 0, s, SynthInit{false, std, dist}, 0,
             std::span<std::byte>(reinterpret_cast<std::byte*>(out.data()), out.size()));
  return out;
}

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

std::vector<uint8_t> round_trip(const std::vector<uint8_t>& bytes,
                                const std::vector<Bf16Range>& ranges, const EncodeOptions& o = {},
                                ThreadPool* pool = nullptr) {
  auto enc = encode_group(bytes, ranges, o);
  EXPECT_TRUE(enc.ok()) << enc.error().to_string();
  if (!enc.ok()) return {};
  auto size = decoded_size(*enc);
  EXPECT_TRUE(size.ok());
  EXPECT_EQ(*size, bytes.size());
  std::vector<uint8_t> out(bytes.size(), 0xcd);
  const Status s = decode_group(*enc, out, DecodeOptions{pool, true});
  EXPECT_TRUE(s.ok()) << s.error().to_string();
  EXPECT_TRUE(out == bytes);
  return *enc;
}

TEST(CompressHash, Xxh64KnownValues) {
  // From python's xxhash 3.x (xxhash.xxh64(data, seed).intdigest()).
  EXPECT_EQ(xxh64("", 0), 0xef46db3751d8e999ull);
  EXPECT_EQ(xxh64("a", 1), 0xd24ec4f1a98c6e5bull);
  EXPECT_EQ(xxh64("abc", 3), 0x44bc2cf5ad770999ull);
  EXPECT_EQ(xxh64("", 0, 12345), 0x95584af7701f808dull);
  EXPECT_EQ(xxh64("abc", 3, 12345), 0x1700e64f6f23509ull);
  std::vector<uint8_t> v(768);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(xxh64(v.data(), v.size()), 0x8e03c838c596036full);
  EXPECT_EQ(xxh64(v.data(), v.size(), 12345), 0x6ecac135863f12b2ull);
}

TEST(CompressHash, GroupChecksumIsThreadIndependent) {
  const auto v = random_bytes((3u << 20) + 17, 4);
  ThreadPool pool(3);
  EXPECT_EQ(group_checksum(v), group_checksum(v, &pool));
  auto w = v;
  w[2u << 20] ^= 1;
  EXPECT_NE(group_checksum(v), group_checksum(w));
  EXPECT_NE(group_checksum({}), group_checksum(std::vector<uint8_t>(1, 0)));
}

TEST(CompressCodec, MagicWordIsTheMagicBytes) {  // the CUDA decoder compares the word
  uint32_t w = 0;
  std::memcpy(&w, kMagic, 4);
  EXPECT_EQ(w, kMagicWord);
}

TEST(CompressCodec, EmptyAndTinyGroups) {
  round_trip({}, {});
  round_trip({}, {{0, 0}});
  const auto one = synth_bf16(1, SynthDistribution::normal);
  round_trip(one, {{0, 2}});
  auto three = random_bytes(3, 1);
  round_trip(three, {});
  round_trip(three, {{1, 2}});
}

TEST(CompressCodec, NormalBf16OfOddSizesRoundTripsCoded) {
  for (size_t n : {255u, 256u, 257u, 8191u, 8192u, 8193u, 3u * 8192 + 77, 100000u}) {
    const auto bytes = synth_bf16(n, SynthDistribution::normal, n);
    const auto enc = round_trip(bytes, {{0, bytes.size()}});
    auto layout = read_group_layout(enc);
    ASSERT_TRUE(layout.ok()) << layout.error().to_string();
    if (n >= 8192) {  // small ones may be stored: the table and states cost ~700 bytes
      EXPECT_TRUE(layout->coded) << n;
      EXPECT_EQ(layout->segments.size(), (n + 8191) / 8192);
      EXPECT_EQ(layout->rans_elements + layout->split_elements, n);
      EXPECT_GE(layout->rans_elements, n / 8192 * 8192);  // a short tail may keep raw exponents
    }
  }
}

TEST(CompressCodec, SegmentSizesAndThreadsGiveTheSameBytes) {
  const auto bytes = synth_bf16(50000, SynthDistribution::normal, 3);
  ThreadPool pool(4);
  EncodeOptions one;
  EncodeOptions threaded;
  threaded.pool = &pool;
  const auto a = round_trip(bytes, {{0, bytes.size()}}, one);
  const auto b = round_trip(bytes, {{0, bytes.size()}}, threaded, &pool);
  EXPECT_TRUE(a == b);  // the encoder's output does not depend on threads
  for (uint32_t seg : {256u, 1024u, 4096u}) {
    EncodeOptions o;
    o.segment_elements = seg;
    const auto enc = round_trip(bytes, {{0, bytes.size()}}, o, &pool);
    EXPECT_EQ(read_group_layout(enc)->segments.size(), (50000 + seg - 1) / seg);
  }
}

// A group like the weight tables lay out: BF16 tensors at 256-byte offsets, F32 norms and
// padding between them, a BF16 range at an odd offset, and raw bytes at the end.
TEST(CompressCodec, MixedLayoutRoundTrips) {
  std::vector<uint8_t> bytes;
  std::vector<Bf16Range> ranges;
  auto pad_to = [&](size_t align) {
    while (bytes.size() % align) bytes.push_back(0);
  };
  auto add_bf16 = [&](size_t n, uint64_t seed) {
    auto t = synth_bf16(n, SynthDistribution::normal, seed);
    ranges.push_back({bytes.size(), t.size()});
    bytes.insert(bytes.end(), t.begin(), t.end());
  };
  add_bf16(1024 * 96 + 5, 1);
  pad_to(256);
  auto norm = random_bytes(4 * 1000, 9);  // an F32 tensor: stored raw
  bytes.insert(bytes.end(), norm.begin(), norm.end());
  pad_to(256);
  add_bf16(20000, 2);
  bytes.push_back(7);  // odd offset for the next range
  add_bf16(9000, 3);
  auto tail = random_bytes(70000, 5);  // a large raw tail: several copy segments
  bytes.insert(bytes.end(), tail.begin(), tail.end());
  const auto enc = round_trip(bytes, ranges);
  auto layout = read_group_layout(enc);
  ASSERT_TRUE(layout.ok());
  EXPECT_TRUE(layout->coded);
  EXPECT_EQ(layout->rans_elements + layout->split_elements, 1024u * 96 + 5 + 20000 + 9000);
  EXPECT_EQ(layout->copy_bytes + 2 * (layout->rans_elements + layout->split_elements),
            bytes.size());
  ThreadPool pool(3);
  std::vector<uint8_t> out(bytes.size());
  ASSERT_TRUE(decode_group(enc, out, DecodeOptions{&pool, true}).ok());
  EXPECT_TRUE(out == bytes);
}

TEST(CompressCodec, IncompressibleDataIsStoredWhole) {
  const auto bytes = random_bytes(1 << 20, 11);  // random BF16: 8 bits of exponent entropy
  const auto enc = round_trip(bytes, {{0, bytes.size()}});
  auto layout = read_group_layout(enc);
  ASSERT_TRUE(layout.ok());
  EXPECT_FALSE(layout->coded);
  EXPECT_EQ(enc.size(), bytes.size() + kHeaderBytes);
  // No BF16 at all: stored.
  const auto normal = synth_bf16(100000, SynthDistribution::normal);
  const auto enc2 = round_trip(normal, {});
  EXPECT_FALSE(read_group_layout(enc2)->coded);
}

TEST(CompressCodec, SegmentsThatDoNotShrinkAreSplitNotCoded) {
  // Normal data, then a run of random BF16: the group codes, the random part's segments keep
  // their exponents raw.
  auto bytes = synth_bf16(8192 * 8, SynthDistribution::normal);
  const auto noise = random_bytes(2 * 8192, 3);
  bytes.insert(bytes.end(), noise.begin(), noise.end());
  const auto enc = round_trip(bytes, {{0, bytes.size()}});
  auto layout = read_group_layout(enc);
  ASSERT_TRUE(layout->coded);
  EXPECT_EQ(layout->split_elements, 8192u);
  EXPECT_EQ(layout->segments.back().kind, SegmentKind::split);
}

TEST(CompressCodec, BadRangesAreRefused) {
  const std::vector<uint8_t> bytes(100);
  EXPECT_FALSE(encode_group(bytes, std::vector<Bf16Range>{{0, 3}}).ok());    // odd
  EXPECT_FALSE(encode_group(bytes, std::vector<Bf16Range>{{90, 12}}).ok());  // past the end
  EXPECT_FALSE(encode_group(bytes, std::vector<Bf16Range>{{20, 10}, {10, 4}}).ok());  // unsorted
  EXPECT_FALSE(encode_group(bytes, std::vector<Bf16Range>{{10, 10}, {18, 4}}).ok());  // overlap
  EncodeOptions o;
  o.segment_elements = 300;
  EXPECT_FALSE(encode_group(bytes, std::vector<Bf16Range>{}, o).ok());
}

// The ratio that matters (issue 24: <= 0.70 of BF16 on normal weights) and uniform beside it.
TEST(CompressCodec, RatioOnNormalAndUniformWeights) {
  const size_t n = size_t{4} << 20;  // 8 MiB of BF16
  const auto normal = synth_bf16(n, SynthDistribution::normal, 21);
  const auto uniform = synth_bf16(n, SynthDistribution::uniform, 21);
  const auto en = encode_group(normal, std::vector<Bf16Range>{{0, normal.size()}});
  const auto eu = encode_group(uniform, std::vector<Bf16Range>{{0, uniform.size()}});
  ASSERT_TRUE(en.ok() && eu.ok());
  const double rn = static_cast<double>(en->size()) / static_cast<double>(normal.size());
  const double ru = static_cast<double>(eu->size()) / static_cast<double>(uniform.size());
  std::printf("ratio: normal %.4f, uniform %.4f\n", rn, ru);
  EXPECT_LE(rn, 0.70);
  EXPECT_GT(rn, 0.60);  // ~2.55 bits of exponent entropy: 0.5 + 2.55 / 16 + overheads
  EXPECT_LT(ru, rn);    // uniform flatters the codec
}

// --- hostile input ---

void set16(std::vector<uint8_t>& v, size_t at, uint16_t x) {
  v[at] = static_cast<uint8_t>(x);
  v[at + 1] = static_cast<uint8_t>(x >> 8);
}
void set32(std::vector<uint8_t>& v, size_t at, uint32_t x) {
  for (int i = 0; i < 4; ++i) v[at + i] = static_cast<uint8_t>(x >> (8 * i));
}
void set64(std::vector<uint8_t>& v, size_t at, uint64_t x) {
  for (int i = 0; i < 8; ++i) v[at + i] = static_cast<uint8_t>(x >> (8 * i));
}
uint32_t get32(const std::vector<uint8_t>& v, size_t at) {
  uint32_t x = 0;
  for (int i = 3; i >= 0; --i) x = (x << 8) | v[at + i];
  return x;
}
uint64_t get64(const std::vector<uint8_t>& v, size_t at) {
  return get32(v, at) | static_cast<uint64_t>(get32(v, at + 4)) << 32;
}

struct Fixture {
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> enc;
  GroupLayout layout;
};

// Normal BF16 with a raw gap between two ranges: rans, copy, rans, rans, rans (3000 elements).
const Fixture& fixture() {
  static const Fixture f = [] {
    Fixture x;
    x.bytes = synth_bf16(3 * 8192 + 3000, SynthDistribution::normal, 8);
    const auto gap = random_bytes(512, 1);
    x.bytes.insert(x.bytes.begin() + 2 * 8192, gap.begin(), gap.end());
    const std::vector<Bf16Range> r{{0, 2 * 8192}, {2 * 8192 + 512, 2 * (2 * 8192 + 3000)}};
    x.enc = encode_group(x.bytes, r).value();
    x.layout = read_group_layout(x.enc).value();
    return x;
  }();
  return f;
}

size_t entry(size_t k, uint32_t field) {
  return kHeaderBytes + kTableBytes + 32 * k + field;
}

struct Corruption {
  const char* name;
  std::function<void(std::vector<uint8_t>&)> apply;
  const char* expect;  // a substring of the error
};

TEST(CompressHostile, FixtureIsAsExpected) {
  const Fixture& f = fixture();
  ASSERT_TRUE(f.layout.coded);
  ASSERT_EQ(f.layout.segments.size(), 5u);
  EXPECT_EQ(f.layout.segments[0].kind, SegmentKind::rans);
  EXPECT_EQ(f.layout.segments[1].kind, SegmentKind::copy);
  EXPECT_EQ(f.layout.segments[3].kind, SegmentKind::rans);
  EXPECT_EQ(f.layout.segments[4].kind, SegmentKind::rans);
}

TEST(CompressHostile, EveryCorruptionIsRefusedWithAReason) {
  const Fixture& f = fixture();
  const uint64_t payload = f.layout.payload_offset;
  const SegmentInfo& s1 = f.layout.segments[3];  // a rans segment
  const size_t s1_words = payload + s1.in_offset + kStateBytes;
  const size_t s1_sm = payload + s1.in_offset + align16(s1.in_length);
  const std::vector<Corruption> table = {
      {"empty", [](auto& v) { v.clear(); }, "truncated"},
      {"header cut", [](auto& v) { v.resize(63); }, "truncated"},
      {"table cut", [](auto& v) { v.resize(300); }, "truncated"},
      {"index cut", [](auto& v) { v.resize(kHeaderBytes + kTableBytes + 40); }, "overruns"},
      {"payload cut", [](auto& v) { v.resize(v.size() - 1); }, "truncated or lying"},
      {"payload extended", [](auto& v) { v.push_back(0); }, "truncated or lying"},
      {"magic", [](auto& v) { v[0] = 'X'; }, "magic"},
      {"version", [](auto& v) { set16(v, kHeaderVersion, 2); }, "version 2"},
      {"mode", [](auto& v) { set16(v, kHeaderMode, 7); }, "unknown mode"},
      {"mode says stored", [](auto& v) { set16(v, kHeaderMode, kModeStored); }, "stored group"},
      {"reserved header", [](auto& v) { v[kHeaderReserved] = 1; }, "reserved"},
      {"decoded size larger",
       [](auto& v) { set64(v, kHeaderDecodedSize, get64(v, kHeaderDecodedSize) + 2); },
       "segments cover"},
      {"decoded size smaller",
       [](auto& v) { set64(v, kHeaderDecodedSize, get64(v, kHeaderDecodedSize) - 2); },
       "ends past the decoded size"},
      {"decoded size huge", [](auto& v) { set64(v, kHeaderDecodedSize, ~0ull); }, "segments cover"},
      {"segment count huge", [](auto& v) { set32(v, kHeaderSegmentCount, 0xffffffffu); },
       "overruns"},
      {"segment count zero", [](auto& v) { set32(v, kHeaderSegmentCount, 0); }, "no segments"},
      {"segment count smaller", [](auto& v) { set32(v, kHeaderSegmentCount, 4); }, "payload at"},
      {"precision", [](auto& v) { set32(v, kHeaderProbBits, 11); }, "precision"},
      {"index offset", [](auto& v) { set64(v, kHeaderIndexOffset, 600); }, "index at"},
      {"payload offset",
       [](auto& v) { set64(v, kHeaderPayloadOffset, get64(v, kHeaderPayloadOffset) + 16); },
       "payload at"},
      {"payload size",
       [](auto& v) { set64(v, kHeaderPayloadSize, get64(v, kHeaderPayloadSize) - 16); },
       "truncated or lying"},
      {"table sums to 4097", [](auto& v) { v[kHeaderBytes + 2 * 127] += 1; }, "sums to 4097"},
      {"table sums to 4095",
       [](auto& v) {
         for (size_t s = 0; s < 256; ++s) {
           if (v[kHeaderBytes + 2 * s] != 0) {
             v[kHeaderBytes + 2 * s] -= 1;
             return;
           }
         }
       },
       "sums to 4095"},
      {"table overflows u16 sum", [](auto& v) { set16(v, kHeaderBytes, 0xffff); }, "sums to"},
      {"kind", [](auto& v) { set16(v, entry(3, kEntryKind), 9); }, "unknown kind"},
      {"entry reserved", [](auto& v) { v[entry(3, kEntryReserved + 3)] = 1; }, "reserved"},
      {"out offset gap",
       [](auto& v) {
         set64(v, entry(3, kEntryOutOffset), get64(v, entry(3, kEntryOutOffset)) + 2);
       },
       "previous segment ends"},
      {"out offset overlap", [](auto& v) { set64(v, entry(1, kEntryOutOffset), 0); },
       "previous segment ends"},
      {"in offset past payload", [](auto& v) { set64(v, entry(4, kEntryInOffset), 1ull << 40); },
       "past the payload"},
      {"in offset wraps", [](auto& v) { set64(v, entry(4, kEntryInOffset), ~0ull - 15); },
       "past the payload"},
      {"in offset unaligned",
       [](auto& v) { set64(v, entry(3, kEntryInOffset), get64(v, entry(3, kEntryInOffset)) + 2); },
       "aligned"},
      {"in length odd",
       [](auto& v) { set32(v, entry(3, kEntryInLength), get32(v, entry(3, kEntryInLength)) + 1); },
       "rANS part"},
      {"in length below the states", [](auto& v) { set32(v, entry(3, kEntryInLength), 64); },
       "rANS part"},
      {"in length huge", [](auto& v) { set32(v, entry(3, kEntryInLength), 0xfffffffeu); },
       "rANS part"},
      {"in length longer (words past the stream)",
       [](auto& v) { set32(v, entry(4, kEntryInLength), get32(v, entry(4, kEntryInLength)) + 2); },
       "segment 4"},
      {"in length shorter (stream ends early)",
       [](auto& v) { set32(v, entry(3, kEntryInLength), get32(v, entry(3, kEntryInLength)) - 2); },
       "segment 3"},
      {"copy length lies", [](auto& v) { set32(v, entry(1, kEntryInLength), 100); }, "copies"},
      {"copy too long",
       [](auto& v) {
         set32(v, entry(1, kEntryCount), 70000);
         set32(v, entry(1, kEntryInLength), 70000);
       },
       "65536"},
      {"count zero", [](auto& v) { set32(v, entry(0, kEntryCount), 0); }, "empty"},
      {"count too many", [](auto& v) { set32(v, entry(0, kEntryCount), 8193); }, "8192"},
      {"count smaller", [](auto& v) { set32(v, entry(0, kEntryCount), 8191); },
       "previous segment ends"},
      {"count of the last segment larger",
       [](auto& v) { set32(v, entry(4, kEntryCount), get32(v, entry(4, kEntryCount)) + 1); },
       "decoded size"},
      {"kind rans -> split", [](auto& v) { set16(v, entry(3, kEntryKind), kKindSplit); },
       "exponent bytes for"},
      {"kind copy -> rans", [](auto& v) { set16(v, entry(1, kEntryKind), kKindRans); },
       "previous segment ends"},
      {"initial state below 2^16", [s1_words](auto& v) { set32(v, s1_words - kStateBytes + 8, 5); },
       "below 2^16"},
      {"initial state changed", [s1_words](auto& v) { v[s1_words - kStateBytes + 9] ^= 0x40; },
       "segment 3"},
      {"word flipped", [s1_words](auto& v) { v[s1_words + 40] ^= 0x10; }, "segment 3"},
      {"sign+mantissa flipped", [s1_sm](auto& v) { v[s1_sm + 77] ^= 0x01; }, "checksum"},
      {"copy byte flipped",
       [payload](auto& v) { v[payload + fixture().layout.segments[1].in_offset + 3] ^= 1; },
       "checksum"},
      {"checksum", [](auto& v) { v[kHeaderChecksum] ^= 1; }, "checksum"},
  };
  ThreadPool pool(3);
  for (const Corruption& c : table) {
    std::vector<uint8_t> v = f.enc;
    c.apply(v);
    std::vector<uint8_t> out(f.bytes.size());
    Status s = decode_group(v, out);
    ASSERT_FALSE(s.ok()) << c.name;
    EXPECT_EQ(s.error().code, ErrorCode::format) << c.name;
    EXPECT_NE(s.error().message.find(c.expect), std::string::npos)
        << c.name << ": " << s.error().message;
    Status t = decode_group(v, out, DecodeOptions{&pool, true});  // the same error threaded
    ASSERT_FALSE(t.ok()) << c.name;
    EXPECT_EQ(t.error().message, s.error().message) << c.name;
  }
  // The output buffer's size is the caller's error, not the data's.
  std::vector<uint8_t> small(f.bytes.size() - 1);
  Status s = decode_group(f.enc, small);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::invalid_argument);
}

TEST(CompressHostile, RandomDamageNeverCrashesAndIsCaught) {
  const Fixture& f = fixture();
  std::mt19937_64 rng(77);
  std::vector<uint8_t> out(f.bytes.size());
  int refused = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<uint8_t> v = f.enc;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) v[rng() % v.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
    if (rng() % 8 == 0) v.resize(rng() % v.size());
    Status s = decode_group(v, out);
    if (!s.ok()) {
      ++refused;
    } else {
      EXPECT_TRUE(out == f.bytes) << trial;  // accepted only if it decodes to the same bytes
    }
  }
  EXPECT_GT(refused, 2900);
}

}  // namespace
}  // namespace ferry::compress

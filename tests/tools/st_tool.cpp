// ferry_st_tool: the C++ side of the safetensors interop test (tests/python).
//   ferry_st_tool dump PATH                   JSON of every tensor: name, dtype, shape, FNV-1a hash
//   ferry_st_tool write OUT_DIR [MAX_SHARD]   a small deterministic checkpoint (sharded if needed)
//   ferry_st_tool bench-write OUT_DIR GB      times write_checkpoint on ~GB of BF16 (memset fill),
//                                             then a read of every page; prints GB/s
// The byte pattern of `write` is reproduced in the pytest; the hash is FNV-1a 64 over the bytes.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "format/safetensors.h"

namespace {

using namespace ferry;

uint64_t fnv1a64(std::span<const std::byte> bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (std::byte b : bytes) {
    h ^= static_cast<uint64_t>(b);
    h *= 0x100000001b3ull;
  }
  return h;
}

int dump(const std::string& path) {
  auto c = Checkpoint::open(path);
  if (!c.ok()) {
    std::fprintf(stderr, "%s\n", c.error().to_string().c_str());
    return 1;
  }
  nlohmann::json out;
  out["files"] = nlohmann::json::array();
  for (const SafetensorsFile& f : c->files())
    out["files"].push_back({{"path", f.path()}, {"metadata", f.header().metadata}});
  out["tensors"] = nlohmann::json::array();
  for (const Checkpoint::Entry& e : c->entries()) {
    char hash[17];
    std::snprintf(hash, sizeof(hash), "%016llx",
                  static_cast<unsigned long long>(fnv1a64(c->data(e))));
    out["tensors"].push_back({{"name", e.info->name},
                              {"dtype", dtype_name(e.info->dtype)},
                              {"shape", e.info->shape},
                              {"bytes", e.info->bytes},
                              {"fnv1a64", hash},
                              {"shard", c->files()[e.shard].path()}});
  }
  std::printf("%s\n", out.dump(1).c_str());
  return 0;
}

// Byte i of the k-th tensor: (k * 29 + i * 13 + 7) mod 256; BOOL tensors hold i mod 2.
TensorToWrite pattern_tensor(size_t k, std::string name, DType dtype, std::vector<int64_t> shape) {
  TensorToWrite t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.fill = [k, dtype](std::span<std::byte> out) {
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = dtype == DType::bool_ ? static_cast<std::byte>(i & 1)
                                     : static_cast<std::byte>((k * 29 + i * 13 + 7) & 0xFF);
  };
  return t;
}

int write(const std::string& dir, uint64_t max_shard) {
  struct Spec {
    const char* name;
    DType dtype;
    std::vector<int64_t> shape;
  };
  const std::vector<Spec> specs = {
      {"model.embed_tokens.weight", DType::bf16, {16, 8}},
      {"model.norm.weight", DType::f32, {8}},
      {"ids", DType::i64, {5}},
      {"mask", DType::bool_, {2, 3}},
      {"half", DType::f16, {3, 3}},
      {"fp8.e4m3", DType::f8_e4m3, {4}},
      {"fp8.e5m2", DType::f8_e5m2, {4}},
      {"u16", DType::u16, {3}},
      {"i8", DType::i8, {7}},
      {"u32", DType::u32, {2}},
      {"i32", DType::i32, {2}},
      {"u64", DType::u64, {2}},
      {"i16", DType::i16, {2}},
      {"f64", DType::f64, {2, 2}},
      {"scalar", DType::f32, {}},
      {"empty", DType::f32, {0, 3}},
      {"u8", DType::u8, {9}},
  };
  std::vector<TensorToWrite> tensors;
  for (size_t k = 0; k < specs.size(); ++k)
    tensors.push_back(pattern_tensor(k, specs[k].name, specs[k].dtype, specs[k].shape));
  Status s = write_checkpoint(dir, tensors, max_shard, {{"format", "pt"}, {"writer", "ferry"}});
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.error().to_string().c_str());
    return 1;
  }
  return 0;
}

// Tensors shaped like a decoder layer's (4096 x 4096 BF16, 32 MiB), plus one embedding-sized
// tensor (151936 x 4096 BF16, 1.2 GB) when there is room: the writer's throughput, not the fill's.
int bench_write(const std::string& dir, double gb) {
  std::vector<TensorToWrite> tensors;
  auto add = [&](std::string name, std::vector<int64_t> shape, int value) {
    TensorToWrite t;
    t.name = std::move(name);
    t.dtype = DType::bf16;
    t.shape = std::move(shape);
    t.fill = [value](std::span<std::byte> out) { std::memset(out.data(), value, out.size()); };
    tensors.push_back(std::move(t));
  };
  const double embed = 151936.0 * 4096 * 2;
  double left = gb * 1e9;
  if (left > 2 * embed) {
    add("embed", {151936, 4096}, 1);
    left -= embed;
  }
  for (int i = 0; left > 0; ++i, left -= 4096.0 * 4096 * 2)
    add("layers." + std::to_string(i), {4096, 4096}, i & 0xFF);
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  Status s = write_checkpoint(dir, tensors);
  const auto t1 = clock::now();
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.error().to_string().c_str());
    return 1;
  }
  auto c = Checkpoint::open(dir);
  if (!c.ok()) {
    std::fprintf(stderr, "%s\n", c.error().to_string().c_str());
    return 1;
  }
  const auto t2 = clock::now();
  uint64_t sum = 0;
  for (const Checkpoint::Entry& e : c->entries()) {
    const auto d = c->data(e);
    for (size_t k = 0; k < d.size(); k += 4096) sum += static_cast<uint64_t>(d[k]);
  }
  const auto t3 = clock::now();
  const double bytes = static_cast<double>(c->total_bytes());
  const double w = std::chrono::duration<double>(t1 - t0).count();
  const double o = std::chrono::duration<double>(t2 - t1).count();
  const double r = std::chrono::duration<double>(t3 - t2).count();
  std::printf(
      "%.2f GB in %zu files, %zu tensors: write %.2f s (%.2f GB/s), open+validate %.4f s, "
      "touch every page %.2f s (%.2f GB/s) [checksum %llu]\n",
      bytes / 1e9, c->files().size(), c->entries().size(), w, bytes / 1e9 / w, o, r,
      bytes / 1e9 / r, static_cast<unsigned long long>(sum));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 2 && args[0] == "dump") return dump(args[1]);
  if ((args.size() == 2 || args.size() == 3) && args[0] == "write") {
    uint64_t max_shard = 5'000'000'000ull;
    if (args.size() == 3) max_shard = std::strtoull(args[2].c_str(), nullptr, 10);
    return write(args[1], max_shard);
  }
  if (args.size() == 3 && args[0] == "bench-write")
    return bench_write(args[1], std::atof(args[2].c_str()));
  std::fprintf(stderr,
               "usage: ferry_st_tool dump PATH | write OUT_DIR [MAX_SHARD_BYTES] | "
               "bench-write OUT_DIR GB\n");
  return 2;
}

#include "backend/backend.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "backend/arena.h"

namespace ferry {

// Device memory bookkeeping shared by every backend: the ledger by purpose and, under a
// reservation, the one region every buffer is carved from.
struct Backend::MemoryState {
  struct Live {
    uint64_t bytes = 0;  // rounded to the unit
    std::string purpose;
    void (*release)(void*) = nullptr;  // null: carved from the region
    uint64_t offset = 0;               // in the region
  };
  mutable std::mutex mutex;
  std::optional<Arena> arena;
  RawDeviceMemory region;
  std::unordered_map<void*, Live> live;
  std::map<std::string, uint64_t, std::less<>> by_purpose;
  uint64_t in_use = 0;
  uint64_t peak = 0;

  void add(void* p, Live l) {
    in_use += l.bytes;
    peak = std::max(peak, in_use);
    by_purpose[l.purpose] += l.bytes;
    live.emplace(p, std::move(l));
  }
};

namespace {
constexpr uint64_t kUnit = Arena::kAlignment;
uint64_t round_unit(uint64_t bytes) {
  return std::max(kUnit, (bytes + kUnit - 1) / kUnit * kUnit);
}
std::string mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}
}  // namespace

Backend::Backend() : memory_(std::make_unique<MemoryState>()) {}

Backend::~Backend() {
  if (memory_ && memory_->region.data != nullptr && memory_->region.release != nullptr) {
    memory_->region.release(memory_->region.data);
  }
}

Result<DeviceBuffer> Backend::allocate(size_t bytes, std::string_view purpose) {
  if (bytes > UINT64_MAX / 2) {
    return make_error(ErrorCode::out_of_memory, std::string(name()) + ": cannot allocate " +
                                                    std::to_string(bytes) + " bytes");
  }
  MemoryState& m = *memory_;
  const uint64_t need = round_unit(bytes);
  std::lock_guard lock(m.mutex);
  if (m.arena) {
    const std::optional<uint64_t> offset = m.arena->take(need);
    if (!offset) {
      return make_error(ErrorCode::out_of_memory,
                        std::string(name()) + ": the device budget has no room for " + mib(need) +
                            " of " + std::string(purpose) + " (" + mib(m.arena->in_use()) + " of " +
                            mib(m.arena->capacity()) + " in use, largest free range " +
                            mib(m.arena->largest_free()) + ")");
    }
    void* p = static_cast<char*>(m.region.data) + *offset;
    m.add(p, MemoryState::Live{need, std::string(purpose), nullptr, *offset});
    return DeviceBuffer(this, p, bytes);
  }
  FERRY_ASSIGN_OR_RETURN(RawDeviceMemory raw, device_alloc(need));
  m.add(raw.data, MemoryState::Live{need, std::string(purpose), raw.release, 0});
  return DeviceBuffer(this, raw.data, bytes);
}

void Backend::free(void* data, size_t /*bytes*/) {
  MemoryState& m = *memory_;
  std::lock_guard lock(m.mutex);
  auto it = m.live.find(data);
  FERRY_CHECK(it != m.live.end(), "free of device memory this backend did not allocate");
  const MemoryState::Live& l = it->second;
  m.in_use -= l.bytes;
  auto p = m.by_purpose.find(l.purpose);
  if (p != m.by_purpose.end()) {
    p->second -= l.bytes;
    if (p->second == 0) m.by_purpose.erase(p);
  }
  if (l.release != nullptr) {
    l.release(data);
  } else if (m.arena) {
    m.arena->give(l.offset);
  }
  m.live.erase(it);
}

Status Backend::reserve(uint64_t bytes) {
  MemoryState& m = *memory_;
  {
    std::lock_guard lock(m.mutex);
    if (m.arena) {
      return make_error(ErrorCode::invalid_argument,
                        std::string(name()) + ": device memory is already reserved");
    }
    if (!m.live.empty()) {
      return make_error(ErrorCode::invalid_argument,
                        std::string(name()) +
                            ": reserve the device budget before allocating anything (" +
                            mib(m.in_use) + " already allocated)");
    }
  }
  const uint64_t need = bytes / kUnit * kUnit;
  if (need == 0) {
    return make_error(ErrorCode::invalid_argument, "a device budget must be at least 256 bytes");
  }
  FERRY_ASSIGN_OR_RETURN(RawDeviceMemory raw, device_alloc(need));
  std::lock_guard lock(m.mutex);
  m.region = raw;
  m.arena.emplace(need);
  return Status();
}

Status Backend::release_reservation() {
  MemoryState& m = *memory_;
  RawDeviceMemory region;
  {
    std::lock_guard lock(m.mutex);
    if (!m.arena) return Status();
    for (const auto& [p, l] : m.live) {
      if (l.release == nullptr) {
        return make_error(ErrorCode::internal, std::string(name()) + ": " + mib(l.bytes) + " of " +
                                                   l.purpose + " still held in the region");
      }
    }
    region = m.region;
    m.region = {};
    m.arena.reset();
  }
  if (region.data != nullptr && region.release != nullptr) region.release(region.data);
  return Status();
}

MemoryLedger Backend::ledger() const {
  const MemoryState& m = *memory_;
  std::lock_guard lock(m.mutex);
  MemoryLedger l;
  l.reserved = m.arena ? m.arena->capacity() : 0;
  l.in_use = m.in_use;
  l.peak = m.peak;
  l.largest_free = m.arena ? m.arena->largest_free() : 0;
  for (const auto& [purpose, bytes] : m.by_purpose) l.by_purpose.emplace_back(purpose, bytes);
  return l;
}

Backend::HostRegistrationResult Backend::register_host(const void* /*data*/, size_t /*bytes*/) {
  HostRegistrationResult r;
  r.registered = true;
  r.readable_in_place = true;
  r.how = "not needed (" + std::string(name()) + " reads host memory directly)";
  return r;
}

Result<double> Backend::elapsed_seconds(Event& /*start*/, Event& /*end*/) {
  return make_error(ErrorCode::unsupported,
                    std::string(name()) + ": this backend has no timing events");
}

PlatformFacts Backend::platform_facts() const {
  PlatformFacts f;
  f.device = info().name;
  f.notes.push_back(std::string(name()) +
                    ": device memory is host memory, so there is no link, no copy engine and "
                    "nothing to register: topology, registration and PCIe do not apply");
  return f;
}

std::vector<RegistrationTrial> Backend::try_host_registration(const void* /*data*/,
                                                              size_t /*bytes*/) {
  return {};
}

Status Backend::read_reduce(Stream& /*stream*/, const void* /*src*/, size_t /*bytes*/,
                            void* /*sum*/) {
  return make_error(ErrorCode::unsupported,
                    std::string(name()) + ": no read kernel for probes on this backend");
}

Status Backend::decode_group(Stream& /*stream*/, const compress::GroupLayout& /*layout*/,
                             const void* /*compressed*/, void* /*out*/, size_t /*out_capacity*/,
                             std::string_view name) {
  return make_error(ErrorCode::unsupported, std::string(this->name()) +
                                                ": no decoder of compressed groups (group " +
                                                std::string(name) + ")");
}

Status check_decode_arguments(const compress::GroupLayout& layout, const void* compressed,
                              const void* out, size_t out_capacity, std::string_view name) {
  auto refuse = [&](const std::string& why) {
    return make_error(ErrorCode::invalid_argument,
                      "decode of group " + std::string(name) + ": " + why);
  };
  if (layout.decoded_size > out_capacity) {
    return refuse("decodes to " + std::to_string(layout.decoded_size) +
                  " bytes, the output holds " + std::to_string(out_capacity));
  }
  if (layout.compressed_size > 0 && compressed == nullptr) return refuse("no compressed bytes");
  if (layout.decoded_size > 0 && out == nullptr) return refuse("no output");
  if (reinterpret_cast<uintptr_t>(compressed) % 16 != 0) {
    return refuse("the compressed bytes are not 16-byte aligned");
  }
  return {};
}

void DeviceMemoryKind::release(Backend* backend, void* data, size_t bytes) {
  backend->free(data, bytes);
}

void HostMemoryKind::release(Backend* backend, void* data, size_t bytes) {
  backend->free_host(data, bytes);
}

Result<HostBuffer> Backend::allocate_host(size_t bytes) {
  constexpr size_t kAlign = 256;
  if (bytes > SIZE_MAX - kAlign) {
    return make_error(ErrorCode::out_of_memory, "host: cannot allocate " + std::to_string(bytes));
  }
  const size_t rounded = std::max(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
  void* p = std::aligned_alloc(kAlign, rounded);
  if (p == nullptr) {
    return make_error(ErrorCode::out_of_memory,
                      "host: cannot allocate " + std::to_string(bytes) + " bytes");
  }
  return HostBuffer(this, p, bytes);
}

void Backend::free_host(void* data, size_t /*bytes*/) {
  std::free(data);
}

}  // namespace ferry

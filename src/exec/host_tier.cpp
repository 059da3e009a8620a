#include "exec/host_tier.h"

#include <chrono>
#include <utility>

namespace ferry {

const char* host_path_name(HostPath p) {
  switch (p) {
    case HostPath::automatic:
      return "auto";
    case HostPath::registered:
      return "registered";
    case HostPath::bounce:
      return "bounce";
    case HostPath::pageable:
      return "pageable";
  }
  return "?";
}

std::optional<HostPath> parse_host_path(std::string_view name) {
  for (HostPath p :
       {HostPath::automatic, HostPath::registered, HostPath::bounce, HostPath::pageable}) {
    if (name == host_path_name(p)) return p;
  }
  return std::nullopt;
}

namespace {

// Registers every shard's mapping, all or nothing. Returns why not when refused.
Result<std::vector<std::unique_ptr<HostRegistration>>> register_all(Backend& backend,
                                                                    const Checkpoint& checkpoint,
                                                                    bool* in_place,
                                                                    std::string* how) {
  std::vector<std::unique_ptr<HostRegistration>> out;
  *in_place = true;
  for (const SafetensorsFile& f : checkpoint.files()) {
    const auto bytes = f.file_bytes();
    Backend::HostRegistrationResult r = backend.register_host(bytes.data(), bytes.size());
    *how = r.how;
    if (!r.registered) {
      return make_error(ErrorCode::unsupported, f.path() + ": " + r.how);
    }
    *in_place = *in_place && r.readable_in_place;
    if (r.handle) out.push_back(std::move(r.handle));
  }
  return out;
}

}  // namespace

Result<HostTier> HostTier::open(Backend& backend, const Checkpoint& checkpoint, HostPath path,
                                const BounceOptions& bounce) {
  HostTier t;
  t.checkpoint_ = &checkpoint;
  // Off the registered path, kernels read the mapping in place only where they read any host
  // memory.
  t.in_place_ = backend.reads_pageable_host_memory();
  std::string refused;  // why registration did not happen, when it was tried
  if (path == HostPath::registered || path == HostPath::automatic) {
    const auto start = std::chrono::steady_clock::now();
    bool in_place = false;
    std::string how;
    auto regs = register_all(backend, checkpoint, &in_place, &how);
    t.register_seconds_ =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (regs.ok()) {
      t.registrations_ = std::move(regs).value();
      t.path_ = HostPath::registered;
      t.in_place_ = in_place;
      t.how_ = how;
      return t;
    }
    // (registrations made before the refusal were dropped with the vector: one path for all)
    if (path == HostPath::registered) {
      return make_error(ErrorCode::unsupported,
                        "host tier: registration refused: " + regs.error().message);
    }
    refused = "registration refused: " + regs.error().message;
  }
  if (path == HostPath::bounce || path == HostPath::automatic) {
    auto ring = BounceRing::create(backend, bounce);
    if (ring.ok()) {
      t.bounce_ = std::move(ring).value();
      t.path_ = HostPath::bounce;
      t.how_ = "bounce (" + std::to_string(t.bounce_->buffers()) + " page-locked buffers of " +
               std::to_string(t.bounce_->buffer_bytes() >> 20) + " MiB, " +
               std::to_string(t.bounce_->fill_threads()) + " fill threads; " +
               (refused.empty() ? std::string("registration not asked for") : refused) + ")";
      return t;
    }
    if (path == HostPath::bounce) return ring.error();
    refused += "; " + ring.error().message;
  }
  t.path_ = HostPath::pageable;
  t.how_ =
      "pageable (" + (refused.empty() ? std::string("registration not asked for") : refused) + ")";
  return t;
}

Result<std::vector<HostCopy>> HostTier::copies(const WeightGroup& group) const {
  if (checkpoint_ == nullptr) return make_error(ErrorCode::internal, "host tier: not open");
  std::vector<HostCopy> out;
  for (const WeightSpec& s : group.tensors) {
    const Checkpoint::Entry* e = checkpoint_->find(s.checkpoint_name);
    if (e == nullptr) {
      return make_error(ErrorCode::format,
                        checkpoint_->dir() + ": tensor " + s.checkpoint_name + " is missing");
    }
    if (e->info->dtype != s.dtype || e->info->shape != s.checkpoint_shape()) {
      return make_error(ErrorCode::format,
                        checkpoint_->dir() + ": tensor " + s.checkpoint_name + " is " +
                            std::string(dtype_name(e->info->dtype)) +
                            " of another shape or dtype than the model's table says (" +
                            std::string(dtype_name(s.dtype)) + "); bind_checkpoint names both");
    }
    const auto data = checkpoint_->data(*e);
    const uint64_t from = s.source_offset();
    if (from > data.size() || s.bytes > data.size() - from || s.offset + s.bytes > group.bytes) {
      return make_error(ErrorCode::format,
                        checkpoint_->dir() + ": tensor " + s.checkpoint_name + ": " +
                            std::to_string(data.size()) + " bytes hold no range of " +
                            std::to_string(s.bytes) + " at " + std::to_string(from));
    }
    const std::byte* src = data.data() + from;
    const MappedFile* file = &checkpoint_->mapping(*e);
    if (!out.empty()) {
      // The next tensor at the same distance in the file as in the layout, past an alignment
      // gap at most: one copy (the gap's bytes land in the layout's padding, which no kernel
      // reads; a packed checkpoint fills it with zeros).
      HostCopy& last = out.back();
      const std::byte* end = last.src + last.bytes;
      const uint64_t dst_end = last.dst_offset + last.bytes;
      if (last.file == file && src >= end && s.offset >= dst_end &&
          static_cast<uint64_t>(src - end) == s.offset - dst_end &&
          s.offset - dst_end < kGroupAlignment) {
        last.bytes = s.offset + s.bytes - last.dst_offset;
        continue;
      }
    }
    out.push_back(HostCopy{s.offset, src, s.bytes, file});
  }
  return out;
}

Result<void*> HostTier::in_place(const WeightGroup& group) const {
  if (!in_place_) {
    return make_error(ErrorCode::unsupported,
                      group.name + " cannot be read in place: the host tier is " + how_);
  }
  // The kernels find each tensor at base + its layout offset: the group's file range must be its
  // layout (one range from offset 0; `ferry pack` writes every group so).
  FERRY_ASSIGN_OR_RETURN(std::vector<HostCopy> c, copies(group));
  if (c.size() != 1 || c[0].dst_offset != 0) {
    return make_error(ErrorCode::unsupported,
                      group.name +
                          " cannot be read in place: its tensors are not laid out in the "
                          "file as on the device (`ferry pack` writes them so)");
  }
  return const_cast<std::byte*>(c[0].src);
}

}  // namespace ferry

#include "host/host_tier.h"

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
    case HostPath::storage:
      return "storage";
  }
  return "?";
}

std::optional<HostPath> parse_host_path(std::string_view name) {
  for (HostPath p : {HostPath::automatic, HostPath::registered, HostPath::bounce,
                     HostPath::pageable, HostPath::storage}) {
    if (name == host_path_name(p)) return p;
  }
  return std::nullopt;
}

Result<HostTier> HostTier::open(Backend& backend, const Checkpoint& checkpoint, HostPath path,
                                const BounceOptions& bounce,
                                const RegistrationOptions& registration) {
  HostTier t;
  t.checkpoint_ = &checkpoint;
  // Sampled on every path (a few ms), for the start report.
  t.page_cache_ = page_cache_state(checkpoint);
  if (path == HostPath::automatic) {
    if (read_from_storage(t.page_cache_)) {
      FERRY_RETURN_IF_ERROR(t.take_unregistered(
          backend, HostPath::storage, "not registered: " + describe(t.page_cache_), bounce));
      return t;
    }
  }
  if (path != HostPath::registered && path != HostPath::automatic) {
    FERRY_RETURN_IF_ERROR(t.take_unregistered(backend, path, "", bounce));
    return t;
  }
  const auto start = std::chrono::steady_clock::now();
  auto reg = HostRegistrar::start(backend, checkpoint, registration);
  t.register_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (reg.ok()) {
    t.registrar_ = std::move(reg).value();
    t.path_ = HostPath::registered;
    t.in_place_ = t.registrar_->readable_in_place();
    t.how_ = t.registrar_->how();
    return t;
  }
  if (reg.error().code == ErrorCode::invalid_argument) return reg.error();
  // (pieces registered before the refusal were released with the registrar: one path for all)
  if (path == HostPath::registered) {
    return make_error(ErrorCode::unsupported,
                      "host tier: registration refused: " + reg.error().message);
  }
  FERRY_RETURN_IF_ERROR(
      t.take_unregistered(backend, path, "registration refused: " + reg.error().message, bounce));
  return t;
}

Status HostTier::take_unregistered(Backend& backend, HostPath requested, std::string refused,
                                   const BounceOptions& bounce) {
  if (requested == HostPath::storage) {
    // Nothing reads the mapping: not even kernels in place, which would fault its pages in.
    in_place_ = false;
    BounceOptions o = bounce;
    o.source = BounceSource::storage;
    FERRY_ASSIGN_OR_RETURN(bounce_, BounceRing::create(backend, o));
    for (const SafetensorsFile& f : checkpoint_->files()) {
      FERRY_RETURN_IF_ERROR(bounce_->reader()->prepare(f.mapping()));
    }
    path_ = HostPath::storage;
    const std::string why_not = bounce_->reader()->why_not_direct();
    how_ = "storage (reads into " + std::to_string(bounce_->buffers()) +
           " page-locked buffers of " + std::to_string(bounce_->buffer_bytes() >> 20) + " MiB, " +
           std::to_string(bounce_->fill_threads()) + " threads, " +
           (why_not.empty() ? std::string("O_DIRECT") : why_not) + "; " +
           (refused.empty() ? std::string("registration not asked for") : refused) + ")";
    return {};
  }
  // Off the registered path, kernels read the mapping in place only where they read any host
  // memory.
  in_place_ = backend.reads_pageable_host_memory();
  if (requested == HostPath::bounce || requested == HostPath::automatic) {
    auto ring = BounceRing::create(backend, bounce);
    if (ring.ok()) {
      bounce_ = std::move(ring).value();
      path_ = HostPath::bounce;
      how_ = "bounce (" + std::to_string(bounce_->buffers()) + " page-locked buffers of " +
             std::to_string(bounce_->buffer_bytes() >> 20) + " MiB, " +
             std::to_string(bounce_->fill_threads()) + " fill threads; " +
             (refused.empty() ? std::string("registration not asked for") : refused) + ")";
      return {};
    }
    if (requested == HostPath::bounce) return ring.error();
    refused += "; " + ring.error().message;
  }
  path_ = HostPath::pageable;
  how_ =
      "pageable (" + (refused.empty() ? std::string("registration not asked for") : refused) + ")";
  return {};
}

Status HostTier::fall_back(Backend& backend, HostPath requested, const BounceOptions& bounce) {
  if (!registration_failed()) {
    return make_error(ErrorCode::internal, "host tier: fall_back without a failed registration");
  }
  const std::string why = registrar_->failure();
  register_seconds_ = registrar_->stats().seconds;
  registrar_.reset();  // every piece released
  if (requested == HostPath::registered) {
    path_ = HostPath::pageable;
    how_ = "nothing registered (" + why + ")";
    return make_error(ErrorCode::unsupported, "host tier: " + why);
  }
  return take_unregistered(backend, requested, why, bounce);
}

double HostTier::register_seconds() const {
  return registrar_ ? registrar_->stats().seconds : register_seconds_;
}

RegistrationStats HostTier::registration() const {
  return registrar_ ? registrar_->stats() : RegistrationStats{};
}

bool HostTier::ready(std::span<const HostCopy> copies) const {
  return !registrar_ || registrar_->ready(copies);
}

size_t HostTier::registered_pieces() const {
  return registrar_ ? registrar_->registered() : 0;
}

Status HostTier::wait_progress(size_t seen) const {
  return registrar_ ? registrar_->wait_progress(seen) : Status{};
}

Status HostTier::wait_all() const {
  return registrar_ ? registrar_->wait_all() : Status{};
}

void HostTier::prioritize(std::span<const HostCopy> copies) const {
  if (registrar_) registrar_->prioritize(copies);
}

bool HostTier::registration_failed() const {
  return registrar_ && registrar_->failed();
}

Result<std::vector<HostCopy>> HostTier::transfer_copies(const WeightGroup& group) const {
  FERRY_ASSIGN_OR_RETURN(std::vector<HostCopy> c, copies(group));
  if (!registrar_) return c;
  return registrar_->split(c);
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
  return laid_out(group);
}

Result<void*> HostTier::laid_out(const WeightGroup& group) const {
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

std::vector<uint8_t> HostTier::in_place_groups(const ModelWeights& weights) const {
  if (!in_place_) return std::vector<uint8_t>(weights.groups.size(), 0);
  return laid_out_groups(weights);
}

std::vector<uint8_t> HostTier::laid_out_groups(const ModelWeights& weights) const {
  std::vector<uint8_t> out(weights.groups.size(), 0);
  for (size_t g = 0; g < weights.groups.size(); ++g) {
    out[g] = laid_out(weights.groups[g]).ok() ? 1 : 0;
  }
  return out;
}

}  // namespace ferry

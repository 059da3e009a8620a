#include "exec/host_tier.h"

#include <chrono>

namespace ferry {

const char* host_path_name(HostPath p) {
  switch (p) {
    case HostPath::automatic:
      return "auto";
    case HostPath::registered:
      return "registered";
    case HostPath::pageable:
      return "pageable";
  }
  return "?";
}

Result<HostTier> HostTier::open(Backend& backend, const Checkpoint& checkpoint, HostPath path) {
  HostTier t;
  t.checkpoint_ = &checkpoint;
  if (path == HostPath::pageable) {
    t.how_ = "pageable (registration not asked for)";
    return t;
  }
  const auto start = std::chrono::steady_clock::now();
  bool all = true;
  bool in_place = true;
  std::string how;
  for (const SafetensorsFile& f : checkpoint.files()) {
    const auto bytes = f.file_bytes();
    Backend::HostRegistrationResult r = backend.register_host(bytes.data(), bytes.size());
    how = r.how;
    if (!r.registered) {
      all = false;
      how = f.path() + ": " + r.how;
      break;
    }
    in_place = in_place && r.readable_in_place;
    if (r.handle) t.registrations_.push_back(std::move(r.handle));
  }
  t.register_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!all) {
    t.registrations_.clear();  // all or nothing: one path for every group
    if (path == HostPath::registered) {
      return make_error(ErrorCode::unsupported, "host tier: registration refused: " + how);
    }
    t.how_ = "pageable (" + how + ")";
    return t;
  }
  t.registered_ = true;
  t.in_place_ = in_place;
  t.how_ = how;
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
      HostCopy& last = out.back();
      if (last.file == file && last.src + last.bytes == src &&
          last.dst_offset + last.bytes == s.offset) {
        last.bytes += s.bytes;
        continue;
      }
    }
    out.push_back(HostCopy{s.offset, src, s.bytes, file});
  }
  return out;
}

Result<void*> HostTier::in_place(const WeightGroup& group) const {
  if (!registered_ || !in_place_) {
    return make_error(ErrorCode::unsupported,
                      group.name + " cannot be read in place: the host tier is " + how_);
  }
  if (group.tensors.size() != 1 || group.tensors[0].offset != 0) {
    return make_error(ErrorCode::internal,
                      group.name + ": only a group of one tensor can be read in place");
  }
  FERRY_ASSIGN_OR_RETURN(std::vector<HostCopy> c, copies(group));
  if (c.size() != 1) return make_error(ErrorCode::internal, group.name + ": not one range");
  return const_cast<std::byte*>(c[0].src);
}

}  // namespace ferry

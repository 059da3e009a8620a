#include <array>
#include <mutex>
#include <string>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"

namespace ferry {
namespace {
std::mutex g_mutex;
std::array<BackendFactory, 2> g_factories{};

size_t index(BackendKind kind) {
  return kind == BackendKind::cpu ? 0 : 1;
}
}  // namespace

std::string_view backend_kind_name(BackendKind kind) {
  return kind == BackendKind::cpu ? "cpu" : "cuda";
}

std::optional<BackendKind> parse_backend_kind(std::string_view name) {
  if (name == "cpu") return BackendKind::cpu;
  if (name == "cuda") return BackendKind::cuda;
  return std::nullopt;
}

void register_backend(BackendKind kind, BackendFactory factory) {
  std::lock_guard lock(g_mutex);
  g_factories[index(kind)] = factory;
}

bool backend_available(BackendKind kind) {
  if (kind == BackendKind::cpu) return true;
  std::lock_guard lock(g_mutex);
  const auto& f = g_factories[index(kind)];
  return f.create != nullptr && (f.available == nullptr || f.available());
}

Result<std::unique_ptr<Backend>> create_backend(BackendKind kind) {
  if (kind == BackendKind::cpu) return std::unique_ptr<Backend>(create_cpu_backend());
  BackendFactory f;
  {
    std::lock_guard lock(g_mutex);
    f = g_factories[index(kind)];
  }
  if (f.create == nullptr) {
    return make_error(ErrorCode::unsupported,
                      std::string("backend ") + std::string(backend_kind_name(kind)) +
                          " is not compiled into this binary (build with -DFERRY_CUDA=ON)");
  }
  if (f.available != nullptr && !f.available()) {
    return make_error(ErrorCode::unsupported, "backend cuda: no CUDA device is visible");
  }
  return f.create();
}

BackendKind default_backend_kind() {
  return backend_available(BackendKind::cuda) ? BackendKind::cuda : BackendKind::cpu;
}

}  // namespace ferry

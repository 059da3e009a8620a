// ferry probe [--json] [--model DIR] [--save FILE]: how weight bytes can reach this device.
// Without a model: the topology and capabilities (integrated or discrete, pageable memory access,
// host registration tried for real, the PCIe link, copy engines) and the page-locked link rate.
// With one: the four byte paths measured over the model's whole working set
// (measure/byte_probe.h), and the verdict of the second paper's Algorithm 2 for every group, with
// its reason (plan/byte_paths.h). --save writes the rates as data the planner reads.
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/cli_support.h"
#include "cli/commands.h"
#include "cli/inspect_report.h"
#include "core/parse_size.h"
#include "core/units.h"
#include "exec/session.h"
#include "format/atomic_write.h"
#include "format/mapped_file.h"
#include "measure/byte_probe.h"
#include "measure/host_rates.h"
#include "model/call_sequence.h"
#include "model/compressed_checkpoint.h"
#include "model/workload.h"

namespace ferry::cli {
namespace {

struct ProbeArgs {
  std::string model;
  std::string backend;
  std::string vram;
  std::string host_path = "auto";
  std::string save;
  std::string storage_bytes = "2GiB";
  int passes = 3;
  int host_threads = 0;  // the host engine's workers; 0: its default
  bool no_host_engine = false;
  bool json = false;
};

const Reporter report{"probe"};

// The page-locked link: H2D of one buffer, median of three after a warm-up.
struct LinkRate {
  std::optional<double> bytes_per_s;
  uint64_t bytes = 0;
  std::string note;
};

LinkRate measure_link(Backend& backend) {
  LinkRate l;
  l.bytes = backend.name() == "cpu" ? uint64_t{64} << 20 : uint64_t{256} << 20;
  auto host = backend.allocate_host(static_cast<size_t>(l.bytes));
  auto dev = backend.allocate(static_cast<size_t>(l.bytes), "probe");
  if (!host.ok() || !dev.ok()) {
    l.note = !host.ok() ? host.error().message : dev.error().message;
    return l;
  }
  std::memset(host->data(), 1, host->bytes());
  std::unique_ptr<Stream> s = backend.create_copy_stream();
  std::vector<double> t;
  for (int i = 0; i < 4; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    backend.copy_to_device(*s, dev->data(), host->data(), host->bytes());
    if (Status st = backend.synchronize(*s); !st.ok()) {
      l.note = st.error().message;
      return l;
    }
    if (i > 0) {
      t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  std::sort(t.begin(), t.end());
  if (t[1] > 0) l.bytes_per_s = static_cast<double>(l.bytes) / t[1];
  l.note = "one copy from page-locked host memory, median of 3";
  return l;
}

// The workload the verdicts count uses with: one image where the model sees images, the run
// command's default prompt, 8 generated tokens, the model's flow steps.
Workload probe_workload(const ModelConfig& config) {
  Workload w;
  if (const Qwen3VLConfig* vlm = config.vlm()) {
    const bool tiny = vlm->vision.hidden_size < 512;
    w.num_images = 1;
    w.image_height = tiny ? 128 : 320;
    w.image_width = tiny ? 192 : 576;
  }
  w.prompt_tokens = (config.vlm() != nullptr ? image_tokens(w, config) + 120 : 64);
  w.gen_tokens = 8;
  if (const AlpamayoConfig* a = config.alpamayo()) {
    w.flow_steps = a->diffusion.num_inference_steps;
  }
  return w;
}

std::string yes_no(const std::optional<bool>& v) {
  return v ? (*v ? "yes" : "no") : "unknown";
}

nlohmann::ordered_json opt_json(const std::optional<bool>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json();
}
nlohmann::ordered_json opt_json(const std::optional<int>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json();
}
nlohmann::ordered_json opt_json(const std::optional<double>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json();
}

nlohmann::ordered_json facts_json(const PlatformFacts& f) {
  nlohmann::ordered_json j;
  j["device"] = f.device;
  j["integrated"] = opt_json(f.integrated);
  j["pageable_memory_access"] = opt_json(f.pageable_memory_access);
  j["pageable_uses_host_page_tables"] = opt_json(f.pageable_uses_host_page_tables);
  j["host_pointer_for_registered"] = opt_json(f.host_pointer_for_registered);
  j["host_register_supported"] = opt_json(f.host_register_supported);
  j["host_register_read_only_supported"] = opt_json(f.host_register_read_only_supported);
  j["copy_engines"] = opt_json(f.copy_engines);
  j["pcie"] = {{"generation", opt_json(f.pcie_generation)},
               {"width", opt_json(f.pcie_width)},
               {"max_generation", opt_json(f.pcie_max_generation)},
               {"max_width", opt_json(f.pcie_max_width)},
               {"source", f.pcie_source}};
  j["notes"] = f.notes;
  return j;
}

std::string pcie_text(const std::optional<int>& gen, const std::optional<int>& width) {
  return "Gen" + (gen ? std::to_string(*gen) : std::string("?")) + " x" +
         (width ? std::to_string(*width) : std::string("?"));
}

void print_facts(const PlatformFacts& f, const std::vector<RegistrationTrial>& trials,
                 const LinkRate& link) {
  std::printf("device     %s\n", f.device.c_str());
  if (f.integrated) {
    std::printf(
        "topology   %s; kernels read pageable host memory: %s (through the host's page "
        "tables: %s); registered memory at its host address: %s\n",
        *f.integrated ? "integrated" : "discrete", yes_no(f.pageable_memory_access).c_str(),
        yes_no(f.pageable_uses_host_page_tables).c_str(),
        yes_no(f.host_pointer_for_registered).c_str());
    std::printf("register   supported: %s, read-only: %s (device attributes)\n",
                yes_no(f.host_register_supported).c_str(),
                yes_no(f.host_register_read_only_supported).c_str());
  }
  for (const RegistrationTrial& t : trials) {
    std::printf("  tried    %s, %s flags: %s\n", t.memory.c_str(), t.flags.c_str(), t.how.c_str());
  }
  if (f.copy_engines || !f.pcie_source.empty()) {
    std::printf("link       %s copy engines; PCIe %s now, %s at most (%s)\n",
                f.copy_engines ? std::to_string(*f.copy_engines).c_str() : "?",
                pcie_text(f.pcie_generation, f.pcie_width).c_str(),
                pcie_text(f.pcie_max_generation, f.pcie_max_width).c_str(),
                f.pcie_source.empty() ? "unknown" : f.pcie_source.c_str());
  }
  if (link.bytes_per_s) {
    std::printf("h2d        %.1f GB/s from page-locked memory (%s, %s)\n", *link.bytes_per_s / 1e9,
                binary_bytes(link.bytes).c_str(), link.note.c_str());
  } else {
    std::printf("h2d        not measured: %s\n", link.note.c_str());
  }
  for (const std::string& n : f.notes) std::printf("note       %s\n", n.c_str());
}

nlohmann::ordered_json rate_json(const PathRate& r) {
  nlohmann::ordered_json j;
  j["gb_per_s"] =
      r.bytes_per_s ? nlohmann::ordered_json(*r.bytes_per_s / 1e9) : nlohmann::ordered_json();
  j["bytes"] = r.bytes;
  j["passes"] = r.passes;
  j["note"] = r.note;
  return j;
}

void print_rate(const char* name, const PathRate& r) {
  if (r.bytes_per_s) {
    std::printf("  %-16s %9.1f GB/s  %s\n", name, *r.bytes_per_s / 1e9, r.note.c_str());
  } else {
    std::printf("  %-16s %9s       %s\n", name, "-", r.note.c_str());
  }
}

struct ModelProbe {
  ByteProbeResult result;
  std::vector<GroupPathInput> inputs;
  std::vector<GroupPathVerdict> verdicts;
  uint64_t room = 0;
  uint64_t budget = 0;
  uint64_t fixed = 0;
};

ModelProbe probe_model(Backend& backend, const ProbeArgs& a) {
  const OpenModel m = report.check(open_model(a.model));
  ByteProbeOptions o;
  o.passes = a.passes;
  const std::optional<HostPath> path = parse_host_path(a.host_path);
  if (!path) {
    report.fail("--host-path: expected auto, registered, bounce, pageable or storage, got '" +
                a.host_path + "'");
  }
  o.host_path = *path;
  o.storage_bytes = a.storage_bytes == "0" ? 0 : report.check(parse_size(a.storage_bytes));
  ModelProbe p;
  p.result = report.check(probe_byte_paths(backend, m.weights, m.checkpoint, a.model, o));
  // The capacity gate: resident room beside what every plan needs (runtime, activations,
  // workspaces, two slots: the smallest budget, every group streamed).
  const Workload w = probe_workload(m.config);
  report.check(validate_workload(w, m.config));
  const std::vector<Call> calls = report.check(call_sequence(m.weights, m.config, w));
  const std::optional<uint64_t> held = backend.driver_device_bytes();
  const uint64_t runtime = held ? *held + kRuntimeMarginBytes : 0;
  const MemoryBudget least = report.check(
      smallest_budget(backend, m.config, m.weights, w, SessionOptions{}, runtime, true));
  p.budget = a.vram.empty() ? backend.info().total_bytes : report.check(parse_size(a.vram));
  p.fixed = least.total();
  p.room = p.budget > p.fixed ? p.budget - p.fixed : 0;
  std::vector<int64_t> uses(m.weights.groups.size(), 0);
  for (const Call& c : calls) ++uses[static_cast<size_t>(c.group)];
  for (size_t g = 0; g < m.weights.groups.size(); ++g) {
    GroupPathInput in;
    in.name = m.weights.groups[g].name;
    in.bytes = m.weights.groups[g].bytes;
    in.uses = uses[g];
    in.cached_fraction = p.result.cached_fraction[g];
    p.inputs.push_back(in);
  }
  gate_resident(p.inputs, p.room);
  for (const GroupPathInput& in : p.inputs) {
    p.verdicts.push_back(choose_byte_path(p.result.rates, in));
  }
  if (!a.save.empty()) {
    report.check(write_file_atomic(a.save, byte_path_rates_to_json(p.result.rates)));
  }
  return p;
}

nlohmann::ordered_json model_json(const ModelProbe& p) {
  const ByteProbeResult& r = p.result;
  nlohmann::ordered_json j;
  j["working_set_bytes"] = r.rates.working_set_bytes;
  j["host_path"] = r.rates.host_path;
  j["host_how"] = r.host_how;
  j["register_s"] = r.register_seconds;
  nlohmann::ordered_json rates;
  for (BytePath b : kBytePaths) rates[byte_path_name(b)] = rate_json(r.rates.of(b));
  j["rates"] = rates;
  j["stream_bounce"] = rate_json(r.stream_bounce);
  j["resident_load"] = rate_json(r.resident_load);
  j["storage"] = rate_json(r.storage);
  j["resident_room"] = {{"budget", p.budget}, {"every_group_streamed", p.fixed}, {"room", p.room}};
  nlohmann::ordered_json verdicts = nlohmann::ordered_json::array();
  for (size_t i = 0; i < p.verdicts.size(); ++i) {
    const GroupPathVerdict& v = p.verdicts[i];
    nlohmann::ordered_json s;
    for (BytePath b : kBytePaths) {
      s[byte_path_name(b)] = opt_json(v.seconds[static_cast<size_t>(b)]);
    }
    verdicts.push_back(
        {{"group", v.group},
         {"bytes", p.inputs[i].bytes},
         {"uses", p.inputs[i].uses},
         {"cached_fraction", p.inputs[i].cached_fraction},
         {"path", v.path ? byte_path_name(*v.path) : (v.storage_bound ? "storage" : "none")},
         {"seconds_per_inference", s},
         {"reason", v.reason}});
  }
  j["verdicts"] = verdicts;
  return j;
}

void print_model(const ProbeArgs& a, const ModelProbe& p) {
  const ByteProbeResult& r = p.result;
  uint64_t cached = 0;
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    cached += static_cast<uint64_t>(r.cached_fraction[i] * static_cast<double>(p.inputs[i].bytes));
  }
  std::printf("model      %s: %s in %zu groups; %.0f%% in the page cache before the probe\n",
              a.model.c_str(), human_bytes(r.rates.working_set_bytes).c_str(), p.inputs.size(),
              r.rates.working_set_bytes > 0 ? 100.0 * static_cast<double>(cached) /
                                                  static_cast<double>(r.rates.working_set_bytes)
                                            : 100.0);
  std::printf("host path  %s (%s), registration took %.3f s\n", r.rates.host_path.c_str(),
              r.host_how.c_str(), r.register_seconds);
  std::printf("rates      over the whole working set, median of %d passes after a warm-up:\n",
              a.passes);
  for (BytePath b : kBytePaths) print_rate(byte_path_name(b), r.rates.of(b));
  print_rate("(stream, bounce)", r.stream_bounce);
  print_rate("(resident load)", r.resident_load);
  print_rate("(storage)", r.storage);
  std::printf(
      "room       %s for resident groups: a budget of %s less %s that every plan needs "
      "(every group streamed)\n",
      binary_bytes(p.room).c_str(), binary_bytes(p.budget).c_str(), binary_bytes(p.fixed).c_str());
  std::printf(
      "verdicts   per group (Algorithm 2: storage-bound stop, capacity gate, fastest, map "
      "within %.0f%% preferred)\n",
      kMapTieBand * 100);
  uint64_t by_path[5] = {};
  for (size_t i = 0; i < p.verdicts.size(); ++i) {
    const GroupPathVerdict& v = p.verdicts[i];
    const char* name = v.path ? byte_path_name(*v.path) : (v.storage_bound ? "storage" : "none");
    by_path[v.path ? static_cast<size_t>(*v.path) : 4] += p.inputs[i].bytes;
    std::printf("  %-22s %10s  uses %-4lld -> %-12s %s\n", v.group.c_str(),
                human_bytes(p.inputs[i].bytes).c_str(), static_cast<long long>(p.inputs[i].uses),
                name, v.reason.c_str());
  }
  std::printf("summary   ");
  for (BytePath b : kBytePaths) {
    std::printf(" %s %s,", byte_path_name(b), human_bytes(by_path[static_cast<size_t>(b)]).c_str());
  }
  std::printf(" storage-bound or none %s\n", human_bytes(by_path[4]).c_str());
  if (!a.save.empty()) std::printf("saved      the rates to %s\n", a.save.c_str());
}

// The page cache a checkpoint needs to stay cached: its files' bytes; for a compressed one
// (ferry pack --compress) beside the raw tensor bytes it gives back.
struct PageCacheNeed {
  bool compressed = false;
  uint64_t file_bytes = 0;
  uint64_t raw_bytes = 0;
};

PageCacheNeed page_cache_need(const std::string& model) {
  const Checkpoint ck = report.check(Checkpoint::open(model));
  PageCacheNeed n;
  for (const SafetensorsFile& f : ck.files()) n.file_bytes += f.file_bytes().size();
  n.raw_bytes = ck.total_bytes();
  if (is_compressed_checkpoint(ck)) {
    const OpenContainer c = report.check(open_container(model));
    n.compressed = true;
    n.raw_bytes = 0;
    for (const ContainerTensor& t : c.table.tensors) n.raw_bytes += t.bytes;
  }
  return n;
}

// What `ferry probe` found: the device's facts, registration tried for real, the page-locked
// link, and with --model the page cache it needs, the byte paths over its working set and a
// verdict per group (not yet for a compressed checkpoint: the executor does not read one).
struct ProbeReport {
  const ProbeArgs& a;
  std::string backend;
  PlatformFacts facts;
  std::vector<RegistrationTrial> trials;
  LinkRate link;
  std::optional<PageCacheNeed> cache;
  std::optional<ModelProbe> model;
  std::optional<HostRates> host;  // the host engine's rates (measure/host_rates.h)
};

double cache_ratio(const PageCacheNeed& n) {
  return n.raw_bytes > 0 ? static_cast<double>(n.file_bytes) / static_cast<double>(n.raw_bytes)
                         : 0.0;
}

ProbeReport gather_probe(const ProbeArgs& a) {
  std::unique_ptr<Backend> backend = report.check(backend_from_flag(a.backend));
  ProbeReport r{.a = a,
                .backend = std::string(backend->name()),
                .facts = backend->platform_facts(),
                .trials = {},
                .link = {},
                .cache = {},
                .model = {},
                .host = {}};
  r.link = measure_link(*backend);
  if (!a.no_host_engine) r.host = report.check(measure_host_rates(backend.get(), a.host_threads));
  if (!a.model.empty()) r.cache = page_cache_need(a.model);
  if (!a.model.empty() && !r.cache->compressed) {
    r.model = probe_model(*backend, a);
    r.trials = r.model->result.registration;
  } else {
    // Registration tried on a real read-only shared mapping: this binary's own file.
    auto self = MappedFile::open("/proc/self/exe");
    if (self.ok()) {
      r.trials = backend->try_host_registration(self->bytes().data(),
                                                std::min(self->bytes().size(), size_t{64} << 20));
    }
  }
  return r;
}

nlohmann::ordered_json probe_report_json(const ProbeReport& r) {
  nlohmann::ordered_json j;
  j["backend"] = r.backend;
  j["facts"] = facts_json(r.facts);
  nlohmann::ordered_json tried = nlohmann::ordered_json::array();
  for (const RegistrationTrial& t : r.trials) {
    tried.push_back({{"memory", t.memory}, {"flags", t.flags}, {"ok", t.ok}, {"how", t.how}});
  }
  j["registration"] = tried;
  j["h2d_pinned"] = {
      {"gb_per_s", r.link.bytes_per_s ? nlohmann::ordered_json(*r.link.bytes_per_s / 1e9)
                                      : nlohmann::ordered_json()},
      {"bytes", r.link.bytes},
      {"note", r.link.note}};
  if (r.cache) {
    j["page_cache"] = {{"compressed", r.cache->compressed},
                       {"file_bytes", r.cache->file_bytes},
                       {"raw_bytes", r.cache->raw_bytes},
                       {"ratio", cache_ratio(*r.cache)}};
  }
  if (r.model) j["model"] = model_json(*r.model);
  if (r.host) {
    auto opt = [](const std::optional<double>& v) {
      return v ? nlohmann::ordered_json(*v / 1e9) : nlohmann::ordered_json();
    };
    j["host_engine"] = {{"threads", r.host->threads},
                        {"isa", gemv_isa_name(r.host->isa)},
                        {"pinned", r.host->pinned},
                        {"bytes", r.host->bytes},
                        {"gemv_k", r.host->gemv_k},
                        {"read_gb_per_s", r.host->read_bandwidth / 1e9},
                        {"gemv_gb_per_s", r.host->gemv_bandwidth / 1e9},
                        {"gemv_beside_copies_gb_per_s", opt(r.host->gemv_beside_copies)},
                        {"link_beside_gemv_gb_per_s", opt(r.host->link_beside_gemv)}};
  }
  return j;
}

// The host engine's line: DRAM read, its GEMV alone and beside the link's copies.
void print_host_engine(const HostRates& h) {
  std::printf("host engine %d threads (%s%s): DRAM read %.1f GB/s, batch-1 GEMV %.1f GB/s over %s",
              h.threads, gemv_isa_name(h.isa), h.pinned ? ", pinned" : ", not pinned",
              h.read_bandwidth / 1e9, h.gemv_bandwidth / 1e9, human_bytes(h.bytes).c_str());
  if (h.gemv_beside_copies && h.link_beside_gemv) {
    std::printf("; beside the link's copies %.1f GB/s, the link meanwhile %.1f GB/s (sum %.1f)",
                *h.gemv_beside_copies / 1e9, *h.link_beside_gemv / 1e9,
                (*h.gemv_beside_copies + *h.link_beside_gemv) / 1e9);
  }
  std::printf("\n");
}

void print_probe_report(const ProbeReport& r) {
  print_facts(r.facts, r.trials, r.link);
  if (r.cache) {
    std::printf("page cache %s to keep %s cached%s\n", human_bytes(r.cache->file_bytes).c_str(),
                r.a.model.c_str(),
                r.cache->compressed
                    ? (" (compressed: " + human_bytes(r.cache->raw_bytes) + " raw, ratio " +
                       std::to_string(cache_ratio(*r.cache)).substr(0, 6) +
                       "); its byte paths are not probed until the executor reads "
                       "compressed groups")
                          .c_str()
                    : "");
  }
  if (r.model) print_model(r.a, *r.model);
  if (r.host) print_host_engine(*r.host);
}

void probe(const ProbeArgs& a) {
  const ProbeReport r = gather_probe(a);
  if (a.json) {
    std::cout << probe_report_json(r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
              << '\n';
    return;
  }
  print_probe_report(r);
}

}  // namespace

void add_probe_command(CLI::App& app) {
  auto args = std::make_shared<ProbeArgs>();
  auto* cmd = app.add_subcommand(
      "probe",
      "How weight bytes can reach this device: topology, capabilities, link; with --model, the "
      "rate of each byte path over the model's working set and the path each group should take");
  cmd->add_option("--model", args->model, "Checkpoint folder to probe the byte paths over")
      ->check(not_empty());
  cmd->add_option("--backend", args->backend, "cpu or cuda (default: cuda when available)")
      ->check(not_empty());
  add_int_option(cmd, "--passes", &args->passes, 1, 100,
                 "Timed passes per path (after one warm-up); the median counts")
      ->default_str("3");
  cmd->add_option("--vram", args->vram,
                  "The budget resident groups must fit in beside everything else (default: the "
                  "device's memory)")
      ->check(not_empty());
  cmd->add_option("--host-path", args->host_path,
                  "The host tier to probe through: auto, registered, bounce, pageable or storage")
      ->capture_default_str();
  cmd->add_option("--storage-bytes", args->storage_bytes,
                  "Bytes per pass of the storage probe (reads from the files into device "
                  "memory, a new stretch of the working set each pass); 0: skip it")
      ->capture_default_str();
  cmd->add_option("--save", args->save, "Write the measured rates (JSON) for the planner")
      ->check(not_empty());
  add_int_option(cmd, "--host-threads", &args->host_threads, 0, 1024,
                 "Workers of the host engine's probe (0: the physical cores less two)")
      ->default_str("0");
  cmd->add_flag("--no-host-engine", args->no_host_engine,
                "Skip the host engine's probe (DRAM read and batch-1 GEMV rates)");
  cmd->add_flag("--json", args->json, "Print one JSON object");
  cmd->callback([args] {
    if (args->model.empty() && !args->save.empty()) {
      report.fail("--save needs --model (the rates are measured over a model's working set)");
    }
    probe(*args);
  });
}

}  // namespace ferry::cli

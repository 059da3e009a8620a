// ferry._ferry.Model: api::LoadedModel for Python. Arguments arrive normalized by
// python/ferry/__init__.py; here numpy frames become images, the GIL is released while files
// are decoded and the model runs, and the result comes back as a dict of numpy arrays and text.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cinttypes>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "api/loaded_model.h"
#include "api/run_inputs.h"
#include "api/session_args.h"
#include "api/synth.h"
#include "binding.h"
#include "image/image.h"
#include "image/qwen_vl_preprocess.h"
#include "model/ego_history.h"
#include "tensors.h"

namespace ferry::python {

namespace {

using FrameArray = py::array_t<uint8_t, py::array::c_style>;

std::string hex64(uint64_t v) {
  char buf[19];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

// An HxWx3 uint8 array (RGB, row-major) as ferry's planar image.
RgbImage image_from_array(const FrameArray& a, size_t index) {
  const std::string name = "frames[" + std::to_string(index) + "]";
  if (a.ndim() != 3 || a.shape(2) != 3) {
    throw py::value_error(name + ": expected an HxWx3 uint8 RGB array");
  }
  const DecodeLimits limits;
  const int64_t h = a.shape(0), w = a.shape(1);
  if (h < 1 || w < 1 || h > limits.max_side || w > limits.max_side || h * w > limits.max_pixels) {
    throw py::value_error(name + ": " + std::to_string(h) + "x" + std::to_string(w) +
                          " pixels is empty or larger than ferry takes");
  }
  RgbImage img;
  img.height = h;
  img.width = w;
  img.planes.resize(3 * img.plane_size());
  const uint8_t* src = a.data();
  for (size_t i = 0; i < img.plane_size(); ++i) {
    for (int c = 0; c < 3; ++c) img.plane(c)[i] = src[i * 3 + static_cast<size_t>(c)];
  }
  return img;
}

// One frame as Python gave it: a file to decode, or pixels already converted.
struct FrameSource {
  std::string path;
  std::optional<RgbImage> image;
};

struct HistorySource {
  std::string path;  // a .json or .npy file
  std::string rotations_path;
  std::vector<double> xyz, yaw, rotations;  // in memory (xyz empty: none)
};

// Everything a run reads, gathered with the GIL held, read without it.
struct RunRequest {
  std::optional<std::string> frames_path;  // a folder or manifest
  std::vector<FrameSource> frames;
  std::optional<HistorySource> history;
  std::optional<ChatRequest> chat;
  int64_t max_tokens = 0;
  api::RunSettings settings;
};

Result<api::InputParts> read_parts(const api::LoadedModel& model, RunRequest& req) {
  api::InputParts parts;
  const bool alpamayo = model.config().alpamayo() != nullptr;
  if (req.frames_path) {
    FERRY_RETURN_IF_ERROR(api::read_frames(model.path(), *req.frames_path,
                                           alpamayo ? api::kAlpamayoFrames : 0, parts));
  } else if (!req.frames.empty()) {
    FERRY_ASSIGN_OR_RETURN(VisionPreprocessConfig pre, load_preprocessor_config(model.path()));
    for (size_t i = 0; i < req.frames.size(); ++i) {
      FrameSource& f = req.frames[i];
      if (f.image) {
        parts.frames.push_back(std::move(*f.image));
        parts.frame_names.push_back("frames[" + std::to_string(i) + "]");
      } else {
        FERRY_ASSIGN_OR_RETURN(RgbImage img, read_image(f.path, pre.limits));
        parts.frames.push_back(std::move(img));
        parts.frame_names.push_back(f.path);
      }
    }
  }
  if (req.history) {
    const HistorySource& h = *req.history;
    if (!h.path.empty()) {
      FERRY_ASSIGN_OR_RETURN(parts.history, api::read_ego_history(h.path, h.rotations_path));
    } else {
      FERRY_ASSIGN_OR_RETURN(parts.history, ego_history_from(h.xyz, h.rotations, h.yaw));
    }
  }
  parts.chat = std::move(req.chat);
  parts.max_tokens = req.max_tokens;
  return parts;
}

py::array_t<float> float_array(const std::vector<float>& v, std::vector<py::ssize_t> shape) {
  py::array_t<float> a(shape);
  std::copy(v.begin(), v.end(), a.mutable_data());
  return a;
}

py::dict result_dict(const api::LoadedModel& model, const api::RunOutput& out) {
  const InferenceResult& r = out.result;
  const PhaseTimes& t = r.times;
  py::dict d;
  d["text"] = out.text.text;
  d["stop"] = out.text.stop;
  d["tokens"] = r.tokens;
  d["prompt_tokens"] = r.prompt.size();
  d["logits_hash"] = hex64(r.logits_hash);
  d["prefill_logits_hash"] = hex64(r.prefill_logits_hash);
  d["opened_session"] = out.opened_session;
  py::dict timings;
  timings["open"] = out.open_seconds;
  timings["vision"] = t.of(Phase::vision);
  timings["prefill"] = t.of(Phase::prefill);
  timings["decode"] = t.of(Phase::decode);
  timings["expert"] = t.of(Phase::expert);
  timings["total"] = t.total_seconds;
  d["timings"] = timings;
  if (model.config().alpamayo() != nullptr) {
    d["reasoning"] = out.text.reasoning;
    d["actions_hash"] = hex64(r.actions_hash);
    const auto n = static_cast<py::ssize_t>(r.trajectory_xyz.size());
    std::vector<float> xyz;
    for (const auto& p : r.trajectory_xyz) xyz.insert(xyz.end(), p.begin(), p.end());
    d["waypoints"] = float_array(xyz, {n, 3});
    d["yaw"] = float_array(r.trajectory_yaw, {static_cast<py::ssize_t>(r.trajectory_yaw.size())});
    d["actions"] = float_array(r.actions, {static_cast<py::ssize_t>(r.actions.size() / 2), 2});
  }
  return d;
}

std::unique_ptr<api::LoadedModel> open_model(
    const std::string& path, const std::optional<std::string>& backend,
    const std::optional<std::string>& vram, const std::optional<std::string>& mode,
    std::optional<int64_t> slots, const std::optional<std::string>& resident,
    std::optional<int> resident_count, const std::optional<std::string>& plan,
    const std::optional<std::string>& profile, const std::string& host_path, bool graphs) {
  api::ModelOptions o;
  o.backend = backend.value_or("");
  o.session.vram = vram.value_or("");
  o.session.mode = mode.value_or("");
  o.session.slots = slots;
  o.session.resident = resident.value_or("");
  o.session.resident_count = resident_count;
  o.session.plan_file = plan.value_or("");
  o.session.profile_file = profile.value_or("");
  o.session.host_path = host_path;
  o.graphs = graphs;
  Result<std::unique_ptr<api::LoadedModel>> m = [&] {
    py::gil_scoped_release release;
    return api::LoadedModel::open(path, o);
  }();
  return check(std::move(m));
}

py::dict run(api::LoadedModel& model, const std::optional<std::string>& frames_path,
             const py::list& frames, const py::object& history, const py::object& chat,
             int64_t max_tokens, std::optional<bool> greedy, std::optional<float> temperature,
             std::optional<float> top_p, uint64_t seed, std::optional<int64_t> flow_steps) {
  RunRequest req;
  req.frames_path = frames_path;
  for (size_t i = 0; i < frames.size(); ++i) {
    const py::handle f = frames[i];
    if (py::isinstance<py::str>(f)) {
      req.frames.push_back(FrameSource{f.cast<std::string>(), std::nullopt});
    } else {
      req.frames.push_back(FrameSource{"", image_from_array(f.cast<FrameArray>(), i)});
    }
  }
  if (!history.is_none()) {
    const py::dict h = history.cast<py::dict>();
    HistorySource s;
    if (h.contains("path")) s.path = h["path"].cast<std::string>();
    if (h.contains("rotations_path")) s.rotations_path = h["rotations_path"].cast<std::string>();
    if (h.contains("xyz")) s.xyz = h["xyz"].cast<std::vector<double>>();
    if (h.contains("yaw")) s.yaw = h["yaw"].cast<std::vector<double>>();
    if (h.contains("rot")) s.rotations = h["rot"].cast<std::vector<double>>();
    req.history = std::move(s);
  }
  if (!chat.is_none()) {
    const py::dict c = chat.cast<py::dict>();
    ChatRequest r;
    r.user = c["user"].cast<std::string>();
    if (!c["system"].is_none()) r.system = c["system"].cast<std::string>();
    r.thinking = c["thinking"].cast<bool>();
    req.chat = std::move(r);
  }
  req.max_tokens = max_tokens;
  req.settings.greedy = greedy;
  req.settings.temperature = temperature;
  req.settings.top_p = top_p;
  req.settings.seed = seed;
  req.settings.flow_steps = flow_steps;
  Result<api::RunOutput> out = [&]() -> Result<api::RunOutput> {
    py::gil_scoped_release release;
    FERRY_ASSIGN_OR_RETURN(api::InputParts parts, read_parts(model, req));
    return model.run(std::move(parts), req.settings);
  }();
  return result_dict(model, check(std::move(out)));
}

py::object plan_summary(const api::LoadedModel& model) {
  std::optional<api::LoadedModel::SessionSummary> s;
  {
    py::gil_scoped_release release;  // waits for a run on another thread
    s = model.session_summary();
  }
  if (!s) return py::none();
  return py::module_::import("json").attr("loads")(s->plan_json);
}

py::object memory_summary(const api::LoadedModel& model) {
  std::optional<api::LoadedModel::SessionSummary> s;
  {
    py::gil_scoped_release release;
    s = model.session_summary();
  }
  if (!s) return py::none();
  return py::str(s->memory);
}

}  // namespace

void add_model(py::module_& m) {
  m.def(
      "synth",
      [](const std::string& preset, const std::string& out, uint64_t seed, bool force) {
        api::SynthOptions o;
        o.preset = preset;
        o.out = out;
        o.seed = seed;
        o.force = force;
        Result<api::SynthReport> r = make_error(ErrorCode::internal, "synth did not run");
        {
          py::gil_scoped_release release;
          r = api::run_synth(o);
        }
        api::print_synth_report(check(std::move(r)));
      },
      py::arg("preset"), py::arg("out"), py::arg("seed") = 0, py::arg("force") = false,
      "Writes a preset's checkpoint with seeded random weights and a synthetic tokenizer "
      "(ferry synth)");
  py::class_<api::LoadedModel>(m, "Model")
      .def(py::init(&open_model), py::arg("path"), py::arg("backend") = py::none(),
           py::arg("vram") = py::none(), py::arg("mode") = py::none(),
           py::arg("slots") = py::none(), py::arg("resident") = py::none(),
           py::arg("resident_count") = py::none(), py::arg("plan") = py::none(),
           py::arg("profile") = py::none(), py::arg("host_path") = "auto", py::arg("graphs") = true)
      .def("_run", &run, py::arg("frames_path"), py::arg("frames"), py::arg("history"),
           py::arg("chat"), py::arg("max_tokens"), py::arg("greedy"), py::arg("temperature"),
           py::arg("top_p"), py::arg("seed"), py::arg("flow_steps"))
      .def_property_readonly("path", &api::LoadedModel::path)
      .def_property_readonly(
          "architecture",
          [](const api::LoadedModel& x) { return std::string(architecture_name(x.config().arch)); })
      .def_property_readonly("_config",
                             [](const api::LoadedModel& x) {
                               const TextConfig& t = x.config().text();
                               py::dict d;
                               d["architecture"] = architecture_name(x.config().arch);
                               d["layers"] = t.num_layers;
                               d["hidden_size"] = t.hidden_size;
                               d["heads"] = t.num_heads;
                               d["kv_heads"] = t.num_kv_heads;
                               d["vocab_size"] = t.vocab_size;
                               d["weights_bytes"] = x.weights().total_bytes();
                               d["groups"] = x.weights().groups.size();
                               d["vision"] = x.config().vlm() != nullptr;
                               d["action_expert"] = x.config().alpamayo() != nullptr;
                               return d;
                             })
      .def_property_readonly("backend", &api::LoadedModel::backend_name)
      .def_property_readonly("plan", &plan_summary,
                             "The session's plan and memory (None before the first run)")
      .def_property_readonly("memory", &memory_summary,
                             "The session's device memory in one line (None before the first run)")
      .def_property_readonly("sessions_opened", &api::LoadedModel::sessions_opened)
      .def(
          "tensor",
          [](const api::LoadedModel& x, const std::string& name) {
            return tensor_of(x.checkpoint(), name);
          },
          py::arg("name"))
      .def_property_readonly(
          "checkpoint", [](const api::LoadedModel& x) { return CheckpointRef{x.checkpoint()}; });
}

}  // namespace ferry::python

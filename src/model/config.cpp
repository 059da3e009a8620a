#include "model/config.h"

namespace ferry {

const char* architecture_name(Architecture a) {
  switch (a) {
    case Architecture::qwen3:
      return "qwen3";
    case Architecture::llama:
      return "llama";
    case Architecture::qwen3_vl:
      return "qwen3_vl";
    case Architecture::alpamayo_r1:
      return "alpamayo_r1";
  }
  return "unknown";
}

const TextConfig& ModelConfig::text() const {
  if (const auto* t = std::get_if<TextConfig>(&body)) return *t;
  if (const auto* v = std::get_if<Qwen3VLConfig>(&body)) return v->text;
  return std::get<AlpamayoConfig>(body).vlm.text;
}

const Qwen3VLConfig* ModelConfig::vlm() const {
  if (const auto* v = std::get_if<Qwen3VLConfig>(&body)) return v;
  if (const auto* a = std::get_if<AlpamayoConfig>(&body)) return &a->vlm;
  return nullptr;
}

const AlpamayoConfig* ModelConfig::alpamayo() const {
  return std::get_if<AlpamayoConfig>(&body);
}

}  // namespace ferry

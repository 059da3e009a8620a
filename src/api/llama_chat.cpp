#include "api/llama_chat.h"

#include <algorithm>
#include <filesystem>

#include "api/run_inputs.h"
#include "format/strict_json.h"
#include "tokenizer/utf8.h"

namespace ferry::api {
namespace {

using json = nlohmann::json;

constexpr size_t kMaxTokenizerConfigBytes = 16 << 20;

Error bad_config(const std::string& path, const std::string& what) {
  return make_error(ErrorCode::format, path + ": " + what);
}

// Python's str.isspace for the characters a prompt may hold.
bool is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// Python's str.strip(): leading and trailing white space off (the text is valid UTF-8).
std::string strip(const std::string& s) {
  size_t begin = 0, end = 0, pos = 0;
  bool seen = false;
  while (pos < s.size()) {
    const size_t at = pos;
    const std::optional<char32_t> c = tok::next_code_point(s, pos);
    if (!c) {
      ++pos;  // not reached for checked text; kept as a character
    } else if (is_space(*c)) {
      continue;
    }
    if (!seen) begin = at;
    seen = true;
    end = pos;
  }
  return seen ? s.substr(begin, end - begin) : std::string();
}

Result<std::string> token_field(const json& doc, const char* key, const std::string& path) {
  if (!doc.contains(key) || doc.at(key).is_null())
    return bad_config(path, std::string("no ") + key);
  const json& v = doc.at(key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v.at("content").is_string()) {
    return v.at("content").get<std::string>();
  }
  return bad_config(path, std::string(key) + " must be a string or {\"content\": ...}");
}

Result<std::string> template_text(const json& doc, const std::string& path) {
  if (!doc.contains("chat_template")) {
    return make_error(ErrorCode::unsupported,
                      path + ": no chat_template; give the prompt as ids with --prompt-ids");
  }
  const json& t = doc.at("chat_template");
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array()) {
    for (const json& item : t) {
      if (item.is_object() && item.value("name", "") == "default" && item.contains("template") &&
          item.at("template").is_string()) {
        return item.at("template").get<std::string>();
      }
    }
    return bad_config(path, "chat_template lists no \"default\" template");
  }
  return bad_config(path, "chat_template must be a string or a list of named templates");
}

}  // namespace

Result<LlamaChat> load_llama_chat(const std::string& model_dir) {
  const std::string path = model_dir + "/tokenizer_config.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return make_error(ErrorCode::unsupported,
                      path +
                          " is missing: no chat template; give the prompt as ids with "
                          "--prompt-ids");
  }
  FERRY_ASSIGN_OR_RETURN(std::string text, read_text_file(path, kMaxTokenizerConfigBytes));
  FERRY_ASSIGN_OR_RETURN(json doc, strict_json::parse(text, 32, path, "JSON"));
  if (!doc.is_object()) return bad_config(path, "expected a JSON object");
  FERRY_ASSIGN_OR_RETURN(std::string tpl, template_text(doc, path));
  LlamaChat chat;
  const auto has = [&](std::string_view s) { return tpl.find(s) != std::string::npos; };
  if (has("<|start_header_id|>") && has("<|end_header_id|>") && has("<|eot_id|>")) {
    chat.format = LlamaChat::Format::llama3_header;
  } else if (has("[INST]") && has("[/INST]")) {
    chat.format = LlamaChat::Format::llama2_inst;
  } else {
    return make_error(ErrorCode::unsupported,
                      path +
                          ": a chat_template ferry does not know (it renders the Llama-2 "
                          "[INST] and Llama-3 header formats); give --prompt-ids");
  }
  if (has("Cutting Knowledge Date") || has("tools") || has("ipython")) {
    return make_error(ErrorCode::unsupported,
                      path +
                          ": the chat_template writes a dated system preamble or tool turns, "
                          "which ferry does not render; give the prompt as ids with "
                          "--prompt-ids");
  }
  FERRY_ASSIGN_OR_RETURN(chat.bos, token_field(doc, "bos_token", path));
  FERRY_ASSIGN_OR_RETURN(chat.eos, token_field(doc, "eos_token", path));
  return chat;
}

std::string llama_chat_text(const LlamaChat& chat, const ChatRequest& request) {
  if (chat.format == LlamaChat::Format::llama2_inst) {
    std::string text = request.user;
    if (request.system) text = "<<SYS>>\n" + *request.system + "\n<</SYS>>\n\n" + request.user;
    return chat.bos + "[INST] " + strip(text) + " [/INST]";
  }
  auto turn = [](const std::string& role, const std::string& content) {
    return "<|start_header_id|>" + role + "<|end_header_id|>\n\n" + strip(content) + "<|eot_id|>";
  };
  std::string out = chat.bos;
  if (request.system) out += turn("system", *request.system);
  out += turn("user", request.user);
  return out + "<|start_header_id|>assistant<|end_header_id|>\n\n";
}

Result<ModelInputs> llama_chat_inputs(const Tokenizer& tokenizer, const LlamaChat& chat,
                                      const ChatRequest& request) {
  ModelInputs in;
  FERRY_ASSIGN_OR_RETURN(in.prompt, tokenizer.encode(llama_chat_text(chat, request)));
  const std::optional<int32_t> eos = tokenizer.token_to_id(chat.eos);
  if (!eos) {
    return make_error(ErrorCode::format, "tokenizer.json has no eos_token " + chat.eos +
                                             ": not this model's tokenizer");
  }
  in.stop.stop_tokens.push_back(*eos);
  for (const char* end : {"<|eot_id|>", "<|eom_id|>", "<|end_of_text|>"}) {
    const std::optional<int32_t> id = tokenizer.token_to_id(end);
    if (id && std::find(in.stop.stop_tokens.begin(), in.stop.stop_tokens.end(), *id) ==
                  in.stop.stop_tokens.end()) {
      in.stop.stop_tokens.push_back(*id);
    }
  }
  return in;
}

}  // namespace ferry::api

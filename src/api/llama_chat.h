// Llama chat prompts: the chat template a checkpoint declares (tokenizer_config.json
// `chat_template`, a Jinja2 text ferry does not interpret) recognized by the markers of its
// format and rendered in C++ for an optional system turn, the user turn and the assistant's
// generation prompt (apply_chat_template with add_generation_prompt=True):
//
// - Llama-3 (<|start_header_id|>, <|end_header_id|>, <|eot_id|>): BOS, then per turn
//   <|start_header_id|>ROLE<|end_header_id|>\n\n + the text trimmed + <|eot_id|>, then the
//   assistant's header.
// - Llama-2 ([INST], [/INST]): BOS [INST] + the text (the system turn as <<SYS>>\n..\n<</SYS>>\n\n
//   before it), trimmed, + " [/INST]".
//
// A template that also does what ferry does not render (Llama-3.1's dated system preamble and
// tool turns) is refused with a message that names --prompt-ids. Trimming is Python's str.strip
// over ASCII and the common Unicode spaces. tests/unit/llama_chat_test.cpp compares with
// transformers' apply_chat_template on the test checkpoints.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "api/chat_prompt.h"
#include "core/status.h"
#include "model/model_inputs.h"
#include "tokenizer/tokenizer.h"

namespace ferry::api {

struct LlamaChat {
  enum class Format { llama2_inst, llama3_header };
  Format format = Format::llama3_header;
  std::string bos;  // tokenizer_config.json bos_token
  std::string eos;  // tokenizer_config.json eos_token
};

// Reads DIR/tokenizer_config.json: its chat_template (a string, or the "default" of a list of
// named templates), bos_token and eos_token (strings or {"content": ...}).
Result<LlamaChat> load_llama_chat(const std::string& model_dir);

// The rendered prompt (special tokens spelled out).
std::string llama_chat_text(const LlamaChat& chat, const ChatRequest& request);

// The prompt's ids, and generation ending at the end of a turn (eos_token, and Llama-3's
// <|eot_id|>, <|eom_id|>, <|end_of_text|> where the vocabulary has them).
Result<ModelInputs> llama_chat_inputs(const Tokenizer& tokenizer, const LlamaChat& chat,
                                      const ChatRequest& request);

}  // namespace ferry::api

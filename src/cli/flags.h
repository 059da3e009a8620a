// Numbers on the command line, parsed as other tools parse them: an integer is decimal (a leading
// zero is not octal, "0x" is not hex), an optional '-' and digits, nothing else; a number is
// finite; an empty value is an error; a value outside the flag's range is an error naming the
// range (no silent wrap of -1 into an unsigned, no silent clamp). And workload flags a model has
// no use for are errors, the same in every command.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "model/config.h"
#include "model/workload.h"

namespace ferry::cli {

// "--seed: expected a decimal integer in [0, 18446744073709551615], got '-1'".
Result<int64_t> parse_int_flag(std::string_view flag, std::string_view text, int64_t min,
                               int64_t max);
Result<uint64_t> parse_uint_flag(std::string_view flag, std::string_view text, uint64_t max);
Result<double> parse_number_flag(std::string_view flag, std::string_view text, double min,
                                 double max);

// Options parsed by the functions above; a bad value is a CLI11 validation error (the usage
// line, a non-zero exit) before the command runs.
CLI::Option* add_int_option(CLI::App* cmd, const std::string& name, int64_t* out, int64_t min,
                            int64_t max, const std::string& help);
CLI::Option* add_int_option(CLI::App* cmd, const std::string& name, std::optional<int64_t>* out,
                            int64_t min, int64_t max, const std::string& help);
CLI::Option* add_int_option(CLI::App* cmd, const std::string& name, int* out, int min, int max,
                            const std::string& help);
CLI::Option* add_uint_option(CLI::App* cmd, const std::string& name, uint64_t* out,
                             const std::string& help);
CLI::Option* add_number_option(CLI::App* cmd, const std::string& name, std::optional<float>* out,
                               double min, double max, const std::string& help);

// For string options: an empty value is refused, not taken as "not given".
CLI::Validator not_empty();

// What part of a model a workload flag drives.
enum class FlagNeeds { vision, action_expert };

// An invalid_argument error "--steps: qwen3 has no action expert (...)" when the flag was given
// but the model lacks what it drives; ok otherwise.
Status check_flag_applies(const ModelConfig& config, std::string_view flag, bool given,
                          FlagNeeds needs);

// --prompt-tokens: `given` when it covers the prompt's fixed parts for this workload (images,
// chat template, ego history; else an error naming the least length), or `fallback` raised to
// that least. Never a prompt silently longer than asked.
Result<int64_t> prompt_tokens_flag(const ModelConfig& config, const Workload& w,
                                   std::optional<int64_t> given, int64_t fallback);

}  // namespace ferry::cli

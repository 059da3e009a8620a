#include "cli/flags.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "model/prompt.h"

namespace ferry::cli {
namespace {

Error bad_value(std::string_view flag, const std::string& expected, std::string_view text) {
  return make_error(ErrorCode::invalid_argument, std::string(flag) + ": expected " + expected +
                                                     ", got '" + std::string(text) + "'");
}

template <class T>
std::string range(T min, T max) {
  return "[" + std::to_string(min) + ", " + std::to_string(max) + "]";
}

// Only '-'? digits: from_chars alone would also stop early at "12abc" or accept "+1" in some
// versions; every character is checked here.
bool plain_integer(std::string_view text, bool allow_minus) {
  size_t i = allow_minus && !text.empty() && text[0] == '-' ? 1 : 0;
  if (i == text.size()) return false;
  for (; i < text.size(); ++i)
    if (text[i] < '0' || text[i] > '9') return false;
  return true;
}

template <class Option, class Parse>
CLI::Option* add_parsed(CLI::App* cmd, const std::string& name, const std::string& help,
                        const char* type, Parse parse, Option* out) {
  return cmd
      ->add_option_function<std::string>(
          name,
          [name, parse, out](const std::string& text) {
            auto v = parse(text);
            if (!v.ok()) throw CLI::ValidationError(v.error().message);
            *out = *v;
          },
          help)
      ->type_name(type);
}

}  // namespace

Result<int64_t> parse_int_flag(std::string_view flag, std::string_view text, int64_t min,
                               int64_t max) {
  const std::string expected = "a decimal integer in " + range(min, max);
  if (!plain_integer(text, true)) return bad_value(flag, expected, text);
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v, 10);
  if (ec != std::errc() || end != text.data() + text.size() || v < min || v > max)
    return bad_value(flag, expected, text);
  return v;
}

Result<uint64_t> parse_uint_flag(std::string_view flag, std::string_view text, uint64_t max) {
  const std::string expected = "a decimal integer in " + range<uint64_t>(0, max);
  if (!plain_integer(text, false)) return bad_value(flag, expected, text);
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v, 10);
  if (ec != std::errc() || end != text.data() + text.size() || v > max)
    return bad_value(flag, expected, text);
  return v;
}

Result<double> parse_number_flag(std::string_view flag, std::string_view text, double min,
                                 double max) {
  const std::string expected =
      "a number in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  // Decimal notation only: no "inf", "nan" or hex floats.
  for (char c : text)
    if (!((c >= '0' && c <= '9') || c == '.' || c == '-' || c == 'e' || c == 'E' || c == '+'))
      return bad_value(flag, expected, text);
  double v = 0;
  const auto [end, ec] =
      std::from_chars(text.data(), text.data() + text.size(), v, std::chars_format::general);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v) ||
      v < min || v > max)
    return bad_value(flag, expected, text);
  return v;
}

CLI::Option* add_int_option(CLI::App* cmd, const std::string& name, int64_t* out, int64_t min,
                            int64_t max, const std::string& help) {
  auto parse = [name, min, max](const std::string& t) { return parse_int_flag(name, t, min, max); };
  return add_parsed(cmd, name, help, "INT", parse, out);
}

CLI::Option* add_int_option(CLI::App* cmd, const std::string& name, std::optional<int64_t>* out,
                            int64_t min, int64_t max, const std::string& help) {
  auto parse = [name, min, max](const std::string& t) { return parse_int_flag(name, t, min, max); };
  return add_parsed(cmd, name, help, "INT", parse, out);
}

CLI::Option* add_int_option(CLI::App* cmd, const std::string& name, int* out, int min, int max,
                            const std::string& help) {
  auto parse = [name, min, max](const std::string& t) -> Result<int> {
    FERRY_ASSIGN_OR_RETURN(int64_t v, parse_int_flag(name, t, min, max));
    return static_cast<int>(v);
  };
  return add_parsed(cmd, name, help, "INT", parse, out);
}

CLI::Option* add_uint_option(CLI::App* cmd, const std::string& name, uint64_t* out,
                             const std::string& help) {
  auto parse = [name](const std::string& t) {
    return parse_uint_flag(name, t, std::numeric_limits<uint64_t>::max());
  };
  return add_parsed(cmd, name, help, "UINT", parse, out);
}

CLI::Option* add_number_option(CLI::App* cmd, const std::string& name, std::optional<float>* out,
                               double min, double max, const std::string& help) {
  auto parse = [name, min, max](const std::string& t) -> Result<float> {
    FERRY_ASSIGN_OR_RETURN(double v, parse_number_flag(name, t, min, max));
    return static_cast<float>(v);
  };
  return add_parsed(cmd, name, help, "NUMBER", parse, out);
}

CLI::Validator not_empty() {
  return CLI::Validator(
      [](std::string& v) { return v.empty() ? std::string("expected a value, got ''") : ""; }, "",
      "NOT_EMPTY");
}

Status check_flag_applies(const ModelConfig& config, std::string_view flag, bool given,
                          FlagNeeds needs) {
  if (!given) return {};
  const std::string model = architecture_name(config.arch);
  if (needs == FlagNeeds::vision && config.vlm() == nullptr) {
    return make_error(ErrorCode::invalid_argument, std::string(flag) + ": " + model +
                                                       " is a text-only model; it takes no images");
  }
  if (needs == FlagNeeds::action_expert && config.alpamayo() == nullptr) {
    return make_error(ErrorCode::invalid_argument,
                      std::string(flag) + ": " + model +
                          " has no action expert (flow-matching steps are Alpamayo-R1's)");
  }
  return {};
}

Result<int64_t> prompt_tokens_flag(const ModelConfig& config, const Workload& w,
                                   std::optional<int64_t> given, int64_t fallback) {
  const int64_t least = min_prompt_tokens(config, w);
  if (!given) return std::max(fallback, least);
  if (*given < least) {
    return make_error(ErrorCode::invalid_argument,
                      "--prompt-tokens " + std::to_string(*given) + ": the images and the " +
                          "prompt's fixed parts take " + std::to_string(least - 1) +
                          " tokens; give at least " + std::to_string(least));
  }
  return *given;
}

}  // namespace ferry::cli

// ferry tokenize --model DIR (--text T | --file F | --batch F) [--decode] [--skip-special]
// [--add-special] [--json]: the ids of a text with the model's tokenizer.json (with
// --add-special also the post-processor's BOS), or with --decode the text of ids, as llama.cpp's
// tokenize tool does. --batch reads a JSON list (of strings, or of id lists with --decode) and
// prints a JSON list, so a test can check a whole corpus in one run.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/cli_support.h"
#include "cli/commands.h"
#include "format/strict_json.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace ferry::cli {
namespace {

using json = nlohmann::json;

struct TokenizeOptions {
  std::string model;
  std::string text;
  std::string file;
  std::string batch;
  bool decode = false;
  bool skip_special = false;
  bool add_special = false;
  bool json = false;
};

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::io, path + ": cannot open");
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) return make_error(ErrorCode::io, path + ": cannot read");
  return s.str();
}

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// A token's bytes for a terminal: whole characters as they are, control characters and bytes of
// an unfinished character escaped ("\n", "\xf0").
std::string printable(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "'";
  size_t i = 0;
  while (i < bytes.size()) {
    const size_t start = i;
    const auto cp = tok::next_code_point(bytes, i);
    if (cp && *cp >= 0x20 && *cp != 0x7F) {
      out.append(bytes.substr(start, i - start));
      continue;
    }
    const auto c = static_cast<unsigned char>(bytes[start]);
    i = start + 1;
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out + "'";
}

// Ids written as a JSON list or separated by spaces and commas ("1 2 3", "[1, 2, 3]").
Result<std::vector<int32_t>> parse_ids(std::string_view text) {
  std::vector<int32_t> ids;
  size_t i = 0;
  auto separator = [](char c) {
    return c == ' ' || c == ',' || c == '\n' || c == '\t' || c == '\r';
  };
  while (i < text.size() && separator(text[i])) ++i;
  const bool bracket = i < text.size() && text[i] == '[';
  if (bracket) ++i;
  while (i < text.size()) {
    if (separator(text[i])) {
      ++i;
      continue;
    }
    if (bracket && text[i] == ']') {
      ++i;
      while (i < text.size() && separator(text[i])) ++i;
      if (i == text.size()) return ids;
      break;
    }
    int64_t v = 0;
    size_t digits = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9' && digits < 10) {
      v = v * 10 + (text[i++] - '0');
      ++digits;
    }
    if (digits == 0 || v > INT32_MAX || (i < text.size() && !separator(text[i]) && text[i] != ']'))
      return make_error(ErrorCode::invalid_argument,
                        "--decode: expected token ids (\"1 2 3\" or \"[1, 2, 3]\") near byte " +
                            std::to_string(i));
    ids.push_back(static_cast<int32_t>(v));
  }
  if (bracket) return make_error(ErrorCode::invalid_argument, "--decode: missing ']'");
  return ids;
}

// The text of ids, and the pieces a StreamDecoder printed one id at a time.
struct Decoded {
  std::string text;
  std::vector<std::string> pieces;  // one per id, then what finish() flushed
};

Result<Decoded> decode_ids(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip) {
  Decoded d;
  FERRY_ASSIGN_OR_RETURN(d.text, tok.decode(ids, skip));
  StreamDecoder stream(tok, skip);
  for (int32_t id : ids) {
    FERRY_ASSIGN_OR_RETURN(std::string piece, stream.push(id));
    d.pieces.push_back(std::move(piece));
  }
  d.pieces.push_back(stream.finish());
  return d;
}

json decoded_json(const Decoded& d) {
  return json{{"text", d.text}, {"pieces", d.pieces}};
}

// What `ferry tokenize` found: the ids of a text with each token's bytes, or (--decode) the
// text of ids, or (--batch) one of those per item.
struct TokenizeReport {
  enum class Kind { encode, decode, batch };
  Kind kind = Kind::encode;
  std::vector<int32_t> ids;                         // encode
  std::vector<std::string> bytes;                   // encode: each token's bytes
  Decoded decoded;                                  // decode
  std::vector<std::vector<int32_t>> encoded_batch;  // batch, encoding
  std::vector<Decoded> decoded_batch;               // batch, --decode
};

Result<TokenizeReport> gather_batch(const Tokenizer& tok, const TokenizeOptions& o) {
  FERRY_ASSIGN_OR_RETURN(std::string text, read_file(o.batch));
  FERRY_ASSIGN_OR_RETURN(json input, strict_json::parse(text, 8, o.batch, "batch"));
  if (!input.is_array()) return make_error(ErrorCode::invalid_argument, o.batch + ": not a list");
  TokenizeReport r;
  r.kind = TokenizeReport::Kind::batch;
  for (const json& item : input) {
    if (!o.decode) {
      if (!item.is_string())
        return make_error(ErrorCode::invalid_argument, o.batch + ": items must be strings");
      FERRY_ASSIGN_OR_RETURN(std::vector<int32_t> ids,
                             tok.encode(item.get<std::string>(), o.add_special));
      r.encoded_batch.push_back(std::move(ids));
      continue;
    }
    std::vector<int32_t> ids;
    if (!item.is_array())
      return make_error(ErrorCode::invalid_argument, o.batch + ": items must be id lists");
    for (const json& id : item) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
        return make_error(ErrorCode::invalid_argument, o.batch + ": ids must be integers >= 0");
      ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
    FERRY_ASSIGN_OR_RETURN(Decoded d, decode_ids(tok, ids, o.skip_special));
    r.decoded_batch.push_back(std::move(d));
  }
  return r;
}

Result<TokenizeReport> gather_tokenize(const TokenizeOptions& o) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool is_file = fs::is_regular_file(o.model, ec);
  FERRY_ASSIGN_OR_RETURN(Tokenizer tok,
                         is_file ? Tokenizer::load(o.model) : Tokenizer::load_dir(o.model));
  if (!o.batch.empty()) return gather_batch(tok, o);
  std::string input = o.text;
  if (!o.file.empty()) {
    FERRY_ASSIGN_OR_RETURN(input, read_file(o.file));
  }
  TokenizeReport r;
  if (o.decode) {
    r.kind = TokenizeReport::Kind::decode;
    FERRY_ASSIGN_OR_RETURN(std::vector<int32_t> ids, parse_ids(input));
    FERRY_ASSIGN_OR_RETURN(r.decoded, decode_ids(tok, ids, o.skip_special));
    return r;
  }
  FERRY_ASSIGN_OR_RETURN(r.ids, tok.encode(input, o.add_special));
  for (int32_t id : r.ids) {
    FERRY_ASSIGN_OR_RETURN(std::string_view bytes, tok.token_bytes(id));
    r.bytes.emplace_back(bytes);
  }
  return r;
}

// A batch is JSON whichever printer is asked for: a list, one item per input.
std::string tokenize_report_json(const TokenizeReport& r) {
  switch (r.kind) {
    case TokenizeReport::Kind::encode:
      return dump(json(r.ids)) + "\n";
    case TokenizeReport::Kind::decode:
      return dump(decoded_json(r.decoded)) + "\n";
    case TokenizeReport::Kind::batch:
      break;
  }
  json out = json::array();
  for (const std::vector<int32_t>& ids : r.encoded_batch) out.push_back(ids);
  for (const Decoded& d : r.decoded_batch) out.push_back(decoded_json(d));
  return dump(out) + "\n";
}

std::string tokenize_report_text(const TokenizeReport& r) {
  switch (r.kind) {
    case TokenizeReport::Kind::decode:
      return r.decoded.text + "\n";
    case TokenizeReport::Kind::batch:
      return tokenize_report_json(r);
    case TokenizeReport::Kind::encode:
      break;
  }
  // One token a line: its id and what it stands for (bytes of a partial character escaped).
  std::string out;
  for (size_t i = 0; i < r.ids.size(); ++i) {
    out += std::to_string(r.ids[i]) + " " + printable(r.bytes[i]) + "\n";
  }
  return out;
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto opts = std::make_shared<TokenizeOptions>();
  auto* cmd = app.add_subcommand(
      "tokenize", "Token ids of a text with the model's tokenizer.json (or text of ids: --decode)");
  cmd->add_option("--model", opts->model, "model folder (or a tokenizer.json file)")->required();
  auto* text = cmd->add_option("--text", opts->text, "the text (with --decode: ids, \"1 2 3\")");
  auto* file = cmd->add_option("--file", opts->file, "read the text (or ids) from a file");
  auto* batch = cmd->add_option("--batch", opts->batch,
                                "a JSON list of texts (or of id lists); prints a JSON list");
  text->excludes(file)->excludes(batch);
  file->excludes(batch);
  cmd->add_flag("--decode", opts->decode, "ids in, text out");
  cmd->add_flag("--skip-special", opts->skip_special, "--decode: leave special tokens out");
  cmd->add_flag("--add-special", opts->add_special,
                "encoding: the post-processor's special tokens too (Llama's BOS)");
  cmd->add_flag("--json", opts->json, "print JSON (ids; with --decode: text and stream pieces)");
  cmd->callback([opts, text, file, batch] {
    const Reporter reporter("tokenize");
    if (text->count() + file->count() + batch->count() == 0) {
      reporter.fail("give --text, --file or --batch");
    }
    const TokenizeReport r = reporter.check(gather_tokenize(*opts));
    std::cout << (opts->json ? tokenize_report_json(r) : tokenize_report_text(r)) << std::flush;
  });
}

}  // namespace ferry::cli

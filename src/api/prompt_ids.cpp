#include "api/prompt_ids.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "api/npy.h"
#include "format/strict_json.h"

namespace ferry::api {
namespace {

Error bad(const std::string& msg) {
  return make_error(ErrorCode::invalid_argument, "--prompt-ids: " + msg);
}

bool ends_with(const std::string& s, std::string_view suffix) {
  if (s.size() < suffix.size()) return false;
  std::string tail = s.substr(s.size() - suffix.size());
  std::transform(tail.begin(), tail.end(), tail.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return tail == suffix;
}

Result<std::vector<int64_t>> comma_list(const std::string& arg) {
  std::vector<int64_t> out;
  size_t pos = 0;
  while (pos <= arg.size()) {
    size_t end = arg.find(',', pos);
    if (end == std::string::npos) end = arg.size();
    std::string item = arg.substr(pos, end - pos);
    const auto first = item.find_first_not_of(" \t");
    const auto last = item.find_last_not_of(" \t");
    item = first == std::string::npos ? "" : item.substr(first, last - first + 1);
    if (item.empty() || item.size() > 10 ||
        !std::all_of(item.begin(), item.end(), [](unsigned char c) { return std::isdigit(c); })) {
      return bad("entry " + std::to_string(out.size()) + " ('" + item.substr(0, 20) +
                 "') is not a token id; give ids as 1,2,3 or a .npy / .json file");
    }
    out.push_back(std::stoll(item));
    if (out.size() > kMaxPromptIds)
      return bad("more than " + std::to_string(kMaxPromptIds) + " ids");
    pos = end + 1;
  }
  return out;
}

Result<std::vector<int64_t>> npy_ids(const std::string& path) {
  FERRY_ASSIGN_OR_RETURN(NpyArray a, read_npy(path, kMaxPromptIds));
  if (a.shape.size() > 2 || (a.shape.size() == 2 && a.shape[0] != 1)) {
    return bad(path + ": expected a list of ids or one row [1, n]");
  }
  std::vector<int64_t> out;
  for (size_t i = 0; i < a.values.size(); ++i) {
    const double v = a.values[i];
    if (!(v >= 0) || v != std::floor(v) || v > 2147483647.0) {
      return bad(path + ": entry " + std::to_string(i) + " is not a token id");
    }
    out.push_back(static_cast<int64_t>(v));
  }
  return out;
}

Result<std::vector<int64_t>> json_ids(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::io, path + ": cannot open");
  std::ostringstream s;
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    s.write(buf, in.gcount());
    if (static_cast<size_t>(s.tellp()) > 16 * kMaxPromptIds) return bad(path + ": too large");
  }
  FERRY_ASSIGN_OR_RETURN(nlohmann::json doc, strict_json::parse(s.str(), 4, path, "JSON"));
  if (!doc.is_array()) return bad(path + ": expected a JSON list of ids");
  if (doc.size() > kMaxPromptIds) return bad(path + ": more than " + std::to_string(kMaxPromptIds));
  std::vector<int64_t> out;
  for (size_t i = 0; i < doc.size(); ++i) {
    const auto& v = doc[i];
    if (!v.is_number_integer() || v.get<int64_t>() < 0) {
      return bad(path + ": entry " + std::to_string(i) + " is not a token id");
    }
    out.push_back(v.get<int64_t>());
  }
  return out;
}

}  // namespace

Result<std::vector<int32_t>> parse_prompt_ids(const std::string& arg, int64_t vocab_size) {
  std::vector<int64_t> ids;
  if (ends_with(arg, ".npy")) {
    FERRY_ASSIGN_OR_RETURN(ids, npy_ids(arg));
  } else if (ends_with(arg, ".json")) {
    FERRY_ASSIGN_OR_RETURN(ids, json_ids(arg));
  } else {
    FERRY_ASSIGN_OR_RETURN(ids, comma_list(arg));
  }
  if (ids.empty()) return bad("no ids in " + arg);
  std::vector<int32_t> out;
  out.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= vocab_size) {
      return bad("id " + std::to_string(ids[i]) + " (entry " + std::to_string(i) +
                 ") is outside the vocabulary of " + std::to_string(vocab_size));
    }
    out.push_back(static_cast<int32_t>(ids[i]));
  }
  return out;
}

}  // namespace ferry::api

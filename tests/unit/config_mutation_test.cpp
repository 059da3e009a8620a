// Mutated real configs: the parser never throws or crashes, and whatever it accepts is a config
// every later stage handles (validation, the weight table, a config.json round trip).
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "model/config_json.h"
#include "model/weights.h"

namespace ferry {
namespace {

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(FERRY_SOURCE_DIR) + "/tests/fixtures/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One random edit: a byte flipped, a span deleted or duplicated, or a number replaced by an
// extreme one.
std::string mutate(const std::string& s, std::mt19937_64& rng) {
  std::string out = s;
  auto pos = [&](size_t n) { return static_cast<size_t>(rng() % std::max<size_t>(n, 1)); };
  switch (rng() % 4) {
    case 0:
      out[pos(out.size())] = static_cast<char>(rng() & 0xff);
      break;
    case 1: {
      size_t a = pos(out.size());
      out.erase(a, 1 + pos(16));
      break;
    }
    case 2: {
      size_t a = pos(out.size());
      out.insert(a, out.substr(a, 1 + pos(32)));
      break;
    }
    default: {
      static const char* kNumbers[] = {
          "0",   "-1",   "1",     "3",  "4097", "1e9", "16777217", "9223372036854775807",
          "0.5", "null", "\"x\"", "[]", "{}"};
      size_t start = out.find_first_of("0123456789", pos(out.size()));
      if (start == std::string::npos) break;
      size_t end = out.find_first_not_of("0123456789.e-", start);
      out.replace(start, end - start, kNumbers[rng() % std::size(kNumbers)]);
      break;
    }
  }
  return out;
}

TEST(ConfigMutation, AcceptedConfigsAreUsableAndRejectedOnesSayWhy) {
  std::mt19937_64 rng(20261129);
  int accepted = 0, rejected = 0;
  for (const char* name : {"qwen3-8b.config.json", "qwen3-vl-8b-instruct.config.json",
                           "llama-2-7b.config.json", "alpamayo-r1-10b.config.json"}) {
    const std::string base = fixture(name);
    ASSERT_FALSE(base.empty()) << name;
    for (int i = 0; i < 1500; ++i) {
      std::string text = mutate(base, rng);
      if (rng() % 3 == 0) text = mutate(text, rng);
      Result<ModelConfig> r = make_error(ErrorCode::internal, "not run");
      ASSERT_NO_THROW(r = parse_config(text)) << text;
      if (!r.ok()) {
        ++rejected;
        EXPECT_EQ(r.error().message.rfind("config.json: ", 0), 0u) << r.error().message;
        continue;
      }
      ++accepted;
      EXPECT_TRUE(validate_config(*r).ok());
      auto w = describe_weights(*r);
      ASSERT_TRUE(w.ok()) << w.error().to_string() << "\n" << text;
      EXPECT_GT(w->total_params(), 0);
      auto again = parse_config(write_config(*r));
      ASSERT_TRUE(again.ok()) << again.error().to_string();
      EXPECT_EQ(*again, *r);
    }
  }
  // The mutations exercise both outcomes.
  EXPECT_GT(accepted, 100);
  EXPECT_GT(rejected, 100);
}

}  // namespace
}  // namespace ferry

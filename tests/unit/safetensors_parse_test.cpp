// In-memory parser checks that complement the corpus: messages, padding, order, limits.
#include <gtest/gtest.h>

#include <string>

#include "format/safetensors.h"

namespace ferry {
namespace {

std::vector<std::byte> image(const std::string& header, size_t data_bytes, size_t length = 0) {
  const uint64_t n = length ? length : header.size();
  std::vector<std::byte> out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>((n >> (8 * i)) & 0xFF));
  for (char c : header) out.push_back(static_cast<std::byte>(c));
  out.resize(out.size() + data_bytes, std::byte{0x5a});
  return out;
}

TEST(SafetensorsParse, SpanMismatchMessageNamesFileTensorAndExpectation) {
  auto img = image(R"({"x.weight":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,10]}})", 10);
  auto h = parse_safetensors(img, "model-00002-of-00005.safetensors");
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.error().code, ErrorCode::format);
  EXPECT_EQ(h.error().message,
            "model-00002-of-00005.safetensors: tensor 'x.weight': data_offsets [0, 10] span 10 "
            "bytes, expected 12 (BF16 [2, 3])");
}

TEST(SafetensorsParse, SortsByOffsetAndMakesOffsetsAbsolute) {
  const std::string header =
      R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},)"
      R"("a":{"dtype":"I16","shape":[2],"data_offsets":[0,4]},"__metadata__":{"k":"v"}})";
  auto h = parse_safetensors(image(header + "   ", 8), "f");
  ASSERT_TRUE(h.ok()) << h.error().message;
  ASSERT_EQ(h->tensors.size(), 2u);
  EXPECT_EQ(h->data_start, 8 + header.size() + 3);
  EXPECT_EQ(h->tensors[0].name, "a");
  EXPECT_EQ(h->tensors[0].begin, h->data_start);
  EXPECT_EQ(h->tensors[1].name, "b");
  EXPECT_EQ(h->tensors[1].begin, h->data_start + 4);
  EXPECT_EQ(h->tensors[1].bytes, 4u);
  EXPECT_EQ(h->metadata.at("k"), "v");
}

TEST(SafetensorsParse, ZeroSizeTensorsMayShareAnOffset) {
  const std::string header = R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},)"
                             R"("b":{"dtype":"U8","shape":[3,0],"data_offsets":[0,0]},)"
                             R"("c":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})";
  auto h = parse_safetensors(image(header, 2), "f");
  ASSERT_TRUE(h.ok()) << h.error().message;
  EXPECT_EQ(h->tensors.size(), 3u);
}

TEST(SafetensorsParse, ZeroDimensionDoesNotHideAnOverflowingShape) {
  // 2^40 * 2^40 * 0 elements is 0 bytes: a valid (empty) tensor, not an overflow.
  const std::string header =
      R"({"a":{"dtype":"U8","shape":[1099511627776,1099511627776,0],"data_offsets":[0,0]}})";
  auto h = parse_safetensors(image(header, 0), "f");
  ASSERT_TRUE(h.ok()) << h.error().message;
  EXPECT_EQ(h->tensors[0].numel(), 0);
}

TEST(SafetensorsParse, UnicodeNamesAndEscapesAreAccepted) {
  const std::string header =
      "{\"\xc3\xa9\\u00e9\xf0\x9f\x98\x80\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}"
      "}";
  auto h = parse_safetensors(image(header, 1), "f");
  ASSERT_TRUE(h.ok()) << h.error().message;
  EXPECT_EQ(h->tensors[0].name, "\xc3\xa9\xc3\xa9\xf0\x9f\x98\x80");
}

TEST(SafetensorsParse, HeaderLengthAtTheLimitIsOnlyBoundedByTheFile) {
  auto at_limit = parse_safetensors(image("{}", 0, 100'000'000), "f");
  ASSERT_FALSE(at_limit.ok());
  EXPECT_NE(at_limit.error().message.find("does not fit"), std::string::npos);
  auto over = parse_safetensors(image("{}", 0, 100'000'001), "f");
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.error().message.find("exceeds the limit"), std::string::npos);
}

TEST(SafetensorsParse, LoneSurrogateEscapeIsRejected) {
  auto h = parse_safetensors(
      image(R"({"\ud800":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1), "f");
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.error().message.find("not valid JSON"), std::string::npos);
}

TEST(SafetensorsIndexParse, AcceptsScalarMetadataAsStrings) {
  auto i = parse_safetensors_index(
      R"({"metadata":{"total_size":1234,"total_parameters":617,"x":"y","f":true,"n":null},)"
      R"("weight_map":{"b":"model-00002-of-00002.safetensors","a":"model-00001-of-00002.safetensors","c":"model-00001-of-00002.safetensors"}})",
      "idx");
  ASSERT_TRUE(i.ok()) << i.error().message;
  EXPECT_EQ(i->metadata.at("total_size"), "1234");
  EXPECT_EQ(i->metadata.at("x"), "y");
  EXPECT_EQ(i->metadata.at("f"), "true");
  EXPECT_EQ(i->weight_map.size(), 3u);
  ASSERT_EQ(i->shards.size(), 2u);
  EXPECT_EQ(i->shards[0], "model-00001-of-00002.safetensors");
  EXPECT_EQ(i->shards[1], "model-00002-of-00002.safetensors");
}

TEST(SafetensorsIndexParse, MetadataIsOptional) {
  auto i = parse_safetensors_index(R"({"weight_map":{"a":"x.safetensors"}})", "idx");
  ASSERT_TRUE(i.ok()) << i.error().message;
  EXPECT_TRUE(i->metadata.empty());
}

}  // namespace
}  // namespace ferry

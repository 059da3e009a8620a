// The input files of `ferry run` (api/run_inputs.h, api/npy.h) and the ego history built from
// user data (model/ego_history.h): what is accepted, and a one-line error for what is not.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "api/npy.h"
#include "api/run_inputs.h"
#include "scratch_dir.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

class Files : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& bytes) {
    const fs::path p = dir_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
  }
  testing::ScratchDir scratch_{"ferry_inputs"};
  fs::path dir_ = scratch_.path();
};

// A .npy of doubles with the header numpy writes.
std::string npy(const std::vector<double>& v, const std::string& shape, const char* descr = "<f8",
                int major = 1) {
  std::string header =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  const size_t prefix = major == 1 ? 10 : 12;
  header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  const size_t n = header.size();
  out += static_cast<char>(n & 0xff);
  out += static_cast<char>(n >> 8);
  if (major != 1) out += std::string(2, '\0');
  out += header;
  out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(double));
  return out;
}

std::string with_char(std::string s, size_t at, char c) {
  s[at] = c;
  return s;
}

std::vector<double> straight_history(double speed) {
  std::vector<double> xyz;
  for (int k = 0; k < 16; ++k) {
    xyz.insert(xyz.end(), {speed * 0.1 * (k - 15), 0.0, 0.0});
  }
  return xyz;
}

TEST_F(Files, NpyReadsNumpysLayouts) {
  const std::vector<double> v = {1.5, -2.0, 3.25, 4.0, 5.0, 6.0};
  auto a = parse_npy(npy(v, "(2, 3)"), "a.npy", 100);
  ASSERT_TRUE(a.ok()) << a.error().to_string();
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a->values, v);
  auto b = parse_npy(npy(v, "(6,)", "<f8", 2), "b.npy", 100);
  ASSERT_TRUE(b.ok()) << b.error().to_string();
  EXPECT_EQ(b->shape, (std::vector<int64_t>{6}));
  std::vector<double> f4_as_f8(3);
  const float f[6] = {1.0f, 2.0f, 3.0f, 4.0f, 0.5f, -1.0f};
  std::memcpy(f4_as_f8.data(), f, sizeof f);  // 24 bytes of six floats
  auto c = parse_npy(npy(f4_as_f8, "(1, 6)", "<f4"), "c.npy", 100);
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  EXPECT_EQ(c->values, (std::vector<double>{1, 2, 3, 4, 0.5, -1}));
}

TEST_F(Files, NpyRefusesWhatItCannotTrust) {
  const std::vector<double> v(6, 1.0);
  for (const auto& [bytes, why] : std::vector<std::pair<std::string, std::string>>{
           {"hello", "magic"},
           {npy(v, "(2, 4)"), "data bytes"},
           {npy(v, "(2, 3)", ">f8"), "dtype"},
           {npy(v, "(2, 3)", "<c16"), "dtype"},
           {npy(v, "(1000, 1000)"), "more than"},
           {with_char(npy(v, "(2, 3)"), 10, '['), "expected '{'"},
           {npy(v, "(2, 3)", "<f8", 7), "version"},
           {npy(v, "(2, 3)").substr(0, 40), "truncated"}}) {
    auto r = parse_npy(bytes, "x.npy", 1000);
    ASSERT_FALSE(r.ok()) << why;
    EXPECT_NE(r.error().message.find(why), std::string::npos) << r.error().message;
    EXPECT_EQ(r.error().message.find('\n'), std::string::npos);
  }
  std::string fortran = npy(v, "(2, 3)");
  const size_t at = fortran.find("False");
  for (size_t i = 0; i < 5; ++i) fortran[at + i] = "True "[i];
  EXPECT_FALSE(parse_npy(fortran, "f.npy", 100).ok());
}

TEST_F(Files, FramesFromAFolderInNameOrderOrFromAManifest) {
  for (const char* n : {"b.png", "a.jpg", "c.JPEG", ".hidden.png", "notes.txt"}) write(n, "x");
  auto set = api::read_frame_set(dir_.string(), 0);
  ASSERT_TRUE(set.ok()) << set.error().to_string();
  ASSERT_EQ(set->paths.size(), 3u);
  EXPECT_EQ(fs::path(set->paths[0]).filename(), "a.jpg");
  EXPECT_EQ(fs::path(set->paths[2]).filename(), "c.JPEG");
  auto wrong = api::read_frame_set(dir_.string(), 16);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().message.find("3 frames, the model takes 16"), std::string::npos);

  const std::string m = write("sub/frames.json",
                              R"({"frames": ["x.png", "/abs/y.png"], "front": 1,
                                  "camera": {"hfov_deg": 90, "height_m": 1.2}})");
  auto man = api::read_frame_set((dir_ / "sub").string(), 2);  // the folder's frames.json
  ASSERT_TRUE(man.ok()) << man.error().to_string();
  EXPECT_EQ(man->paths[0], (dir_ / "sub" / "x.png").string());
  EXPECT_EQ(man->paths[1], "/abs/y.png");
  EXPECT_EQ(man->front, 1);
  EXPECT_EQ(man->camera.hfov_deg, 90.0);
  EXPECT_EQ(man->camera.height_m, 1.2);
  EXPECT_EQ(man->camera.forward_m, CameraModel{}.forward_m);
  EXPECT_TRUE(api::read_frame_set(m, 2).ok());  // the manifest named directly

  for (const auto& [text, why] : std::vector<std::pair<std::string, std::string>>{
           {R"({"frames": ["a"], "extra": 1})", "unknown key"},
           {R"({"frames": ["a"], "front": 3})", "\"front\" is 3"},
           {R"({"frames": [1]})", "file names"},
           {R"({"frames": ["a"], "frames": ["b"]})", "duplicate"},
           {R"({"front": 0})", "no \"frames\""},
           {R"({"frames": ["a"], "camera": {"hfov_deg": 200}})", "hfov_deg"},
           {R"({"frames": ["a"], "camera": {"fov": 1}})", "unknown camera key"}}) {
    auto r = api::read_frame_set(write("bad.json", text), 0);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.error().message.find(why), std::string::npos) << r.error().message;
  }
  EXPECT_FALSE(api::read_frame_set((dir_ / "missing").string(), 0).ok());
  fs::create_directories(dir_ / "empty");
  EXPECT_FALSE(api::read_frame_set((dir_ / "empty").string(), 0).ok());
}

std::string json_points(const std::vector<double>& xyz) {
  std::string s = "[";
  for (size_t k = 0; k < xyz.size() / 3; ++k) {
    s += std::string(k ? "," : "") + "[" + std::to_string(xyz[3 * k]) + "," +
         std::to_string(xyz[3 * k + 1]) + "," + std::to_string(xyz[3 * k + 2]) + "]";
  }
  return s + "]";
}

TEST_F(Files, EgoHistoryFromJsonAndNpy) {
  const std::vector<double> xyz = straight_history(10.0);
  auto bare = api::read_ego_history(write("h.json", json_points(xyz)), "");
  ASSERT_TRUE(bare.ok()) << bare.error().to_string();
  EXPECT_FLOAT_EQ(bare->xyz[0][0], -15.0f);
  EXPECT_FLOAT_EQ(bare->xyz[15][0], 0.0f);
  for (float y : bare->yaw) EXPECT_FLOAT_EQ(y, 0.0f);  // straight ahead: headings 0

  std::string rot = "[";
  for (int k = 0; k < 16; ++k) {
    const double a = 0.01 * (15 - k);  // turning right into t0
    rot += std::string(k ? "," : "") + "[[" + std::to_string(std::cos(a)) + "," +
           std::to_string(-std::sin(a)) + ",0],[" + std::to_string(std::sin(a)) + "," +
           std::to_string(std::cos(a)) + ",0],[0,0,1]]";
  }
  rot += "]";
  auto with_rot = api::read_ego_history(
      write("r.json", "{\"xyz\": " + json_points(xyz) + ", \"rot\": " + rot + "}"), "");
  ASSERT_TRUE(with_rot.ok()) << with_rot.error().to_string();
  EXPECT_NEAR(with_rot->yaw[0], 0.15, 1e-5);
  EXPECT_NEAR(with_rot->yaw[15], 0.0, 1e-6);
  // The same rotations from their own file.
  auto rot_file = api::read_ego_history(write("p.json", json_points(xyz)), write("rot.json", rot));
  ASSERT_TRUE(rot_file.ok()) << rot_file.error().to_string();
  EXPECT_EQ(rot_file->yaw, with_rot->yaw);

  auto from_npy = api::read_ego_history(write("h.npy", npy(xyz, "(1, 1, 16, 3)")), "");
  ASSERT_TRUE(from_npy.ok()) << from_npy.error().to_string();
  EXPECT_EQ(from_npy->xyz, bare->xyz);
}

TEST_F(Files, EgoHistoryErrorsNameTheProblem) {
  std::vector<double> nan = straight_history(5.0);
  nan[3 * 4 + 1] = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> far = straight_history(5.0);
  far[0] = 5000.0;
  for (const auto& [path, why] : std::vector<std::pair<std::string, std::string>>{
           {write("nan.npy", npy(nan, "(16, 3)")), "point 4 has a non-finite position"},
           {write("far.npy", npy(far, "(16, 3)")), "point 0 has a position beyond 1000"},
           {write("short.npy", npy(std::vector<double>(45, 0.0), "(15, 3)")), "[..., 16, 3]"},
           {write("s.json", "[[0,0,0]]"), "array of 16 arrays"},
           {write("k.json", R"({"xyz": []})"), "\"xyz\" must be an array of 16"},
           {write("u.json", R"({"speed": 3})"), "unknown key"},
           {write("n.json", "7"), "JSON object or an array"},
           {write("both.json", "{\"xyz\": " + json_points(straight_history(1.0)) +
                                   ", \"yaw\": [0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0], "
                                   "\"rot\": [[[1,0,0],[0,1,0],[0,0,1]]]}"),
            "\"rot\""}}) {
    auto r = api::read_ego_history(path, "");
    ASSERT_FALSE(r.ok()) << path;
    EXPECT_NE(r.error().message.find(why), std::string::npos) << r.error().message;
    EXPECT_EQ(r.error().message.find('\n'), std::string::npos);
  }
}

TEST(EgoHistoryFrom, HeadingsFromMotionWhenNoneAreGiven) {
  // A quarter circle of radius 20 m ending at the origin heading +x: headings rise to 0.
  std::vector<double> xyz;
  const double r = 20.0;
  for (int k = 0; k < 16; ++k) {
    const double a = -0.05 * (15 - k);  // radians before t0
    xyz.insert(xyz.end(), {r * std::sin(a), r * (1 - std::cos(a)), 0.0});
  }
  auto h = ego_history_from(xyz, {}, {});
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  for (int k = 1; k < 15; ++k) EXPECT_NEAR(h->yaw[static_cast<size_t>(k)], -0.05 * (15 - k), 1e-3);
  EXPECT_EQ(h->yaw[15], 0.0f);
  // Standing still: headings 0.
  auto still = ego_history_from(std::vector<double>(48, 0.0), {}, {});
  ASSERT_TRUE(still.ok());
  for (float y : still->yaw) EXPECT_EQ(y, 0.0f);
  EXPECT_FALSE(
      ego_history_from(xyz, std::vector<double>(144, 0.0), std::vector<double>(16, 0.0)).ok());
}

}  // namespace
}  // namespace ferry

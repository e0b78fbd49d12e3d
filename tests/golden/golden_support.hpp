// Shared by the golden tests: compare a text with tests/golden/data/<name>.txt, or rewrite
// the file when SPINDLE_UPDATE_GOLDEN=1.
#pragma once

#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace golden {

// The first line where two texts differ, for a readable failure.
inline std::string first_difference(const std::string& a, const std::string& b) {
  std::istringstream x(a), y(b);
  std::string la, lb;
  for (int line = 1;; ++line) {
    bool ga = static_cast<bool>(std::getline(x, la)), gb = static_cast<bool>(std::getline(y, lb));
    if (!ga && !gb) return "identical";
    if (la != lb || ga != gb)
      return "line " + std::to_string(line) + ":\n  expected: " + (gb ? lb : "<end>") + "\n  actual:   " + (ga ? la : "<end>");
  }
}

inline void check_golden(const std::string& name, const std::string& actual) {
  std::string path = std::string(SPINDLE_TEST_SOURCE_DIR) + "/golden/data/" + name + ".txt";
  const char* update = std::getenv("SPINDLE_UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    std::ofstream(path) << actual;
    WARN("updated " << path);
    return;
  }
  std::ifstream in(path);
  INFO("golden file " << path << " (regenerate with SPINDLE_UPDATE_GOLDEN=1)");
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  std::string expected = ss.str();
  INFO(first_difference(actual, expected));
  CHECK(actual == expected);
}

}  // namespace golden

// Where test data lives: the golden vectors copied into the repository, and a scratch folder.
#pragma once

#include <filesystem>
#include <string>

namespace gridfeed::testing {

// tests/golden/megatron in the source tree (set by CMake).
inline std::string GoldenDir() { return GRIDFEED_GOLDEN_DIR; }

// A fresh, empty folder for one test, removed and recreated on each call.
inline std::string ScratchDir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / "gridfeed_test" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

}  // namespace gridfeed::testing

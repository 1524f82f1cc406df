// What `gridfeed bench` measured, and its two renderings: a table for people and one JSON
// object for tools (keys documented in README, "gridfeed bench"). Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace gridfeed::app {

// World rank 0's table build, measured first: peak RSS is a high-water mark.
struct BuildFacts {
  double build_seconds = 0;        // the pipeline's Build(): read the stores, build the tables
  double image_write_seconds = 0;  // writing the tables' image into fresh memory
  uint64_t table_bytes = 0;        // the tables' arrays
  uint64_t image_bytes = 0;        // what the feeder broadcasts and every node holds once
  uint64_t rss_before_bytes = 0;   // resident set when the build started
  uint64_t peak_rss_bytes = 0;     // high-water mark of the resident set, build + image
  bool peak_since_build = false;   // the mark was reset at the build (else: process lifetime)
};

// One reader (world rank 0, one thread) over consecutive positions of the split, then the
// memcpy floor over the very same positions.
struct AssemblyFacts {
  int64_t samples = 0;            // read in order from position 0, wrapping around the split
  int64_t split_length = 0;       // positions in the split
  int64_t tokens_per_sample = 0;  // copied by the floor
  double read_seconds = 0;
  double floor_seconds = 0;
};

// Under mpirun: the feeder's start-up (Feeder::Open), from a common barrier.
struct StartupFacts {
  double seconds = 0;            // until the last rank is ready
  double build_seconds = 0;      // world rank 0's build + writing the image into its window
  double broadcast_seconds = 0;  // from then until the slowest rank holds the image
  double open_seconds = 0;       // opening the token stores, slowest rank
  double cpu_rank0_seconds = 0, cpu_others_seconds = 0;  // user + system, others summed
};

struct BenchReport {
  std::string pipeline;  // megatron, olmo or mixture
  std::string split;
  int64_t seq_length = 0;
  int ranks = 1;
  BuildFacts build;
  AssemblyFacts assembly;
  std::optional<StartupFacts> startup;  // with more than one rank
};

std::string ReportText(const BenchReport& r);
// One line of JSON (rates and ratios derived here; null where a time is 0).
std::string ReportJson(const BenchReport& r);

}  // namespace gridfeed::app

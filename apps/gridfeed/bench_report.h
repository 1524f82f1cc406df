// What `gridfeed bench` measured, and its two renderings: a table for people and one JSON
// object for tools (keys documented in README, "gridfeed bench"). Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gridfeed/core/status.h"
#include "gridfeed/order/pipeline.h"

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
  uint64_t image_digest = 0;       // order::ImageDigest of the whole image
  // Per-section costs for a projection of many producers (order::BuildPhases): the build's
  // phases on `threads` cores, the blend's bytes, the index bytes of each store a build is
  // divided by (empty: one producer builds it all), and a node image's bytes (fixed, per held
  // sample) and the seconds of making it per held sample.
  order::BuildPhases phases;
  std::vector<uint64_t> store_index_bytes;
  uint64_t node_image_fixed_bytes = 0;
  double node_image_bytes_per_sample = 0;
  double node_image_seconds_per_sample = 0;  // making that node image, per held sample
  int64_t split_length = 0;
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
  // The feeder's node windows (parallel::SharedImage), as allocated in this start-up: how many
  // (one per node with readers; simulated nodes with --testing-ranks-per-node), and the bytes
  // of the largest (Feeder::table_bytes_on_node(), the maximum over the ranks).
  int nodes = 0;
  uint64_t node_window_bytes = 0;
  int readers = 0;  // reader ranks in all (the ranks holding a window's view), summed over nodes
  // Who built the tables (--table-producers), the largest peak resident set of any rank during
  // the start-up (each rank's mark reset before it), and the digest of the image the nodes hold
  // (feed::StartupTimes::image_digest; 0 where none was taken).
  int producers = 1;
  int64_t max_peak_rss_bytes = -1;
  uint64_t image_digest = 0;
};

// A projection of the start-up onto another grid (--project-nodes N --project-dp D), from this
// run's measured start-up; not a measurement. The run's TP, PP and CP are kept. Formulas
// (M = the run's nodes, at least 2, so that a broadcast between leaders was measured):
//   readers          = D * (this run's readers / this run's DP)
//   readers_per_node = ceil(readers / N)
//   node_window      = this run's largest node window (the whole image with
//                      --node-window full; a node window's share is not rescaled)
//   plain_copy       = node_window * readers_per_node (one private copy per reader instead)
//   build            = this run's build + image write (world rank 0 alone, whatever N)
//   broadcast        = this run's broadcast * ceil(log2 N) / ceil(log2 M) (a binomial tree:
//                      ceil(log2 nodes) rounds of the whole image; the rate is this run's links)
//   open             = this run's open (every reader opens its stores at once)
//   seconds          = build + broadcast + open
// With an order whose build is divided (build.store_index_bytes not empty), `producers` adds a
// projection of the start-up by N producers with node windows (one node: world rank 0 alone,
// the whole image; ProducerProjection)
// from the per-section costs world rank 0 measured in process (BuildFacts), at `scale` times
// the corpus (documents and samples) and `cores` per node.
struct ProducerProjection {
  int64_t producers = 0;
  double scale = 1, cores_per_node = 0;
  double share = 1;                  // the largest producer's part of the index bytes
  uint64_t node_window_bytes = 0;    // the largest node's window (world rank 0's)
  uint64_t producer_peak_bytes = 0;  // the largest producer's peak resident set
  double build_seconds = 0;          // its share of the tables beside the blend
  double sections_seconds = 0;       // sections, exchange, assembly and window write
  double open_seconds = 0;           // the readers' store open, as measured
  double seconds = 0;
};
struct ProjectionFacts {
  int64_t nodes = 0, data_parallel_size = 0;
  int64_t readers = 0, readers_per_node = 0;
  uint64_t node_window_bytes = 0, plain_copy_bytes_per_node = 0;
  double build_seconds = 0, broadcast_seconds = 0, open_seconds = 0, seconds = 0;
  std::optional<ProducerProjection> producers;
};

struct BenchReport {
  std::string pipeline;  // megatron, olmo or mixture
  std::string split;
  int64_t seq_length = 0;
  int ranks = 1;
  BuildFacts build;
  AssemblyFacts assembly;
  int64_t data_parallel_size = 1;
  std::optional<StartupFacts> startup;        // with more than one rank
  std::optional<ProjectionFacts> projection;  // with --project-nodes/--project-dp
};

// The projection of `r`'s start-up (ProjectionFacts' formulas) onto `nodes` nodes at DP `dp`.
// FailedPrecondition without a start-up measured between at least 2 nodes.
// `scale`, `cores`: ProducerProjection's (cores 0: the measuring process's build threads).
Result<ProjectionFacts> Project(const BenchReport& r, int64_t nodes, int64_t dp, double scale = 1,
                                double cores = 0);
// The projection of a start-up by `nodes` producers, one per node (ProducerProjection), from
// `b`'s per-section costs; `open_seconds`: the readers' open to add.
ProducerProjection ProjectProducers(const BuildFacts& b, int64_t nodes, double scale, double cores,
                                    double open_seconds);

std::string ReportText(const BenchReport& r);
// One line of JSON (rates and ratios derived here; null where a time is 0).
std::string ReportJson(const BenchReport& r);

}  // namespace gridfeed::app

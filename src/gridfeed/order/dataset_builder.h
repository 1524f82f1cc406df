// The datasets of every split, built the way Megatron's BlendedMegatronDatasetBuilder builds
// GPT datasets: one prefix, weighted blends, unweighted blends (inferred weights or
// exhaustive), per-split data paths. The token stores are opened on several threads, the
// mid-level datasets built on several threads, and a weighted blend's table (which needs only
// its weights and size) on a thread of its own beside both.
//
// Differences from Megatron, each an error at build time instead of a hang or a late crash:
// an empty split asked for samples, a blend source that runs short (with the source, the
// shortfall and the flag to change). More than 32767 sources and int64 sample counts work.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gridfeed/config/options.h"
#include "gridfeed/core/status.h"
#include "gridfeed/io/indexed_dataset.h"
#include "gridfeed/order/blend.h"
#include "gridfeed/order/gpt_tables.h"
#include "gridfeed/order/split.h"

namespace gridfeed::order {

struct MidDataset;

struct DatasetConfig {
  std::optional<std::vector<std::string>> data_path;  // --data-path tokens
  std::array<std::optional<std::vector<std::string>>, 3>
      split_paths;                   // --train/valid/test-data-path
  std::optional<std::string> split;  // --split; none with --data-path = legacy "969, 30, 1"
  std::array<std::optional<int64_t>, 3> sizes;  // samples per split; none = one epoch / exhaustive
  uint32_t seed = 1234;
  int64_t seq_length = 0;
  int64_t eod_id = 0;
  int64_t pad_id = -1;
  bool add_extra_token = true;
  bool drop_last_partial_validation_sequence = true;
  double mid_level_dataset_surplus = 0.005;
  int threads = 0;  // 0 = all cores
  // --per-dataset-sequences-path: the counts each opened index must hold (null: none given);
  // a prefix without an entry or with other counts is an error naming the file.
  std::shared_ptr<const config::SequencesPerDataset> sequences_per_dataset;
  std::string sequences_path;  // the file, for messages
  // Also computes each opened store's index XXH3 (io::IndexedDataset::index_xxh3, remembered):
  // for a caller that names the data by them. On a thread beside the tables where a core is
  // free, else from the bytes each index check reads.
  bool digest_indexes = false;
  // Called on the builder thread that built it as each mid-level dataset's tables are done
  // (split, its place among the split's datasets), before BuildDatasets returns: for a writer
  // that overlaps writing with the rest of the build. Called concurrently from several
  // threads; an error it returns fails the build with the dataset named. With one store, the
  // tables it sees may come from an index whose full check (beside the tables) then fails
  // the build: publish nothing before BuildDatasets returns Ok. It may take the tables'
  // contents (a writer gives their pages back as it writes them) and then sets
  // `tables.contents_released`: only their sizes and scalars are read after it.
  std::function<Status(int split, size_t k, MidDataset& m)> on_mid_built;
  // Called as each table of a mid-level dataset is final (GptTablesConfig::table_final), before
  // its on_mid_built, on whichever thread finished it; concurrently from several threads.
  // `tables` is valid during the call only; the table's entries stay at their address until
  // on_mid_built (then in `m.tables`), which must be set too: it is where a writer that
  // started here waits for its write.
  std::function<void(int split, size_t k, GptTable table, const GptTables& tables, bool read_after)>
      on_table_final;
  // One producer's share of a build by several (order/megatron/node_sections.h): only the stores
  // it names true are opened and their mid-level tables built; the others' mids are laid out
  // without a store (dataset null, begin = end = 0, no tables) and their checks are their own
  // producers'. Every blended split must then be weighted (its table needs no mid's size):
  // InvalidArgument otherwise. Null: every store (one producer).
  std::function<bool(const std::string& prefix)> builds_store;
};

struct MidDataset {
  std::string prefix;
  Split split = Split::kTrain;
  int64_t begin = 0, end = 0;  // sequence ids of the split
  std::optional<int64_t> num_samples_requested;
  int64_t seq_length = 0;  // tokens per sample; 0 = the config's (a mixture stage's own length)
  GptTables tables;
  GptTablesTimes times;
  std::shared_ptr<const io::IndexedDataset> dataset;
};

struct SplitDataset {
  bool blended = false;
  std::vector<MidDataset> mids;
  std::vector<double> weights;  // the BlendedDataset's weights (raw lengths when exhaustive)
  std::optional<int64_t> size;  // none = exhaustive
  BlendTables blend;
  int64_t length = 0;  // positions are read through order::TableView (table_view.h)
};

struct BuiltDatasets {
  std::array<std::optional<SplitDataset>, 3> splits;
  SplitMatrix split_matrix;
  int64_t pad_id_used = -1;
  std::vector<std::string> warnings;
  // Wall seconds of each phase; a weighted blend is built on its own thread beside the open and
  // the tables (seconds_blend_build: its own time), so seconds_blend is the rest. With one
  // store the open checks the index's structure only and its full check runs beside the
  // tables (seconds_checks_beside: its own time, inside seconds_tables); else 0.
  double seconds_open = 0, seconds_tables = 0, seconds_blend = 0, seconds_blend_build = 0;
  double seconds_checks_beside = 0;
};

// Builds the GPT tables of every mid-level dataset laid out in `splits` (prefix, range,
// dataset and num_samples_requested set), several at once (c.threads). `drawer_idle`, if set,
// is called (from any thread, possibly more than once) when a build's drawing thread has done
// its own work (GptTablesConfig::drawer_idle).
Status BuildMidTables(std::array<std::optional<SplitDataset>, 3>& splits, const DatasetConfig& c,
                      const std::function<void()>& drawer_idle = {});

// Opens the token stores (relative paths from the working directory) and builds everything.
// An error is the first in the order a serial build meets it (blend weights before stores,
// stores in the blend's order); every thread it started has ended when it returns.
Result<BuiltDatasets> BuildDatasets(const DatasetConfig& config);

}  // namespace gridfeed::order

// OLMo's data order as a Pipeline (order/pipeline.h): token files (io/olmo_token_files.h) ->
// OLMo's global order for each epoch (olmo_order.h, numpy's PCG64 shuffle) -> an image of the
// permutations -> instances as MemMapDataset returns them, in the order each DP rank's
// DataLoader yields them.
//
// Positions: the feeder walks Megatron's single read schedule from --consumed-samples c (DP
// rank r reads micro-batch slots [r*mbs, (r+1)*mbs) of every mbs*DP positions after c). An OLMo
// position p >= c is laid out so that walk yields, on DP rank r, what OLMo's DataLoader on rank
// r yields when training starts there: its i-th instance (i = k*mbs + j for p - c = k*mbs*DP +
// r*mbs + j) is the i-th of the epochs' streams concatenated. The first is OLMo's restart at
// start_index s (c = whole epochs + s): g[s:][r::DP] dealt to the workers anew (s need not be
// a multiple of DP; rank r then reads what rank (r + s) mod DP would have); the later ones are
// reshuffled with seed + epoch + 1 from start index 0, as OLMo's trainer does. Full device
// batches come out in stream order; a partial tail in the order the configured DataLoader
// workers emit it; with drop_last it is dropped. The micro-batch is OLMo's chunk of a device
// batch (config::OlmoFeederMicroBatch). The order therefore depends on DP size, global and
// micro-batch size, workers and c: they are part of the data facts (fingerprint). A resumed
// run (a gridfeed checkpoint) continues the order of the run that saved it. Thread safe where
// pipeline.h says so.
//
// Many producers of the whole image (--table-producers; Pipeline::WholeShareUnits): the units
// are the plan's epochs (cost: the instances each shuffles; none with one epoch), a share
// shuffles only its epochs, its sections are those epochs' permutations (index, length,
// values), and the assembly takes every epoch from exactly one producer into the very image
// one process's Build() writes. The shares' facts (the order's shape and the data facts) must
// agree: a producer whose token files differ is refused when they are adopted.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "gridfeed/config/options.h"
#include "gridfeed/core/status.h"
#include "gridfeed/io/olmo_token_files.h"
#include "gridfeed/order/olmo/olmo_instance.h"
#include "gridfeed/order/olmo/olmo_order.h"
#include "gridfeed/order/olmo/pcg64.h"
#include "gridfeed/order/pipeline.h"

namespace gridfeed::order {

// The geometry of an OLMo order, from the options and the files' sizes.
struct OlmoPlan {
  std::vector<io::OlmoFileFacts> files;
  std::vector<int> file_source;  // source (data.datasets label, else path) of each file
  std::vector<std::string> source_names;
  int64_t instances = 0;  // N
  int64_t world_size = 1, global_batch_size = 0, micro_batch_size = 1, num_workers = 0;
  bool drop_last = false;
  OlmoSizes sizes;
  int64_t epoch_stream = 0;  // instances each rank reads per epoch (drop_last: full batches)
  int64_t first_epoch = 0;
  int64_t epochs = 1;  // epochs the tables hold (enough for --train-iters)
  SeedWords seed;      // the train seed (data.seed or seed); epoch e shuffles with seed + e
  // Where reading starts (--consumed-samples): OLMo's restart, epoch offset restart_epoch at
  // start_index (instances of that epoch's global order already consumed).
  int64_t restart = 0, restart_epoch = 0, start_index = 0;
  int64_t length = 0;  // positions: the start + whole micro-steps (mbs x DP) over the epochs
};

// Bytes per token of the configured --olmo-memmap-dtype (2 or 4).
int OlmoTokenSize(const config::DataOptions& options);
// dataset[i]'s options from the --olmo-* rows, --pad-id and --eod-id.
OlmoItemOptions OlmoItemOptionsOf(const config::DataOptions& options);

// DP size from --data-parallel-size (when 0, in offline tools: global batch /
// device_train_batch_size when that is given, else 1), the batch sizes as resolved.
// InvalidArgument names the flag or file; FailedPrecondition for an empty order (where OLMo
// crashes writing an empty global_indices.npy).
Result<OlmoPlan> PlanOlmoOrder(const config::JobOptions& options);

// Where position p is read: epoch offset e (epoch first_epoch + e) and the index in that
// epoch's global order.
struct OlmoSlot {
  int64_t epoch = 0;
  int64_t global_index = 0;
};
class OlmoPositions {
 public:
  explicit OlmoPositions(const OlmoPlan& plan);
  OlmoSlot Locate(int64_t position) const;

 private:
  int64_t world_size_, micro_batch_size_, epoch_stream_, device_batch_, full_rows_;
  std::vector<int64_t> tail_;  // OlmoLoaderTail: stream indices of the partial tail
  int64_t restart_, restart_epoch_, start_index_, total_size_;
  bool drop_last_;
  // (stream length, its OlmoLoaderTail) for the two lengths of the restarted epoch's streams.
  std::vector<std::pair<int64_t, std::vector<int64_t>>> restart_tails_;
};

std::unique_ptr<Pipeline> MakeOlmoPipeline(const config::JobOptions& options);

}  // namespace gridfeed::order

// OLMo's data order as a Pipeline (order/pipeline.h): token files (io/olmo_token_files.h) ->
// OLMo's global order for each epoch (olmo_order.h, numpy's PCG64 shuffle) -> an image of the
// permutations -> instances as MemMapDataset returns them, in the order each DP rank's
// DataLoader yields them.
//
// Positions: the feeder walks Megatron's single read schedule (DP rank r reads micro-batch
// slots [r*mbs, (r+1)*mbs) of every mbs*DP positions). An OLMo position p is laid out so that
// walk yields, on DP rank r, rank r's DataLoader stream in order: its i-th instance (i = k*mbs
// + j for p = k*mbs*DP + r*mbs + j) is the i-th of the epochs' streams concatenated (epoch
// `olmo-epoch` first, then reshuffled with seed + epoch + 1, start index 0, as OLMo's trainer
// does). Full device batches come out in stream order; a partial tail in the order the
// configured DataLoader workers emit it; with drop_last it is dropped. The order therefore
// depends on DP size, global and micro-batch size and workers: they are part of the data facts
// (fingerprint). Thread safe where pipeline.h says so.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "gridfeed/config/options.h"
#include "gridfeed/core/status.h"
#include "gridfeed/io/olmo_token_files.h"
#include "gridfeed/order/olmo_instance.h"
#include "gridfeed/order/olmo_order.h"
#include "gridfeed/order/pcg64.h"
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
  int64_t length = 0;  // positions: whole micro-steps (mbs x DP) over `epochs` epochs
};

// Bytes per token of the configured --olmo-memmap-dtype (2 or 4).
int OlmoTokenSize(const config::DataOptions& options);
// dataset[i]'s options from the --olmo-* rows, --pad-id and --eod-id.
OlmoItemOptions OlmoItemOptionsOf(const config::DataOptions& options);

// DP size from --data-parallel-size (1 when 0: offline tools), the batch sizes as resolved.
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
  int64_t world_size_, micro_batch_size_, epoch_stream_, full_rows_;
  std::vector<int64_t> tail_;  // OlmoLoaderTail: stream indices of the partial tail
};

std::unique_ptr<Pipeline> MakeOlmoPipeline(const config::JobOptions& options);

}  // namespace gridfeed::order

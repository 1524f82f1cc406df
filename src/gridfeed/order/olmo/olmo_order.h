// OLMo's global order and what each rank, DataLoader worker and batch gets, exactly as
// olmo/data/iterable_dataset.py with torch's DataLoader (see the design note, sections 4-5).
// Pure functions of their arguments; thread safe.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "gridfeed/core/status.h"
#include "gridfeed/order/olmo/pcg64.h"

namespace gridfeed::order {

struct OlmoSizes {
  int64_t num_samples = 0;  // per rank
  int64_t total_size = 0;   // num_samples * world_size
  int64_t device_batch_size = 0;
};
// drop_last with N % W != 0: floor(N / W), else ceil(N / W). InvalidArgument when W < 1, the
// global batch size is not a positive multiple of W, or N >= 2^32 - 1 (OLMo's assert).
Result<OlmoSizes> OlmoSizesFor(int64_t dataset_len, int64_t world_size, int64_t global_batch_size,
                               bool drop_last);

// FailedPrecondition when total_size is 0 (N = 0, or drop_last with N < W): OLMo crashes there
// writing its work_dir file ("cannot mmap an empty file"); gridfeed says why instead.
Status OlmoCheckOrderNotEmpty(int64_t dataset_len, int64_t world_size, const OlmoSizes& sizes);

// _build_global_indices: arange(N, uint32), shuffled with seed + epoch when `shuffle`, then
// padded by repeating the shuffled head (out[k] = idx[k mod N]) or truncated to total_size.
// `seed_plus_epoch` is the shuffle seed (AddToSeed(seed, epoch)).
std::vector<uint32_t> OlmoGlobalIndices(int64_t dataset_len, const SeedWords& seed_plus_epoch,
                                        bool shuffle, const OlmoSizes& sizes);
// The same written into `out` (total_size entries), for callers that own the memory.
void OlmoGlobalIndicesInto(int64_t dataset_len, const SeedWords& seed_plus_epoch, bool shuffle,
                           std::span<uint32_t> out);

// What rank `rank` iterates in the main process: g[:max_examples] (max_examples < 0 = none),
// then [start_index:], then every world_size-th entry starting at rank.
std::vector<int64_t> OlmoRankStream(std::span<const uint32_t> global, int64_t rank,
                                    int64_t world_size, int64_t start_index, int64_t max_examples);

// What DataLoader worker `worker` of `num_workers` (>= 1) yields from a rank stream: whole
// device batches worker, worker+K, ... then the leftovers stream[T + worker :: K].
std::vector<int64_t> OlmoWorkerStream(std::span<const int64_t> rank_stream,
                                      int64_t device_batch_size, int64_t worker,
                                      int64_t num_workers);

// One batch the DataLoader emits: the worker that made it (-1: main process) and its indices.
struct OlmoLoaderBatch {
  int64_t worker = -1;
  std::vector<int64_t> index;
};
// The batches a rank's DataLoader emits, in order (num_workers 0: the main process), partial
// batches dropped with drop_last (per worker).
std::vector<OlmoLoaderBatch> OlmoLoaderBatches(std::span<const int64_t> rank_stream,
                                               int64_t device_batch_size, int64_t num_workers,
                                               bool drop_last);

// The DataLoader's order without materialising the stream: for a rank stream of `stream_len`
// entries, the positions (indices into the stream) that the emitted batches hold after the
// last full device batch, in emission order. Full batches come out in stream order for every
// num_workers; only this tail depends on it. Empty with drop_last.
std::vector<int64_t> OlmoLoaderTail(int64_t stream_len, int64_t device_batch_size,
                                    int64_t num_workers, bool drop_last);

}  // namespace gridfeed::order

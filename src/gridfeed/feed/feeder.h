// Feeder: the public API a trainer uses. One object per rank.
//
//   auto feeder = gridfeed::feed::Feeder::Open(options, MPI_COMM_WORLD);   // collective
//   for (...) { auto mb = (*feeder)->Next(); ... }                          // per micro-batch
//
// Open (collective on `comm`): ranks agree on the options' fingerprint, world rank 0 builds
// every table and broadcasts it (status first) into node-shared memory of the reader ranks
// (tp_rank 0 of the first and last pipeline stage), readers open the token files (a failure on
// any reader is the same error on every rank) and start a prefetch thread.
// Next (collective on the rank's TP group; no communication on middle pipeline stages):
// readers hand over the next prefetched micro-batch of their DP rank and broadcast to their
// TP group what its stage needs; CP ranks get their zigzag chunks. Every rank of the job
// returns OutOfRange at the same step when the split runs out.
// Not thread safe: call from the trainer's thread (the MPI calls happen there).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "gridfeed/config/data_options.h"
#include "gridfeed/core/status.h"
#include "gridfeed/dist/grid.h"
#include "gridfeed/order/sample_record.h"
#include "gridfeed/order/split.h"

namespace gridfeed::feed {

struct FeederOptions {
  config::DataOptions data;
  dist::GridSizes grid;
  int64_t micro_batch_size = 1;
  int64_t global_batch_size = 0;  // 0 = micro_batch_size x DP
  int64_t consumed_samples = 0;   // start as if resumed here (a global sample count)
  order::Split split = order::Split::kTrain;
  int prefetch_depth = 4;  // micro-batches assembled ahead on each reader
  // TP broadcast on the GPU: TP rank 0 copies the payload to its device asynchronously and
  // NCCL broadcasts it inside the TP group; MicroBatch::device_payload then holds it on every
  // TP rank (host fields stay empty). Needs CUDA + NCCL and a GPU per rank; if any rank lacks
  // one, Open fails the same way everywhere. Off: MPI broadcast of host memory.
  bool device_broadcast = false;
  // Resume from a gridfeed checkpoint (HDF5): the cursor replaces consumed_samples. Refused when
  // the fingerprint differs (the message names the field); a changed DP/TP/PP/CP size is fine
  // (the cursor is global), a changed global batch size only with allow_batch_size_change.
  std::string resume_from;
  bool allow_batch_size_change = false;
  int testing_fail_open_rank = -1;  // tests only: this world rank fails to open its token files
};

// What one rank receives for one micro-batch. A field is empty when this rank's stage does
// not get it. Shapes: [mbs, local_seq_length] (attention_mask [mbs, 1, local, seq_length]).
struct MicroBatch {
  bool has_inputs = false;   // tokens, position_ids (+ attention_mask): first stage
  bool has_targets = false;  // labels, loss_mask: last stage
  int64_t micro_batch_size = 0;
  int64_t seq_length = 0;
  int64_t local_seq_length = 0;         // seq_length / cp
  std::vector<int64_t> sample_indices;  // positions in the split's top-level dataset
  std::vector<int64_t> tokens, position_ids, labels;
  std::vector<float> loss_mask;
  std::vector<uint8_t> attention_mask;  // 1 = masked out; only with create_attention_mask
  // On the first-stage reader of CP rank 0 (one per DP rank): what each sample is, for the
  // ledger. Empty elsewhere.
  std::vector<order::SampleRecord> records;
  // Device path only: the packed payload in this rank's GPU memory (see feed/payload.h for
  // the layout); valid until the next Next().
  const void* device_payload = nullptr;
  size_t device_payload_bytes = 0;
  bool empty() const { return !has_inputs && !has_targets; }
  // XXH3-64 over every host field (peers that received the same data agree on it).
  uint64_t Digest() const;
};

struct StartupTimes {
  double build_seconds = 0, broadcast_seconds = 0, open_seconds = 0;
};

class Feeder {
 public:
  static Result<std::unique_ptr<Feeder>> Open(const FeederOptions& options, MPI_Comm comm);
  ~Feeder();

  Result<MicroBatch> Next();
  // Global samples consumed (the cursor a checkpoint stores), after the last Next().
  int64_t consumed_samples() const { return consumed_; }
  const dist::Grid& grid() const;
  const StartupTimes& startup() const { return startup_; }
  int64_t num_microbatches_per_global_batch() const;
  int64_t split_length() const { return split_length_; }
  // The iteration stored in the checkpoint resumed from (0 for a fresh start).
  int64_t resumed_iteration() const { return resumed_iteration_; }
  const std::string& fingerprint() const { return fingerprint_; }
  const std::string& canonical_config() const { return canonical_config_; }
  // Collective on the world: world rank 0 writes the cursor (iteration, consumed samples,
  // per-source counts, grid and batch sizes) atomically; every rank returns its status.
  Status SaveCheckpoint(const std::string& path, int64_t iteration) const;
  // Table bytes held on this node (0 off the readers), for memory reports.
  size_t table_bytes_on_node() const;
  // Reader ranks sharing this node's copy (what a plain copy per rank would multiply).
  int readers_on_node() const;
  bool holds_tables() const;
  // Token stores this rank has open (0 off the readers).
  int num_open_token_files() const;

 private:
  struct Impl;
  Feeder() = default;
  static Status OpenDevicePath(Impl& im);
  std::unique_ptr<Impl> impl_;
  int64_t consumed_ = 0;
  int64_t split_length_ = 0;
  int64_t resumed_iteration_ = 0;
  std::string canonical_config_, fingerprint_;
  StartupTimes startup_;
};

}  // namespace gridfeed::feed

// Feeder: the public API a trainer uses. One object per rank.
//
//   auto feeder = gridfeed::feed::Feeder::Open(options, MPI_COMM_WORLD);   // collective
//   for (...) { auto mb = (*feeder)->Next(); ... }                          // per micro-batch
//   (*feeder)->SaveCheckpoint(path, iteration);                             // collective
//   feeder->reset();                                                        // collective
//
// Open (collective on `comm`): ranks agree on every option, world rank 0 builds the data
// order's tables through its pipeline (order/pipeline.h) and broadcasts their image (status
// first) into node-shared memory of the reader ranks (tp_rank 0 of the first and last pipeline
// stage), readers open the token stores (a failure on any reader is the same error on every
// rank) and start a prefetch thread that reads along the read schedule (order/read_schedule.h).
// Next (collective on the rank's TP group; no communication on middle pipeline stages):
// readers hand over the next prefetched micro-batch of their DP rank and broadcast to their TP
// group the fields of the pipeline's schema (order/field_schema.h) its stage receives, laid out
// by feed/payload.h: fixed fields first, then each variable-length field's used values (with
// device_broadcast: the whole payload staged in pinned memory and broadcast over NCCL into each
// TP rank's GPU memory, MicroBatch::device_payload); CP ranks get their slices as the schema
// says (zigzag, or THD for packed sequences). Every rank returns OutOfRange at the same step when
// the split runs out (never with
// --dataloader-type cyclic).
// A reader's read error (or an exception in its prefetch thread) is returned by Next() on the
// reader and, through the status-first TP broadcast, on its TP peers (naming the reader's world
// rank); every later Next() there returns it again. Other TP groups and middle stages do not
// learn it: the caller ends the job with the message (gridfeed run and the toy trainer abort).
// ~Feeder is collective: it frees the node-shared window and the grid's communicators, so every
// rank destroys its Feeder at the same point of the program (never while unwinding alone).
// Not thread safe: call from the trainer's thread (the MPI calls happen there).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "gridfeed/config/options.h"
#include "gridfeed/core/status.h"
#include "gridfeed/feed/payload.h"
#include "gridfeed/order/field_schema.h"
#include "gridfeed/order/pipeline.h"
#include "gridfeed/order/read_schedule.h"
#include "gridfeed/order/sample_record.h"
#include "gridfeed/parallel/grid.h"

namespace gridfeed::feed {

// Every option of the job (config/options.h): data, grid, batch, resume, feed, run.
using FeederOptions = config::JobOptions;

// One field of a micro-batch as this rank received it: its declaration (the pipeline's
// schema, order/field_schema.h; static storage), its shape here and where its values lie in
// MicroBatch::payload.
struct FieldArray {
  const order::FieldSpec* spec = nullptr;
  std::vector<int64_t> shape;
  size_t offset = 0, bytes = 0;
};

// What one rank receives for one micro-batch: the fields of its pipeline's schema that its
// stage receives, over the payload the TP broadcast delivered (no copy). Shapes follow the
// schema: [mbs, local_seq_length] per sample (attention_mask [mbs, 1, local, seq_length]); a
// packed order's (SFT) sequence fields are one flattened row [1, mbs x local] (this CP rank's
// THD slice), as Megatron's get_batch leaves them for --sft, with cu_seqlens (the merged
// boundaries, all CP ranks the same) and max_seqlen. Copyable (fields hold offsets).
struct MicroBatch {
  bool has_inputs = false;   // first stage: tokens, position_ids (+ attention_mask)
  bool has_targets = false;  // last stage: labels, loss_mask
  int64_t micro_batch_size = 0;
  // This micro-batch's: --seq-length, or its mixture stage's own (set on every rank, middle
  // pipeline stages included, so activations can be sized).
  int64_t seq_length = 0;
  int64_t local_seq_length = 0;  // seq_length / cp
  // The order's sample index of each sample: Megatron's top-level dataset index (= its
  // position), OLMo's instance index.
  std::vector<int64_t> sample_indices;
  // Each sample's global position in the split's read order (what resumes, ledgers and the
  // DP coverage checks count).
  std::vector<int64_t> sample_positions;
  std::vector<int64_t> source_ids;  // each sample's blend source (0 without a blend)
  bool packed = false;              // the schema's sequence fields are packed rows
  // This stage's fields in schema order, over `payload`; empty on the device path and on
  // middle stages, except the packed order's cu_seqlens and max_seqlen there.
  std::vector<FieldArray> fields;
  std::vector<std::byte> payload;
  // On the first-stage reader of CP rank 0 (one per DP rank): what each sample is, for the
  // ledger. Empty elsewhere.
  std::vector<order::SampleRecord> records;
  // Device path only (--device-broadcast): the packed payload in this rank's GPU memory on
  // every TP rank of a stage that receives data (see feed/payload.h for the layout; the host
  // fields above then stay empty, records excepted); valid until the next Next().
  const void* device_payload = nullptr;
  size_t device_payload_bytes = 0;
  // Nothing received: a middle stage of an order that gives it no field.
  bool empty() const { return fields.empty() && device_payload == nullptr; }

  // Field `name`, or null when this rank did not receive it.
  const FieldArray* Find(std::string_view name) const;
  // Its values (empty when absent). REQUIRES T is the field's dtype (uint8_t for bool).
  template <typename T>
  std::span<const T> Values(std::string_view name) const {
    const FieldArray* f = Find(name);
    if (f == nullptr) return {};
    CheckDType(*f, sizeof(T), std::is_floating_point_v<T>);
    return {reinterpret_cast<const T*>(payload.data() + f->offset), f->bytes / sizeof(T)};
  }
  // The fields the GPT and packed schemas declare (empty / 0 when absent).
  std::span<const int64_t> tokens() const { return Values<int64_t>(order::kTokens); }
  std::span<const int64_t> labels() const { return Values<int64_t>(order::kLabels); }
  std::span<const float> loss_mask() const { return Values<float>(order::kLossMask); }
  std::span<const int64_t> position_ids() const { return Values<int64_t>(order::kPositionIds); }
  std::span<const uint8_t> attention_mask() const {  // 1 = masked out
    return Values<uint8_t>(order::kAttentionMask);
  }
  std::span<const int32_t> cu_seqlens() const { return Values<int32_t>(order::kCuSeqlens); }
  int32_t max_seqlen() const {
    auto v = Values<int32_t>(order::kMaxSeqlen);
    return v.empty() ? 0 : v[0];
  }
  // XXH3-64 over the header and every field (peers that received the same data agree on it).
  uint64_t Digest() const;

 private:
  static void CheckDType(const FieldArray& f, size_t size, bool floating);
};

struct StartupTimes {
  double build_seconds = 0, broadcast_seconds = 0, open_seconds = 0;
  // Processes that built the tables (--table-producers), on every rank.
  int producers = 1;
  // The largest peak resident set (VmHWM) of any rank once every node holds its tables: what
  // the build cost the process that paid most; on every rank. -1 where unreadable.
  int64_t max_peak_rss_bytes = -1;
  // On world rank 0: the image's digest (order::ImageDigest), or with node images the XXH3 of
  // every node's, in node order; 0 where one node holds the only window and none was taken.
  uint64_t image_digest = 0;
};

class Feeder {
 public:
  static Result<std::unique_ptr<Feeder>> Open(const FeederOptions& options, MPI_Comm comm);
  ~Feeder();  // collective on the communicator given to Open (see above)
  // Local (no communication): stops the prefetch thread and gives `feeder` up without its
  // collective destruction; its communicators and node-shared window stay allocated until
  // MPI_Finalize or MPI_Abort ends the job. For a rank that cannot destroy its Feeder at the
  // same point as its peers (an exception only it sees, MPI_Finalize reached with it open).
  static void Abandon(std::unique_ptr<Feeder> feeder);
  Feeder(const Feeder&) = delete;
  Feeder& operator=(const Feeder&) = delete;

  Result<MicroBatch> Next();
  // Global samples consumed (the cursor a checkpoint stores), after the last Next().
  int64_t consumed_samples() const;
  const parallel::Grid& grid() const;
  const StartupTimes& startup() const;
  int64_t num_microbatches_per_global_batch() const;
  // Samples in the split read (its top-level order).
  int64_t split_length() const;
  // The iteration stored in the checkpoint resumed from (0 for a fresh start).
  int64_t resumed_iteration() const;
  const std::string& fingerprint() const;
  const std::string& canonical_config() const;
  // The options after resolution (global batch size filled in, DP size set).
  const FeederOptions& options() const;
  // The read schedule this run follows from its start (what a ledger segment records).
  const order::ReadSchedule& schedule() const;
  // Mixture schedules: the schedules in force from each position so far, this run's last
  // (checkpoint::Cursor::schedule_history, JSON), on every rank; empty otherwise.
  const std::string& schedule_history() const;
  // Collective on the world: world rank 0 writes the cursor (iteration, consumed samples,
  // per-source counts, grid and batch sizes) atomically; every rank returns its status.
  // Refused on every rank (nothing written) once any rank's Next() failed.
  Status SaveCheckpoint(const std::string& path, int64_t iteration) const;
  // Table bytes held on this node (0 off the readers), for memory reports.
  size_t table_bytes_on_node() const;
  // Reader ranks sharing this node's copy (what a plain copy per rank would multiply).
  int readers_on_node() const;
  // Nodes holding a copy of the tables (one shared window and one leader each), on every rank;
  // simulated nodes with --testing-ranks-per-node.
  int num_nodes() const;
  // Readers served by each node's window, world rank 0's node first; on world rank 0 only.
  const std::vector<int>& readers_per_node() const;
  // The byte layout of this rank's payload (the device payload's too) at the run's longest seq
  // length; a micro-batch's own is payload_layout().At(mb.seq_length) (Unpack applies it).
  const PayloadLayout& payload_layout() const;
  // Tokens per sample along the split read (a mixture's stages may differ), and the longest.
  const order::SeqLengths& seq_lengths() const;
  int64_t max_seq_length() const;
  // Device path: a host copy of mb.device_payload (device-to-host; for checks and tests). Local.
  Result<std::vector<std::byte>> DevicePayloadToHost(const MicroBatch& mb) const;
  bool holds_tables() const;
  // Token stores this rank has open (0 off the readers).
  int num_open_token_files() const;

 private:
  struct Impl;
  explicit Feeder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gridfeed::feed

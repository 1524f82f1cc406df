#include "gridfeed/feed/feeder.h"

#include <xxhash.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "gridfeed/checkpoint/cursor.h"
#include "gridfeed/device/probe.h"
#include "gridfeed/device/tp_broadcast.h"
#include "gridfeed/dist/agree.h"
#include "gridfeed/dist/shared_tables.h"
#include "gridfeed/feed/data_build.h"
#include "gridfeed/feed/fingerprint.h"
#include "gridfeed/feed/payload.h"
#include "gridfeed/io/indexed_dataset.h"
#include "gridfeed/order/cp_zigzag.h"

namespace gridfeed::feed {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string Fingerprint(const FeederOptions& o) {
  return config::CanonicalText(o.data) + "|mbs=" + std::to_string(o.micro_batch_size) +
         "|gbs=" + std::to_string(o.global_batch_size) +
         "|consumed=" + std::to_string(o.consumed_samples) +
         "|split=" + std::to_string(static_cast<int>(o.split)) +
         "|tp=" + std::to_string(o.grid.tensor_model_parallel_size) +
         "|pp=" + std::to_string(o.grid.pipeline_model_parallel_size) +
         "|cp=" + std::to_string(o.grid.context_parallel_size) + "|order=" + o.grid.rank_order;
}

// Collective on comm: the same verdict on every rank.
Status AgreeOnFingerprint(MPI_Comm comm, const FeederOptions& o) {
  const std::string text = Fingerprint(o);
  const uint64_t mine = XXH3_64bits(text.data(), text.size());
  int size = 0;
  MPI_Comm_size(comm, &size);
  std::vector<uint64_t> all(static_cast<size_t>(size));
  GRIDFEED_RETURN_IF_ERROR(dist::MpiStatus(
      MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm), "MPI_Allgather"));
  for (int r = 1; r < size; ++r) {
    if (all[r] != all[0]) {
      char buf[160];
      std::snprintf(buf, sizeof(buf),
                    "rank %d: configuration fingerprint %016llx differs from rank 0's %016llx; "
                    "every rank must get the same options",
                    r, static_cast<unsigned long long>(all[r]),
                    static_cast<unsigned long long>(all[0]));
      return FailedPrecondition(buf);
    }
  }
  return Status::Ok();
}

// Checks that need no data, identical on every rank (same fingerprint).
Status ValidateOptions(const FeederOptions& o, int world_size) {
  const auto& g = o.grid;
  const int64_t model = int64_t{g.tensor_model_parallel_size} * g.pipeline_model_parallel_size *
                        g.context_parallel_size;
  if (model <= 0 || world_size % model != 0) {
    return InvalidArgument("world size " + std::to_string(world_size) +
                           " is not divisible by TP x PP x CP = " + std::to_string(model));
  }
  const int64_t dp = world_size / model;
  if (o.micro_batch_size <= 0) return InvalidArgument("--micro-batch-size must be positive");
  const int64_t gbs = o.global_batch_size ? o.global_batch_size : o.micro_batch_size * dp;
  if (gbs % (o.micro_batch_size * dp) != 0) {
    return InvalidArgument("--global-batch-size " + std::to_string(gbs) +
                           " is not a multiple of micro-batch-size x DP = " +
                           std::to_string(o.micro_batch_size) + " x " + std::to_string(dp));
  }
  if (o.data.seq_length <= 0) return InvalidArgument("--seq-length must be positive");
  const int cp = g.context_parallel_size;
  if (cp > 1 && o.data.seq_length % (2 * cp) != 0) {
    return InvalidArgument(
        "--seq-length " + std::to_string(o.data.seq_length) +
        " must be divisible by 2 x context-parallel-size = " + std::to_string(2 * cp));
  }
  if (o.consumed_samples < 0) return InvalidArgument("--consumed-samples must be >= 0");
  if (o.prefetch_depth < 1) return InvalidArgument("prefetch depth must be >= 1");
  return Status::Ok();
}

}  // namespace

struct Feeder::Impl {
  FeederOptions options;
  std::unique_ptr<dist::Grid> grid;
  std::unique_ptr<dist::SharedTables> tables;
  std::unique_ptr<device::TpBroadcast> device_bcast;
  std::map<std::string, std::unique_ptr<io::IndexedDataset>> datasets;
  order::SampleOptions sample_options;
  PayloadLayout layout;
  int64_t dp = 1;
  int64_t next_step = 0;  // micro-batch steps handed out so far
  int64_t num_steps = 0;  // steps the split holds from the start cursor

  // Prefetch (readers only): packed payloads of steps [handed, produced).
  std::thread worker;
  std::mutex mu;
  std::condition_variable cv;
  struct Prefetched {
    std::vector<std::byte> payload;
    std::vector<order::SampleRecord> records;
  };
  std::deque<Prefetched> ready;
  bool keeps_records = false;  // first-stage reader of CP rank 0
  bool stop = false;

  const order::ImageSplit& split() const {
    return *tables->tables().splits[static_cast<int>(options.split)];
  }

  // Assembles the payload of one step on a reader.
  void Assemble(int64_t step, std::vector<std::byte>* out,
                std::vector<order::SampleRecord>* records) const {
    const int64_t mbs = options.micro_batch_size;
    const int64_t S = options.data.seq_length;
    const int64_t cp = grid->cp_size();
    const int64_t step_start = options.consumed_samples + step * mbs * dp;
    const int64_t base = step_start + grid->dp_rank() * mbs;
    records->clear();
    out->assign(layout.total_bytes, std::byte{0});
    order::Sample sample;
    std::vector<int64_t> tokens, labels, positions;
    std::vector<float> loss;
    std::vector<uint8_t> mask;
    for (int64_t k = 0; k < mbs; ++k) {
      const int64_t position = base + k;
      const auto [mid, j] = split().Locate(position);
      const auto& m = split().mids[mid];
      order::AssembleSample(*datasets.at(m.prefix), m.tables, j, sample_options, &sample);
      if (keeps_records) {
        auto r = order::MakeSampleRecord(position, mid, j, m.tables, sample.tokens);
        r.iteration = step_start / options.global_batch_size;
        r.micro_batch = (step_start % options.global_batch_size) / (mbs * dp);
        r.dp_rank = grid->dp_rank();
        records->push_back(r);
      }
      layout.Put(out, PayloadLayout::kSampleIndices, k, &position, 1);
      if (layout.has_inputs) {
        tokens = order::CpZigzagSlice(sample.tokens, 1, S, 1, cp, grid->cp_rank());
        positions = order::CpZigzagSlice(sample.position_ids, 1, S, 1, cp, grid->cp_rank());
        layout.Put(out, PayloadLayout::kTokens, k, tokens.data(), tokens.size());
        layout.Put(out, PayloadLayout::kPositionIds, k, positions.data(), positions.size());
        if (layout.has_mask) {
          mask = order::CpZigzagSlice(sample.attention_mask, 1, S, S, cp, grid->cp_rank());
          layout.Put(out, PayloadLayout::kAttentionMask, k, mask.data(), mask.size());
        }
      }
      if (layout.has_targets) {
        labels = order::CpZigzagSlice(sample.labels, 1, S, 1, cp, grid->cp_rank());
        loss = order::CpZigzagSlice(sample.loss_mask, 1, S, 1, cp, grid->cp_rank());
        layout.Put(out, PayloadLayout::kLabels, k, labels.data(), labels.size());
        layout.Put(out, PayloadLayout::kLossMask, k, loss.data(), loss.size());
      }
    }
  }

  // Runs on the prefetch thread from `first_step` on (never reads next_step, which the
  // trainer's thread advances).
  void Prefetch(int64_t first_step) {
    for (int64_t step = first_step; step < num_steps; ++step) {
      Prefetched item;
      Assemble(step, &item.payload, &item.records);
      std::unique_lock lock(mu);
      cv.wait(lock,
              [&] { return stop || static_cast<int>(ready.size()) < options.prefetch_depth; });
      if (stop) return;
      ready.push_back(std::move(item));
      cv.notify_all();
    }
  }

  Prefetched Take() {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return !ready.empty(); });
    auto payload = std::move(ready.front());
    ready.pop_front();
    cv.notify_all();
    return payload;
  }

  ~Impl() {
    if (worker.joinable()) {
      {
        std::lock_guard lock(mu);
        stop = true;
      }
      cv.notify_all();
      worker.join();
    }
  }
};

Result<std::unique_ptr<Feeder>> Feeder::Open(const FeederOptions& options, MPI_Comm comm) {
  std::unique_ptr<Feeder> f(new Feeder());
  f->impl_ = std::make_unique<Impl>();
  Impl& im = *f->impl_;
  im.options = options;
  // The fingerprint is agreed on first, so every later decision is the same on every rank.
  {
    MPI_Comm dup;
    MPI_Comm_dup(comm, &dup);
    MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
    int world_size = 0;
    MPI_Comm_size(dup, &world_size);
    Status st = AgreeOnFingerprint(dup, options);
    MPI_Comm_free(&dup);
    GRIDFEED_RETURN_IF_ERROR(st);
    GRIDFEED_RETURN_IF_ERROR(ValidateOptions(options, world_size));
  }
  GRIDFEED_ASSIGN_OR_RETURN(im.grid, dist::Grid::Create(comm, options.grid));
  const dist::Grid& g = *im.grid;
  im.dp = g.dp_size();
  if (im.options.global_batch_size == 0) {
    im.options.global_batch_size = options.micro_batch_size * im.dp;
  }

  dist::DistributeTimes times;
  std::string canonical;
  auto build = [&]() -> Result<std::unique_ptr<order::TableImageWriter>> {
    GRIDFEED_ASSIGN_OR_RETURN(order::BuiltDatasets b, BuildFromOptions(options.data));
    if (!b.splits[static_cast<int>(options.split)]) {
      return FailedPrecondition(std::string("the ") +
                                order::kSplitNames[static_cast<int>(options.split)] +
                                " split is empty with this --split");
    }
    canonical = CanonicalConfig(options.data, b);
    return order::TableImageWriter::Create(std::move(b));
  };
  GRIDFEED_ASSIGN_OR_RETURN(im.tables, dist::SharedTables::BuildAndDistribute(g, build, &times));
  f->startup_.build_seconds = times.build_seconds;
  f->startup_.broadcast_seconds = times.broadcast_seconds;
  GRIDFEED_RETURN_IF_ERROR(dist::BroadcastString(g.world(), 0, &canonical));
  f->canonical_config_ = canonical;
  f->fingerprint_ = FingerprintOf(canonical);

  // Resume: world rank 0 reads and checks the cursor, everyone learns the outcome.
  int64_t resume[2] = {options.consumed_samples, 0};  // consumed, iteration
  if (!options.resume_from.empty()) {
    Status checked;
    if (g.world_rank() == 0) {
      auto cursor = checkpoint::ReadCursor(options.resume_from);
      if (!cursor.ok()) {
        checked = cursor.status();
      } else if (FingerprintOf(cursor->canonical_config) != cursor->fingerprint) {
        checked = DataLoss("checkpoint '" + options.resume_from +
                           "': its configuration text does not match its fingerprint (corrupt)");
      } else if (cursor->fingerprint != f->fingerprint_) {
        checked = FailedPrecondition(
            "checkpoint '" + options.resume_from + "' was written for another data order (" +
            DescribeChange(cursor->canonical_config, canonical) + "); refusing to resume");
      } else if (cursor->global_batch_size != im.options.global_batch_size &&
                 !options.allow_batch_size_change) {
        checked = FailedPrecondition(
            "checkpoint '" + options.resume_from + "' used global batch size " +
            std::to_string(cursor->global_batch_size) + ", now " +
            std::to_string(im.options.global_batch_size) +
            "; pass --allow-batch-size-change to continue from the same global sample");
      } else {
        resume[0] = cursor->consumed_train_samples;
        resume[1] = cursor->iteration;
      }
    }
    GRIDFEED_RETURN_IF_ERROR(dist::BroadcastStatus(g.world(), 0, checked.WithContext("rank 0")));
    GRIDFEED_RETURN_IF_ERROR(
        dist::MpiStatus(MPI_Bcast(resume, 2, MPI_INT64_T, 0, g.world()), "MPI_Bcast(cursor)"));
    im.options.consumed_samples = resume[0];
    f->resumed_iteration_ = resume[1];
  }

  // Everyone learns the split length (non-readers hold no tables) and the pad id.
  auto t0 = Clock::now();
  int64_t meta[2] = {0, -1};
  if (g.world_rank() == 0) {
    meta[0] = im.split().length;
    meta[1] = im.tables->tables().pad_id_used;
  }
  GRIDFEED_RETURN_IF_ERROR(
      dist::MpiStatus(MPI_Bcast(meta, 2, MPI_INT64_T, 0, g.world()), "MPI_Bcast(split length)"));
  f->split_length_ = meta[0];
  const int64_t step_samples = options.micro_batch_size * im.dp;
  im.num_steps = std::max<int64_t>(0, (meta[0] - im.options.consumed_samples) / step_samples);
  f->consumed_ = im.options.consumed_samples;
  im.sample_options = ToSampleOptions(options.data, meta[1]);
  im.layout = PayloadLayout(options.micro_batch_size, options.data.seq_length, g.cp_size(),
                            g.first_stage(), g.last_stage(), options.data.create_attention_mask);

  // Readers open the token files; a failure anywhere is the same error everywhere.
  Status opened;
  if (g.is_reader()) {
    for (const auto& prefix : im.tables->tables().prefixes) {
      if (g.world_rank() == options.testing_fail_open_rank) {
        opened = NotFound("cannot open '" + prefix + ".bin' (injected by test)");
        break;
      }
      auto ds = io::IndexedDataset::Open(prefix);
      if (!ds.ok()) {
        opened = ds.status();
        break;
      }
      im.datasets[prefix] = std::make_unique<io::IndexedDataset>(std::move(ds).value());
    }
  }
  GRIDFEED_RETURN_IF_ERROR(dist::AgreeOnStatus(g.world(), opened, g.world_rank()));
  f->startup_.open_seconds = Since(t0);
  if (options.device_broadcast) GRIDFEED_RETURN_IF_ERROR(OpenDevicePath(im));
  im.keeps_records = g.is_reader() && g.first_stage() && g.cp_rank() == 0;
  if (g.is_reader()) im.worker = std::thread([&im, first = im.next_step] { im.Prefetch(first); });
  return f;
}

// Collective on the world: every rank makes the same two agreements; ranks of stages that
// receive data also set up their TP group's NCCL communicator in between.
Status Feeder::OpenDevicePath(Impl& im) {
  const dist::Grid& g = *im.grid;
  const bool receives = im.layout.has_inputs || im.layout.has_targets;
  const auto probe = device::Probe();
  Status local;
  if (!receives) {
    // Middle pipeline stages receive nothing and need no GPU for gridfeed.
  } else if (!probe.compiled_with_nccl) {
    local = FailedPrecondition("device broadcast asked for, but gridfeed was built without NCCL");
  } else if (probe.device_count == 0) {
    local = FailedPrecondition("device broadcast asked for, but no GPU is usable (" +
                               probe.cuda_status + ")");
  }
  GRIDFEED_RETURN_IF_ERROR(dist::AgreeOnStatus(g.world(), local, g.world_rank()));
  if (!receives) return dist::AgreeOnStatus(g.world(), Status(), g.world_rank());
  // From here on a failure in one TP group must not skip the final world agreement (other
  // groups would wait in it forever), so errors are carried, not returned.
  std::vector<std::byte> id(128);
  Status made;
  if (g.tp_rank() == 0) {
    auto r = device::TpBroadcast::NewGroupId();
    if (r.ok()) {
      id = *r;
    } else {
      made = r.status();
    }
  }
  Status st = dist::BroadcastStatus(g.tp_comm(), 0, made);
  if (st.ok()) {
    uint64_t n = id.size();
    st = dist::MpiStatus(MPI_Bcast(&n, 1, MPI_UINT64_T, 0, g.tp_comm()), "MPI_Bcast");
    id.resize(n);
    if (st.ok()) st = dist::BroadcastBytes(g.tp_comm(), 0, id);
  }
  if (st.ok()) {
    // One GPU per rank on a node: the rank's index among the node's ranks (from the launcher).
    int local_rank = 0;
    for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "LOCAL_RANK"}) {
      if (const char* e = std::getenv(v)) {
        local_rank = std::atoi(e);
        break;
      }
    }
    auto b = device::TpBroadcast::Create(id.data(), id.size(), g.tp_rank(), g.tp_size(),
                                         local_rank % std::max(1, probe.device_count),
                                         im.layout.total_bytes);
    if (b.ok()) {
      im.device_bcast = std::move(b).value();
    } else {
      st = b.status();
    }
  }
  return dist::AgreeOnStatus(g.world(), st, g.world_rank());
}

Status Feeder::SaveCheckpoint(const std::string& path, int64_t iteration) const {
  const Impl& im = *impl_;
  const dist::Grid& g = *im.grid;
  Status written;
  if (g.world_rank() == 0) {
    checkpoint::Cursor c;
    c.fingerprint = fingerprint_;
    c.canonical_config = canonical_config_;
    c.iteration = iteration;
    c.consumed_train_samples = consumed_;
    const auto& split = im.split();
    c.source_samples.assign(split.mids.size(), 0);
    const int64_t upto = std::min(consumed_, split.length);
    if (split.blended) {
      for (int64_t p = 0; p < upto; ++p) ++c.source_samples[split.dataset_index[p]];
    } else {
      c.source_samples[0] = upto;
    }
    for (int64_t n : c.source_samples) c.source_tokens.push_back(n * im.options.data.seq_length);
    c.dp = g.dp_size(), c.tp = g.tp_size(), c.pp = g.pp_size(), c.cp = g.cp_size();
    c.micro_batch_size = im.options.micro_batch_size;
    c.global_batch_size = im.options.global_batch_size;
    written = checkpoint::WriteCursor(path, c);
  }
  return dist::BroadcastStatus(g.world(), 0, written.WithContext("rank 0"));
}

Feeder::~Feeder() = default;

const dist::Grid& Feeder::grid() const { return *impl_->grid; }

int64_t Feeder::num_microbatches_per_global_batch() const {
  return impl_->options.global_batch_size / (impl_->options.micro_batch_size * impl_->dp);
}

size_t Feeder::table_bytes_on_node() const { return impl_->tables->node_bytes(); }
int Feeder::readers_on_node() const { return impl_->tables->readers_on_node(); }
int Feeder::num_open_token_files() const { return static_cast<int>(impl_->datasets.size()); }
bool Feeder::holds_tables() const { return !impl_->tables->image().empty(); }

Result<MicroBatch> Feeder::Next() {
  Impl& im = *impl_;
  const dist::Grid& g = *im.grid;
  if (im.next_step >= im.num_steps) {
    return OutOfRange(std::string("the ") + order::kSplitNames[static_cast<int>(im.options.split)] +
                      " split is exhausted after " + std::to_string(consumed_) +
                      " consumed samples (" + std::to_string(split_length_) + " in the split)");
  }
  ++im.next_step;
  consumed_ += im.options.micro_batch_size * im.dp;
  MicroBatch mb;
  mb.micro_batch_size = im.options.micro_batch_size;
  mb.seq_length = im.options.data.seq_length;
  mb.local_seq_length = mb.seq_length / g.cp_size();
  if (!im.layout.has_inputs && !im.layout.has_targets) return mb;  // middle stage
  std::vector<std::byte> payload;
  if (g.tp_rank() == 0) {
    auto item = im.Take();
    payload = std::move(item.payload);
    mb.records = std::move(item.records);
  } else {
    payload.assign(im.layout.total_bytes, std::byte{0});
  }
  if (g.tp_size() > 1) {
    GRIDFEED_RETURN_IF_ERROR(dist::BroadcastBytes(g.tp_comm(), 0, payload));
  }
  im.layout.Unpack(payload, &mb);
  return mb;
}

}  // namespace gridfeed::feed

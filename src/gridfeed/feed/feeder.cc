#include "gridfeed/feed/feeder.h"

#include <xxhash.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <new>
#include <thread>

#include "gridfeed/checkpoint/cursor.h"
#include "gridfeed/checkpoint/resume_policy.h"
#include "gridfeed/config/canonical.h"
#include "gridfeed/core/log.h"
#include "gridfeed/core/stopwatch.h"
#include "gridfeed/device/probe.h"
#include "gridfeed/device/tp_broadcast.h"
#include "gridfeed/feed/payload.h"
#include "gridfeed/io/file_util.h"
#include "gridfeed/order/pipeline.h"
#include "gridfeed/order/read_schedule.h"
#include "gridfeed/parallel/agree.h"
#include "gridfeed/parallel/shared_image.h"

namespace gridfeed::feed {
namespace {

order::Split SplitOf(const FeederOptions& o) {
  if (o.feed.split_name == "valid") return order::Split::kValid;
  if (o.feed.split_name == "test") return order::Split::kTest;
  return order::Split::kTrain;
}

}  // namespace

struct Feeder::Impl {
  FeederOptions options;
  order::Split split = order::Split::kTrain;
  std::unique_ptr<parallel::Grid> grid;
  std::unique_ptr<order::Pipeline> pipeline;
  std::unique_ptr<parallel::SharedImage> image;
  std::unique_ptr<order::OrderView> view;  // readers only
  std::unique_ptr<order::ReadSchedule> schedule;
  std::unique_ptr<device::TpBroadcast> device_bcast;
  PayloadLayout layout;           // at the run's longest seq length (buffers are this size)
  order::SeqLengths seq_lengths;  // tokens per sample along the split (every rank)
  std::string canonical, fingerprint;
  std::string store_facts;       // rank 0's token store facts (order::EncodeFacts)
  std::string schedule_history;  // amendable orders: checkpoint::Cursor's (every rank)
  StartupTimes startup;
  int64_t split_length = 0;
  int64_t resumed_iteration = 0;
  int64_t consumed = 0;   // global samples after the last Next()
  int64_t next_step = 0;  // micro-batch steps handed out so far

  // Prefetch (readers only): packed payloads of steps [handed, produced).
  std::thread worker;
  std::mutex mu;
  std::condition_variable cv;
  struct Prefetched {
    // A read error of this step (then the thread has stopped and nothing follows).
    Status status;
    std::vector<std::byte> payload;
    std::vector<order::SampleRecord> records;
  };
  std::deque<Prefetched> ready;
  bool keeps_records = false;  // first-stage reader of CP rank 0
  bool stop = false;
  // The first error Next() returned (read error, TP broadcast): every later Next() returns it
  // (the prefetch thread has stopped, so nothing else would come).
  Status failed;

  // The phases of Open, in order; each is collective on the world and returns the same status
  // on every rank.
  Status AgreeOnOptions(MPI_Comm comm);
  Status CreateGrid(MPI_Comm comm);
  Status BuildAndShareTables();
  Status OpenTokenStores();
  // This reader opens its node leader's very files (so the leader checks them in full).
  bool same_files_as_node_leader = false;
  Status CheckTokenStores();
  Status Resume();
  // Rank 0: whether the saved order (recomputed from its canonical text) reads what this run's
  // tables read before the saved cursor (the pipeline's SamePast).
  Status SamePast(const checkpoint::Cursor& saved) const;
  Status PlanSchedule();
  Status OpenDevicePath();
  void StartPrefetch();

  // Assembles the payload of one step on a reader; the first read error.
  Status AssemblePacked(const order::StepBatch& batch, const PayloadLayout& at,
                        std::vector<std::byte>* out,
                        std::vector<order::SampleRecord>* records) const;
  Status Assemble(const order::StepBatch& batch, std::vector<std::byte>* out,
                  std::vector<order::SampleRecord>* records, order::AssemblyScratch* scratch) const;
  // Runs on the prefetch thread (never reads next_step, which the trainer's thread advances).
  void Prefetch();
  Prefetched Take();
  // Collective on the TP group (none with TP 1): TP rank 0's read status, status first, so a
  // reader's read error reaches its peers instead of data. Returns it (sticky in `failed`).
  Status ShareReadStatus(Status* read);

  // Stops and joins the prefetch thread (local; idempotent).
  void StopPrefetch() {
    if (worker.joinable()) {
      {
        std::lock_guard lock(mu);
        stop = true;
      }
      cv.notify_all();
      worker.join();
    }
  }
  ~Impl() { StopPrefetch(); }
};

// The fingerprint of every option is agreed first, so every later decision is the same on every
// rank; then the options are checked against the world (the same verdict everywhere).
Status Feeder::Impl::AgreeOnOptions(MPI_Comm comm) {
  MPI_Comm dup;
  MPI_Comm_dup(comm, &dup);
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  int world_size = 0;
  MPI_Comm_size(dup, &world_size);
  int rank = 0;
  MPI_Comm_rank(dup, &rank);
  // Rank 0's options are the reference; a rank that differs names the first differing option.
  std::string reference = config::AgreementText(options);
  Status same = parallel::BroadcastString(dup, 0, &reference);
  if (same.ok()) {
    Status local;
    const std::string change = config::DescribeDifference(reference, options);
    if (!change.empty()) {
      local = FailedPrecondition("options differ from rank 0's: " + change +
                                 "; every rank must get the same options");
    }
    same = parallel::AgreeOnStatus(dup, local, rank);
  }
  MPI_Comm_free(&dup);
  GRIDFEED_RETURN_IF_ERROR(same);
  GRIDFEED_ASSIGN_OR_RETURN(const int64_t dp, config::ValidateGrid(options, world_size));
  options.grid.data_parallel_size = dp;
  // OLMo's chunks of a device batch as micro-batches of one size (config/olmo_yaml.h).
  options.batch.micro_batch_size = config::FeederMicroBatchSize(options, dp);
  if (options.batch.global_batch_size == 0) {
    options.batch.global_batch_size = options.batch.micro_batch_size * dp;
  }
  split = SplitOf(options);
  return Status::Ok();
}

Status Feeder::Impl::CreateGrid(MPI_Comm comm) {
  parallel::GridSizes sizes;
  sizes.tensor_model_parallel_size = static_cast<int>(options.grid.tensor_model_parallel_size);
  sizes.pipeline_model_parallel_size = static_cast<int>(options.grid.pipeline_model_parallel_size);
  sizes.context_parallel_size = static_cast<int>(options.grid.context_parallel_size);
  sizes.rank_order = options.grid.rank_order;
  GRIDFEED_ASSIGN_OR_RETURN(grid, parallel::Grid::Create(comm, sizes));
  return Status::Ok();
}

// World rank 0 builds through the pipeline and writes the image into its shared window; every
// reader views the image it received. The canonical text (options + data facts) follows.
Status Feeder::Impl::BuildAndShareTables() {
  const parallel::Grid& g = *grid;
  GRIDFEED_ASSIGN_OR_RETURN(pipeline, order::Pipeline::For(options));
  int64_t length = 0;
  auto build = [&]() -> Result<parallel::ImageProducer> {
    GRIDFEED_ASSIGN_OR_RETURN(auto built, pipeline->Build());
    length = built->view().length(split);
    if (length == 0) {
      return FailedPrecondition("the " + options.feed.split_name +
                                " split is empty with this --split");
    }
    canonical = config::CanonicalText(options.data, built->DataFacts());
    std::shared_ptr<order::ImageWriter> writer = built->TakeImage();
    return parallel::ImageProducer{writer->size(),
                                   [writer](std::byte* dst) { writer->WriteTo(dst); }};
  };
  // Rank 0's failures, allocation included, must reach the status header: the other ranks
  // are waiting for it.
  auto make = [&]() -> Result<parallel::ImageProducer> {
    try {
      return build();
    } catch (const std::bad_alloc&) {
      return Internal("out of memory while building the tables");
    } catch (const std::exception& e) {
      return Internal(std::string("while building the tables: ") + e.what());
    }
  };
  parallel::DistributeTimes times;
  parallel::NodeSplit nodes;
  nodes.ranks_per_node = static_cast<int>(options.feed.testing_ranks_per_node);
  nodes.corrupt_node = static_cast<int>(options.feed.testing_corrupt_image_node);
  GRIDFEED_ASSIGN_OR_RETURN(
      image, parallel::SharedImage::Distribute(g, make, order::ImageDigest, &times, nodes));
  startup.build_seconds = times.build_seconds;
  startup.broadcast_seconds = times.broadcast_seconds;
  GRIDFEED_RETURN_IF_ERROR(parallel::BroadcastString(g.world(), 0, &canonical));
  fingerprint = config::FingerprintOf(canonical);
  // Non-readers hold no tables but plan the same schedule: they learn the split's length.
  GRIDFEED_RETURN_IF_ERROR(parallel::MpiStatus(MPI_Bcast(&length, 1, MPI_INT64_T, 0, g.world()),
                                               "MPI_Bcast(split length)"));
  split_length = length;
  Status viewed;
  if (g.is_reader()) {
    auto v = pipeline->ViewImage(image->bytes());
    if (v.ok()) {
      view = std::move(v).value();
    } else {
      viewed = v.status();
    }
  }
  return parallel::AgreeOnStatus(g.world(), viewed, g.world_rank());
}

// World rank 0 reads and checks the cursor (checkpoint's resume policy); everyone learns the
// outcome.
Status Feeder::Impl::Resume() {
  const parallel::Grid& g = *grid;
  consumed = options.resume.consumed_samples;
  schedule_history = pipeline->StartHistory(consumed);
  if (options.resume.resume_from.empty()) return Status::Ok();
  int64_t point[2] = {0, 0};  // consumed, iteration
  // Rank 0 reads and checks the cursor; an amended schedule rebuilds the saved order (SamePast).
  auto check = [&]() -> Status {
    checkpoint::ResumeRequest now;
    now.path = options.resume.resume_from;
    now.fingerprint = fingerprint;
    now.canonical_config = canonical;
    now.micro_batch_size = options.batch.micro_batch_size;
    now.dp = options.grid.data_parallel_size;
    now.global_batch_size = options.batch.global_batch_size;
    now.allow_batch_size_change = options.resume.allow_batch_size_change;
    now.order_depends_on_geometry = options.data.dataloader_type == "cyclic";
    now.token_store_facts = store_facts;
    now.allow_schedule_change = options.resume.allow_schedule_change;
    // The single sampler stops at the split's end: a cursor past it is no run's (unless the
    // order is sized otherwise: Pipeline::cursor_bounded_by_split).
    if (options.data.dataloader_type != "cyclic" && pipeline->cursor_bounded_by_split()) {
      now.max_consumed = split_length;
    }
    now.check_same_past = [this](const checkpoint::Cursor& saved) { return SamePast(saved); };
    auto cursor = checkpoint::ReadCursor(options.resume.resume_from);
    auto resumed = cursor.ok() ? checkpoint::CheckResume(*cursor, now)
                               : Result<checkpoint::ResumePoint>(cursor.status());
    if (resumed.ok()) {
      point[0] = resumed->consumed_samples;
      point[1] = resumed->iteration;
      if (pipeline->amendable()) {
        schedule_history =
            pipeline->ResumedHistory(cursor->schedule_history, cursor->canonical_config, point[0],
                                     resumed->schedule_amended);
      }
    } else {
      return resumed.status();
    }
    return Status::Ok();
  };
  Status checked;
  if (g.world_rank() == 0) {
    // Rank 0's failures, allocation and JSON included, must reach the broadcast below: the
    // other ranks are waiting in it (as in BuildAndShareTables).
    try {
      checked = check();
    } catch (const std::bad_alloc&) {
      checked = Internal("out of memory while checking the checkpoint '" +
                         options.resume.resume_from + "' (rebuilding its order)");
    } catch (const std::exception& e) {
      checked = Internal("while checking the checkpoint '" + options.resume.resume_from +
                         "': " + e.what());
    }
  }
  GRIDFEED_RETURN_IF_ERROR(parallel::BroadcastStatus(g.world(), 0, checked.WithContext("rank 0")));
  GRIDFEED_RETURN_IF_ERROR(
      parallel::MpiStatus(MPI_Bcast(point, 2, MPI_INT64_T, 0, g.world()), "MPI_Bcast(cursor)"));
  // The options are the same on every rank (agreed fingerprint), so all or none broadcast.
  if (pipeline->amendable()) {
    GRIDFEED_RETURN_IF_ERROR(parallel::BroadcastString(g.world(), 0, &schedule_history));
  }
  consumed = point[0];
  resumed_iteration = point[1];
  return Status::Ok();
}

Status Feeder::Impl::SamePast(const checkpoint::Cursor& saved) const {
  GRIDFEED_ASSIGN_OR_RETURN(config::DataOptions before,
                            config::FromCanonical(saved.canonical_config));
  config::JobOptions old = options;
  old.data = before;
  old.batch.global_batch_size = saved.global_batch_size;  // budgets in iterations
  if (!image) return Internal("rank 0 holds no table image");
  return pipeline->SamePast(old, image->bytes(), saved.consumed_train_samples);
}

// Every rank plans the same schedule from the same numbers (no communication).
Status Feeder::Impl::PlanSchedule() {
  const parallel::Grid& g = *grid;
  order::ScheduleOptions s;
  GRIDFEED_ASSIGN_OR_RETURN(s.type, order::ParseDataloaderType(options.data.dataloader_type));
  s.total_samples = split_length;
  s.micro_batch_size = options.batch.micro_batch_size;
  s.dp_size = g.dp_size();
  s.global_batch_size = options.batch.global_batch_size;
  s.start_consumed = consumed;
  s.start_iteration = options.resume.resume_from.empty() ? -1 : resumed_iteration;
  s.data_sharding = !options.data.no_data_sharding;
  GRIDFEED_ASSIGN_OR_RETURN(auto planned, order::ReadSchedule::Create(s));
  schedule = std::make_unique<order::ReadSchedule>(std::move(planned));
  seq_lengths.begin = {0};
  seq_lengths.length = {options.data.seq_length};
  if (split == order::Split::kTrain) {
    GRIDFEED_ASSIGN_OR_RETURN(seq_lengths, order::SeqLengthsOf(options));
  }
  // A micro-batch has one shape: a change of length must fall between this run's global batches
  // (those it reads from `consumed` on; a boundary already passed does not matter).
  const int64_t gbs = schedule->micro_batches_per_iteration() * s.micro_batch_size * s.dp_size;
  for (size_t i = 1; i < seq_lengths.begin.size(); ++i) {
    const int64_t b = seq_lengths.begin[i];
    if (b <= consumed || (b - consumed) % gbs == 0) continue;
    const std::string stage = pipeline->DescribeStageFrom(b);
    return InvalidArgument(
        stage + " reads " + std::to_string(seq_lengths.length[i]) + " tokens per sample from " +
        "sample " + std::to_string(b) + ", where none of this run's global batches starts (" +
        std::to_string(gbs) + " samples each from sample " + std::to_string(consumed) +
        "): a micro-batch would mix two lengths; make the stages before it a multiple of the " +
        "global batch size");
  }
  layout =
      PayloadLayout(options.batch.micro_batch_size, seq_lengths.max(), g.cp_size(), g.first_stage(),
                    g.last_stage(), options.data.create_attention_mask, pipeline->packed());
  return Status::Ok();
}

// Readers open the token stores; a failure anywhere is the same error everywhere. A reader
// whose files are its node leader's very files (device, inode, size, mtime) leaves the
// per-element checks to the leader, which makes them at the same time.
Status Feeder::Impl::OpenTokenStores() {
  const parallel::Grid& g = *grid;
  Stopwatch watch;
  Status opened;
  if (g.is_reader()) {
    MPI_Comm node = image->node_comm();
    int node_rank = 0;
    MPI_Comm_rank(node, &node_rank);
    std::string identity;  // empty when a file cannot be stat'ed: then checked here in full
    for (const auto& file : view->TokenFiles()) {
      auto id = io::FileIdentity(file);
      if (!id.ok()) {
        identity.clear();
        break;
      }
      identity += *id + "\n";
    }
    std::string leader_identity = identity;
    GRIDFEED_RETURN_IF_ERROR(parallel::BroadcastString(node, 0, &leader_identity));
    same_files_as_node_leader = node_rank != 0 && !identity.empty() && identity == leader_identity;
    if (g.world_rank() == options.feed.testing_fail_open_rank) {
      opened =
          NotFound("cannot open '" + view->token_stores().front() + ".bin' (injected by test)");
    } else {
      opened = view->OpenTokenStores(same_files_as_node_leader);
    }
  }
  GRIDFEED_RETURN_IF_ERROR(parallel::AgreeOnStatus(g.world(), opened, g.world_rank()));
  startup.open_seconds = watch.Seconds();
  return Status::Ok();
}

// Every reader proves it reads the same data as rank 0 (node-local copies are common): index
// digest, data size and a digest of data blocks sampled at offsets derived from the
// fingerprint. A difference on any reader is the same error everywhere, naming rank and store.
// On a node, the leader computes the facts; a peer whose files are the leader's very files
// takes them, any other computes its own.
Status Feeder::Impl::CheckTokenStores() {
  const parallel::Grid& g = *grid;
  // An amendable order's digests do not depend on its schedule, so an amended resume can
  // compare them.
  const std::string salted =
      pipeline->amendable() ? checkpoint::WithoutScheduleText(canonical) : fingerprint;
  const uint64_t salt = XXH3_64bits(salted.data(), salted.size());
  std::vector<order::StoreFacts> mine;
  if (g.is_reader()) {
    if (!same_files_as_node_leader) mine = view->TokenStoreFacts(salt);
    std::string leader_facts = order::EncodeFacts(mine);
    GRIDFEED_RETURN_IF_ERROR(parallel::BroadcastString(image->node_comm(), 0, &leader_facts));
    if (same_files_as_node_leader) mine = order::DecodeFacts(leader_facts);
  }
  std::string reference = order::EncodeFacts(mine);  // rank 0 is a reader
  GRIDFEED_RETURN_IF_ERROR(parallel::BroadcastString(g.world(), 0, &reference));
  store_facts = reference;
  Status local;
  if (g.is_reader()) {
    const std::string change = order::DescribeFactsDifference(mine, order::DecodeFacts(reference));
    if (!change.empty()) {
      local = DataLoss(change + "; every reader must see the same token files as rank 0");
    }
  }
  return parallel::AgreeOnStatus(g.world(), local, g.world_rank());
}

// Collective on the world: every rank makes the same two agreements; ranks of stages that
// receive data also set up their TP group's NCCL communicator (or, with
// --testing-device-loopback, the host twin over the TP communicator) in between.
Status Feeder::Impl::OpenDevicePath() {
  const parallel::Grid& g = *grid;
  const bool receives = layout.has_inputs || layout.has_targets;
  const bool loopback = options.feed.testing_device_loopback;
  const auto probe = device::Probe();
  Status local;
  if (!receives || loopback) {
    // Middle pipeline stages receive nothing and need no GPU for gridfeed; the loopback twin
    // needs none either.
  } else if (!probe.compiled_with_nccl) {
    local = FailedPrecondition("device broadcast asked for, but gridfeed was built without NCCL");
  } else if (probe.device_count == 0) {
    local = FailedPrecondition("device broadcast asked for, but no GPU is usable (" +
                               probe.cuda_status + ")");
  }
  GRIDFEED_RETURN_IF_ERROR(parallel::AgreeOnStatus(g.world(), local, g.world_rank()));
  if (!receives) return parallel::AgreeOnStatus(g.world(), Status(), g.world_rank());
  if (loopback) {
    MPI_Comm tp = g.tp_comm();  // the grid outlives device_bcast (declared before it)
    device_bcast = device::TpBroadcast::CreateLoopback(
        g.tp_rank(), layout.total_bytes, [tp](std::byte* data, size_t bytes) {
          return parallel::BroadcastBytes(tp, 0, std::span<std::byte>(data, bytes));
        });
    return parallel::AgreeOnStatus(g.world(), Status(), g.world_rank());
  }
  // From here on a failure in one TP group must not skip the final world agreement (other
  // groups would wait in it forever), so errors are carried, not returned.
  std::vector<std::byte> id(device::kGroupIdBytes);
  Status made;
  if (g.tp_rank() == 0) {
    auto r = device::TpBroadcast::NewGroupId();
    if (r.ok() && r->size() == id.size()) {
      id = *r;
    } else {
      made = r.ok() ? Internal("NCCL group id of unexpected size") : r.status();
    }
  }
  Status st = parallel::BroadcastStatus(g.tp_comm(), 0, made);
  if (st.ok()) st = parallel::BroadcastBytes(g.tp_comm(), 0, id);
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
                                         layout.total_bytes);
    if (b.ok()) {
      device_bcast = std::move(b).value();
    } else {
      st = b.status();
    }
  }
  return parallel::AgreeOnStatus(g.world(), st, g.world_rank());
}

void Feeder::Impl::StartPrefetch() {
  const parallel::Grid& g = *grid;
  keeps_records = g.is_reader() && g.first_stage() && g.cp_rank() == 0;
  if (g.is_reader()) worker = std::thread([this] { Prefetch(); });
}

Status Feeder::Impl::Assemble(const order::StepBatch& batch, std::vector<std::byte>* out,
                              std::vector<order::SampleRecord>* records,
                              order::AssemblyScratch* scratch) const {
  const parallel::Grid& g = *grid;
  records->clear();
  const PayloadLayout at =
      layout.At(batch.positions.empty() ? layout.seq_length : seq_lengths.At(batch.positions[0]));
  out->assign(at.total_bytes, std::byte{0});
  if (at.packed) return AssemblePacked(batch, at, out, records);
  for (size_t k = 0; k < batch.positions.size(); ++k) {
    const int64_t position = batch.positions[k];
    const auto i = static_cast<int64_t>(k);
    // Only this stage's fields, only this CP rank's slice, straight into the payload.
    order::FieldTargets targets = at.Targets(out, i);
    targets.cp_size = g.cp_size();
    targets.cp_rank = g.cp_rank();
    if (position == options.feed.testing_fail_read_position) {
      return IoError("cannot read sample " + std::to_string(position) + " of the " +
                     options.feed.split_name + " split (injected by test)");
    }
    order::SampleRecord r = view->ReadFields(split, position, targets,
                                             /*hash_tokens=*/keeps_records, scratch);
    if (keeps_records) {
      r.iteration = batch.iteration;
      r.micro_batch = batch.micro_batch;
      r.dp_rank = g.dp_rank();
      records->push_back(r);
    }
    const int64_t sample_index = view->SampleIndex(split, position);
    at.Put(out, PayloadLayout::kSampleIndices, i, &sample_index, 1);
    at.Put(out, PayloadLayout::kSourceIds, i, &r.dataset, 1);
    at.Put(out, PayloadLayout::kSamplePositions, i, &position, 1);
  }
  return Status::Ok();
}

// A packed order assembles the whole micro-batch at once (its CP slices span samples).
Status Feeder::Impl::AssemblePacked(const order::StepBatch& batch, const PayloadLayout& at,
                                    std::vector<std::byte>* out,
                                    std::vector<order::SampleRecord>* records) const {
  const parallel::Grid& g = *grid;
  for (int64_t position : batch.positions) {
    if (position == options.feed.testing_fail_read_position) {
      return IoError("cannot read sample " + std::to_string(position) + " of the " +
                     options.feed.split_name + " split (injected by test)");
    }
  }
  order::PackedTargets targets = at.Packed(out);
  targets.cp_size = g.cp_size();
  targets.cp_rank = g.cp_rank();
  GRIDFEED_RETURN_IF_ERROR(
      view->ReadPacked(split, batch.positions, targets, /*hash_tokens=*/keeps_records, records));
  for (size_t k = 0; k < batch.positions.size(); ++k) {
    const auto i = static_cast<int64_t>(k);
    const int64_t position = batch.positions[k];
    order::SampleRecord& r = (*records)[k];
    r.iteration = batch.iteration;
    r.micro_batch = batch.micro_batch;
    r.dp_rank = g.dp_rank();
    const int64_t sample_index = view->SampleIndex(split, position);
    at.Put(out, PayloadLayout::kSampleIndices, i, &sample_index, 1);
    at.Put(out, PayloadLayout::kSourceIds, i, &r.dataset, 1);
    at.Put(out, PayloadLayout::kSamplePositions, i, &position, 1);
  }
  if (!keeps_records) records->clear();
  return Status::Ok();
}

// A read error (or an exception: allocation, a library's) ends the walk with an error item, so
// Next() returns it instead of waiting for a step that never comes, and never std::terminate.
void Feeder::Impl::Prefetch() {
  auto walker = schedule->Walk(grid->dp_rank());
  order::StepBatch batch;
  order::AssemblyScratch scratch;
  for (;;) {
    Prefetched item;
    try {
      if (!walker.Next(&batch)) return;
      item.status = Assemble(batch, &item.payload, &item.records, &scratch);
    } catch (const std::bad_alloc&) {
      item.status = Internal("out of memory while assembling a micro-batch");
    } catch (const std::exception& e) {
      item.status = Internal(std::string("while assembling a micro-batch: ") + e.what());
    } catch (...) {
      item.status = Internal("an unknown exception while assembling a micro-batch");
    }
    const bool failed = !item.status.ok();
    if (failed) {
      item.status =
          item.status.WithContext("reader world rank " + std::to_string(grid->world_rank()) + " (" +
                                  grid->Describe() + ")");
    }
    std::unique_lock lock(mu);
    cv.wait(lock, [&] {
      return stop || static_cast<int64_t>(ready.size()) < options.feed.prefetch_depth;
    });
    if (stop) return;
    ready.push_back(std::move(item));
    cv.notify_all();
    if (failed) return;
  }
}

Feeder::Impl::Prefetched Feeder::Impl::Take() {
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return !ready.empty(); });
  auto payload = std::move(ready.front());
  ready.pop_front();
  cv.notify_all();
  return payload;
}

Status Feeder::Impl::ShareReadStatus(Status* read) {
  if (grid->tp_size() > 1) {
    Status shared = parallel::BroadcastStatus(grid->tp_comm(), 0, *read);
    *read = shared;
  }
  if (!read->ok()) failed = *read;
  return *read;
}

Feeder::Feeder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Feeder::~Feeder() = default;

void Feeder::Abandon(std::unique_ptr<Feeder> feeder) {
  if (!feeder) return;
  feeder->impl_->StopPrefetch();
  static_cast<void>(feeder.release());  // its MPI handles are the job's end to free
}

Result<std::unique_ptr<Feeder>> Feeder::Open(const FeederOptions& options, MPI_Comm comm) {
  auto im = std::make_unique<Impl>();
  im->options = options;
  // Each phase's time on rank 0 at DEBUG level (GRIDFEED_LOG_LEVEL=DEBUG): where start-up goes.
  Stopwatch phase;
  auto done = [&phase](const char* name) {
    if (log::Enabled(log::Level::kDebug)) {
      log::Debug(std::string("start-up phase ") + name + ": " + std::to_string(phase.Lap()) + " s");
    }
  };
  GRIDFEED_RETURN_IF_ERROR(im->AgreeOnOptions(comm));
  done("agree on options");
  GRIDFEED_RETURN_IF_ERROR(im->CreateGrid(comm));
  done("create grid");
  GRIDFEED_RETURN_IF_ERROR(im->BuildAndShareTables());
  done("build and share tables");
  GRIDFEED_RETURN_IF_ERROR(im->OpenTokenStores());
  done("open token stores");
  GRIDFEED_RETURN_IF_ERROR(im->CheckTokenStores());
  done("check token stores");
  GRIDFEED_RETURN_IF_ERROR(im->Resume());
  done("resume");
  GRIDFEED_RETURN_IF_ERROR(im->PlanSchedule());
  done("plan schedule");
  if (options.feed.device_broadcast) GRIDFEED_RETURN_IF_ERROR(im->OpenDevicePath());
  im->StartPrefetch();
  return std::unique_ptr<Feeder>(new Feeder(std::move(im)));
}

Status Feeder::SaveCheckpoint(const std::string& path, int64_t iteration) const {
  const Impl& im = *impl_;
  const parallel::Grid& g = *im.grid;
  // The cursor counts a micro-batch as soon as Next() starts it: after a read error (sticky,
  // known to the failing reader's TP group) a checkpoint would skip a micro-batch nobody got.
  // Every rank refuses the save when any has failed.
  GRIDFEED_RETURN_IF_ERROR(
      parallel::AgreeOnStatus(g.world(), im.failed, g.world_rank())
          .WithContext("no checkpoint after a micro-batch that could not be delivered"));
  Status written;
  if (g.world_rank() == 0) {
    checkpoint::Cursor c;
    c.fingerprint = im.fingerprint;
    c.canonical_config = im.canonical;
    c.iteration = iteration;
    c.consumed_train_samples = im.consumed;
    const auto sources = im.view->Sources(im.split);
    c.source_samples.assign(sources.size(), 0);
    const int64_t upto = std::min(im.consumed, im.split_length);
    if (sources.size() == 1) {
      c.source_samples[0] = upto;
    } else {
      for (int64_t p = 0; p < upto; ++p) ++c.source_samples[im.view->SourceOf(im.split, p)];
    }
    if (im.seq_lengths.uniform()) {
      for (int64_t n : c.source_samples) c.source_tokens.push_back(n * im.seq_lengths.length[0]);
    } else {
      c.source_tokens.assign(sources.size(), 0);
      for (int64_t p = 0; p < upto; ++p) {
        c.source_tokens[static_cast<size_t>(im.view->SourceOf(im.split, p))] +=
            im.seq_lengths.At(p);
      }
    }
    c.dp = g.dp_size(), c.tp = g.tp_size(), c.pp = g.pp_size(), c.cp = g.cp_size();
    c.token_store_facts = im.store_facts;
    c.order_position = im.view->DescribeCursor(im.split, im.consumed);
    c.schedule_history = im.schedule_history;
    c.micro_batch_size = im.options.batch.micro_batch_size;
    c.global_batch_size = im.options.batch.global_batch_size;
    written = checkpoint::WriteCursor(path, c);
  }
  return parallel::BroadcastStatus(g.world(), 0, written.WithContext("rank 0"));
}

int64_t Feeder::consumed_samples() const { return impl_->consumed; }
const parallel::Grid& Feeder::grid() const { return *impl_->grid; }
const StartupTimes& Feeder::startup() const { return impl_->startup; }
int64_t Feeder::split_length() const { return impl_->split_length; }
int64_t Feeder::resumed_iteration() const { return impl_->resumed_iteration; }
const std::string& Feeder::fingerprint() const { return impl_->fingerprint; }
const std::string& Feeder::canonical_config() const { return impl_->canonical; }
const FeederOptions& Feeder::options() const { return impl_->options; }
const order::ReadSchedule& Feeder::schedule() const { return *impl_->schedule; }
const std::string& Feeder::schedule_history() const { return impl_->schedule_history; }
int64_t Feeder::num_microbatches_per_global_batch() const {
  return impl_->schedule->micro_batches_per_iteration();
}
size_t Feeder::table_bytes_on_node() const { return impl_->image->node_bytes(); }
int Feeder::readers_on_node() const { return impl_->image->readers_on_node(); }
int Feeder::num_nodes() const { return impl_->image->num_nodes(); }
const std::vector<int>& Feeder::readers_per_node() const {
  return impl_->image->readers_per_node();
}
const PayloadLayout& Feeder::payload_layout() const { return impl_->layout; }
const order::SeqLengths& Feeder::seq_lengths() const { return impl_->seq_lengths; }
int64_t Feeder::max_seq_length() const { return impl_->layout.seq_length; }

Result<std::vector<std::byte>> Feeder::DevicePayloadToHost(const MicroBatch& mb) const {
  const Impl& im = *impl_;
  if (!im.device_bcast || mb.device_payload == nullptr) {
    return FailedPrecondition("the micro-batch has no device payload");
  }
  if (mb.device_payload != im.device_bcast->device_buffer() ||
      mb.device_payload_bytes > im.layout.total_bytes) {
    return InvalidArgument("the micro-batch's device payload is not this feeder's");
  }
  std::vector<std::byte> out(mb.device_payload_bytes);
  GRIDFEED_RETURN_IF_ERROR(im.device_bcast->CopyToHost(out.size(), out.data()));
  return out;
}
int Feeder::num_open_token_files() const {
  return impl_->view && impl_->grid->is_reader()
             ? static_cast<int>(impl_->view->token_stores().size())
             : 0;
}
bool Feeder::holds_tables() const { return !impl_->image->bytes().empty(); }

Result<MicroBatch> Feeder::Next() {
  Impl& im = *impl_;
  const parallel::Grid& g = *im.grid;
  if (!im.failed.ok()) return im.failed;
  if (im.next_step >= im.schedule->num_steps()) {
    return OutOfRange("the " + im.options.feed.split_name + " split is exhausted after " +
                      std::to_string(im.consumed) + " consumed samples (" +
                      std::to_string(im.split_length) + " in the split)");
  }
  ++im.next_step;
  // Every position of this step lies in the global batch that holds `consumed` (PlanSchedule).
  const PayloadLayout layout = im.layout.At(im.seq_lengths.At(im.consumed));
  im.consumed += im.schedule->samples_per_step();
  MicroBatch mb;
  mb.micro_batch_size = im.options.batch.micro_batch_size;
  mb.seq_length = layout.seq_length;
  mb.local_seq_length = mb.seq_length / g.cp_size();
  if (!layout.has_inputs && !layout.has_targets) return mb;  // middle stage
  if (im.device_bcast) {
    // Device path: TP rank 0 stages the payload in the pinned buffer, every TP rank ends with
    // it in device memory; the host fields stay empty.
    Status read;
    if (g.tp_rank() == 0) {
      auto item = im.Take();
      read = item.status;
      if (read.ok()) {
        std::memcpy(im.device_bcast->host_buffer(), item.payload.data(), layout.total_bytes);
      }
      mb.records = std::move(item.records);
    }
    GRIDFEED_RETURN_IF_ERROR(im.ShareReadStatus(&read));
    Status sent = im.device_bcast->Broadcast(layout.total_bytes).WithContext("device broadcast");
    if (!sent.ok()) return im.failed = sent;
    mb.has_inputs = layout.has_inputs;
    mb.has_targets = layout.has_targets;
    mb.device_payload = im.device_bcast->device_buffer();
    mb.device_payload_bytes = layout.total_bytes;
    return mb;
  }
  std::vector<std::byte> payload;
  Status read;
  if (g.tp_rank() == 0) {
    auto item = im.Take();
    read = item.status;
    payload = std::move(item.payload);
    mb.records = std::move(item.records);
  }
  GRIDFEED_RETURN_IF_ERROR(im.ShareReadStatus(&read));
  if (g.tp_rank() != 0) payload.assign(layout.total_bytes, std::byte{0});
  if (g.tp_size() > 1) {
    Status sent = parallel::BroadcastBytes(g.tp_comm(), 0, payload);
    if (!sent.ok()) return im.failed = sent.WithContext("TP broadcast");
  }
  layout.Unpack(payload, &mb);
  return mb;
}

}  // namespace gridfeed::feed

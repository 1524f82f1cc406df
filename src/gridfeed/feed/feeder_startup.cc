// Feeder::Open and its phases up to the first micro-batch: agreeing on the options, the grid,
// building and sharing the tables, opening and checking the token stores, planning the read
// schedule and the device path (the resume phase is feeder_resume.cc).
#include <xxhash.h>

#include <cstdlib>
#include <exception>
#include <new>

#include "gridfeed/checkpoint/cursor.h"
#include "gridfeed/checkpoint/resume_policy.h"
#include "gridfeed/config/canonical.h"
#include "gridfeed/core/log.h"
#include "gridfeed/core/memory_usage.h"
#include "gridfeed/core/stopwatch.h"
#include "gridfeed/device/probe.h"
#include "gridfeed/feed/feeder_impl.h"
#include "gridfeed/io/file_util.h"
#include "gridfeed/io/mapped_fault.h"
#include "gridfeed/order/store_facts.h"
#include "gridfeed/parallel/agree.h"

namespace gridfeed::feed {

namespace {

order::Split SplitOf(const FeederOptions& o) {
  if (o.feed.split_name == "valid") return order::Split::kValid;
  if (o.feed.split_name == "test") return order::Split::kTest;
  return order::Split::kTrain;
}

}  // namespace

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
  // The same options on every rank: the same choice, so the reader communicator agrees.
  GRIDFEED_ASSIGN_OR_RETURN(pipeline, order::Pipeline::For(options));
  sizes.middle_stages_read = pipeline->schema().middle_stages();
  GRIDFEED_ASSIGN_OR_RETURN(grid, parallel::Grid::Create(comm, sizes));
  // A store truncated under the job faults on the ranks that read it; after its message, the
  // rank ends the whole job (a launcher may not end it for a rank that only exits).
  io::SetMappedFaultEnd([] {
    int finalized = 1;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Abort(MPI_COMM_WORLD, 1);
  });
  return Status::Ok();
}

// Where a run's reading starts, as world rank 0 can tell before the build: the cursor of the
// checkpoint it resumes from (checked in full by Resume, which must then agree), else
// --consumed-samples.
int64_t Feeder::Impl::ExpectedStart() const {
  if (options.resume.resume_from.empty()) return options.resume.consumed_samples;
  auto cursor = checkpoint::ReadCursor(options.resume.resume_from);
  return cursor.ok() ? cursor->consumed_train_samples : 0;  // Resume reports the error
}

// Rank 0's image of a node whose readers are the DP ranks `keys`: the positions the schedule
// `from` gives them from its start on (order/node_image.h).
Result<parallel::ImageProducer> Feeder::Impl::NodeProducer(
    const std::shared_ptr<order::BuiltOrder>& built, const order::ReadSchedule& from,
    const std::vector<int>& keys, bool world_node) const {
  GRIDFEED_ASSIGN_OR_RETURN(std::shared_ptr<order::ImageWriter> writer,
                            built->NodeImage(split, from.PositionsOf(keys), world_node));
  if (!writer) return Internal("the order made no node image");
  return parallel::ImageProducer{writer->size(),
                                 [writer](std::byte* dst) { writer->WriteTo(dst); },
                                 writer->leaves_dst_untouched(),
                                 {}};
}

// World rank 0 builds through the pipeline and writes the image into its shared window (or,
// with node windows, each node's own image into that node's); every reader views the image it
// received. The canonical text (options + data facts) follows.
Status Feeder::Impl::BuildAndShareTables() {
  const parallel::Grid& g = *grid;
  int64_t facts[2] = {0, -1};  // the split's length; where the node windows start (-1: whole)
  auto build = [&](int num_nodes) -> Result<parallel::ImageProducer> {
    GRIDFEED_ASSIGN_OR_RETURN(std::shared_ptr<order::BuiltOrder> built, pipeline->Build());
    built_stores = built->OpenedStores();
    facts[0] = built->view().length(split);
    if (facts[0] == 0) {
      return FailedPrecondition("the " + options.feed.split_name +
                                " split is empty with this --split");
    }
    Stopwatch data_facts;
    canonical = config::CanonicalText(options.data, built->DataFacts());
    if (log::Enabled(log::Level::kDebug)) {
      log::Debug("data facts (index digests): " + std::to_string(data_facts.Seconds()) + " s");
    }
    const std::string& mode = options.feed.node_window;
    const bool wanted = mode == "reads" || (mode == "auto" && num_nodes > 1);
    if (wanted && options.data.dataloader_type == "single" && !pipeline->amendable()) {
      GRIDFEED_ASSIGN_OR_RETURN(auto probe, built->NodeImage(split, {}, false));
      if (probe) {
        order::ScheduleOptions s;
        s.total_samples = facts[0];
        s.micro_batch_size = options.batch.micro_batch_size;
        s.dp_size = g.dp_size();
        s.global_batch_size = options.batch.global_batch_size;
        s.start_consumed = ExpectedStart();
        GRIDFEED_ASSIGN_OR_RETURN(auto from, order::ReadSchedule::Create(s));
        facts[1] = s.start_consumed;
        parallel::ImageProducer p;
        p.per_node = [this, built, from](
                         int node,
                         const std::vector<int>& keys) -> Result<parallel::ImageProducer> {
          if (node == options.feed.testing_fail_node_image) {
            return Internal("cannot make node " + std::to_string(node) +
                            "'s image (injected by test)");
          }
          return NodeProducer(built, from, keys, node == 0);
        };
        return p;
      }
    }
    if (mode == "reads") {
      return InvalidArgument(
          "--node-window reads: this order has no node images (Megatron's pretraining order "
          "without a mixture schedule has); use --node-window full or auto");
    }
    std::shared_ptr<order::ImageWriter> writer = built->TakeImage();
    return parallel::ImageProducer{writer->size(),
                                   [writer](std::byte* dst) { writer->WriteTo(dst); },
                                   writer->leaves_dst_untouched(),
                                   {}};
  };
  // Rank 0's failures, allocation included, must reach the status header: the other ranks
  // are waiting for it.
  auto make = [&](int num_nodes) -> Result<parallel::ImageProducer> {
    try {
      return build(num_nodes);
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
  nodes.fail_receive_node = static_cast<int>(options.feed.testing_fail_node_receive);
  nodes.fail_send_node = static_cast<int>(options.feed.testing_fail_node_send);
  parallel::LeaderProducer leaders;
  // World rank 0 decides (the whole-image units of OLMo's order depend on its files' sizes).
  leaders.wanted = [this](int num_nodes) { return static_cast<int>(LeadersMake(num_nodes)); };
  leaders.make = [this, &facts](int way, MPI_Comm comm, int node,
                                const std::vector<std::vector<int>>& keys) {
    return static_cast<LeaderImages>(way) == LeaderImages::kWholeImage
               ? ProduceWholeImage(comm, node, facts)
               : ProduceNodeImage(comm, node, keys, facts);
  };
  GRIDFEED_ASSIGN_OR_RETURN(
      image, parallel::SharedImage::Distribute(g, make, order::ImageDigest, &times, nodes,
                                               g.dp_rank(), &leaders));
  startup.build_seconds = times.build_seconds;
  startup.broadcast_seconds = times.broadcast_seconds;
  // What the tables cost the job: who built them, the largest process's peak memory by now,
  // and the digest of every node's image (the same whoever built them).
  startup.producers = image->leader_produced() ? produced_by : 1;
  int producers = startup.producers;
  int64_t peak = PeakResidentBytes();
  GRIDFEED_RETURN_IF_ERROR(parallel::MpiStatus(MPI_Bcast(&producers, 1, MPI_INT, 0, g.world()),
                                               "MPI_Bcast(table producers)"));
  GRIDFEED_RETURN_IF_ERROR(
      parallel::MpiStatus(MPI_Allreduce(MPI_IN_PLACE, &peak, 1, MPI_INT64_T, MPI_MAX, g.world()),
                          "MPI_Allreduce(peak memory)"));
  startup.producers = producers;
  startup.max_peak_rss_bytes = peak;
  const auto& digests = image->node_digests();
  startup.image_digest = digests.size() == 1
                             ? digests[0]
                             : XXH3_64bits(digests.data(), digests.size() * sizeof(uint64_t));
  GRIDFEED_RETURN_IF_ERROR(parallel::BroadcastString(g.world(), 0, &canonical));
  fingerprint = config::FingerprintOf(canonical);
  // Non-readers hold no tables but plan the same schedule: they learn the split's length.
  GRIDFEED_RETURN_IF_ERROR(parallel::MpiStatus(MPI_Bcast(facts, 2, MPI_INT64_T, 0, g.world()),
                                               "MPI_Bcast(split length)"));
  split_length = facts[0];
  node_window_from = facts[1];
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

// Readers open the token stores; a failure anywhere is the same error everywhere. World rank 0
// stats its token files and broadcasts what stat says (order::FileFacts); every reader stats
// its own (O(files)): a file of another size is named here; a reader whose files are all rank
// 0's very files (order::SameFile), or its node leader's very files, checks only their
// structure (rank 0, or the leader, checked every element); any other checks them in full and
// digests them (CheckTokenStores compares). World rank 0 serves from the stores its build
// opened where their files are still the ones it identified.
Status Feeder::Impl::OpenTokenStores() {
  const parallel::Grid& g = *grid;
  Stopwatch watch;
  const bool full = order::TestingFullStoreCheck();
  std::vector<std::string> files;
  std::vector<order::FileFacts> mine;
  std::string reference;
  if (g.is_reader()) {
    files = view->TokenFiles();
    // Stat'ed before rank 0 adopts its build's stores: a file replaced in between is then
    // opened anew, and its new identity is no other reader's proof.
    for (const auto& file : files) mine.push_back(order::StatFile(file));
    if (g.world_rank() == 0) reference = order::EncodeFileFacts(mine);
  }
  GRIDFEED_RETURN_IF_ERROR(parallel::BroadcastString(g.world(), 0, &reference));
  Status opened;
  if (g.is_reader()) {
    const std::vector<order::FileFacts> rank0 = order::DecodeFileFacts(reference);
    const std::string sizes = order::DescribeSizeDifference(files, mine, rank0);
    bool rank0_files = !full && g.world_rank() != 0 && sizes.empty();
    for (size_t i = 0; rank0_files && i < mine.size(); ++i) {
      // Names that are no file on either side (a tokenizer's name) hold nothing to differ.
      rank0_files = order::SameFile(mine[i], rank0[i]) || (!mine[i].exists && !rank0[i].exists);
    }
    // The node leader's very files: every file stat'ed and equal, device included.
    bool all_exist = true;
    for (const auto& f : mine) all_exist = all_exist && f.exists;
    const std::string identity = all_exist ? order::EncodeFileFacts(mine) : std::string();
    std::string leader_identity = identity;
    GRIDFEED_RETURN_IF_ERROR(parallel::BroadcastString(image->node_comm(), 0, &leader_identity));
    int node_rank = 0;
    MPI_Comm_rank(image->node_comm(), &node_rank);
    const bool leader_files = node_rank != 0 && !identity.empty() && identity == leader_identity;
    files_proof = g.world_rank() != 0 && rank0_files ? FilesProof::kRank0Files
                  : leader_files                     ? FilesProof::kLeaderFiles
                                                     : FilesProof::kOwnCheck;
    view->AdoptTokenStores(built_stores);  // world rank 0's, if unchanged since identified
    built_stores.clear();
    if (!sizes.empty()) {
      opened = DataLoss(sizes + "; every reader must see the same token files as rank 0");
    } else if (g.world_rank() == options.feed.testing_fail_open_rank) {
      opened =
          NotFound("cannot open '" + view->token_stores().front() + ".bin' (injected by test)");
    } else {
      opened = view->OpenTokenStores(files_proof != FilesProof::kOwnCheck);
    }
  }
  GRIDFEED_RETURN_IF_ERROR(parallel::AgreeOnStatus(g.world(), opened, g.world_rank()));
  // How many readers took each proof, for rank 0's log (tests read it); counted on every rank,
  // as the count is collective.
  int proofs[3] = {0, 0, 0};
  if (g.is_reader()) proofs[static_cast<int>(files_proof)] = 1;
  int counted[3] = {0, 0, 0};
  GRIDFEED_RETURN_IF_ERROR(parallel::MpiStatus(
      MPI_Reduce(proofs, counted, 3, MPI_INT, MPI_SUM, 0, g.world()), "MPI_Reduce(proofs)"));
  if (g.world_rank() == 0 && log::Enabled(log::Level::kDebug)) {
    log::Debug("token files (" + std::to_string(files.size()) + " per reader) proven by " +
               std::to_string(counted[0]) + " readers as rank 0's very files, " +
               std::to_string(counted[1]) + " as their node leader's, " +
               std::to_string(counted[2]) + " checked and digested (rank 0 included)");
  }
  startup.open_seconds = watch.Seconds();
  return Status::Ok();
}

// Every reader proves it reads the same data as rank 0 (node-local copies are common): index
// digest, data size and a digest of data blocks sampled at offsets derived from the
// fingerprint. Rank 0 computes its facts once and broadcasts them; a reader holding rank 0's
// very files takes them (no reads), one holding its node leader's very files takes the
// leader's, any other computes its own. A difference on any reader is the same error
// everywhere, naming rank and store.
Status Feeder::Impl::CheckTokenStores() {
  const parallel::Grid& g = *grid;
  // An amendable order's digests do not depend on its schedule, so an amended resume can
  // compare them.
  const std::string salted =
      pipeline->amendable() ? checkpoint::WithoutScheduleText(canonical) : fingerprint;
  const uint64_t salt = XXH3_64bits(salted.data(), salted.size());
  std::vector<order::StoreFacts> mine;
  if (g.is_reader() && files_proof == FilesProof::kOwnCheck) mine = view->TokenStoreFacts(salt);
  // The others wait asleep while rank 0 (and any reader of its own copies) reads: polling ranks
  // took the cores from it where ranks outnumber cores.
  if (!order::TestingFullStoreCheck()) {
    GRIDFEED_RETURN_IF_ERROR(parallel::SleepyBarrier(g.world()));
  }
  std::string reference = order::EncodeFacts(mine);  // rank 0 is a reader and checks its own
  GRIDFEED_RETURN_IF_ERROR(parallel::BroadcastString(g.world(), 0, &reference));
  store_facts = reference;
  Status local;
  if (g.is_reader()) {
    const std::vector<order::StoreFacts> rank0 = order::DecodeFacts(reference);
    if (files_proof == FilesProof::kRank0Files) mine = view->FactsOfRank0Files(salt, rank0);
    std::string leader_facts = order::EncodeFacts(mine);
    GRIDFEED_RETURN_IF_ERROR(parallel::BroadcastString(image->node_comm(), 0, &leader_facts));
    if (files_proof == FilesProof::kLeaderFiles) mine = order::DecodeFacts(leader_facts);
    const std::string change = order::DescribeFactsDifference(mine, rank0);
    if (!change.empty()) {
      local = DataLoss(change + "; every reader must see the same token files as rank 0");
    }
  }
  return parallel::AgreeOnStatus(g.world(), local, g.world_rank());
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
  // Node windows hold what this schedule reads: it must start where they do.
  if (node_window_from >= 0 && consumed != node_window_from) {
    return Internal("the node windows hold the samples read from " +
                    std::to_string(node_window_from) + " on, but reading starts at " +
                    std::to_string(consumed) + "; rerun with --node-window full");
  }
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
  layout = PayloadLayout(pipeline->schema(), options.batch.micro_batch_size, seq_lengths.max(),
                         g.cp_size(), g.first_stage(), g.last_stage());
  return Status::Ok();
}

// Collective on the world: every rank makes the same two agreements; ranks of stages that
// receive data also set up their TP group's NCCL communicator (or, with
// --testing-device-loopback, the host twin over the TP communicator) in between.
Status Feeder::Impl::OpenDevicePath() {
  const parallel::Grid& g = *grid;
  const bool receives = layout.receives;
  const bool loopback = options.feed.testing_device_loopback;
  const auto probe = device::Probe();
  Status local;
  if (!receives || loopback) {
    // Stages that receive nothing need no GPU for gridfeed; the loopback twin
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

}  // namespace gridfeed::feed
